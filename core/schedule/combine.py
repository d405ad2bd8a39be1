"""Putting per-batch results back together in item order.

Batches finish in any order (several devices, OOM splits), so results are kept
with their item range and sorted by start before combining. The default stitches
arrays along their first axis, which is the item axis by convention for every
backend (trajectories: items x times x outputs).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence, Union

import numpy as np

from ..errors import OptionError
from .batching import Batch

#: "concatenate" (default), "batches" (the sorted [(Batch, result)]) or a callable
Combine = Union[str, Callable[[list], Any]]


def check_coverage(pieces: Sequence[tuple[Batch, Any]], n_items: int) -> None:
    """The batches, sorted, must tile [0, n_items) exactly: a gap or overlap here
    means a scheduler bug, and stitching would silently misplace items."""
    position = 0
    for batch, _ in pieces:
        if batch.start != position:
            raise RuntimeError(f"scheduler bug: batch {batch} does not start at {position}")
        position = batch.stop
    if position != n_items:
        raise RuntimeError(f"scheduler bug: batches end at {position}, not at {n_items}")


def _stitch(values: list, sizes: list[int], where: str) -> Any:
    first = values[0]
    if all(v is None for v in values):
        return None
    if isinstance(first, np.ndarray):
        for value, size in zip(values, sizes):
            if not isinstance(value, np.ndarray) or value.ndim == 0 or value.shape[0] != size:
                shape = getattr(value, "shape", type(value).__name__)
                raise ValueError(f"work result{where} for a batch of {size} items has "
                                 f"shape {shape}; the first axis must be the items")
        return np.concatenate(values, axis=0)
    if isinstance(first, tuple):
        return tuple(_stitch([v[i] for v in values], sizes, f"{where}[{i}]")
                     for i in range(len(first)))
    if isinstance(first, dict):
        return {key: _stitch([v[key] for v in values], sizes, f"{where}[{key!r}]")
                for key in first}
    if isinstance(first, list):
        for value, size in zip(values, sizes):
            if len(value) != size:
                raise ValueError(f"work result{where} for a batch of {size} items has "
                                 f"{len(value)} entries")
        return [item for value in values for item in value]
    return values  # scalars or objects: one per batch, in order


def check_combine(combine: Combine) -> Combine:
    if not callable(combine) and combine not in ("concatenate", "batches"):
        raise OptionError("combine", f"{combine!r} is not 'concatenate', 'batches' or a callable")
    return combine


def combine_in_order(pieces: Sequence[tuple[Batch, Any]], n_items: int,
                     combine: Combine = "concatenate") -> Any:
    """Sort `pieces` by item range and combine them (see the module docstring).

    "concatenate": arrays along axis 0, lists joined, tuples and dicts of those
    field by field, all-None to None, anything else a list with one entry per batch.
    No items at all give None (there is no result to take a shape from)."""
    ordered = sorted(pieces, key=lambda piece: piece[0].start)
    check_coverage(ordered, n_items)
    check_combine(combine)
    if callable(combine):
        return combine(ordered)
    if combine == "batches":
        return ordered
    if not ordered:
        return None
    return _stitch([r for _, r in ordered], [b.size for b, _ in ordered], "")
