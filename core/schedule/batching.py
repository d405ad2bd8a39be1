"""How many items one launch may take: the memory arithmetic of batching.

An ensemble rarely fits on a GPU at once (a million trajectories of a 100-species
model with 1,000 output times is 800 GB in float64). The backend says what one item
costs in device memory (`bytes_per_item`) and what a launch needs besides
(`fixed_bytes`, not yet allocated); the device says how much is free. We use only a
`safety` fraction of the free memory because the driver, the compiled module, the
allocator's rounding and other processes on the GPU all take some that no estimate
sees; an estimate that is a little off then costs nothing, and one that is far off
is caught by the out-of-memory retry in `worker.py`.
"""

from __future__ import annotations

import math
import operator
import sys
from dataclasses import dataclass

from ..errors import DeviceError, OptionError

#: Fraction of the free device memory that batches may fill (see the module docstring).
DEFAULT_SAFETY = 0.9


@dataclass(frozen=True)
class Batch:
    """The items [start, stop) of one launch."""

    start: int
    stop: int

    @property
    def size(self) -> int:
        return self.stop - self.start


def check_safety(safety: float) -> float:
    if not (isinstance(safety, (int, float)) and 0.0 < safety <= 1.0):
        raise OptionError("safety", f"{safety!r} is not a fraction in (0, 1]")
    return float(safety)


def check_count(name: str, value, minimum: int = 0) -> int:
    try:
        if isinstance(value, bool):
            raise TypeError
        value = operator.index(value)  # int and numpy integers, not floats
    except TypeError:
        raise OptionError(name, f"{value!r} is not an integer") from None
    if value < minimum:
        raise OptionError(name, f"{value} is below the minimum {minimum}")
    return value


def check_bytes(name: str, value) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(
            value) or value < 0:
        raise OptionError(name, f"{value!r} is not a finite, non-negative number of bytes")
    return value


def items_that_fit(free_bytes: int, bytes_per_item: float, fixed_bytes: float = 0,
                   safety: float = DEFAULT_SAFETY) -> int:
    """The most items whose memory, with `fixed_bytes`, fits in `safety * free_bytes`.

    Zero when not even the fixed part fits; `sys.maxsize` when items cost nothing."""
    check_bytes("free-bytes", free_bytes)
    check_bytes("bytes-per-item", bytes_per_item)
    check_bytes("fixed-bytes", fixed_bytes)
    budget = check_safety(safety) * free_bytes - fixed_bytes
    if budget < 0:
        return 0
    if bytes_per_item == 0:
        return sys.maxsize
    return int(budget // bytes_per_item)


def align_down(size: int, align: int) -> int:
    """`size` rounded down to a multiple of `align`, unless that would be zero.

    Batches start on multiples of `align` (e.g. 32, so that a bundle of similar items
    from `bundle()` fills one warp); a batch smaller than `align` is allowed when
    memory leaves nothing else, because a split bundle only costs speed."""
    return size // align * align if size >= align else size


def batch_size_limit(n_items: int, fit: int, *, max_items: int | None = None,
                     align: int = 1) -> int:
    """The batch size to aim for: what fits, capped by `max_items` and by `n_items`."""
    size = min(fit, n_items if n_items > 0 else 1)
    if max_items is not None:
        size = min(size, max_items)
    return max(align_down(size, align), 0)


def plan_batches(n_items: int, bytes_per_item: float, *, free_bytes: int,
                 fixed_bytes: float = 0, safety: float = DEFAULT_SAFETY,
                 max_items: int | None = None, min_items: int = 1,
                 align: int = 1) -> list[Batch]:
    """Split `n_items` into consecutive launches that fit in device memory.

    All batches but the last have the same size (a multiple of `align` where
    possible). Raises DeviceError, naming the numbers, when fewer than `min_items`
    fit: better said before launching than found out by a failed allocation."""
    n_items = check_count("n-items", n_items)
    min_items = check_count("min-batch-items", min_items, 1)
    align = check_count("align", align, 1)
    if max_items is not None:
        max_items = check_count("max-batch-items", max_items, 1)
        if max_items < min_items:
            raise OptionError("max-batch-items",
                              f"{max_items} is below min-batch-items {min_items}")
    fit = items_that_fit(free_bytes, bytes_per_item, fixed_bytes, safety)
    if n_items == 0:
        return []
    if fit < min(min_items, n_items):
        raise DeviceError(not_enough_memory_message(
            free_bytes, bytes_per_item, fixed_bytes, safety, min(min_items, n_items)))
    size = max(batch_size_limit(n_items, fit, max_items=max_items, align=align), 1)
    return [Batch(start, min(start + size, n_items)) for start in range(0, n_items, size)]


def not_enough_memory_message(free_bytes, bytes_per_item, fixed_bytes, safety,
                              items: int, where: str = "the device") -> str:
    need = fixed_bytes + items * bytes_per_item
    return (f"not enough memory on {where}: {items} item(s) need {need:.4g} bytes "
            f"({fixed_bytes:.4g} fixed + {bytes_per_item:.4g} per item), but only "
            f"{safety:g} x {free_bytes:.4g} free bytes may be used; free memory on the "
            "device or use a smaller model or output grid")
