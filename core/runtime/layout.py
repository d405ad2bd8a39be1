"""Time courses from the member-minor layout of one-thread-per-member kernels to the
member-major arrays of results, on the device (codegen/templates/transpose.cu).

A kernel in which thread i computes member i writes its outputs as (columns,
members), so that a warp's stores are coalesced; a Result holds (members, times,
outputs). Transposing on the host is a strided pass over every value (seconds per
gigabyte); on the device it runs at memory bandwidth, and the copy back is then
one contiguous block, straight into the caller's array when it has one.

That copy goes through the device's pool of pinned staging buffers
(transfer.download_staged) where the driver page-locks them (PyCUDA): a copy into
the result's pageable rows runs at a few GB/s, through pinned chunks at the link's
speed. A device whose host buffers are plain memory (the base default, fakes)
copies straight into the rows, as before: staging would only add a memcpy.
"""

from __future__ import annotations

import numpy as np

from ..profile import phase
from .base import Device
from .core_kernels import core_kernel, precision_of
from .prefault import pool as host_memory_threads
from .transfer import DEFAULT_CHUNK_BYTES, download_staged

TILE, ROWS = 32, 8  # transpose.cu: TILE, ROWS
MAX_GRID_Y = 65535
KERNEL = "sbmlgpu_member_major"


def _precision(dtype) -> str:
    return precision_of(dtype, "member_major")


def transpose_kernel(device, dtype):
    """The compiled transpose for `dtype` on `device` (compiled once per process)."""
    return core_kernel(device, "transpose.cu", KERNEL, dtype, "member_major")


def pins_host_memory(device) -> bool:
    """Whether `device`'s staging pool holds page-locked memory: its driver
    allocates pinned buffers itself instead of base.Device's plain arrays."""
    allocate = getattr(type(device), "allocate_pinned", None)
    return allocate is not None and allocate is not Device.allocate_pinned \
        and callable(getattr(device, "pinned_pool", None))


#: a smaller download pins its small staging quickly enough inside itself
STAGE_AHEAD_MIN = 4 << 20


def stage_ahead(device, nbytes: int, chunk_bytes: int = DEFAULT_CHUNK_BYTES):
    """Pin, on the host-memory threads, the two staging blocks that a download of
    `nbytes` of time courses will take (download_staged: two chunks of
    min(`chunk_bytes`, `nbytes`), in that size class), while the caller goes on; the
    download then takes them from the pool, or waits for one still being pinned
    (pinned.PinnedPool.prefill). `nbytes`: one launch's time courses, which one
    download_staged call copies. Measured (docs/benchmarks.md): a first run's download
    on the H200 took 30-45 ms longer than the repeat's, which found its 2 x 32 MiB in
    the pool; the method check (Python, 20-460 ms) runs meanwhile where the driver
    pins without the GIL (driver_host_memory.py). Only for downloads of at least
    STAGE_AHEAD_MIN and where the device pins (pins_host_memory). Returns the future,
    or None where there is nothing to do."""
    if nbytes < STAGE_AHEAD_MIN or not pins_host_memory(device):
        return None
    # PyCUDA frees an object (an event, a stream) outside an activation only in the
    # thread that made its context, and otherwise warns and leaks it: the context is
    # made here, in the caller's thread, before the pool's thread activates it (on the
    # H200, a first run that made it there left "out-of-thread context" warnings)
    with device.activate():
        pass
    return host_memory_threads().submit(device.pinned_pool().prefill,
                                        min(int(chunk_bytes), int(nbytes)), 2)


def member_major(device, source, n: int, shape: tuple[int, ...], dtype, *,
                 profiler=None, destination: np.ndarray | None = None) -> np.ndarray:
    """The (n, *shape) host array of a device buffer laid out as (*shape, n).

    Needs a scratch buffer of the same size on the device for the moment.
    `destination`: a C-contiguous (n, *shape) array of `dtype` to fill (else a new
    one)."""
    dtype = np.dtype(dtype)
    full = (int(n), *map(int, shape))
    if destination is None or destination.shape != full or destination.dtype != dtype \
            or not destination.flags.c_contiguous:
        destination = np.empty(full, dtype=dtype)
    cols = int(np.prod(shape)) if len(shape) else 1
    if n == 0 or cols == 0:
        return destination
    scratch = device.alloc(n * cols * dtype.itemsize)
    try:
        kernel = transpose_kernel(device, dtype)
        grid = ((n + TILE - 1) // TILE, min((cols + TILE - 1) // TILE, MAX_GRID_Y))
        timing = kernel.launch(grid, (TILE, ROWS), [np.int64(n), np.int32(cols), source, scratch])
        if profiler is not None:
            profiler.record_launch(kernel, timing, device, flops=0.0,
                                   bytes=2.0 * n * cols * dtype.itemsize,
                                   precision=_precision(dtype))
        with phase(profiler, "download time courses", category="transfer", device=device):
            if pins_host_memory(device):
                download_staged(device, scratch, destination)
            else:
                device.download(scratch, destination)
    finally:
        scratch.free()
    return destination
