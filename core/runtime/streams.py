"""Streams, events and launches whose timing is read later (part of the driver interface).

Why: `Kernel.launch` waits for its kernel to end, and `Device.upload/download` copy
synchronously, so a backend cannot copy one batch back while the next one runs,
nor keep two kernels in flight. A `Stream` is an ordered queue on one device:
copies and launches enqueued on it run in order, and the host goes on at once.

    stream = device.stream()
    stream.upload(params_buf, params)              # asynchronous where the memory is pinned
    pending = kernel.launch_async(grid, block, args, stream=stream)
    profiler.record_pending(kernel, pending, device, flops=...)   # recorded once known
    stream.download(out_buf, rows)                 # rows: C-contiguous host memory
    stream.synchronize()                           # now rows hold the data, the timing is read

Timing comes from two events recorded around each kernel, read when the stream is
synchronised (or `pending.timing()` is asked for); until then nothing waits. Where
a launch started on the host clock is known from an anchor event recorded when the
stream was made (see `Stream.host_time`), so a trace places asynchronous kernels
where they ran, not where the host happened to read their time.

`SerialStream` is the fallback of a driver without streams (and of the fakes in
tests): every operation runs at once through the device's synchronous methods, so
code written against streams runs unchanged on any Device.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from typing import Any, Callable

import numpy as np

from ..errors import DeviceError
from .base import Buffer, LaunchTiming


class Event(ABC):
    """A marker in a stream: reached when everything enqueued before it has run."""

    @abstractmethod
    def synchronize(self) -> None:
        """Wait until the stream reaches this event (DeviceError if work before it failed)."""

    @abstractmethod
    def query(self) -> bool:
        """True once the stream has reached this event (never waits)."""

    @abstractmethod
    def elapsed_ms(self, since: "Event") -> float:
        """Milliseconds from `since` to this event; both must have been reached."""


class PendingLaunch:
    """A kernel enqueued on a stream. `timing()` waits for it and reads its time;
    `on_done(callback)` hands the LaunchTiming to `callback` once it is read (by
    `timing()` or by `stream.synchronize()`, on the thread that reads it).

    Holds the kernel's arguments until then, so that a buffer the caller drops is
    not freed while the kernel may still use it."""

    def __init__(self, where: str, grid: tuple[int, int, int], block: tuple[int, int, int],
                 shared_bytes: int, stream: "Stream", start: Event | None = None,
                 end: Event | None = None, *, timing: LaunchTiming | None = None,
                 args: Any = None):
        if timing is None and (start is None or end is None):
            raise ValueError("a pending launch needs its start and end events")
        self.where, self.grid, self.block = where, grid, block
        self.shared_bytes = int(shared_bytes)
        self.stream = stream
        self._start, self._end = start, end
        self._timing = timing
        self._args = None if timing is not None else args
        self._callbacks: list[Callable[[LaunchTiming], Any]] = []
        self._lock = threading.Lock()

    def done(self) -> bool:
        """True once the kernel has ended (never waits)."""
        return self._timing is not None or self._end.query()

    def timing(self) -> LaunchTiming:
        """Wait for the kernel, then its time from the events. DeviceError, naming the
        kernel and its launch shape, when it failed while running."""
        with self._lock:
            if self._timing is not None:
                return self._timing
            try:
                self._end.synchronize()
            except DeviceError as e:
                raise DeviceError(f"{self.where}: failed while running: {e}") from None
            self._timing = LaunchTiming(
                ms=float(self._end.elapsed_ms(self._start)), grid=self.grid, block=self.block,
                dynamic_shared_bytes=self.shared_bytes,
                started_at=self.stream.host_time(self._start))
            self._args = None
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self._timing)
        return self._timing

    def on_done(self, callback: Callable[[LaunchTiming], Any]) -> None:
        """Call `callback(timing)` once the timing is read (now, if it already is)."""
        with self._lock:
            if self._timing is None:
                self._callbacks.append(callback)
                return
        callback(self._timing)


class Stream(ABC):
    """An ordered queue of copies and launches on one device (see the module docstring).

    Host arrays given to `upload`/`download` must stay untouched until the stream is
    synchronised; the stream keeps a reference to them until then. Copies are truly
    asynchronous only from and into page-locked memory (`device.pinned_pool()`);
    with pageable memory the driver copies synchronously, which is correct, only slow.
    """

    device: Any

    def __init__(self, device):
        self.device = device
        self._lock = threading.Lock()
        self._pending: list[PendingLaunch] = []
        self._kept: list[Any] = []
        self._anchor: tuple[Event, float] | None = None

    # --- what a driver implements -------------------------------------------------------
    @abstractmethod
    def _record(self) -> Event: ...

    @abstractmethod
    def _wait(self, event: Event) -> None: ...

    @abstractmethod
    def _synchronize(self) -> None: ...

    @abstractmethod
    def _upload(self, buffer: Buffer, host: np.ndarray, offset: int) -> None: ...

    @abstractmethod
    def _download(self, buffer: Buffer, out: np.ndarray, offset: int) -> None: ...

    @abstractmethod
    def query(self) -> bool:
        """True when everything enqueued has run (never waits)."""

    # --- the interface ------------------------------------------------------------------
    def record(self) -> Event:
        """An event reached once everything enqueued so far has run."""
        return self._record()

    def wait(self, event: Event) -> None:
        """Make work enqueued from now on wait for `event` (from any stream of this
        device) without blocking the host: how one stream hands data to another."""
        self._wait(event)

    def upload(self, buffer: Buffer, array, offset: int = 0) -> None:
        """Enqueue a copy of `array` into `buffer` at byte `offset`."""
        host = np.ascontiguousarray(array)
        self._check_range(buffer, host.nbytes, offset, "writing")
        if host.nbytes:
            self._upload(buffer, host, int(offset))
            self.keep(host)

    def download(self, buffer: Buffer, out: np.ndarray, offset: int = 0) -> None:
        """Enqueue a copy of `out.nbytes` bytes of `buffer`, from byte `offset`, into
        `out` (C-contiguous and writable, e.g. a block of rows of a result)."""
        if not (isinstance(out, np.ndarray) and out.flags.c_contiguous and out.flags.writeable):
            raise DeviceError(f"{self.device}: a stream copies into C-contiguous, writable "
                              "numpy arrays only (copy rows through a staging array)")
        self._check_range(buffer, out.nbytes, offset, "reading")
        if out.nbytes:
            self._download(buffer, out, int(offset))
            self.keep(out)

    def keep(self, obj: Any) -> None:
        """Hold `obj` until the next `synchronize()` (memory an enqueued copy uses)."""
        with self._lock:
            self._kept.append(obj)

    def track(self, pending: PendingLaunch) -> PendingLaunch:
        """Have `synchronize()` read `pending`'s timing (drivers call this)."""
        with self._lock:
            self._pending.append(pending)
        return pending

    def synchronize(self) -> None:
        """Wait for everything enqueued; then every pending launch's timing is read
        (its `on_done` callbacks run, e.g. the profiler's record) and kept host arrays
        are released. DeviceError naming the kernels in flight when one failed."""
        with self._lock:
            pending, self._pending = self._pending, []
        try:
            self._synchronize()
        except DeviceError as e:
            if pending:
                names = "; ".join(p.where for p in pending)
                raise DeviceError(f"{e} (launches not yet read on this stream: {names})") \
                    from None
            raise
        finally:
            with self._lock:
                self._kept.clear()
        for launch in pending:
            launch.timing()

    def host_time(self, event: Event) -> float | None:
        """time.perf_counter() at which the stream reached `event` (reached already):
        the anchor's host time plus the device time from the anchor to `event`."""
        if self._anchor is None:
            return None
        anchor, host = self._anchor
        return host + event.elapsed_ms(anchor) / 1e3

    def _set_anchor(self) -> None:
        """Record an event on the idle stream and note the host time it was reached
        (drivers call this once, when the stream is made)."""
        event = self._record()
        event.synchronize()
        self._anchor = (event, time.perf_counter())

    def _check_range(self, buffer: Buffer, nbytes: int, offset: int, what: str) -> None:
        if offset < 0 or offset + nbytes > buffer.nbytes:
            raise DeviceError(f"{self.device}: {what} {nbytes} bytes at offset {offset} of a "
                              f"{buffer.nbytes}-byte buffer")


class SerialEvent(Event):
    """An event of a SerialStream: reached when recorded, timed by the host clock."""

    def __init__(self):
        self.time = time.perf_counter()

    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True

    def elapsed_ms(self, since: Event) -> float:
        if not isinstance(since, SerialEvent):
            raise DeviceError("events of different kinds of stream cannot be compared")
        return (self.time - since.time) * 1e3


class SerialStream(Stream):
    """The stream of a device without asynchronous operations: each one runs at
    once through the device's synchronous methods, so results are the same and
    only the overlap is lost. A copy at an offset reads (or rewrites) the buffer
    from its start, which is slow and fine for what has no streams: fakes, tests."""

    def __init__(self, device):
        super().__init__(device)
        self._set_anchor()

    def _record(self) -> Event:
        return SerialEvent()

    def _wait(self, event: Event) -> None:
        pass  # everything before `event` has already run

    def _synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True

    def _upload(self, buffer: Buffer, host: np.ndarray, offset: int) -> None:
        if offset == 0:
            self.device.upload(buffer, host)
            return
        whole = self.device.from_device(buffer, (buffer.nbytes,), np.uint8)
        whole[offset:offset + host.nbytes] = host.reshape(-1).view(np.uint8)
        self.device.upload(buffer, whole)

    def _download(self, buffer: Buffer, out: np.ndarray, offset: int) -> None:
        if offset == 0:
            self.device.download(buffer, out)
            return
        head = self.device.from_device(buffer, (offset + out.nbytes,), np.uint8)
        out.reshape(-1).view(np.uint8)[...] = head[offset:]
