"""Shared pieces of the DBN result tests: small networks built from binned trajectories.

Counting is the dbn backend's job; these tests count bin records themselves (plainly,
one trajectory at a time) so that the result machinery is checked against numbers it
did not produce.
"""

from __future__ import annotations

import numpy as np

from sbmlgpu.results.dbn import DbnResult, SparseCounts


def count(records: np.ndarray, variables, parents, bins: int):
    """Dense counts and counted marginals of bin records (trajectories, slices + 1,
    variables): counts[v][s, row of the parents' bins at s, v's bin at s + 1]."""
    n, slices = records.shape[0], records.shape[1] - 1
    index = {v: i for i, v in enumerate(variables)}
    counts = {}
    for var in variables:
        cols = [index[p] for p in parents[var]]
        table = np.zeros((slices, bins ** len(cols), bins), np.int64)
        for trajectory in records:
            for s in range(slices):
                row = 0
                for c in cols:  # first parent most significant
                    row = row * bins + int(trajectory[s, c])
                table[s, row, trajectory[s + 1, index[var]]] += 1
        counts[var] = table
    counted = np.zeros((slices + 1, len(variables), bins))
    for s in range(slices + 1):
        for v in range(len(variables)):
            counted[s, v] = np.bincount(records[:, s, v], minlength=bins) / n
    return counts, counted


def random_walk_bins(rng, trajectories: int, slices: int, variables: int, bins: int):
    """Bin records of random walks: each bin moves by -1, 0 or +1 per slice (clipped),
    so a variable's next bin depends on its own (and its neighbours' are correlated)."""
    records = np.empty((trajectories, slices + 1, variables), np.int64)
    records[:, 0] = rng.integers(0, bins, (trajectories, variables))
    for s in range(slices):
        step = rng.integers(-1, 2, (trajectories, variables))
        records[:, s + 1] = np.clip(records[:, s] + step, 0, bins - 1)
    return records


def result_of(variables, parents, bins, counts, counted, **kwargs) -> DbnResult:
    """A DbnResult with unit-spaced bin edges and slices at 0, 1, 2, ..."""
    slices = counted.shape[0] - 1
    edges = np.tile(np.arange(bins + 1, dtype=float), (len(variables), 1))
    return DbnResult(tuple(variables), np.arange(slices + 1.0), edges, dict(parents), counts,
                     counted, **kwargs)


def sparse_copy(result: DbnResult, variables=None) -> DbnResult:
    """The same result with the counts of `variables` (default: all) stored sparse."""
    variables = result.variables if variables is None else variables
    counts = {var: SparseCounts.from_dense(c) if var in variables else c
              for var, c in result.counts.items()}
    return DbnResult(result.variables, result.times, result.edges, result.parents, counts,
                     result.counted, metadata=dict(result.metadata))


def random_network(rng, variables=("a", "b", "c"), bins=3, slices=3, trajectories=400,
                   max_parents=2):
    """A result from random-walk trajectories, each variable with itself and up to
    max_parents - 1 other random parents."""
    parents = {}
    for v, var in enumerate(variables):
        others = [u for u in range(len(variables)) if u != v]
        extra = rng.choice(others, size=min(max_parents - 1, len(others)), replace=False)
        parents[var] = tuple(variables[u] for u in sorted([v, *extra.tolist()]))
    records = random_walk_bins(rng, trajectories, slices, len(variables), bins)
    counts, counted = count(records, variables, parents, bins)
    return result_of(variables, parents, bins, counts, counted)
