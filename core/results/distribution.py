"""The result of a SteadyState task: a probability distribution over states.

A chemical-master-equation solver returns one probability per enumerated state (copy
numbers of each species); a deterministic steady state is the same object with a
single state of probability 1. `diagnostics` says how far to trust it: residual,
iterations, solver, the truncation-error indicator (probability mass on the boundary
of the enumerated space: an indicator, not a proven bound), the bounds used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from .base import Result, close_ids, finish_figure, new_figure
from .writers import companion, write_table

#: how negative a probability may come out of a solver's rounding before it is an error
NEGATIVE_TOLERANCE = 1e-9


@dataclass
class StateDistribution(Result):
    """`states` (n_states, len(ids)): the state of each row; `probability` (n_states,)."""

    #: file suffix of the CSV output written by `sbmlgpu COMMAND -o OUTDIR`
    csv_suffix: ClassVar[str] = ".csv"
    kind: ClassVar[str] = "steady-state"

    ids: tuple[str, ...]
    states: np.ndarray
    probability: np.ndarray
    diagnostics: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        self.ids = tuple(str(i) for i in self.ids)
        if len(set(self.ids)) != len(self.ids):
            raise ValueError(f"state columns repeat an id: {self.ids}")
        self.states = np.asarray(self.states, dtype=float).reshape(-1, len(self.ids))
        self.probability = np.asarray(self.probability, dtype=float).reshape(-1)
        if len(self.probability) != len(self.states):
            raise ValueError(f"{len(self.probability)} probabilities for "
                             f"{len(self.states)} states")
        p = self.probability
        if not np.all(np.isfinite(p)) or (p.size and p.min() < -NEGATIVE_TOLERANCE):
            raise ValueError("probabilities must be finite and not negative")
        self.diagnostics = dict(self.diagnostics)

    @property
    def n_states(self) -> int:
        return len(self.probability)

    @property
    def integral(self) -> bool:
        """True when every state is whole copy numbers (a CME distribution)."""
        return bool(np.all(self.states == np.round(self.states)))

    def index(self, sbml_id: str) -> int:
        if sbml_id in self.ids:
            return self.ids.index(sbml_id)
        raise KeyError(f"no species {sbml_id!r} in this distribution (species: "
                       f"{', '.join(self.ids)}){close_ids(sbml_id, self.ids)}")

    def marginal(self, sbml_id: str) -> tuple[np.ndarray, np.ndarray]:
        """(values, probabilities) of one species, values ascending."""
        column = self.states[:, self.index(sbml_id)]
        values, inverse = np.unique(column, return_inverse=True)
        return values, np.bincount(inverse, weights=self.probability, minlength=len(values))

    def mean(self, sbml_id: str) -> float:
        values, p = self.marginal(sbml_id)
        return float(values @ p / p.sum()) if p.sum() > 0 else float("nan")

    # -- output ---------------------------------------------------------------------
    def write_csv(self, path: Path) -> list[Path]:
        """`path`: one row per state, a column per species, then `probability`;
        `<stem>.marginals.csv`: `id,count,probability` (`value` for the middle column
        when states are not whole copy numbers)."""
        path = Path(path)
        if self.integral:  # copy numbers as whole numbers, as the marginals write them
            rows = ([*state, p] for state, p in zip(self.states.astype(np.int64).tolist(),
                                                    self.probability.tolist()))
        else:
            rows = np.column_stack([self.states, self.probability]).tolist()
        write_table(path, [*self.ids, "probability"], rows)
        marginals = companion(path, "marginals")
        with open(marginals, "w", encoding="utf-8") as out:
            out.write(f"id,{'count' if self.integral else 'value'},probability\n")
            for sbml_id in self.ids:
                for value, p in zip(*self.marginal(sbml_id)):
                    shown = int(value) if self.integral else repr(float(value))
                    out.write(f"{sbml_id},{shown},{float(p)!r}\n")
        return [path, marginals]

    def arrays(self) -> dict[str, Any]:
        import json

        return {"ids": np.array(self.ids, dtype=str), "states": self.states,
                "probability": self.probability,
                "diagnostics_json": json.dumps(self.diagnostics, default=str, sort_keys=True)}

    @classmethod
    def from_arrays(cls, a: dict[str, Any], metadata: dict) -> "StateDistribution":
        import json

        return cls(tuple(np.asarray(a["ids"]).tolist()), a["states"], a["probability"],
                   json.loads(str(a["diagnostics_json"])), metadata)

    def landscape(self, x_id: str, y_id: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(x values, y values, P[y, x]): the joint marginal of two species, summed over
        the others (the probability landscape of Maggioni et al.'s toggle switch)."""
        xs, ix = np.unique(self.states[:, self.index(x_id)], return_inverse=True)
        ys, iy = np.unique(self.states[:, self.index(y_id)], return_inverse=True)
        grid = np.zeros((len(ys), len(xs)))
        np.add.at(grid, (iy, ix), self.probability)
        return xs, ys, grid

    def default_landscape(self) -> tuple[str, str] | None:
        """The two species a landscape shows by default: the only two, else the two
        that take the most values (a gene's 0/1 makes no landscape); None if fewer
        than two species take more than two values."""
        if len(self.ids) == 2:
            return self.ids[0], self.ids[1]
        spread = [(len(np.unique(self.states[:, k])), k) for k in range(len(self.ids))]
        wide = sorted((k for count, k in spread if count > 2),
                      key=lambda k: -spread[k][0])[:2]
        return (self.ids[min(wide)], self.ids[max(wide)]) if len(wide) == 2 else None

    def plot(self, path: str | Path | None = None, ids=None, landscape="auto"):
        """Marginals as bars, one panel per species (`ids`, default the first 6), and
        the joint probability of two species as a heat map: `landscape` a pair of ids,
        "auto" (the two species of a two-species model, else the two that take the
        most values, as the toggle switch's Pa and Pb) or None."""
        ids = list(ids) if ids is not None else list(self.ids[:6])
        pair = self.default_landscape() if landscape == "auto" else \
            (tuple(landscape) if landscape is not None else None)
        if pair is not None:
            for sbml_id in pair:
                self.index(sbml_id)  # KeyError naming the species for an unknown id
        panels = len(ids) + (1 if pair else 0)
        fig = new_figure((4 * panels, 3.6))
        axes = fig.subplots(1, panels, squeeze=False)[0]
        for ax, sbml_id in zip(axes, ids):
            values, p = self.marginal(sbml_id)
            width = np.min(np.diff(values)) if len(values) > 1 else 1.0
            ax.bar(values, p, width=0.9 * width)
            ax.set_xlabel(sbml_id)
            ax.set_ylabel("probability")
        if pair:
            ax = axes[-1]
            xs, ys, grid = self.landscape(*pair)
            image = ax.imshow(grid, origin="lower", aspect="auto",
                              extent=(xs[0] - 0.5, xs[-1] + 0.5, ys[0] - 0.5, ys[-1] + 0.5))
            fig.colorbar(image, ax=ax, label="probability")
            ax.set_xlabel(pair[0])
            ax.set_ylabel(pair[1])
        title = self.metadata.get("model") or ""
        if title:
            fig.suptitle(f"{title}: steady state", fontsize="medium")
        return finish_figure(fig, path)

    def __repr__(self) -> str:
        return (f"StateDistribution({self.n_states} state(s) over {', '.join(self.ids)}, "
                f"total probability {self.probability.sum():.6g})")
