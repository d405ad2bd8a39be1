"""Forward inference in a DbnResult's network, and how far it is from the trajectories.

Factored frontier (Murphy & Weiss 2001), as Liu et al. 2009 use it to check their DBN
approximation of a pathway: the belief state at a slice is a product of one marginal
per variable. m_0[v] is the counted marginal at slice 0; for each transition s

    m_{s+1}[v][b] = sum over parent configurations c of
                    (prod_i m_s[parent_i][c_i]) * P_s(v = b | c).

A configuration no trajectory visited has no CPT row, and none is invented: the sum
runs over visited configurations only, the product mass u that fell on unvisited
ones is reported (`unvisited_mass[s, v]`), and the visited sum is renormalised by
its own mass 1 - u. When nothing visited has mass (u = 1) the marginal is NaN for that
variable and slice, and every variable it is a parent of is NaN after it: an
approximation that cannot be computed stays visible as such.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .dbn import SparseCounts

if TYPE_CHECKING:  # pragma: no cover
    from .dbn import DbnResult


def infer(result: "DbnResult") -> tuple[np.ndarray, np.ndarray]:
    """(inferred, unvisited_mass): marginals (slices + 1, variables, K) by factored
    frontier from `result.counted[0]`, and the unvisited mass (slices, variables)."""
    inferred = np.empty((result.slices + 1, len(result.variables), result.bins))
    unvisited = np.empty((result.slices, len(result.variables)))
    inferred[0] = result.counted[0]
    for s in range(result.slices):
        inferred[s + 1], unvisited[s] = forward_step(result, s, inferred[s])
    return inferred, unvisited


def forward_step(result: "DbnResult", transition: int, marginals: np.ndarray):
    """One factored-frontier step through a transition's CPTs from per-variable
    marginals (variables, K) at its first slice: (marginals at the next slice,
    unvisited mass per variable)."""
    index = {v: i for i, v in enumerate(result.variables)}
    after = np.empty_like(marginals, dtype=float)
    unvisited = np.empty(len(result.variables))
    for v, var in enumerate(result.variables):
        parents = np.array([index[p] for p in result.parents[var]], dtype=np.intp)
        counts = result.counts[var]
        if isinstance(counts, SparseCounts):
            weights, table = _sparse_weights(marginals, parents, counts, transition)
            after[v], unvisited[v] = _step(weights, table, every_row=False)
        else:
            weights = _dense_weights(marginals, parents)
            after[v], unvisited[v] = _step(weights, counts[transition], every_row=True)
    return after, unvisited


def _dense_weights(marginals: np.ndarray, parents: np.ndarray) -> np.ndarray:
    """Product masses of every parent configuration (in dense row order: the outer
    product of the parents' marginals, first parent most significant)."""
    weights = np.ones(1)
    for p in parents:
        weights = np.multiply.outer(weights, marginals[p]).reshape(-1)
    return weights


def _sparse_weights(marginals: np.ndarray, parents: np.ndarray, counts: SparseCounts, s: int):
    """Product masses of the listed (visited) configurations only."""
    configs = counts.configs[s].astype(np.intp)
    return marginals[parents[None, :], configs].prod(axis=1), counts.counts[s]


def _step(weights: np.ndarray, table: np.ndarray, every_row: bool) -> tuple[np.ndarray, float]:
    """One variable's next marginal from configuration masses and their counts, and
    the mass on unvisited configurations: summed where the table has every row
    (`every_row`, dense), else what the listed visited rows leave of 1."""
    totals = table.sum(axis=1)
    visited = totals > 0
    probabilities = table[visited] / totals[visited, None]
    mass = weights[visited].sum()
    if not np.isfinite(mass):  # a parent's marginal is NaN: so is what it would give
        unvisited = np.nan
    elif every_row:  # exactly 0 when no unvisited row has mass
        unvisited = float(weights[~visited].sum())
    else:  # rounding can put a sum of normalised products a hair above 1
        unvisited = float(np.clip(1.0 - mass, 0.0, 1.0))
    if not mass > 0:  # nothing visited has mass (or the parents' marginals are NaN)
        return np.full(table.shape[1], np.nan), unvisited
    return weights[visited] @ probabilities / mass, unvisited


def total_variation(inferred: np.ndarray, counted: np.ndarray) -> np.ndarray:
    """0.5 * sum over bins of |inferred - counted|, per (slice, variable)."""
    return 0.5 * np.abs(inferred - counted).sum(axis=-1)


def inference_error(result: "DbnResult") -> dict[str, Any]:
    """How well the network's marginals reproduce the trajectories' (the quality of the
    approximation, as Liu et al. report it): the total variation distance between
    inferred and counted marginals per slice and variable, over slices 1..T (slice 0 is
    the counted marginal itself). Uses `result.inferred`, or infers without storing.

    Returns {"total_variation": (slices + 1, variables) array, "per_variable": {id:
    {"mean", "max", "worst_slice", "undefined"}}, "mean", "max", "undefined"}, where
    "undefined" counts the slices whose inferred marginal is NaN (left out of mean and
    max; mean and max are NaN when no slice is defined)."""
    inferred = result.inferred if result.inferred is not None else infer(result)[0]
    distance = total_variation(inferred, result.counted)
    later = distance[1:]
    per_variable = {var: _summary(later[:, v], first_slice=1)
                    for v, var in enumerate(result.variables)}
    overall = _summary(later.reshape(-1), first_slice=1)
    del overall["worst_slice"]  # a flat index over (slice, variable) would mislead
    return {"total_variation": distance, "per_variable": per_variable, **overall}


def _summary(values: np.ndarray, first_slice: int) -> dict[str, Any]:
    defined = np.isfinite(values)
    if not defined.any():
        return {"mean": float("nan"), "max": float("nan"), "worst_slice": None,
                "undefined": int(values.size)}
    masked = np.where(defined, values, -np.inf)
    return {"mean": float(values[defined].mean()), "max": float(masked.max()),
            "worst_slice": int(masked.argmax()) + first_slice,
            "undefined": int((~defined).sum())}
