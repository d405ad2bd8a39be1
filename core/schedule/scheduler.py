"""The Scheduler every backend gets in `Program.run(request, scheduler, profiler)`.

It answers two questions for a backend: "run `work(device, start, stop)` over
items 0..n-1, in launches that fit, on every device I may use, and give me the
results in item order" (`map_batches`), and "run `work(device, items)` over these
items and over every item the work creates, until none is left" (`run_queue`, for
branch and bound; growing.py). Memory sizing and the out-of-memory retry are in
`worker.py`, the threads per GPU in `dispatch.py`, MPI ranks in `mpi.py` (and
`growing_mpi.py` for run_queue).

    scheduler = Scheduler(devices=driver.devices())
    y = scheduler.map_batches(work, n_items=len(params), bytes_per_item=8 * n_out * n_t)
    boxes = scheduler.run_queue(check_and_split, [initial_box], bytes_per_item=...)
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import pickle
import sys
import threading
import warnings
from typing import Any, Iterable, Sequence

from ..errors import OptionError
from ..runtime.base import Device
from .batching import (DEFAULT_SAFETY, Batch, check_bytes, check_count, check_safety,
                       items_that_fit, plan_batches)
from .combine import Combine, check_combine, combine_in_order
from .dispatch import run_workers
from .growing import (Finished, GrowingQueue, QueueBatchRecord, QueueRun, QueueWork,
                      QueueWorker, budget_share, check_balance, check_order, check_seconds,
                      share)
from .growing_mpi import run_queue_on_ranks
from .mpi import MODES, MpiWorld, error_report, mpi_world, raise_any_failure, run_on_ranks
from .progress import DEFAULT_DELAY, Progress
from .worker import (BatchRecord, DeviceWorker, WorkerSettings, WorkFunction, WorkQueue,
                     host_free_memory)


class Scheduler:
    """Batches, devices and ranks for `map_batches` and `run_queue`.

    devices: the GPUs to use (all of them by default is the caller's choice; none
        means the host: `work` gets device None, sized by host memory).
    safety: fraction of free memory that batches may fill.
    max_batch_items / min_batch_items: caps on a launch; out-of-memory halving stops
        at min_batch_items.
    batches_per_device: with several devices (or ranks), batches are made small
        enough that each device gets about this many, so the queue can balance.
    progress / progress_delay: the tqdm bar over items, shown after this many seconds.
    mpi: spread over MPI ranks (mpi4py); a rank uses devices[local_rank % len(devices)].
        Every rank must construct the Scheduler and call map_batches / run_queue
        (all are collective), with the same arguments.
    mpi_mode: "dynamic" (rank-0 work queue) or "static" (contiguous blocks), for
        map_batches; run_queue's work is known only as it runs, so it is always
        dynamic.
    profiler: if given, every batch is a span on its device's track.
    """

    def __init__(self, devices: Sequence[Device] | None = None, *,
                 safety: float = DEFAULT_SAFETY, max_batch_items: int | None = None,
                 min_batch_items: int = 1, batches_per_device: int = 4,
                 progress: bool = True, progress_delay: float = DEFAULT_DELAY,
                 mpi: bool | MpiWorld = False, mpi_mode: str = "dynamic", profiler=None):
        self.devices: tuple[Device, ...] = tuple(devices or ())
        self.safety = check_safety(safety)
        self.min_batch_items = check_count("min-batch-items", min_batch_items, 1)
        self.max_batch_items = (None if max_batch_items is None
                                else check_count("max-batch-items", max_batch_items, 1))
        if self.max_batch_items is not None and self.max_batch_items < self.min_batch_items:
            raise OptionError("max-batch-items", f"{max_batch_items} is below "
                              f"min-batch-items {min_batch_items}")
        self.batches_per_device = check_count("batches-per-device", batches_per_device, 1)
        if not isinstance(progress_delay, (int, float)) or progress_delay < 0:
            raise OptionError("progress-delay", f"{progress_delay!r} is not a number of "
                              "seconds >= 0")
        self.progress = bool(progress)
        self.progress_delay = float(progress_delay)
        if mpi_mode not in MODES:
            raise OptionError("mpi-mode", f"{mpi_mode!r} is not one of: {', '.join(MODES)}")
        self.mpi_mode = mpi_mode
        self.profiler = profiler
        if isinstance(mpi, MpiWorld):
            self.world: MpiWorld | None = mpi
        else:
            self.world = mpi_world() if mpi else None
        if self.world is not None and self.devices and self.world.local_size > len(self.devices):
            warnings.warn(f"{self.world.local_size} MPI ranks on this host share "
                          f"{len(self.devices)} GPU(s)", RuntimeWarning, stacklevel=2)
        #: the batches of the last map_batches on this process, in item order
        self.last_batches: list[BatchRecord] = []
        #: the batches of the last run_queue, in the order they finished (under MPI:
        #: every rank's on rank 0, this rank's elsewhere)
        self.last_queue_batches: list[QueueBatchRecord] = []
        #: the (id, item) entries that the last run_queue's budget left queued
        #: (None off rank 0), and which budget stopped it (None: it ran to the end)
        self.last_queue_left: list | None = []
        self.last_queue_stopped: str | None = None

    # --- where this process stands -------------------------------------------------
    @property
    def rank(self) -> int:
        return self.world.rank if self.world is not None else 0

    @property
    def size(self) -> int:
        """Number of MPI ranks (1 without MPI)."""
        return self.world.size if self.world is not None else 1

    @property
    def is_root(self) -> bool:
        """True on the process that gets the results (write files only there)."""
        return self.rank == 0

    @property
    def local_devices(self) -> tuple[Device, ...]:
        """The devices this process drives: all of them, or its rank's one under MPI."""
        if self.world is None or not self.devices:
            return self.devices
        return (self.devices[self.world.local_rank % len(self.devices)],)

    # --- planning -------------------------------------------------------------------
    def plan(self, n_items: int, bytes_per_item: float = 0, *, fixed_bytes: float = 0,
             align: int = 1, device: Device | None = None) -> list[Batch]:
        """The batches one device (the first local one by default) would run, from its
        free memory now; for reports and tests; `map_batches` re-plans per device."""
        device = device if device is not None else (self.local_devices or (None,))[0]
        with (device.activate() if device is not None else contextlib.nullcontext()):
            free = device.free_memory() if device is not None else host_free_memory()
        return plan_batches(n_items, bytes_per_item, free_bytes=free, fixed_bytes=fixed_bytes,
                            safety=self.safety, max_items=self.max_batch_items,
                            min_items=self.min_batch_items, align=align)

    def _balance_items(self, n_items: int, workers: int, align: int) -> int | None:
        """Batch size that gives each worker about `batches_per_device` batches."""
        if workers <= 1:
            return None
        size = math.ceil(n_items / (self.batches_per_device * workers))
        size = math.ceil(size / align) * align
        return max(size, self.min_batch_items)

    # --- running --------------------------------------------------------------------
    def map_batches(self, work: WorkFunction, n_items: int, bytes_per_item: float = 0, *,
                    fixed_bytes: float = 0, align: int = 1, combine: Combine = "concatenate",
                    progress: bool | None = None, desc: str = "items",
                    max_items: int | None = None, workers_per_device: int = 1) -> Any:
        """Call `work(device, start, stop)` for batches covering items [0, n_items) and
        return the results in item order (see combine.py for `combine`).

        bytes_per_item / fixed_bytes: device memory one item / one launch needs beyond
            what is already allocated. align: batch starts are multiples of it (use
            the bundling group). progress: None follows the scheduler's setting (pass
            `request.progress`). Under MPI every rank calls this; rank 0 gets the
            results, the others None. `last_batches` tells what ran where.
        max_items: a cap on this call's launches besides the scheduler's own (e.g. so
            that the progress of a long run moves).
        workers_per_device: host threads taking batches for each GPU of this process
            (not the host, and not under MPI: a rank is one worker). While one waits
            for its launch another does its host work (Python, page faults, copies
            out of pinned memory). Each sizes its batches from its share of the
            device's free memory, read once for all of them; a GPU gets fewer workers
            where a share would not hold one launch's fixed bytes. The batches are as
            large as without them (balancing counts devices and ranks, not threads),
            so a run of few batches keeps the extra threads idle (none are started when
            `max_items` leaves one batch per device). `work` must be safe
            to call from several threads for one device."""
        n_items = check_count("n-items", n_items)
        check_bytes("bytes-per-item", bytes_per_item)
        check_bytes("fixed-bytes", fixed_bytes)
        align = check_count("align", align, 1)
        workers_per_device = check_count("workers-per-device", workers_per_device, 1)
        check_combine(combine)
        self.last_batches = []
        if n_items == 0:
            return None
        devices: tuple[Device | None, ...] = self.local_devices or (None,)
        distributed = self.world is not None and self.world.size > 1
        dynamic_ranks = self.size if distributed and self.mpi_mode == "dynamic" else 1
        cap = self.max_batch_items
        if max_items is not None:
            max_items = max(check_count("max-items", max_items, 1), self.min_batch_items)
            cap = max_items if cap is None else min(cap, max_items)
        settings = WorkerSettings(
            n_items, bytes_per_item, fixed_bytes, self.safety, cap,
            self.min_batch_items, align,
            self._balance_items(n_items, len(devices) * dynamic_ranks, align))
        def make_progress(total: int) -> Progress:
            return self._progress(total, progress, desc)

        if distributed:
            worker = DeviceWorker(devices[0], work, settings, lambda r, x: None,
                                  profiler=self.profiler)
            gathered = run_on_ranks(self.world, worker, n_items, mode=self.mpi_mode,
                                    progress_for=make_progress)
            if gathered is None:
                return None
            pieces, records = gathered
            self.last_batches = sorted(records, key=lambda r: r.start)
            return combine_in_order(pieces, n_items, combine)

        pieces: list[tuple[Batch, Any]] = []
        records: list[BatchRecord] = []
        lock = threading.Lock()
        stop = threading.Event()
        with make_progress(n_items) as bar:
            def on_batch(record: BatchRecord, result: Any) -> None:
                with lock:
                    pieces.append((Batch(record.start, record.stop), result))
                    records.append(record)
                bar.advance(record.size)

            if cap is not None and -(-n_items // cap) <= len(devices):
                workers_per_device = 1  # a batch per device at most: no thread to spare
            workers = []
            for device in devices:
                count, free = (1, None) if device is None else \
                    self._workers_for(device, settings, workers_per_device)
                shared = settings if count == 1 else \
                    dataclasses.replace(settings, safety=settings.safety / count)
                workers += [DeviceWorker(device, work, shared, on_batch, stop=stop,
                                         profiler=self.profiler, free_bytes=free)
                            for _ in range(count)]
            try:
                run_workers(workers, WorkQueue(0, n_items))
            finally:
                self.last_batches = sorted(records, key=lambda r: r.start)
        return combine_in_order(pieces, n_items, combine)

    def run_queue(self, work: QueueWork, items: Iterable[Any], *, bytes_per_item: float = 0,
                  fixed_bytes: float = 0, order: str = "fifo", ordered: bool = False,
                  limit: int | None = None, budget_items: int | None = None,
                  budget_seconds: float | None = None, progress: bool | None = None,
                  desc: str = "items", balance: str = "dynamic") -> list[Finished] | None:
        """Call `work(device, batch)` on batches of `items` and of every item the work
        creates, until none is left (growing.py: the contract, ids and order).

        Returns one `Finished(id, item, result)` per item worked on: in the order
        they finished, or sorted by id with `ordered` (the same on every run).
        bytes_per_item / fixed_bytes: device memory of one item / one launch, which
            sizes the batches as in map_batches; out-of-memory halves them.
        order: "fifo" (breadth first) or "lifo" (depth first) from the queue.
        limit: a SimulationError once this many items have been queued in all (a
            guard against work that never stops creating items).
        budget_items / budget_seconds: hand out no more items once this many were
            taken / this long after the start; the items already taken finish, and
            the run returns normally with `last_queue_left`, the (id, item) entries
            still queued (sorted by id with `ordered`), and `last_queue_stopped`
            saying which budget stopped it (None when the run was complete).
        A failure in `work` stops the other devices and is raised with its type and
        device. Under MPI every rank calls this with the same arguments; rank 0
        keeps the queue (growing_mpi.py), gets the results and `last_queue_left`,
        the other ranks None; a failure on any rank is raised on every rank.
        balance: "dynamic" (the above: one queue) or "static", the baseline that
            dynamic balancing is measured against: the initial items are split once
            into equal contiguous shares, one per MPI rank and, within a rank, one
            per device, and each share and everything it creates is worked on by its
            own device alone; the results go to rank 0 at the end. The same items,
            ids and results as dynamic; an item budget is split over the shares, a
            time budget holds for each, `limit` guards each share. Under MPI a
            failure on one rank reaches the others only when they have finished
            their shares (they then raise): there is no queue to close."""
        check_bytes("bytes-per-item", bytes_per_item)
        check_bytes("fixed-bytes", fixed_bytes)
        check_order(order)
        if limit is not None:
            limit = check_count("limit", limit, 1)
        if budget_items is not None:
            budget_items = check_count("budget-items", budget_items, 1)
        if budget_seconds is not None:
            budget_seconds = check_seconds("budget-seconds", budget_seconds)
        check_balance(balance)
        items = list(items)
        distributed = self.world is not None and self.world.size > 1
        if balance == "static":
            return self._run_queue_static(work, items, bytes_per_item, fixed_bytes, order,
                                          ordered, limit, budget_items, budget_seconds,
                                          progress, desc)
        self.last_queue_batches = []
        self.last_queue_left = [] if self.is_root else None
        self.last_queue_stopped = None
        if not items and not distributed:
            return []
        devices: tuple[Device | None, ...] = self.local_devices or (None,)
        settings = WorkerSettings(sys.maxsize, bytes_per_item, fixed_bytes, self.safety,
                                  self.max_batch_items, self.min_batch_items, 1, None)
        # under MPI each rank is one worker of rank 0's queue (one device per rank)
        queue = GrowingQueue(items if self.is_root else (), order=order,
                             workers=self.size if distributed else len(devices), limit=limit,
                             budget_items=budget_items, budget_seconds=budget_seconds)
        shown = len(items) if self.is_root else 0
        with self._progress(shown, progress, desc) as bar:
            run = QueueRun(queue, bar)
            stop = threading.Event()
            workers = [QueueWorker(device, work, settings, run.on_batch, stop=stop,
                                   profiler=self.profiler) for device in devices]
            try:
                if distributed:
                    self.last_queue_stopped = run_queue_on_ranks(self.world, workers[0], run)
                else:
                    run_workers(workers, queue)
            finally:
                self.last_queue_batches = run.records
        if not self.is_root:
            return None
        left = queue.left()
        if not distributed:
            self.last_queue_stopped = queue.stopped_by if left else None
        finished = run.finished
        if ordered:
            finished.sort(key=lambda done: done.id)
            left.sort(key=lambda entry: entry[0])
        self.last_queue_left = left
        return finished

    def _run_queue_static(self, work, items, bytes_per_item, fixed_bytes, order, ordered,
                          limit, budget_items, budget_seconds, progress, desc):
        """run_queue's balance="static" (see there)."""
        distributed = self.world is not None and self.world.size > 1
        rank, size = (self.rank, self.size) if distributed else (0, 1)
        entries = [((i,), item) for i, item in enumerate(items)]
        mine = share(entries, rank, size)
        budget = budget_share(budget_items, rank, size, len(entries))
        devices: tuple[Device | None, ...] = self.local_devices or (None,)
        settings = WorkerSettings(sys.maxsize, bytes_per_item, fixed_bytes, self.safety,
                                  self.max_batch_items, self.min_batch_items, 1, None)
        self.last_queue_batches = []
        self.last_queue_left = [] if self.is_root else None
        self.last_queue_stopped = None
        error = None
        # a bar on rank 0 only (over its own share: the others' progress is not sent)
        with self._progress(len(mine) if self.is_root else 0, progress, desc) as bar:
            queues = [GrowingQueue((), entries=share(mine, k, len(devices)), order=order,
                                   limit=limit,
                                   budget_items=budget_share(budget, k, len(devices),
                                                             len(mine)),
                                   budget_seconds=budget_seconds)
                      for k in range(len(devices))]
            runs = [QueueRun(queue, bar) for queue in queues]
            stop = threading.Event()
            workers = [QueueWorker(device, work, settings, run.on_batch, rank=rank,
                                   stop=stop, profiler=self.profiler)
                       for device, run in zip(devices, runs)]
            try:
                if mine:
                    run_workers(workers, queues)
            except BaseException as exc:  # noqa: BLE001 - raised below (on every rank)
                if not distributed:
                    raise
                error = exc
            finally:
                self.last_queue_batches = [r for run in runs for r in run.records]
        finished = [f for run in runs for f in run.finished]
        left = [e for queue in queues for e in queue.left()]
        stopped = next((q.stopped_by for q in queues if q.stopped_by and q.left()), None)
        if distributed:
            parts = self._gather_static(workers[0], error, (
                finished, self.last_queue_batches, left, stopped))
            if not self.is_root:
                self.last_queue_left = None
                return None
            finished = [f for p in parts for f in p[0]]
            self.last_queue_batches = [r for p in parts for r in p[1]]
            left = [e for p in parts for e in p[2]]
            stopped = next((p[3] for p in parts if p[3]), None)
        if stopped and budget_items is not None and "items" in stopped:
            stopped = f"the budget of {budget_items} items was taken"  # all shares' budget
        if ordered:
            finished.sort(key=lambda done: done.id)
            left.sort(key=lambda entry: entry[0])
        self.last_queue_left = left
        self.last_queue_stopped = stopped if left else None
        return finished

    def _gather_static(self, worker, error, mine: tuple) -> list | None:
        """The static split's results of every rank on rank 0 (None elsewhere), then
        every rank raises if any failed. Each rank but 0 pickles its own part (rank 0's
        stays as it is) and rank 0 unpickles each in turn, so that a result that cannot
        travel is that rank's error, never a rank left waiting in the collective."""
        rank = self.rank
        report = error_report(error, worker, rank) if error is not None else None
        blob = None
        if rank > 0:
            try:
                blob = pickle.dumps((*mine, report) if error is None
                                    else ([], [], [], None, report),
                                    protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as exc:  # noqa: BLE001 - reported to rank 0 as this rank's
                report = error_report(exc, worker, rank)
                report["message"] = f"its results cannot be sent to rank 0: {exc}"
                blob = pickle.dumps(([], [], [], None, report))
        gathered = self.world.comm.gather(blob, root=0)
        parts, reports = None, []
        if self.is_root:
            parts = [(*mine, report) if error is None else ([], [], [], None, report)]
            for source, piece in enumerate(gathered[1:], 1):
                try:
                    parts.append(pickle.loads(piece))
                except Exception as exc:  # noqa: BLE001 - e.g. a class rank 0 cannot import
                    parts.append(([], [], [], None, {
                        "rank": source, "where": f"MPI rank {source}", "traceback": "",
                        "type": type(exc).__name__,
                        "message": f"its results cannot be read on rank 0: {exc}"}))
            reports = [p[4] for p in parts if p[4]]
        raise_any_failure(self.world, worker, error, reports)
        return parts

    @staticmethod
    def _workers_for(device: Device, settings: WorkerSettings, asked: int
                     ) -> tuple[int, int | None]:
        """(workers, the free bytes they size from) for one GPU: `asked`, or fewer
        where a worker's share of the free memory would not hold one launch of the
        smallest batch; the free memory read once, before any of them allocates."""
        if asked == 1:
            return 1, None
        with device.activate():
            free = device.free_memory()
        smallest = min(settings.min_items, max(settings.n_items, 1))
        for count in range(asked, 1, -1):
            if items_that_fit(free, settings.bytes_per_item, settings.fixed_bytes,
                              settings.safety / count) >= smallest:
                return count, free
        return 1, None

    def _progress(self, total: int, progress: bool | None, desc: str) -> Progress:
        """The progress bar of one run: `progress` None follows the scheduler."""
        show = self.progress if progress is None else (progress and self.progress)
        return Progress(total, enabled=show and total > 0, delay=self.progress_delay,
                        desc=desc)

    def batches_by_device(self) -> dict:
        """{(rank, device index): {"batches", "items", "seconds"}} for the last map."""
        table: dict = {}
        for record in self.last_batches:
            row = table.setdefault((record.rank, record.device_index),
                                   {"batches": 0, "items": 0, "seconds": 0.0})
            row["batches"] += 1
            row["items"] += record.size
            row["seconds"] += record.seconds
        return table
