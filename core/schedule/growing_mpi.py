"""run_queue across MPI ranks: rank 0 keeps the GrowingQueue, the others ask it.

Work that grows while it runs cannot be split up front (map_batches' static
blocks), so it is always a queue: rank 0 keeps the `GrowingQueue` of growing.py and
works from it on its own device, while a helper thread answers the other ranks
(mpi.RankServer: Iprobe polling, so that it never holds the GIL while rank 0's
device thread needs it, and MPI_THREAD_SERIALIZED is enough).

A rank's request carries what its last batch gave: per finished piece, its
record, the (id, result) of each item and the (id, item) entries it created, all
pickled by the rank itself (so that something unpicklable becomes that rank's
error, not a hang). Rank 0 files them as its own devices' batches (growing.QueueRun:
the same Finished list, ids and `ordered` order as on one host), then answers:

    ("batch", entries)  items to work on (rank 0 remembers them until they come back)
    ("wait",)           nothing queued now, but some rank holds items that may
                        create more: ask again after a short sleep
    ("none",)           stop: the queue is empty and no rank holds items, or a
                        budget is spent, or the run failed

A rank's items are sent back only with its next request, and "none" is the
answer to a request, so a rank that stops holds nothing: a budget stop loses no
item, and rank 0's `left()` has every item not worked on.

A failure on a rank is sent to rank 0 in its last request (rank 0 closes the
queue: every rank gets "none" at its next request); at the end one broadcast
(mpi.raise_any_failure) makes every rank raise. If the MPI library cannot give a
helper thread MPI (MPI_THREAD_SERIALIZED), rank 0 only answers, on its main
thread, and does no items itself.
"""

from __future__ import annotations

import pickle
import time
import warnings
from typing import Any

from ..errors import DeviceError, SimulationError
from .growing import WAIT, ItemId, QueueBatchRecord, QueueRun
from .mpi import POLL_SECONDS, MpiWorld, RankServer, error_report, raise_any_failure
from .worker import DeviceWorker

BATCH, NONE_LEFT = "batch", "none"
#: a rank told to wait sleeps POLL_SECONDS, then twice as long each time, up to this
MAX_WAIT_SECONDS = 0.02

#: one finished piece as it travels to rank 0: (record, [(id, result)], new entries)
Piece = tuple[QueueBatchRecord, list[tuple[ItemId, Any]], list[tuple[ItemId, Any]]]


class _QueueServer(RankServer):
    """Rank 0's helper: files the other ranks' finished pieces and hands out items."""

    request_tag, reply_tag = 7103, 7104  # not map_batches' (mpi.py)
    what = "the MPI growing work queue"

    def __init__(self, comm, run: QueueRun, clients: int):
        super().__init__(comm, clients, "sbmlgpu-mpi-growing-queue")
        self.queue_run = run
        self.held: dict[int, dict[ItemId, Any]] = {}  # rank -> items it holds, by id
        self.reports: list[dict] = []  # failures the other ranks sent
        self.error: BaseException | None = None  # a failure found here (the limit)

    def answer(self, source: int, blob: bytes) -> tuple[bytes, bool]:
        queue = self.queue_run.queue
        try:
            request = pickle.loads(blob)
        except Exception as exc:  # noqa: BLE001 - e.g. a class rank 0 cannot import
            self.reports.append({"rank": source, "where": f"rank {source}", "type":
                                 type(exc).__name__, "traceback": "",
                                 "message": f"its request cannot be read on rank 0: {exc}"})
            queue.close()
            return pickle.dumps((NONE_LEFT,)), True
        held = self.held.setdefault(source, {})
        try:
            for record, done, entries in request["pieces"]:
                piece = [(item_id, held.pop(item_id)) for item_id, _ in done]
                self.queue_run.on_batch(record, piece, [result for _, result in done], entries)
        except SimulationError as exc:  # the queue's limit (it closed itself)
            self.error = self.error or exc
        if request["failed"] is not None:
            self.reports.append(request["failed"])
            queue.close()
        taken = queue.take(request["want"], wait=False) if request["want"] > 0 else None
        if taken is None:
            return pickle.dumps((NONE_LEFT,)), True
        if taken is WAIT:
            return pickle.dumps((WAIT,)), False
        try:
            reply = pickle.dumps((BATCH, taken), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - stop every rank rather than abort MPI
            self.error = self.error or DeviceError(
                f"queued items cannot be sent to MPI rank {source} (pickle: {exc}); under "
                "MPI the items must be picklable")
            queue.close()
            return pickle.dumps((NONE_LEFT,)), True
        held.update(taken)
        return reply, False


class _RemoteGrowingQueue:
    """A non-root rank's view of rank 0's queue: QueueWorker's `take` and `on_batch`."""

    def __init__(self, comm, rank: int, run: QueueRun):
        self.comm, self.rank, self.run = comm, rank, run
        self.pieces: list[Piece] = []  # finished since the last request
        self.finished = False  # rank 0 said "none": this rank holds nothing

    def on_batch(self, record: QueueBatchRecord, piece, results, entries) -> None:
        self.pieces.append((record, [(item_id, results[i]) for i, (item_id, _)
                                     in enumerate(piece)], entries))
        self.run.records.append(record)  # this rank's own record of what it ran

    def take(self, max_items: int) -> list[tuple[ItemId, Any]] | None:
        if self.finished:
            return None
        pause = POLL_SECONDS
        while True:
            reply = self._ask(max(max_items, 1), failed=None)
            if reply[0] == BATCH:
                return reply[1]
            if reply[0] == NONE_LEFT:
                self.finished = True
                return None
            time.sleep(pause)
            pause = min(2 * pause, MAX_WAIT_SECONDS)

    def finish(self, failed: dict | None) -> None:
        """Tell rank 0 this rank stops (after a failure: that all should stop)."""
        if not self.finished:
            self.pieces = []  # after a failure its results do not matter
            self._ask(0, failed)
            self.finished = True

    def _ask(self, want: int, failed: dict | None) -> tuple:
        try:
            blob = pickle.dumps({"want": want, "pieces": self.pieces, "failed": failed},
                                protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - becomes this rank's error, sent below
            raise DeviceError(f"the results or new items of MPI rank {self.rank} cannot be "
                              f"sent to rank 0 (pickle: {exc}); under MPI they must be "
                              "picklable") from exc
        self.pieces = []
        self.comm.send(blob, dest=0, tag=_QueueServer.request_tag)
        return pickle.loads(self.comm.recv(source=0, tag=_QueueServer.reply_tag))


def run_queue_on_ranks(world: MpiWorld, worker: DeviceWorker, run: QueueRun) -> str | None:
    """Run rank 0's queue (`run.queue`) over every rank: `worker` is this rank's device
    and files its batches into `run` (on rank 0, `run` also gets every other rank's).
    Collective. Returns, on every rank, which budget stopped the run (None: it ran
    to the end); raises on every rank if any rank failed."""
    comm, rank = world.comm, world.rank
    worker.rank = rank
    error: BaseException | None = None
    reports: list[dict] = []
    if rank == 0:
        server = _QueueServer(comm, run, world.size - 1)
        if world.threads_ok:
            server.start()
            try:
                worker.run(run.queue.take)
            except BaseException as exc:  # noqa: BLE001 - reported to every rank below
                error = exc
                run.queue.close()
            while server.is_alive():
                server.join(0.2)  # with a timeout so that Ctrl-C reaches this thread
        else:
            warnings.warn("the MPI library does not allow MPI calls from a helper thread "
                          "(MPI_THREAD_SERIALIZED); rank 0 only hands out the work queue "
                          "and works on no items itself", RuntimeWarning, stacklevel=3)
            server.run()
        error = error or server.error
        reports = server.reports + ([error_report(error, worker, 0)] if error else [])
    else:
        remote = _RemoteGrowingQueue(comm, rank, run)
        worker.on_batch = remote.on_batch
        try:
            worker.run(remote.take)
        except BaseException as exc:  # noqa: BLE001
            error = exc
        finally:
            remote.finish(None if error is None else error_report(error, worker, rank))
    raise_any_failure(world, worker, error, reports)
    stopped = run.queue.stopped_by if rank == 0 and run.queue.queued else None
    return comm.bcast(stopped, root=0)
