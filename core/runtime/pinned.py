"""A per-device pool of page-locked host buffers, handed out by size and reused.

Why: a copy from the device into fresh pageable memory runs at a few GB/s (measured
2.8 GB/s: 0.36 s of a 1.11 s run), because the driver stages it through its own
pinned buffer and the pages of a fresh array fault on first touch. Into page-locked
memory the copy runs at the link's speed and can be asynchronous. But page-locking
is slow (it maps and locks every page) and takes memory from the system, so the
pinned buffers are few, kept, and reused from batch to batch: this pool.

Blocks come in power-of-two sizes (at least `MIN_BLOCK`), so that a request of a
similar size next batch finds the block the last batch gave back. Blocks given back
are kept up to `max_cached_bytes`; beyond that they are dropped (and unpinned when
garbage-collected). Thread-safe: the device threads of the scheduler share a pool.
`prefill` pins blocks ahead of the takes that will want them (layout.stage_ahead,
on a thread): a first run's download then finds its staging in the pool, as a
repeated run's does.

Never give a block back while an enqueued copy may still use it: synchronise the
stream (or the event after the copy) first. `borrow()` is for synchronous use.
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from typing import Callable, Iterator

import numpy as np

from ..errors import DeviceError

#: smallest block handed out (smaller requests share this size class)
MIN_BLOCK = 64 << 10
#: pinned bytes a pool keeps for reuse when they are not in use
DEFAULT_MAX_CACHED = 512 << 20


def size_class(nbytes: int) -> int:
    """The block size that serves a request of `nbytes`: the next power of two."""
    if nbytes < 0:
        raise DeviceError(f"cannot take a host buffer of {nbytes} bytes")
    return max(MIN_BLOCK, 1 << max(int(nbytes) - 1, 0).bit_length())


#: every pool, for the fork handler below
_POOLS: "weakref.WeakSet[PinnedPool]" = weakref.WeakSet()


def _forget_prefills_in_child() -> None:
    """A forked child inherits a pool's count of blocks being prefilled but not the
    thread pinning them: a take would wait for them forever. The child counts none
    (and gets fresh locks: the parent's may have been held at the fork)."""
    for pool in list(_POOLS):
        pool._lock = threading.Lock()
        pool._arrived = threading.Condition(pool._lock)
        pool._pending = {}


os.register_at_fork(after_in_child=_forget_prefills_in_child)


class PinnedPool:
    """Host staging buffers of one device. `allocate(nbytes)` returns a 1-D uint8
    array of exactly `nbytes` (page-locked by a GPU driver; plain memory where
    nothing can be pinned, e.g. the fakes of tests)."""

    def __init__(self, allocate: Callable[[int], np.ndarray], *,
                 max_cached_bytes: int = DEFAULT_MAX_CACHED, label: str = "host"):
        self._allocate = allocate
        self.max_cached_bytes = int(max_cached_bytes)
        self.label = label
        self._free: dict[int, list[np.ndarray]] = {}
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)  # a prefilled block, or its failure
        self._pending: dict[int, int] = {}  # blocks being prefilled, per size class
        _POOLS.add(self)
        self.hits = 0  # requests served by a kept block
        self.misses = 0  # requests that allocated a new block
        self.in_use_bytes = 0
        self.cached_bytes = 0

    def take(self, nbytes: int) -> np.ndarray:
        """A 1-D uint8 block of at least `nbytes` bytes (its size class), for you
        alone until you `give_back` it."""
        size = size_class(nbytes)
        with self._lock:
            # a block being prefilled (prefill) arrives sooner than a new one would
            while not self._free.get(size) and self._pending.get(size, 0) > 0:
                self._arrived.wait()
            kept = self._free.get(size)
            if kept:
                block = kept.pop()
                self.cached_bytes -= size
                self.hits += 1
                self.in_use_bytes += size
                return block
            self.misses += 1
        block = self._new_block(size)
        with self._lock:
            self.in_use_bytes += size
        return block

    def _new_block(self, size: int) -> np.ndarray:
        block = self._allocate(size)
        if not (isinstance(block, np.ndarray) and block.dtype == np.uint8
                and block.ndim == 1 and block.nbytes == size):
            raise DeviceError(f"{self.label}: the host allocator returned "
                              f"{type(block).__name__}, not {size} bytes of uint8")
        return block

    def give_back(self, block: np.ndarray) -> None:
        """Return a block from `take` (no copy may still be writing into it)."""
        size = block.nbytes
        if size != size_class(size):
            raise DeviceError(f"{self.label}: a {size}-byte array did not come from this pool")
        with self._lock:
            self.in_use_bytes -= size
            if self.cached_bytes + size <= self.max_cached_bytes:
                self._free.setdefault(size, []).append(block)
                self.cached_bytes += size

    def discard(self, block: np.ndarray) -> None:
        """Forget a block from `take` without keeping it (a copy into it may still be
        running on a failed device: it is left to the garbage collector)."""
        with self._lock:
            self.in_use_bytes -= block.nbytes

    @contextlib.contextmanager
    def borrow(self, shape, dtype) -> Iterator[np.ndarray]:
        """A C-contiguous array of `shape` and `dtype` in a pooled block, for the
        `with` block (synchronise any copy into it before the block ends)."""
        dtype = np.dtype(dtype)
        shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(v) for v in shape)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        block = self.take(nbytes)
        try:
            yield block[:nbytes].view(dtype).reshape(shape)
        finally:
            self.give_back(block)

    def prefill(self, nbytes: int, count: int) -> int:
        """Allocate blocks of `nbytes`'s size class until `count` of them are kept, for
        takes to come (e.g. the staging of a download: layout.stage_ahead, on a
        thread while the caller does other work). A take of that class meanwhile waits
        for a block in progress here rather than pinning another. Returns how many it
        allocated; a failure to allocate is left to the takes (they raise it)."""
        size = size_class(nbytes)
        with self._lock:
            pending = self._pending.get(size, 0)
            # blocks kept or on their way count (another prefill of this class), and
            # no more than the pool would keep (the rest would be pinned for nothing)
            room = (self.max_cached_bytes - self.cached_bytes
                    - sum(k * v for k, v in self._pending.items())) // size
            wanted = max(0, min(int(count) - len(self._free.get(size, ())) - pending, room))
            self._pending[size] = pending + wanted
        made = 0
        try:
            for _ in range(wanted):
                block = self._new_block(size)
                with self._lock:
                    self.misses += 1
                    self._pending[size] -= 1
                    if self.cached_bytes + size <= self.max_cached_bytes:
                        self._free.setdefault(size, []).append(block)
                        self.cached_bytes += size
                    self._arrived.notify_all()
                made += 1
        except DeviceError:
            pass  # nothing could be pinned: each take tries (and says so) itself
        finally:
            with self._lock:
                self._pending[size] -= wanted - made  # those never coming
                self._arrived.notify_all()
        return made

    def clear(self) -> None:
        """Drop every kept block (they are unpinned once nothing refers to them)."""
        with self._lock:
            self._free.clear()
            self.cached_bytes = 0
