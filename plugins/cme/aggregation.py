"""The host-side structure of the multilevel aggregation hierarchy (for solvers.py).

Multilevel aggregation for Markov chains (Horton and Leutenegger 1994; De Sterck,
Manteuffel, McCormick, Miller, Ruge, Sanders, SIAM J. Sci. Comput. 30(3), 2008):
the states of level k are grouped into aggregates, and level k+1 is the chain of
the aggregates, its rates weighted by the current iterate p:

    Ac[I, J] = sum_{i in I, j in J} A[i, j] p_j / pc_J          (I != J)
    Ac[I, I] = (sum_{i in I} d_i p_i + sum_{i != j in I} A[i, j] p_j) / pc_I
    pc_I     = sum_{i in I} p_i

so the coarse chain's columns still sum to zero and its stationary vector, pushed
back down (p_i * qc_I / pc_I), corrects the slow modes that Jacobi cannot.

Aggregates here are runs of `aggregate` consecutive states. That is a choice that
costs nothing to build and works because the enumeration is depth first: states
next to each other in the order are next to each other in the lattice, so a run is
a small connected patch (measured on the toggle switch: see docs/cme.md).

Only the structure is built here, once per matrix; the values are recomputed every
cycle from p by the engines (cpu_engine.py with numpy, the GPU engine with kernels)
from the same arrays, so both do the same sums:

- `perm`/`seg_ptr`: the level's off-diagonal entries (CSR order) that land in each
  coarse off-diagonal slot, slot by slot;
- `diag_perm`/`diag_ptr`: those that fall inside one aggregate (a coarse diagonal);
- `coarse_column`: the coarse column J of each coarse slot (to divide by pc_J).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: states per aggregate (runs of consecutive states)
DEFAULT_AGGREGATE = 4
#: a level at most this big is solved directly (dense) instead of aggregated further
DEFAULT_COARSEST = 512


@dataclass(frozen=True)
class LevelStructure:
    """Level k: its off-diagonal CSR structure and how it aggregates into level k+1
    (the aggregation fields are None on the coarsest level)."""

    n: int
    indptr: np.ndarray  # (n + 1,) int64
    indices: np.ndarray  # (nnz,) int32: the column of each off-diagonal entry
    aggregate: int | None = None  # states per aggregate
    n_coarse: int | None = None
    perm: np.ndarray | None = None  # (nnz_between,) entry ids, grouped by coarse slot
    seg_ptr: np.ndarray | None = None  # (coarse nnz + 1,)
    diag_perm: np.ndarray | None = None  # entry ids inside an aggregate, by aggregate
    diag_ptr: np.ndarray | None = None  # (n_coarse + 1,)
    coarse_column: np.ndarray | None = None  # (coarse nnz,) int32

    @property
    def nnz(self) -> int:
        return int(self.indptr[-1])

    @property
    def rows(self) -> np.ndarray:
        """The row of each entry (CSR order)."""
        return np.repeat(np.arange(self.n, dtype=np.int64), np.diff(self.indptr))


@dataclass(frozen=True)
class Hierarchy:
    levels: tuple[LevelStructure, ...]

    @classmethod
    def build(cls, indptr: np.ndarray, indices: np.ndarray, n: int,
              aggregate: int = DEFAULT_AGGREGATE,
              coarsest: int = DEFAULT_COARSEST) -> "Hierarchy":
        """The hierarchy of the off-diagonal structure (indptr, indices) of an n-state
        generator: levels until one has at most `coarsest` states."""
        if aggregate < 2:
            raise ValueError(f"aggregate must be at least 2, not {aggregate}")
        if coarsest < 1:
            raise ValueError(f"coarsest must be at least 1, not {coarsest}")
        levels = []
        indptr = np.asarray(indptr, dtype=np.int64)
        indices = np.asarray(indices, dtype=np.int32)
        while True:
            if n <= coarsest:
                levels.append(LevelStructure(n, indptr, indices))
                return cls(tuple(levels))
            level, (indptr, indices, n) = _aggregate(n, indptr, indices, aggregate)
            levels.append(level)

    @property
    def depth(self) -> int:
        return len(self.levels)

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(level.n for level in self.levels)


def _aggregate(n: int, indptr: np.ndarray, indices: np.ndarray, s: int):
    """LevelStructure of this level and the coarse level's (indptr, indices, n)."""
    n_coarse = -(-n // s)
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    row_agg = rows // s
    col_agg = indices.astype(np.int64) // s
    inside = row_agg == col_agg
    between = np.nonzero(~inside)[0]
    key = row_agg[between] * n_coarse + col_agg[between]
    order = np.argsort(key, kind="stable")
    perm = between[order]
    sorted_key = key[order]
    starts = np.flatnonzero(np.r_[True, sorted_key[1:] != sorted_key[:-1]]) \
        if len(sorted_key) else np.zeros(0, np.int64)
    seg_ptr = np.r_[starts, len(sorted_key)].astype(np.int64)
    slot_key = sorted_key[starts]
    coarse_rows = slot_key // n_coarse
    coarse_cols = (slot_key % n_coarse).astype(np.int32)
    coarse_indptr = np.zeros(n_coarse + 1, dtype=np.int64)
    np.add.at(coarse_indptr, coarse_rows + 1, 1)
    coarse_indptr = np.cumsum(coarse_indptr)
    inside_ids = np.nonzero(inside)[0]  # rows ascend, so aggregates ascend too
    diag_ptr = np.searchsorted(row_agg[inside_ids], np.arange(n_coarse + 1), side="left")
    level = LevelStructure(
        n=n, indptr=indptr, indices=indices, aggregate=s, n_coarse=n_coarse,
        perm=perm.astype(np.int64), seg_ptr=seg_ptr, diag_perm=inside_ids.astype(np.int64),
        diag_ptr=diag_ptr.astype(np.int64), coarse_column=coarse_cols)
    return level, (coarse_indptr, coarse_cols, n_coarse)
