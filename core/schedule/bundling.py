"""Bundling: put items of similar predicted cost side by side, so a warp's lanes finish together.

The 32 threads of a warp run in lock-step; a warp holding one stiff parameter set
(10,000 steps) and 31 easy ones (100 steps each) costs 32 x 10,000 lane-steps for
about 13,000 steps of work. Kovac et al. (2019) grouped simulations of similar
expected running time into the same warp; the general form is a stable sort of the
items by predicted cost: consecutive groups of `group` items (one warp when the
kernel maps one item to one thread) then hold similar costs. Descending order puts
the expensive items in the first batches, so the long work starts first and the
last batch, which decides when a multi-GPU run ends, is a cheap one (longest
processing time first). The sort is stable, so items of equal predicted cost keep
their original order.

Use: `perm = bundle(costs)`, run on `perm.apply(parameters)` with batches aligned
to `perm.group` (`Scheduler.map_batches(..., align=perm.group)`), then
`perm.restore(results)` puts the results back in the order of the request.
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np

from ..errors import OptionError

WARP = 32


class Permutation:
    """A reordering of n items: `order[k]` is the original index of the k-th item."""

    def __init__(self, order, group: int = WARP):
        order = np.asarray(order)
        if order.ndim != 1 or (order.size and not np.issubdtype(order.dtype, np.integer)):
            raise OptionError("order", "a permutation needs a one-dimensional integer array")
        n = order.size
        seen = np.zeros(n, dtype=bool)
        if n and (order.min() < 0 or order.max() >= n):
            raise OptionError("order", f"indices must lie in [0, {n})")
        seen[order] = True
        if not seen.all():
            raise OptionError("order", "indices repeat: not a permutation")
        if int(group) < 1:
            raise OptionError("group", f"{group!r} is below the minimum 1")
        self.order = order.astype(np.intp)
        self.order.flags.writeable = False
        self.inverse = np.empty(n, dtype=np.intp)
        self.inverse[self.order] = np.arange(n, dtype=np.intp)  # inverse[i]: where item i went
        self.inverse.flags.writeable = False
        self.group = int(group)

    @classmethod
    def identity(cls, n: int, group: int = WARP) -> "Permutation":
        return cls(np.arange(n), group)

    def __len__(self) -> int:
        return self.order.size

    def __repr__(self) -> str:
        return f"Permutation(n={len(self)}, group={self.group})"

    def apply(self, values: Any, axis: int = 0) -> Any:
        """`values` (array, or dict of arrays such as TimeCourse.parameters) in the new order."""
        return self._take(values, self.order, axis)

    def restore(self, values: Any, axis: int = 0) -> Any:
        """Results computed in the new order, put back in the original order."""
        return self._take(values, self.inverse, axis)

    def _take(self, values: Any, index: np.ndarray, axis: int) -> Any:
        if isinstance(values, dict):
            return {k: self._take(v, index, axis) for k, v in values.items()}
        if isinstance(values, tuple):
            return tuple(self._take(v, index, axis) for v in values)
        array = np.asarray(values)
        if array.ndim == 0 or array.shape[axis] != len(self):
            raise OptionError("values", f"axis {axis} has {array.shape[axis] if array.ndim else 0}"
                              f" entries, the permutation {len(self)}")
        return np.take(array, index, axis=axis)

    def bundle_of(self) -> np.ndarray:
        """For each original item, the index of the group (warp) it landed in."""
        return self.inverse // self.group


def _check_costs(costs, name: str = "predicted_costs") -> np.ndarray:
    costs = np.asarray(costs, dtype=float)
    if costs.ndim != 1:
        raise OptionError(name, f"need one cost per item (a 1-D array), got shape {costs.shape}")
    if not np.all(np.isfinite(costs)):
        bad = np.flatnonzero(~np.isfinite(costs))[:5].tolist()
        raise OptionError(name, f"costs must be finite; items {bad} are not")
    return costs


#: items from which bundle() sorts 16-bit levels of the log cost instead of the costs
LEVELS_FROM = 4096
LEVELS = 65535


def bundle(predicted_costs, group: int = WARP, *, descending: bool = True) -> Permutation:
    """Order items by predicted cost (stable; most expensive first unless `descending`
    is False) so that each consecutive `group` holds items of similar cost.

    From LEVELS_FROM items the sort key is the log cost in 65,536 levels between the
    smallest positive and the largest cost, which numpy sorts by radix (measured at
    8 x 10^5 items: 5 ms against 74 ms for a stable sort of the costs, most of a
    bundling plan's time): positive costs within a factor (max / min)^(1/65534) of
    each other (1.0002 over six decades) count as equal and keep their order; zero
    costs have a level of their own. Costs with a negative one sort as they are."""
    costs = _check_costs(predicted_costs)
    if costs.size >= LEVELS_FROM and not np.any(costs < 0):  # levels are of log cost
        positive = costs > 0
        if positive.any():
            smallest = float(costs[positive].min())
            low, high = np.log(smallest), float(np.log(costs.max()))
            scale = (LEVELS - 1) / (high - low) if high > low else 0.0
            # positive costs on levels 1..LEVELS, a zero cost on level 0 of its own
            levels = np.where(positive, 1 + np.rint(
                (np.log(np.maximum(costs, smallest)) - low) * scale), 0).astype(np.uint16)
            key = (LEVELS - levels).astype(np.uint16) if descending else levels
            return Permutation(np.argsort(key, kind="stable"), group)
    key = -costs if descending else costs
    return Permutation(np.argsort(key, kind="stable"), group)


def _ordered_costs(costs, permutation: Permutation | None) -> np.ndarray:
    """Costs checked (finite, not negative) and in the permutation's order."""
    costs = _check_costs(costs, "costs")
    if np.any(costs < 0):
        raise OptionError("costs", "costs must not be negative")
    return permutation.apply(costs) if permutation is not None else costs


def refill_makespan(costs, lanes: int, permutation: Permutation | None = None) -> float:
    """When the last of `lanes` lanes ends, where each lane takes the next item in order
    as soon as its own ends (a refill kernel's queue: greedy list scheduling; the first
    `lanes` items start at once). In units of cost. Unlike lane_efficiency, a lane does
    not wait for its warp: what ordering still gains under refill is that the costliest
    items start first instead of last (longest processing time first)."""
    costs = _ordered_costs(costs, permutation)
    if costs.size == 0:
        return 0.0
    lanes = max(1, min(int(lanes), costs.size))
    loads = costs[:lanes].tolist()
    heapq.heapify(loads)
    for cost in costs[lanes:].tolist():
        heapq.heapreplace(loads, loads[0] + cost)
    return float(max(loads))


def lane_efficiency(costs, group: int = WARP, permutation: Permutation | None = None) -> float:
    """Useful work over paid work when items run `group` to a lock-step group.

    Each group costs its size times its most expensive item; 1.0 means no lane
    waits. Compare with and without a permutation to see what bundling gains."""
    costs = _ordered_costs(costs, permutation)
    if costs.size == 0:
        return 1.0
    n_groups = -(-costs.size // group)
    padded = np.zeros(n_groups * group)
    padded[:costs.size] = costs
    group_max = padded.reshape(n_groups, group).max(axis=1)
    lanes = np.full(n_groups, group)
    lanes[-1] = costs.size - (n_groups - 1) * group
    paid = float(np.sum(group_max * lanes))
    return float(costs.sum() / paid) if paid > 0 else 1.0
