"""The result of a DbnApproximation task: a dynamic Bayesian network over time slices.

Each variable's range is cut into K bins (`edges`). The parents of variable x_i at
slice s+1 are the variables of its right-hand side and x_i itself at slice s. For
every slice transition the CPT counts how many trajectories had each configuration
of the parents' bins at s and each bin of x_i at s+1: `counts[x_i]` has shape
(slices, K**len(parents), K). Counts are kept; probabilities are their row
fractions, and a parent configuration no trajectory visited is NaN (marked, never
filled in). `counted` are the marginals of the trajectories themselves at every
slice, `inferred` (if the backend computed them) the network's own marginals by
forward inference, to be compared with `counted`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from .base import Result, finish_figure, new_figure


@dataclass
class DbnResult(Result):
    #: file suffix of the CSV output written by `sbmlgpu COMMAND -o OUTDIR`
    csv_suffix: ClassVar[str] = ".marginals.csv"
    kind: ClassVar[str] = "dbn"

    variables: tuple[str, ...]
    times: np.ndarray  # (slices + 1,)
    edges: np.ndarray  # (variables, K + 1)
    parents: dict[str, tuple[str, ...]]
    counts: dict[str, np.ndarray]  # variable -> (slices, K**len(parents), K)
    counted: np.ndarray  # (slices + 1, variables, K) fractions of trajectories
    inferred: np.ndarray | None = None  # same shape, by forward inference
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        self.variables = tuple(str(v) for v in self.variables)
        nv = len(self.variables)
        self.times = np.asarray(self.times, dtype=float).reshape(-1)
        self.edges = np.asarray(self.edges, dtype=float).reshape(nv, -1)
        bins = self.bins
        if bins < 1 or np.any(np.diff(self.edges, axis=1) <= 0):
            raise ValueError("each variable needs increasing bin edges")
        self.parents = {str(k): tuple(str(p) for p in v) for k, v in self.parents.items()}
        if set(self.parents) != set(self.variables):
            raise ValueError("parents must be given for every variable, and only for them")
        for var, ps in self.parents.items():
            missing = [p for p in ps if p not in self.variables]
            if missing:
                raise ValueError(f"parents of {var} name unknown variables {missing}")
        slices = len(self.times) - 1
        self.counts = {str(k): np.asarray(v, dtype=np.int64) for k, v in self.counts.items()}
        for var in self.variables:
            shape = (slices, bins ** len(self.parents[var]), bins)
            if self.counts.get(var) is None or self.counts[var].shape != shape:
                got = None if self.counts.get(var) is None else self.counts[var].shape
                raise ValueError(f"counts of {var} have shape {got}; expected {shape}")
        self.counted = np.asarray(self.counted, dtype=float).reshape(slices + 1, nv, bins)
        if self.inferred is not None:
            self.inferred = np.asarray(self.inferred, dtype=float).reshape(self.counted.shape)

    @property
    def bins(self) -> int:
        return self.edges.shape[1] - 1

    def cpt(self, variable: str, transition: int) -> np.ndarray:
        """P(variable's bin at slice transition+1 | parents' bins at slice transition):
        (K**len(parents), K), rows of unvisited parent configurations NaN."""
        counts = self.counts[variable][transition].astype(float)
        totals = counts.sum(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(totals > 0, counts / totals, np.nan)

    def unvisited(self, variable: str, transition: int) -> np.ndarray:
        """Indices of the parent configurations no trajectory visited."""
        return np.flatnonzero(self.counts[variable][transition].sum(axis=1) == 0)

    # -- output ---------------------------------------------------------------------
    def write_csv(self, path: Path) -> list[Path]:
        """`path` (suffix .marginals.csv by default): `time,id,bin,lower,upper,counted,
        inferred` (inferred empty where the backend did not infer). The CPTs, with
        their counts, are in the NPZ/HDF5 output."""
        path = Path(path)
        with open(path, "w", encoding="utf-8") as out:
            out.write("time,id,bin,lower,upper,counted,inferred\n")
            for s, t in enumerate(self.times.tolist()):
                for v, var in enumerate(self.variables):
                    for b in range(self.bins):
                        inferred = ("" if self.inferred is None
                                    else repr(float(self.inferred[s, v, b])))
                        out.write(f"{t!r},{var},{b},{float(self.edges[v, b])!r},"
                                  f"{float(self.edges[v, b + 1])!r},"
                                  f"{float(self.counted[s, v, b])!r},{inferred}\n")
        return [path]

    def arrays(self) -> dict[str, Any]:
        arrays = {"variables": np.array(self.variables, dtype=str), "times": self.times,
                  "edges": self.edges, "counted": self.counted,
                  "parents_json": json.dumps(self.parents)}
        if self.inferred is not None:
            arrays["inferred"] = self.inferred
        for k, var in enumerate(self.variables):
            arrays[f"counts_{k}"] = self.counts[var]
        return arrays

    @classmethod
    def from_arrays(cls, a: dict[str, Any], metadata: dict) -> "DbnResult":
        variables = tuple(str(v) for v in np.asarray(a["variables"]).tolist())
        parents = json.loads(str(a["parents_json"]))
        return cls(variables, a["times"], a["edges"], parents,
                   {var: a[f"counts_{k}"] for k, var in enumerate(variables)},
                   a["counted"], a.get("inferred"), metadata)

    def plot(self, path: str | Path | None = None, variables=None):
        """Marginals over time: one heat map per variable (counted), at most 6."""
        variables = list(variables) if variables is not None else list(self.variables[:6])
        fig = new_figure((4.2 * len(variables), 3.6))
        axes = fig.subplots(1, len(variables), squeeze=False)[0]
        for ax, var in zip(axes, variables):
            v = self.variables.index(var)
            image = ax.imshow(self.counted[:, v, :].T, origin="lower", aspect="auto",
                              extent=(self.times[0], self.times[-1], self.edges[v, 0],
                                      self.edges[v, -1]), vmin=0, vmax=1)
            ax.set_title(var, fontsize="medium")
            ax.set_xlabel("time")
        axes[0].set_ylabel("value (bins)")
        fig.colorbar(image, ax=list(axes), label="fraction of trajectories")
        return finish_figure(fig, path)

    def __repr__(self) -> str:
        return (f"DbnResult({len(self.variables)} variables, {len(self.times) - 1} "
                f"transitions, {self.bins} bins)")
