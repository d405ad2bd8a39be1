"""The result of a DbnApproximation task: a dynamic Bayesian network over time slices.

Each variable's range is cut into K bins (`edges`). The parents of variable x_i at
slice s+1 are the variables of its right-hand side and x_i itself at slice s
(`parents[x_i]`, in model order, x_i included). For every slice transition the CPT
counts how many trajectories had each configuration of the parents' bins at s and
each bin of x_i at s+1. Two forms, per variable:

- dense: `counts[x_i]` an int64 array (slices, K**len(parents), K); the row of a
  parent configuration is `np.ravel_multi_index(bins, (K,) * len(parents))` (C order:
  the first parent most significant), the column x_i's bin at the next slice;
- sparse (`SparseCounts`), for variables with so many parents that K**n rows cannot
  be stored: per transition only the visited configurations, with their counts.

Counts are kept; probabilities are their row fractions, and a parent configuration no
trajectory visited has no probabilities (NaN in `cpt()`, absent from `cpt_rows()`):
marked, never filled in. `counted` are the marginals of the trajectories themselves
at every slice; `inferred` the network's own marginals by factored-frontier forward
inference (`infer()`, sbmlgpu.results.dbn_inference), with `unvisited_mass` the
probability mass that inference found on unvisited configurations.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from .base import Result, finish_figure, new_figure

#: The most entries (K**len(parents) * K) a full table of a sparse variable may have for
#: `cpt()`, `unvisited()` and the pgmpy export to build it: 10**6 float64 = 8 MB (K = 5:
#: up to 7 parents). Above it only `cpt_rows()` (the visited rows) is offered.
FULL_TABLE_LIMIT = 10**6


def config_dtype(bins: int) -> np.dtype:
    """The dtype of stored parent configurations (bin numbers < bins)."""
    return np.dtype(np.uint8 if bins <= 255 else np.uint16)


def _is_sorted_unique(rows: np.ndarray) -> bool:
    """Whether the rows are strictly increasing in lexicographic order."""
    if len(rows) < 2:
        return True
    step = rows[1:].astype(np.int64) - rows[:-1].astype(np.int64)
    nonzero = step != 0
    if not nonzero.any(axis=1).all():
        return False  # two equal rows
    first = nonzero.argmax(axis=1)  # the first column where two neighbours differ
    return bool((step[np.arange(len(step)), first] > 0).all())


def _readonly(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


@dataclass(frozen=True)
class SparseCounts:
    """The counts of one variable at its visited parent configurations only.

    Per transition s: `configs[s]` (m_s, n_parents), the parents' bins (in `parents`
    order) of every configuration some trajectory visited, rows sorted
    lexicographically and unique, uint8 (uint16 for K > 255); `counts[s]` (m_s, K)
    int64, how many of those trajectories had the variable in each bin at slice s+1.
    Every listed row has a positive total (configurations nobody visited are simply
    absent). Arrays are converted to those dtypes and made read-only."""

    configs: tuple[np.ndarray, ...]
    counts: tuple[np.ndarray, ...]

    def __post_init__(self):
        if len(self.configs) != len(self.counts):
            raise ValueError(f"sparse counts: {len(self.configs)} configuration arrays but "
                             f"{len(self.counts)} count arrays (one each per transition)")
        if not self.configs:
            raise ValueError("sparse counts need at least one transition")
        counts = tuple(np.asarray(c) for c in self.counts)
        configs = tuple(np.asarray(c) for c in self.configs)
        if any(c.ndim != 2 for c in counts + configs):
            raise ValueError("sparse counts: every configs[s] and counts[s] must be 2-D")
        bins, n = counts[0].shape[1], configs[0].shape[1]
        checked_configs, checked_counts = [], []
        for s, (rows, table) in enumerate(zip(configs, counts)):
            where = f"sparse counts, transition {s}"
            if table.shape != (len(rows), bins) or rows.shape[1] != n:
                raise ValueError(f"{where}: configs {rows.shape} and counts {table.shape} do "
                                 f"not match (expected (m, {n}) and (m, {bins}))")
            for name, a in (("configs", rows), ("counts", table)):
                if a.size and a.dtype.kind not in "iu":
                    raise ValueError(f"{where}: {name} must be integers, not {a.dtype}")
            if rows.size and (rows.min() < 0 or rows.max() >= bins):
                raise ValueError(f"{where}: a parent bin outside 0..{bins - 1}")
            if table.size and table.min() < 0:
                raise ValueError(f"{where}: negative counts")
            empty = np.flatnonzero(table.sum(axis=1) == 0)
            if empty.size:
                raise ValueError(f"{where}: configuration {rows[empty[0]].tolist()} is listed "
                                 f"with no counts (list visited configurations only)")
            if not _is_sorted_unique(rows):
                raise ValueError(f"{where}: configurations must be sorted lexicographically "
                                 f"and unique")
            checked_configs.append(_readonly(rows.astype(config_dtype(bins))))
            checked_counts.append(_readonly(table.astype(np.int64)))
        object.__setattr__(self, "configs", tuple(checked_configs))
        object.__setattr__(self, "counts", tuple(checked_counts))

    @property
    def transitions(self) -> int:
        return len(self.counts)

    @property
    def bins(self) -> int:
        return self.counts[0].shape[1]

    @property
    def n_parents(self) -> int:
        return self.configs[0].shape[1]

    @property
    def full_table_entries(self) -> int:
        """K**n_parents * K: the size of this variable's table in dense form."""
        return self.bins ** self.n_parents * self.bins

    @classmethod
    def from_dense(cls, dense: np.ndarray) -> "SparseCounts":
        """The visited rows of dense counts (transitions, K**n, K)."""
        dense = np.asarray(dense)
        bins, rows = dense.shape[-1], dense.shape[1]
        n = 0
        while bins ** n < rows:
            n += 1
        if bins ** n != rows:
            raise ValueError(f"dense counts with {rows} rows are not K**n rows for K = {bins}")
        configs, counts = [], []
        for table in dense:
            visited = np.flatnonzero(table.sum(axis=1) > 0)
            configs.append(np.stack(np.unravel_index(visited, (bins,) * n), axis=1)
                           if n else np.zeros((len(visited), 0), int))
            counts.append(table[visited])
        return cls(tuple(configs), tuple(counts))

    def table(self, transition: int) -> np.ndarray:
        """The full table of one transition (K**n, K), zero rows where unvisited;
        refused above FULL_TABLE_LIMIT entries."""
        if self.full_table_entries > FULL_TABLE_LIMIT:
            raise ValueError(f"a full table of {self.n_parents} parents with {self.bins} bins "
                             f"has {self.full_table_entries} entries, over the limit of "
                             f"{FULL_TABLE_LIMIT}")
        dense = np.zeros((self.bins ** self.n_parents, self.bins), np.int64)
        dense[_row_index(self.configs[transition], self.bins)] = self.counts[transition]
        return dense

    def to_dense(self) -> np.ndarray:
        """Every transition's full table (transitions, K**n, K); see `table`."""
        return np.stack([self.table(s) for s in range(self.transitions)])


def _row_index(configs: np.ndarray, bins: int) -> np.ndarray:
    """The dense row of each configuration (C order: first parent most significant)."""
    if configs.shape[1] == 0:
        return np.zeros(len(configs), np.int64)
    return np.ravel_multi_index(tuple(configs.T.astype(np.int64)), (bins,) * configs.shape[1])


def _probabilities(counts: np.ndarray) -> np.ndarray:
    """Row fractions of counts; NaN rows where a row has no counts."""
    counts = counts.astype(float)
    totals = counts.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(totals > 0, counts / totals, np.nan)


@dataclass
class DbnResult(Result):
    #: file suffix of the CSV output written by `sbmlgpu COMMAND -o OUTDIR`
    csv_suffix: ClassVar[str] = ".marginals.csv"
    kind: ClassVar[str] = "dbn"

    variables: tuple[str, ...]
    times: np.ndarray  # (slices + 1,)
    edges: np.ndarray  # (variables, K + 1)
    parents: dict[str, tuple[str, ...]]  # in model order, the variable itself included
    counts: dict[str, np.ndarray | SparseCounts]  # dense: (slices, K**len(parents), K)
    counted: np.ndarray  # (slices + 1, variables, K) fractions of trajectories
    inferred: np.ndarray | None = None  # same shape, by forward inference
    metadata: dict[str, Any] = field(default_factory=dict)
    #: (slices, variables): per transition, the mass forward inference found on parent
    #: configurations no trajectory visited (see dbn_inference)
    unvisited_mass: np.ndarray | None = None

    def failure_note(self) -> tuple[str | None, bool]:
        """(what the command says on stderr about trajectories that failed and were
        left out of the counts, or None; False: a run where all failed raised instead)."""
        failed = int(self.metadata.get("failed_trajectories", 0) or 0)
        if not failed:
            return None, False
        total = int(self.metadata.get("trajectories", 0) or 0)
        statuses = ", ".join(f"{name} {k:,}" for name, k in
                             (self.metadata.get("failed_status") or {}).items())
        members = list(self.metadata.get("failed_members") or [])
        shown = ", ".join(map(str, members[:5])) + (", ..." if failed > 5 else "")
        return (f"{failed:,} of {total:,} trajectories failed ({statuses}; members "
                f"{shown}) and are left out of the counts: the marginals and tables are "
                f"those of the other {total - failed:,} (which may bias them; more --steps "
                f"a slice where the failures are non_finite)"), False

    def __post_init__(self):
        self.variables = tuple(str(v) for v in self.variables)
        nv = len(self.variables)
        self.times = np.asarray(self.times, dtype=float).reshape(-1)
        self.edges = np.asarray(self.edges, dtype=float).reshape(nv, -1)
        bins = self.bins
        if bins < 1 or np.any(np.diff(self.edges, axis=1) <= 0):
            raise ValueError("each variable needs increasing bin edges")
        self.parents = {str(k): tuple(str(p) for p in v) for k, v in self.parents.items()}
        self._check_parents()
        slices = len(self.times) - 1
        self.counts = {str(k): v if isinstance(v, SparseCounts) else np.asarray(v, np.int64)
                       for k, v in self.counts.items()}
        for var in self.variables:
            self._check_counts(var, slices)
        self.counted = np.asarray(self.counted, dtype=float).reshape(slices + 1, nv, bins)
        if self.inferred is not None:
            self.inferred = np.asarray(self.inferred, dtype=float).reshape(self.counted.shape)
        if self.unvisited_mass is not None:
            self.unvisited_mass = np.asarray(self.unvisited_mass, float).reshape(slices, nv)

    def _check_parents(self) -> None:
        if set(self.parents) != set(self.variables):
            raise ValueError("parents must be given for every variable, and only for them")
        order = {v: i for i, v in enumerate(self.variables)}
        for var, ps in self.parents.items():
            missing = [p for p in ps if p not in order]
            if missing:
                raise ValueError(f"parents of {var} name unknown variables {missing}")
            # the row index of a configuration depends on this order: a parent list in
            # another order would silently read the wrong rows
            if [order[p] for p in ps] != sorted(set(order[p] for p in ps)):
                raise ValueError(f"parents of {var} must be distinct and in model order "
                                 f"({', '.join(ps)})")
            if var not in ps:
                raise ValueError(f"parents of {var} must include {var} itself")

    def _check_counts(self, var: str, slices: int) -> None:
        counts, n = self.counts.get(var), len(self.parents[var])
        if isinstance(counts, SparseCounts):
            got = (counts.transitions, counts.n_parents, counts.bins)
            if got != (slices, n, self.bins):
                raise ValueError(f"sparse counts of {var} have {got[0]} transitions, {got[1]} "
                                 f"parents and {got[2]} bins; expected {slices}, {n} and "
                                 f"{self.bins}")
            return
        shape = (slices, self.bins ** n, self.bins)
        if counts is None or counts.shape != shape:
            got = None if counts is None else counts.shape
            raise ValueError(f"counts of {var} have shape {got}; expected {shape}")

    @property
    def bins(self) -> int:
        return self.edges.shape[1] - 1

    @property
    def slices(self) -> int:
        """The number of transitions (time slices after the initial one)."""
        return len(self.times) - 1

    def is_sparse(self, variable: str) -> bool:
        return isinstance(self.counts[variable], SparseCounts)

    def dense_counts(self, variable: str, transition: int) -> np.ndarray:
        """Counts of one transition as a full table (K**len(parents), K), whatever the
        form stored; a sparse variable only up to FULL_TABLE_LIMIT entries."""
        counts = self.counts[variable]
        if not isinstance(counts, SparseCounts):
            return counts[transition]
        if counts.full_table_entries > FULL_TABLE_LIMIT:
            n, bins = counts.n_parents, self.bins
            raise ValueError(f"{variable} has {n} parents: its full table ({bins}**{n} parent "
                             f"configurations) is over the limit of {FULL_TABLE_LIMIT} "
                             f"entries; use cpt_rows({variable!r}, {transition}) for the "
                             f"visited configurations")
        return counts.table(transition)

    def cpt(self, variable: str, transition: int) -> np.ndarray:
        """P(variable's bin at slice transition+1 | parents' bins at slice transition):
        (K**len(parents), K), rows of unvisited parent configurations NaN. A sparse
        variable only while its table is small (FULL_TABLE_LIMIT); `cpt_rows` always."""
        return _probabilities(self.dense_counts(variable, transition))

    def unvisited(self, variable: str, transition: int) -> np.ndarray:
        """Indices (rows of `cpt()`) of the parent configurations no trajectory visited."""
        return np.flatnonzero(self.dense_counts(variable, transition).sum(axis=1) == 0)

    def cpt_rows(self, variable: str, transition: int):
        """The visited rows of a CPT, for dense and sparse variables alike:
        `(configs, probabilities, counts)`, configs (m, len(parents)) the parents' bins
        (sorted lexicographically, so in row order of `cpt()`), probabilities and counts
        (m, K). Unvisited configurations are absent."""
        counts = self.counts[variable]
        if isinstance(counts, SparseCounts):
            configs, table = counts.configs[transition], counts.counts[transition]
        else:
            rows = np.flatnonzero(counts[transition].sum(axis=1) > 0)
            n = len(self.parents[variable])
            configs = np.stack(np.unravel_index(rows, (self.bins,) * n), axis=1)
            configs = configs.astype(config_dtype(self.bins))
            table = counts[transition][rows]
        return configs, _probabilities(table), table

    # -- inference and export (sbmlgpu.results.dbn_inference, dbn_export) ------------------
    def infer(self) -> "DbnResult":
        """Fill `inferred` and `unvisited_mass` by factored-frontier forward inference
        from the counted marginals at slice 0; returns self."""
        from .dbn_inference import infer

        self.inferred, self.unvisited_mass = infer(self)
        return self

    def inference_error(self) -> dict[str, Any]:
        """How far `inferred` is from `counted` (total variation distance per slice and
        variable, its mean and max): see dbn_inference.inference_error."""
        from .dbn_inference import inference_error

        return inference_error(self)

    def to_pgmpy(self, transition: int):
        """The two-slice pgmpy DynamicBayesianNetwork of one transition (dbn_export)."""
        from .dbn_export import to_pgmpy

        return to_pgmpy(self, transition)

    def to_bayesian_network(self, transition: int):
        """The two-slice pgmpy DiscreteBayesianNetwork of one transition (dbn_export)."""
        from .dbn_export import to_bayesian_network

        return to_bayesian_network(self, transition)

    def write_xmlbif(self, path: str | Path, transition: int) -> list[Path]:
        """XMLBIF of the two-slice network of one transition (dbn_export)."""
        from .dbn_export import write_xmlbif

        return write_xmlbif(self, path, transition)

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
        """Dense counts as `counts_{k}`; sparse ones as `sparse_configs_{k}` and
        `sparse_counts_{k}` (every transition's rows one after another) with
        `sparse_offsets_{k}` (slices + 1: transition s is rows offsets[s]:offsets[s+1])."""
        arrays = {"variables": np.array(self.variables, dtype=str), "times": self.times,
                  "edges": self.edges, "counted": self.counted,
                  "parents_json": json.dumps(self.parents)}
        if self.inferred is not None:
            arrays["inferred"] = self.inferred
        if self.unvisited_mass is not None:
            arrays["unvisited_mass"] = self.unvisited_mass
        for k, var in enumerate(self.variables):
            counts = self.counts[var]
            if isinstance(counts, SparseCounts):
                sizes = [len(c) for c in counts.counts]
                arrays[f"sparse_offsets_{k}"] = np.concatenate([[0], np.cumsum(sizes)])
                arrays[f"sparse_configs_{k}"] = np.concatenate(counts.configs)
                arrays[f"sparse_counts_{k}"] = np.concatenate(counts.counts)
            else:
                arrays[f"counts_{k}"] = counts
        return arrays

    @classmethod
    def from_arrays(cls, a: dict[str, Any], metadata: dict) -> "DbnResult":
        variables = tuple(str(v) for v in np.asarray(a["variables"]).tolist())
        parents = json.loads(str(a["parents_json"]))
        counts = {}
        for k, var in enumerate(variables):
            if f"counts_{k}" in a:
                counts[var] = a[f"counts_{k}"]
                continue
            offsets = np.asarray(a[f"sparse_offsets_{k}"]).tolist()
            spans = list(zip(offsets[:-1], offsets[1:]))
            configs = np.asarray(a[f"sparse_configs_{k}"])
            table = np.asarray(a[f"sparse_counts_{k}"])
            counts[var] = SparseCounts(tuple(configs[i:j] for i, j in spans),
                                       tuple(table[i:j] for i, j in spans))
        return cls(variables, a["times"], a["edges"], parents, counts, a["counted"],
                   a.get("inferred"), metadata, a.get("unvisited_mass"))

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
