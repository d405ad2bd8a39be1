"""Downloads into a backend's result rows, and uploads of large host tables, through
pinned staging buffers.

Why: `Device.download(buffer, out)` copies straight into `out`, which is pageable
memory (a block of rows of the result array): the driver then stages the copy
through a small pinned buffer of its own, synchronously, at a few GB/s. Here the
copy goes in chunks into two page-locked blocks from the device's pool, in turn:
while the device copies chunk k+1 into one block, the host copies chunk k from the
other into the rows. The device side runs at the link's speed and the host copy,
a memcpy between two host arrays split over threads (prefault.parallel_copy),
overlaps it.

    download_staged(device, out_buf, result[start:stop])            # blocks until done
    download_staged(device, out_buf, rows, stream=stream)           # after work on `stream`

On a device without streams or pinning (the defaults in base.py) this is a chunked
synchronous copy with the same result.

Uploads the other way round (`upload_staged`): the host copies chunk k+1 into one
block while the device copies chunk k out of the other. Measured on the H200's host:
a 1.4 GB parameter table (Bachmann_MSB2011's objective, 36 runs of 10^5 sets) took
0.2-0.3 s through the driver's own pageable path.

    upload_staged(device, table)                                     # a new buffer
"""

from __future__ import annotations

from collections import deque

import numpy as np

from ..errors import DeviceError
from .prefault import parallel_copy
from .streams import SerialStream

#: bytes per chunk: large enough for full link speed, small enough to overlap well
DEFAULT_CHUNK_BYTES = 32 << 20


def download_staged(device, buffer, out: np.ndarray, *, offset: int = 0, stream=None,
                    chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> np.ndarray:
    """Copy `out.nbytes` bytes of `buffer`, from byte `offset`, into `out` (a
    C-contiguous array, e.g. rows of a result) through pinned staging; returns
    `out` once the copy is complete.

    stream: the stream to copy on (it first finishes what is enqueued on it, e.g.
    the kernel that wrote `buffer`); None: a new stream of `device`."""
    if not (isinstance(out, np.ndarray) and out.flags.c_contiguous and out.flags.writeable):
        raise DeviceError(f"{device}: staged downloads go into C-contiguous, writable numpy "
                          "arrays (a block of whole rows of a C-ordered result)")
    if chunk_bytes < 1:
        raise DeviceError(f"{device}: chunk_bytes must be positive, not {chunk_bytes}")
    total = out.nbytes
    if offset < 0 or offset + total > buffer.nbytes:
        raise DeviceError(f"{device}: reading {total} bytes at offset {offset} of a "
                          f"{buffer.nbytes}-byte buffer")
    if total == 0:
        return out
    stream = stream if stream is not None else device.stream()
    target = out.reshape(-1).view(np.uint8)
    chunk = min(int(chunk_bytes), total)
    pool = device.pinned_pool()
    stages = [pool.take(chunk), pool.take(chunk)]
    in_flight: deque = deque()  # (event, stage, start, size), oldest first
    finished = broken = False
    try:
        for k, start in enumerate(range(0, total, chunk)):
            size = min(chunk, total - start)
            # the stage of chunk k-2 was emptied into `target` before we got here
            stage = stages[k % 2]
            stream.download(buffer, stage[:size], offset=offset + start)
            in_flight.append((stream.record(), stage, start, size))
            if len(in_flight) == 2:
                _drain(in_flight.popleft(), target)
        while in_flight:
            _drain(in_flight.popleft(), target)
        stream.synchronize()  # releases the stream's hold on the stages
        finished = True
    finally:
        if not finished:  # after an error: no copy may still write into a stage we free
            try:
                stream.synchronize()
            except DeviceError:
                broken = True  # a copy may still run: do not hand its stage out again
        for stage in stages:
            (pool.discard if broken else pool.give_back)(stage)
    return out


def _drain(entry, target: np.ndarray) -> None:
    event, stage, start, size = entry
    event.synchronize()
    parallel_copy(target[start:start + size], stage[:size])  # memcpy on threads


def upload_staged(device, array: np.ndarray, *, stream=None,
                  chunk_bytes: int = DEFAULT_CHUNK_BYTES):
    """A new device buffer holding `array` (made C-contiguous), copied through pinned
    staging; returns it once the copy is complete (the caller frees it)."""
    if chunk_bytes < 1:
        raise DeviceError(f"{device}: chunk_bytes must be positive, not {chunk_bytes}")
    host = np.ascontiguousarray(array)
    stream = stream if stream is not None else device.stream()
    if isinstance(stream, SerialStream):
        # a device without asynchronous copies (streams.py's default): staging would
        # only copy twice, and its copies at an offset rewrite the whole buffer
        return device.to_device(host) if host.nbytes else device.alloc(1)
    total = host.nbytes
    if total == 0:
        return device.alloc(1)
    chunk = min(int(chunk_bytes), total)
    pool = device.pinned_pool()
    stages: list = []
    try:
        for _ in range(2):
            stages.append(pool.take(chunk))
    except DeviceError:  # no page-locked memory to be had: the driver's pageable path
        for stage in stages:
            pool.give_back(stage)
        return device.to_device(host)
    source = host.reshape(-1).view(np.uint8)
    finished = broken = False
    buffer = None
    try:
        buffer = device.alloc(total)
        used: list = [None, None]  # the event after the copy out of each stage
        for k, start in enumerate(range(0, total, chunk)):
            size = min(chunk, total - start)
            stage = stages[k % 2]
            if used[k % 2] is not None:
                used[k % 2].synchronize()  # the copy of chunk k-2 has left this stage
            parallel_copy(stage[:size], source[start:start + size])  # memcpy on threads
            stream.upload(buffer, stage[:size], offset=start)
            used[k % 2] = stream.record()
        stream.synchronize()
        finished = True
    finally:
        if not finished:
            try:
                stream.synchronize()
            except DeviceError:
                broken = True  # a copy may still read a stage: do not hand it out again
            if buffer is not None:
                try:
                    buffer.free()
                except DeviceError:
                    broken = True  # the error being raised is the one to see
        for stage in stages:
            (pool.discard if broken else pool.give_back)(stage)
    return buffer
