"""Ensemble statistics per time point and column, over the members that succeeded."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DEFAULT_QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


def quantile_label(q: float) -> str:
    """Column suffix of a quantile: 0.05 -> 'q5', 0.5 -> 'q50', 0.025 -> 'q2.5'."""
    return f"q{100 * q:g}"


@dataclass(frozen=True)
class Summary:
    """mean, sd (sample sd, ddof=1) and quantiles, each of shape (times, columns),
    computed over `n_used` members; `n_excluded` members failed and were left out."""

    mean: np.ndarray
    sd: np.ndarray
    quantiles: tuple[float, ...]
    quantile_values: np.ndarray  # (len(quantiles), times, columns)
    n_used: int
    n_excluded: int = 0

    def __post_init__(self):
        mean = np.asarray(self.mean, dtype=float)
        if mean.ndim != 2:
            raise ValueError(f"summary mean must be (times, columns), got shape {mean.shape}")
        sd = np.asarray(self.sd, dtype=float)
        qv = np.asarray(self.quantile_values, dtype=float).reshape(
            (len(self.quantiles),) + mean.shape)
        if sd.shape != mean.shape:
            raise ValueError(f"summary sd has shape {sd.shape}, mean has {mean.shape}")
        object.__setattr__(self, "mean", mean)
        object.__setattr__(self, "sd", sd)
        object.__setattr__(self, "quantile_values", qv)
        object.__setattr__(self, "quantiles", tuple(float(q) for q in self.quantiles))

    @classmethod
    def of(cls, data: np.ndarray, ok: np.ndarray | None = None,
           quantiles: tuple[float, ...] = DEFAULT_QUANTILES) -> "Summary":
        """Statistics of `data` (members, times, columns) over the members where
        `ok` is True (all when None). With no usable member every value is NaN."""
        data = np.asarray(data, dtype=float)
        ok = np.ones(data.shape[0], bool) if ok is None else np.asarray(ok, bool)
        used = data[ok]
        shape = data.shape[1:]
        n = used.shape[0]
        if n == 0:
            nan = np.full(shape, np.nan)
            return cls(nan, nan.copy(), tuple(quantiles),
                       np.full((len(quantiles),) + shape, np.nan), 0, int((~ok).sum()))
        mean = used.mean(axis=0)
        # A single member has no spread to estimate: NaN, not a misleading 0.
        sd = used.std(axis=0, ddof=1) if n > 1 else np.full(shape, np.nan)
        qv = (np.quantile(used, list(quantiles), axis=0) if quantiles
              else np.empty((0,) + shape))
        return cls(mean, sd, tuple(quantiles), qv, n, int((~ok).sum()))

    def statistics(self) -> list[tuple[str, np.ndarray]]:
        """(suffix, array of (times, columns)) in output order: mean, sd, quantiles."""
        out = [("mean", self.mean), ("sd", self.sd)]
        out += [(quantile_label(q), self.quantile_values[i])
                for i, q in enumerate(self.quantiles)]
        return out

    def describe(self) -> str:
        text = f"over {self.n_used} member{'s' if self.n_used != 1 else ''}"
        if self.n_excluded:
            text += f" ({self.n_excluded} failed member{'s' if self.n_excluded != 1 else ''} excluded)"
        return text
