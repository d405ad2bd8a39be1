"""The CME generator A on the CPU (scipy.sparse), from a StateSpace and its
propensities, in the column convention of the backend: dp/dt = A p.

    A[i, j] = sum of prop[r, j] over the reactions r that take j to i   (i != j)
    A[j, j] = -(sum of prop[r, j] over the reactions r with an edge out of j)

Reactions dropped at a bound (targets[r, j] == -1) are in neither part, so the
columns of A sum to zero: probability that would leave the enumerated space stays
on the boundary state instead (its mass is the truncation-error indicator).
Vectorised: one coo -> csr conversion, no Python per state.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sparse

from .statespace import StateSpace


def offdiag_csr(space: StateSpace, prop: np.ndarray) -> sparse.csr_matrix:
    """The off-diagonal part of A, n x n CSR: [i, j] = prop[r, j] for every edge
    targets[r, j] == i (equivalently sources[r, i] == j); entries of reactions with
    the same jump are summed."""
    prop = np.asarray(prop, dtype=np.float64)
    rows, columns, values = [], [], []
    for r in range(space.targets.shape[0]):  # R reactions: int32 indices, not int64 pairs
        column = np.flatnonzero(space.targets[r] >= 0).astype(np.int32)
        rows.append(space.targets[r, column])
        columns.append(column)
        values.append(prop[r, column])
    n = space.n
    if not rows:
        return sparse.csr_matrix((n, n), dtype=np.float64)
    out = sparse.coo_matrix((np.concatenate(values), (np.concatenate(rows),
                                                      np.concatenate(columns))),
                            shape=(n, n)).tocsr()
    out.sum_duplicates()
    return out


def diagonal(space: StateSpace, prop: np.ndarray) -> np.ndarray:
    """(n,) float64: -sum_r prop[r, i] over the reactions with an edge out of i."""
    prop = np.asarray(prop, dtype=np.float64)
    return -np.where(space.targets >= 0, prop, 0.0).sum(axis=0)


def generator(space: StateSpace, prop: np.ndarray) -> sparse.csr_matrix:
    """A itself (off-diagonal part plus diagonal), n x n CSR."""
    return (offdiag_csr(space, prop) + sparse.diags(diagonal(space, prop))).tocsr()
