"""The CPU engine of the CME solvers: the Engine and Level operations of solvers.py
with scipy.sparse and numpy, on the same matrix and hierarchy structure the GPU
engine uses (so the two compute the same sums; tests compare them).

The matrix is held as the off-diagonal part O (CSR, rows = incoming transitions)
and the diagonal d (minus the rate out of each state that stays inside).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sps

from .aggregation import DEFAULT_AGGREGATE, DEFAULT_COARSEST, Hierarchy, LevelStructure

#: where an accelerated combination (solvers.Anderson) is not positive, this share of
#: the newest V-cycle iterate stands: a zero leaves its aggregate without weight in the
#: next cycle, the iterate itself undoes the acceleration there. Measured (cycles to
#: tol on the toggle switch at 150 x 150 / a bistable 51 x 51 lattice, windows 3, 4, 6):
#: 0 -> fail/81/93, 90/fail/fail; 0.01 -> 90/93/89, 57/55/44; 1 -> 189/fail/fail, 59/47/42
FLOOR = 0.01
#: a coarse probability is never taken below this, so that no aggregate divides by zero
TINY = 1e-300


def jacobi_sweeps(offdiag: sps.csr_matrix, diag: np.ndarray, p: np.ndarray, sweeps: int,
                  omega: float, norm_inf: float) -> np.ndarray:
    """`sweeps` damped Jacobi sweeps on A p = 0. A row without a way out (d_i = 0: an
    absorbing state) takes a uniformised step p_i + (O p)_i / ||A||_inf instead of a
    division by zero."""
    absorbing = diag == 0
    scale = np.where(absorbing, 1.0 / max(norm_inf, TINY), -1.0 / np.where(absorbing, 1.0, diag))
    for _ in range(sweeps):
        incoming = offdiag @ p
        update = np.where(absorbing, p + incoming * scale, incoming * scale)
        p = update if omega == 1.0 else (1.0 - omega) * p + omega * update
    return p


class CpuLevel:
    """One level of the hierarchy: its matrix (values for the level's structure)."""

    def __init__(self, structure: LevelStructure, values: np.ndarray, diag: np.ndarray,
                 norm_inf: float):
        self.structure = structure
        self.n = structure.n
        self.values = values
        self.diag = diag
        self.norm_inf = norm_inf
        self.next: CpuLevel | None = None

    def matrix(self) -> sps.csr_matrix:
        s = self.structure
        return sps.csr_matrix((self.values, s.indices, s.indptr), shape=(s.n, s.n))

    def smooth(self, p: np.ndarray, sweeps: int, omega: float) -> np.ndarray:
        return jacobi_sweeps(self.matrix(), self.diag, p, sweeps, omega, self.norm_inf)

    def coarsen(self, p: np.ndarray) -> np.ndarray:
        """Sets the next level's values from p (aggregation.py's formulas); returns pc."""
        s = self.structure
        pc = np.maximum(aggregate_sums(p, s.aggregate), TINY)
        weighted = self.values * p[s.indices]  # A[i, j] p_j for every entry, CSR order
        between = segment_sums(weighted[s.perm], s.seg_ptr)
        inside = segment_sums(weighted[s.diag_perm], s.diag_ptr)
        coarse_diag = (aggregate_sums(self.diag * p, s.aggregate) + inside) / pc
        coarse_values = between / pc[s.coarse_column]
        nxt = self.next
        nxt.values, nxt.diag = coarse_values, coarse_diag
        return pc

    def prolong(self, p: np.ndarray, qc: np.ndarray, pc: np.ndarray) -> np.ndarray:
        factor = np.maximum(qc, TINY) / pc
        return p * np.repeat(factor, self.structure.aggregate)[:self.n]

    def vector_like(self, host: np.ndarray) -> np.ndarray:
        return np.array(host, dtype=np.float64)

    def dense(self) -> np.ndarray:
        a = self.matrix().toarray()
        a[np.diag_indices(self.n)] += self.diag
        return a


def aggregate_sums(v: np.ndarray, s: int) -> np.ndarray:
    """Sums over runs of s consecutive entries (the last run may be shorter)."""
    n = len(v)
    return np.add.reduceat(v, np.arange(0, n, s)) if n else v[:0]


def segment_sums(v: np.ndarray, ptr: np.ndarray) -> np.ndarray:
    """out[m] = v[ptr[m]:ptr[m+1]].sum() (0 for an empty segment), len(v) == ptr[-1].
    Summed segment by segment (reduceat), never as differences of a running sum,
    which would cancel: segments of tiny probabilities sit beside large ones."""
    lengths = np.diff(ptr)
    out = np.zeros(len(lengths))
    filled = lengths > 0
    if filled.any():
        out[filled] = np.add.reduceat(v, ptr[:-1][filled])
    return out


class CpuEngine:
    """Engine (solvers.py) over a generator given as O (CSR) and d."""

    name = "cpu"

    def __init__(self, offdiag: sps.csr_matrix, diag: np.ndarray,
                 aggregate: int = DEFAULT_AGGREGATE, coarsest: int = DEFAULT_COARSEST):
        offdiag = sps.csr_matrix(offdiag)
        offdiag.sort_indices()
        self.offdiag = offdiag
        self.diag = np.asarray(diag, dtype=np.float64)
        self.n = offdiag.shape[0]
        self.norm_inf = float(np.max(np.asarray(abs(offdiag).sum(axis=1)).reshape(-1)
                                     + np.abs(self.diag), initial=0.0))
        self.aggregate, self.coarsest = aggregate, coarsest
        self._levels: list[CpuLevel] | None = None

    # -- vectors ----------------------------------------------------------------------
    def vector(self, host: np.ndarray) -> np.ndarray:
        return np.array(host, dtype=np.float64)

    def host(self, v: np.ndarray) -> np.ndarray:
        return np.asarray(v)

    # -- the operations -----------------------------------------------------------------
    def jacobi(self, p: np.ndarray, sweeps: int, omega: float = 1.0) -> np.ndarray:
        return jacobi_sweeps(self.offdiag, self.diag, p, sweeps, omega, self.norm_inf)

    def normalise(self, p: np.ndarray) -> float:
        total = float(p.sum())
        if total > 0:
            p /= total
        return total

    def dot(self, x: np.ndarray, y: np.ndarray) -> float:
        # einsum's own loop, not BLAS: OpenBLAS's threads made a dot of 40,000 doubles
        # take 2.7 ms on a busy 2-core machine (66 us this way), 85 % of an IDR solve
        return float(np.einsum("i,i->", x, y))

    def dots(self, pairs) -> list[float]:
        return [self.dot(x, y) for x, y in pairs]

    def combine(self, coefficients, vectors, clip: bool = True) -> np.ndarray:
        """sum_j c_j v_j in the GPU engine's order; with clip, where that is not
        positive, FLOOR times the last vector's value instead."""
        vectors = list(vectors)
        out = coefficients[0] * vectors[0]
        for c, v in zip(coefficients[1:], vectors[1:]):
            out = out + c * v
        return np.where(out > 0, out, FLOOR * vectors[-1]) if clip else out

    def residual(self, p: np.ndarray) -> tuple[float, float, float, float]:
        r = self.offdiag @ p + self.diag * p
        return (float(np.max(np.abs(r), initial=0.0)), float(np.abs(r).sum()),
                float(np.max(np.abs(p), initial=0.0)), float(np.max(-p, initial=0.0)))

    def levels(self) -> list[CpuLevel]:
        if self._levels is None:
            o = self.offdiag
            hierarchy = Hierarchy.build(o.indptr, o.indices, self.n, self.aggregate,
                                        self.coarsest)
            levels = [CpuLevel(hierarchy.levels[0], o.data, self.diag, self.norm_inf)]
            for structure in hierarchy.levels[1:]:
                level = CpuLevel(structure, np.zeros(structure.nnz), np.zeros(structure.n),
                                 self.norm_inf)
                levels[-1].next = level
                levels.append(level)
            self._levels = levels
        return self._levels
