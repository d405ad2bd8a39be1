"""Predicting each item's cost from a pilot run, for bundling.

The cost of a simulation (steps taken, time) often follows a power law in the
parameters over the range of an ensemble: stiffness grows with rate constants,
SSA events with propensities. A power law is a straight line in logs, so we fit
log(cost) = a + b . log(features) by least squares on a pilot subset measured on
the device, and predict the rest. R² (of the fit in log space, on the pilot) says
whether the predictions are worth bundling by: near 1 they are, near 0 they are
noise and bundling by them only costs a permutation.
"""

from __future__ import annotations

import numpy as np

from ..errors import OptionError
from ..runtime.host_threads import over_pieces


def pilot_indices(n_items: int, size: int, seed: int = 0) -> np.ndarray:
    """A random pilot subset of `size` of the items, sorted (neighbours in memory
    stay neighbours), the same for the same seed."""
    if not 0 < size <= n_items:
        raise OptionError("pilot-size", f"{size} is not in [1, {n_items}]")
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n_items, size=size, replace=False))


class CostPredictor:
    """log(cost) ~ intercept + coefficients . f(features), f = log (default) or identity.

    `fit(features, costs)` on the pilot, `predict(features)` for everyone.
    After fitting: `intercept`, `coefficients`, `r_squared` (NaN when the pilot
    costs are all equal: there is nothing to explain) and `n_fit`."""

    def __init__(self, log_features: bool = True):
        self.log_features = log_features
        self.intercept: float | None = None
        self.coefficients: np.ndarray | None = None
        self.r_squared = float("nan")
        self.n_fit = 0

    def _design(self, features, name: str = "features") -> np.ndarray:
        x = np.asarray(features, dtype=float)
        if x.ndim == 1:
            x = x[:, None]  # one feature
        if x.ndim != 2:
            raise OptionError(name, f"need an (items x features) array, got shape {x.shape}")
        if not np.all(np.isfinite(x)):
            raise OptionError(name, "features must be finite")
        if self.log_features:
            if np.any(x <= 0):
                raise OptionError(name, "log features need positive values "
                                  "(use CostPredictor(log_features=False) otherwise)")
            x = np.log(x)
        if self.coefficients is not None and x.shape[1] != self.coefficients.size:
            raise OptionError(name, f"{x.shape[1]} features; the fit used "
                              f"{self.coefficients.size}")
        return np.hstack([np.ones((x.shape[0], 1)), x])

    def fit(self, features, costs) -> "CostPredictor":
        self.coefficients = None
        design = self._design(features)
        y = np.asarray(costs, dtype=float)
        if y.ndim != 1 or y.size != design.shape[0]:
            raise OptionError("costs", f"need one cost per pilot item ({design.shape[0]}), "
                              f"got shape {y.shape}")
        if not np.all(np.isfinite(y)) or np.any(y <= 0):
            raise OptionError("costs", "measured costs must be finite and positive")
        if y.size < design.shape[1]:
            raise OptionError("pilot-size", f"{y.size} pilot items cannot fit "
                              f"{design.shape[1]} coefficients")
        log_cost = np.log(y)
        solution, *_ = np.linalg.lstsq(design, log_cost, rcond=None)
        residual = log_cost - design @ solution
        total = float(np.sum((log_cost - log_cost.mean()) ** 2))
        # relative tolerance: an exact fit leaves rounding residue, not zero
        if total <= 1e-24 * max(1.0, float(np.sum(log_cost ** 2))):
            self.r_squared = float("nan")
        else:
            self.r_squared = 1.0 - float(np.sum(residual ** 2)) / total
        self.intercept = float(solution[0])
        self.coefficients = solution[1:]
        self.n_fit = int(y.size)
        return self

    def predict_log(self, features) -> np.ndarray:
        if self.coefficients is None:
            raise OptionError("predictor", "fit() it on a pilot before predicting")
        design = self._design(features)
        return design @ np.concatenate([[self.intercept], self.coefficients])

    def predict_log_table(self, table) -> np.ndarray:
        """predict_log of the items given feature-major, a (features x items) table
        (the layout of an ensemble's parameter table), in one pass of log over the
        table and one matrix-vector product: no (items x features) design matrix is
        built (for 10^5 members of ~30 features, most of a bundling plan's time). Items
        with a feature that f cannot take (not finite; not positive under log) go
        through predict_log, which says which."""
        if self.coefficients is None:
            raise OptionError("predictor", "fit() it on a pilot before predicting")
        x = np.asarray(table, dtype=float)
        x = x[None, :] if x.ndim == 1 else x
        if x.ndim != 2 or x.shape[0] != self.coefficients.size:
            return self.predict_log(x.T if x.ndim == 2 else x)
        with np.errstate(divide="ignore", invalid="ignore"):
            f = np.log(x) if self.log_features else x
        if not np.all(np.isfinite(f)):
            return self.predict_log(x.T)
        return self.intercept + self.coefficients @ f

    def predict_log_rows(self, table, rows=None) -> np.ndarray:
        """predict_log of every item of a (features x items) table whose features are
        its rows `rows` (all rows: None), a row at a time: one pass over each row and
        no temporary larger than a row (a table of 8 x 10^5 PEtab runs x sets holds
        ~30 rows, of which a plan reads the ~20 that vary). An item with a feature
        that f cannot take (not finite; not positive under log) gets a non-finite
        value, which the caller decides about."""
        if self.coefficients is None:
            raise OptionError("predictor", "fit() it on a pilot before predicting")
        x = np.asarray(table, dtype=float)
        x = x[None, :] if x.ndim == 1 else x
        rows = range(x.shape[0]) if rows is None else [int(r) for r in rows]
        if x.ndim != 2 or len(rows) != self.coefficients.size:
            raise OptionError("features", f"{len(rows)} features; the fit used "
                              f"{self.coefficients.size}")
        out = np.full(x.shape[1], self.intercept)
        coefficients = self.coefficients

        def piece(start: int, stop: int) -> None:  # items start..stop-1, on a thread
            scratch = np.empty(stop - start)
            mine = out[start:stop]
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                for coefficient, row in zip(coefficients, rows):
                    if self.log_features:
                        np.log(x[row, start:stop], out=scratch)  # -inf/nan: cannot take it
                    else:
                        scratch[...] = x[row, start:stop]
                    scratch *= coefficient  # a non-finite value stays so, even times 0
                    mine += scratch

        over_pieces(piece, x.shape[1])
        return out

    def predict(self, features) -> np.ndarray:
        """Predicted costs (exp of the fitted log cost)."""
        return np.exp(self.predict_log(features))

    def __repr__(self) -> str:
        if self.coefficients is None:
            return "CostPredictor(unfitted)"
        return (f"CostPredictor(n_fit={self.n_fit}, r_squared={self.r_squared:.4f}, "
                f"coefficients={np.round(self.coefficients, 4).tolist()})")
