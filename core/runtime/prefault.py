"""Fault in a fresh host array's pages on threads, while the GPU computes what will be
copied into it; and copies between large host arrays split over threads.

Why: the time courses of an ensemble go into a freshly allocated result array
(sbmlgpu.schedule.spill), whose pages the operating system maps on first touch. A
download into it then pays one page fault per page inside the copy, on one thread:
the copy of 10^5 x 51 x 25 doubles ran at ~2.8 GB/s (issue 13). Touching one byte per
page beforehand, on several threads and while the kernel runs, takes the faults off
the critical path; the copy from the pinned staging buffers (transfer.py) then runs at
memory speed, itself split over threads (`parallel_copy`).

Safety: the touch writes zeros into memory that its owner is about to overwrite (the
rows a batch downloads into); `join()` before anything else writes there, so that a
late zero never lands on a downloaded value. Memory-mapped arrays (a spilled result)
are left alone: a touch would write the file.
"""

from __future__ import annotations

import mmap
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

PAGE = mmap.PAGESIZE
#: smaller arrays fault in quickly enough inside the copy: no threads for them
MIN_BYTES = 32 << 20
#: threads at most (page faults and memcpy stop scaling around there)
MAX_THREADS = 8
#: a copy is split into pieces of at least this many bytes
MIN_PIECE = 4 << 20

THREAD_PREFIX = "sbmlgpu-host-memory"  # the pool's threads' names

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def threads() -> int:
    from .host import host_cores

    return max(1, min(MAX_THREADS, host_cores()))


def _forget_pool_in_child() -> None:
    """A forked child inherits the pool but none of its threads: submitting to it would
    wait forever. The child makes its own on first use."""
    global _pool, _lock
    _pool, _lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool_in_child)


def pool() -> ThreadPoolExecutor:
    """The process's threads for host-memory work (created on first use)."""
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(threads(), thread_name_prefix=THREAD_PREFIX)
        return _pool


def _byte_view(array: np.ndarray) -> np.ndarray | None:
    """`array` as flat bytes, or None where it must not or need not be touched."""
    if isinstance(array, np.memmap) or not array.flags.c_contiguous \
            or not array.flags.writeable or array.nbytes < MIN_BYTES:
        return None
    return array.reshape(-1).view(np.uint8)


class Prefault:
    """The pages of `array` being faulted in on the pool's threads; `join()` waits."""

    def __init__(self, array: np.ndarray):
        flat = _byte_view(array)
        self._futures = []
        if flat is None or threads() < 2:
            return
        pieces = threads()
        # piece boundaries on page boundaries of the array's own offsets
        step = -(-flat.size // pieces // PAGE) * PAGE
        self._futures = [pool().submit(_touch, flat[start:start + step])
                         for start in range(0, flat.size, step)]

    @property
    def started(self) -> bool:
        return bool(self._futures)

    def join(self) -> None:
        """Wait until every touch is done (call before anything writes the array)."""
        futures, self._futures = self._futures, []
        for future in futures:
            future.result()


def _touch(flat: np.ndarray) -> None:
    flat[::PAGE] = 0  # one write per page maps it; numpy releases the GIL here


def parallel_copy(target: np.ndarray, source: np.ndarray) -> None:
    """target[...] = source for two 1-D uint8 arrays of one size, on the pool's
    threads when large (each memcpy runs without the GIL)."""
    size = source.size
    pieces = min(threads(), size // MIN_PIECE)
    if pieces < 2:
        target[...] = source
        return
    step = -(-size // pieces)
    futures = [pool().submit(_copy, target[start:start + step], source[start:start + step])
               for start in range(0, size, step)]
    for future in futures:
        future.result()


def _copy(target: np.ndarray, source: np.ndarray) -> None:
    target[...] = source
