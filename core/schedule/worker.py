"""One device's share of a map: take item ranges, run them, halve on out-of-memory.

Why halve: the memory estimate behind a batch size is a model (the backend's
bytes per item), and the truth shows up only as a failed allocation. Halving finds a
size that fits in log2(size) tries, keeps the launches as large as the memory allows,
and ends at `min_items`, below which a launch would be too small to be worth running
(or the item alone does not fit, which no batch size can fix). A size that failed is
not tried again on that device for the rest of the map: what ran out once (memory
taken by another process, fragmentation) usually stays out.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import DeviceError
from ..runtime.base import Device, OutOfDeviceMemory
from .batching import (Batch, align_down, batch_size_limit, items_that_fit,
                       not_enough_memory_message)

#: work(device, start, stop) -> the result for items [start, stop); device None on the host
WorkFunction = Callable[["Device | None", int, int], Any]


@dataclass(frozen=True)
class BatchRecord:
    """What ran where: one finished batch, for reports, traces and tests."""

    device_index: int | None  # None: the host (no GPU)
    device_name: str
    rank: int
    start: int
    stop: int
    seconds: float
    out_of_memory_sizes: tuple[int, ...] = ()  # sizes that failed on the way to this one

    @property
    def size(self) -> int:
        return self.stop - self.start


class WorkQueue:
    """Hands out consecutive item ranges to whichever worker asks next.

    A shared queue rather than a fixed split because GPUs differ in speed (and so do
    batches: stiff parameter sets take longer), so a fixed share leaves the fast
    device idle at the end; with a queue each device asks again as soon as it is done
    and the fast one simply takes more. Thread-safe."""

    def __init__(self, start: int, stop: int):
        self._next = start
        self._stop = stop
        self._closed = False
        self._lock = threading.Lock()

    def take(self, max_items: int) -> Batch | None:
        """The next range of at most `max_items` items, or None when none are left."""
        with self._lock:
            if self._closed or self._next >= self._stop:
                return None
            batch = Batch(self._next, min(self._next + max(max_items, 1), self._stop))
            self._next = batch.stop
            return batch

    def close(self) -> None:
        """Hand out nothing more (another worker failed: stop the others soon)."""
        with self._lock:
            self._closed = True

    @property
    def remaining(self) -> int:
        with self._lock:
            return 0 if self._closed else max(self._stop - self._next, 0)


@dataclass(frozen=True)
class WorkerSettings:
    """What every worker of one map shares."""

    n_items: int
    bytes_per_item: float
    fixed_bytes: float
    safety: float
    max_items: int | None
    min_items: int
    align: int
    balance_items: int | None  # cap that leaves enough batches for dynamic balancing


def device_label(device: Device | None) -> str:
    if device is None:
        return "the host"
    return f"device {device.index} ({device.properties.name})"


#: (monotonic time, bytes) of the last reading: runs within HOST_MEMORY_FRESH_S of it use
#: it (opening /proc/meminfo cost a small run ~0.1 ms, a third of its time)
_HOST_MEMORY = [float("-inf"), 0]
HOST_MEMORY_FRESH_S = 0.5


def host_free_memory() -> int:
    """Memory available to the CPU path: MemAvailable on Linux, else free pages
    (read at most every HOST_MEMORY_FRESH_S)."""
    now = time.monotonic()
    if now - _HOST_MEMORY[0] > HOST_MEMORY_FRESH_S:
        _HOST_MEMORY[:] = [now, _read_host_free_memory()]
    return _HOST_MEMORY[1]


def _read_host_free_memory() -> int:
    from ..runtime.host_memory import available_memory

    return available_memory()


class DeviceWorker:
    """Runs the batches one device takes from a queue.

    `on_batch(record, result)` is called after each batch (from this worker's
    thread); `stop` is checked before each new range so that a failure elsewhere
    ends the map after the batches already running."""

    def __init__(self, device: Device | None, work: WorkFunction, settings: WorkerSettings,
                 on_batch: Callable[[BatchRecord, Any], None], *, rank: int = 0,
                 stop: threading.Event | None = None, profiler=None,
                 free_bytes: int | None = None):
        """free_bytes: the device's free memory to size from, read by the caller for
        several workers of one device before any allocated (None: read it here)."""
        self._given_free = free_bytes
        self.device = device
        self.work = work
        self.settings = settings
        self.on_batch = on_batch
        self.rank = rank
        self.stop = stop or threading.Event()
        self.profiler = profiler
        self.size = 0  # the current batch size, set once the device is active
        self.free_bytes = 0

    @property
    def label(self) -> str:
        return device_label(self.device)

    def run(self, take: Callable[[int], Batch | None]) -> None:
        """Activate the device on this thread, then run ranges until `take` says none."""
        if self.device is None:  # the host: nothing to activate
            self._run_ranges(take)
            return
        with self.device.activate():
            self._run_ranges(take)

    def _run_ranges(self, take: Callable[[int], Batch | None]) -> None:
        self.size = self.initial_size()
        while not self.stop.is_set():
            batch = take(self.size)
            if batch is None:
                return
            self.run_range(batch)

    def initial_size(self) -> int:
        """The largest batch that the memory estimate, the options and balancing allow."""
        s = self.settings
        if self._given_free is not None:
            self.free_bytes = self._given_free
        else:
            self.free_bytes = (self.device.free_memory() if self.device is not None
                               else host_free_memory())
        fit = items_that_fit(self.free_bytes, s.bytes_per_item, s.fixed_bytes, s.safety)
        smallest = min(s.min_items, max(s.n_items, 1))
        if fit < smallest:
            raise DeviceError(not_enough_memory_message(
                self.free_bytes, s.bytes_per_item, s.fixed_bytes, s.safety, smallest,
                where=self.label))
        size = batch_size_limit(s.n_items, fit, max_items=s.max_items, align=s.align)
        if s.balance_items is not None:
            size = min(size, s.balance_items)
        return max(size, smallest)

    def run_range(self, batch: Batch) -> None:
        """Run [start, stop) in pieces of at most `self.size`, halving it on OOM."""
        n_items = self.settings.n_items

        def run_piece(offset: int, size: int):
            piece = Batch(batch.start + offset, batch.start + offset + size)
            with self._span(start=piece.start, stop=piece.stop):
                result = self.work(self.device, piece.start, piece.stop)

            def report(seconds: float, out_of_memory_sizes: tuple[int, ...]) -> None:
                index, name = self.where()
                self.on_batch(BatchRecord(index, name, self.rank, piece.start, piece.stop,
                                          seconds, out_of_memory_sizes), result)
            return report

        self.run_in_pieces(batch.size, run_piece, lambda offset, size: (
            f"items [{batch.start + offset}, {batch.start + offset + size}) of {n_items}"))

    def run_in_pieces(self, count: int, run_piece: Callable[[int, int], Callable],
                      describe: Callable[[int, int], str]) -> None:
        """Run the `count` items of a taken batch in pieces of at most `self.size`,
        halving it on out-of-memory. `run_piece(offset, size)` runs one piece and
        returns `report(seconds, out_of_memory_sizes)`, called once it succeeded;
        `describe(offset, size)` names the piece in the error when halving ends."""
        position, failed = 0, []
        while position < count:
            size = min(self.size, count - position)
            started = time.perf_counter()
            out_of_memory = False
            try:
                report = run_piece(position, size)
            except OutOfDeviceMemory as exc:
                failed.append(size)
                self.size = self._halve(size, failed, describe(position, size), exc)
                out_of_memory = True
            if out_of_memory:
                # outside the except block, so that the failed try's frames (and the
                # device buffers they hold) are no longer referenced by the traceback
                gc.collect()
                continue
            report(time.perf_counter() - started, tuple(failed))
            failed = []
            position += size

    def where(self) -> tuple[int | None, str]:
        """(device index, device name) for records; (None, "host") on the host."""
        if self.device is None:
            return None, "host"
        return self.device.index, self.device.properties.name

    def _halve(self, size: int, failed: list[int], what: str,
               exc: OutOfDeviceMemory) -> int:
        s = self.settings
        if size <= s.min_items:
            tried = ", ".join(map(str, failed))
            raise DeviceError(
                f"out of memory on {self.label} running {what}: tried batch sizes {tried} "
                f"and min-batch-items is {s.min_items}; the estimate was "
                f"{s.fixed_bytes:.4g} fixed + {s.bytes_per_item:.4g} bytes per item with "
                f"{self.free_bytes:.4g} bytes free at the start ({exc})") from exc
        return max(align_down(size // 2, s.align), s.min_items, 1)

    def _span(self, **meta):
        if self.profiler is None:
            return contextlib.nullcontext()
        return self.profiler.span("batch", category="schedule", device=self.device,
                                  rank=self.rank, **meta)
