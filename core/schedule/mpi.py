"""MPI: one rank per GPU, items handed out by a work queue on rank 0.

Launch with `mpirun -n <GPUs> python -m ...`; each rank drives the device picked
by its rank among the ranks on its host (MPI_COMM_TYPE_SHARED), so the same
command works on one host and on many.

Dynamic (the default): rank 0 keeps the `WorkQueue`; a helper thread on rank 0
answers the other ranks' requests ("done k items, want m more") while rank 0's own
GPU works from the same queue directly. As on one host, a fast rank takes more
batches. The helper thread is the only one calling MPI until it has told every
other rank to stop, so MPI_THREAD_SERIALIZED is enough; it polls (Iprobe, then a
1 ms sleep) so that it never holds the GIL while rank 0's own thread needs it.
Static: rank r takes the r-th of `size` contiguous blocks; no thread, no
messages, but no balancing either. It is used when the MPI library cannot give
the thread level dynamic needs (with a warning), or when asked for.

Results travel to rank 0 with one `gather` (pickled; each rank pickles its part
itself first so that an unpicklable result becomes an error report instead of a
hang); rank 0 returns them in item order, the others None. A failure on any rank
is broadcast so that every rank raises, instead of some waiting forever.
"""

from __future__ import annotations

import pickle
import sys
import threading
import time
import traceback
import warnings
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import DeviceError, OptionError
from .batching import Batch
from .dispatch import annotate
from .progress import Progress
from .worker import BatchRecord, DeviceWorker, WorkQueue

REQUEST_TAG, REPLY_TAG = 7101, 7102
POLL_SECONDS = 0.001
MODES = ("dynamic", "static")


@dataclass(frozen=True)
class MpiWorld:
    """This process's place among the MPI ranks."""

    comm: Any
    rank: int
    size: int
    local_rank: int  # rank among the ranks on this host: picks the GPU
    local_size: int
    threads_ok: bool  # a helper thread may call MPI (dynamic mode needs it)


def mpi_world(comm: Any = None) -> MpiWorld:
    """The world communicator (or `comm`), imported only now: MPI is optional.

    Collective: every rank must call it. Raises OptionError('mpi') when mpi4py
    (or the MPI library it is built against) is missing."""
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise OptionError("mpi", f"MPI was asked for but mpi4py cannot be imported ({exc}); "
                          "install it with `pip install 'sbmlgpu[mpi]'` next to an MPI "
                          "library (MPICH or Open MPI), or run without MPI") from exc
    comm = comm if comm is not None else MPI.COMM_WORLD
    local = comm.Split_type(MPI.COMM_TYPE_SHARED)
    local_rank, local_size = local.Get_rank(), local.Get_size()
    local.Free()
    # one decision for all ranks: the modes must agree or the protocol deadlocks
    threads_ok = comm.bcast(MPI.Query_thread() >= MPI.THREAD_SERIALIZED, root=0)
    return MpiWorld(comm, comm.Get_rank(), comm.Get_size(), local_rank, local_size,
                    bool(threads_ok))


def static_block(n_items: int, rank: int, size: int) -> tuple[int, int]:
    """The rank-th of `size` contiguous blocks; sizes differ by at most one."""
    base, extra = divmod(n_items, size)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)


class RankServer(threading.Thread):
    """Rank 0's helper thread: answers the other ranks' requests until every one of
    them has been told to stop. Subclasses say what a request gets (`answer`)."""

    request_tag, reply_tag = REQUEST_TAG, REPLY_TAG
    what = "the MPI work queue"  # for the message if the protocol breaks

    def __init__(self, comm, clients: int, name: str):
        super().__init__(name=name, daemon=True)
        self.comm, self.clients = comm, clients

    def answer(self, source: int, message: Any) -> tuple[Any, bool]:
        """(the reply to rank `source`'s request, whether it tells that rank to stop)."""
        raise NotImplementedError

    def run(self) -> None:
        from mpi4py import MPI

        status = MPI.Status()
        stopped = 0
        try:
            while stopped < self.clients:
                if not self.comm.Iprobe(source=MPI.ANY_SOURCE, tag=self.request_tag,
                                        status=status):
                    time.sleep(POLL_SECONDS)
                    continue
                source = status.Get_source()
                message = self.comm.recv(source=source, tag=self.request_tag)
                reply, stops = self.answer(source, message)
                self.comm.send(reply, dest=source, tag=self.reply_tag)
                stopped += stops
        except BaseException:  # noqa: BLE001 - the protocol is broken: end all ranks, not hang
            traceback.print_exc()
            sys.stderr.write(f"sbmlgpu: {self.what} on rank 0 failed; aborting all ranks\n")
            self.comm.Abort(1)


class _Server(RankServer):
    """map_batches' server: hands out item ranges of rank 0's WorkQueue."""

    def __init__(self, comm, queue: WorkQueue, clients: int, progress: Progress):
        super().__init__(comm, clients, "sbmlgpu-mpi-queue")
        self.queue, self.progress = queue, progress

    def answer(self, source: int, message: dict) -> tuple[Any, bool]:
        self.progress.advance(message["done"])
        if message["failed"]:
            self.queue.close()
        batch = self.queue.take(message["want"]) if message["want"] > 0 else None
        reply = None if batch is None else (batch.start, batch.stop)
        return reply, batch is None


class _RemoteQueue:
    """A non-root rank's view of rank 0's queue (same `take` as WorkQueue)."""

    def __init__(self, comm):
        self.comm = comm
        self.done = 0  # items finished since the last request
        self.finished = False

    def take(self, max_items: int) -> Batch | None:
        if self.finished:
            return None
        return self._ask(max(max_items, 1), failed=False)

    def finish(self, failed: bool) -> None:
        """Tell rank 0 this rank stops (after a failure: that all should stop)."""
        if not self.finished:
            self._ask(0, failed)

    def _ask(self, want: int, failed: bool) -> Batch | None:
        self.comm.send({"want": want, "done": self.done, "failed": failed}, dest=0,
                       tag=REQUEST_TAG)
        self.done = 0
        reply = self.comm.recv(source=0, tag=REPLY_TAG)
        if reply is None:
            self.finished = True
            return None
        return Batch(*reply)


def error_report(exc: BaseException, worker: DeviceWorker, rank: int) -> dict:
    """A failure as plain data, to travel to rank 0."""
    return {"rank": rank, "where": worker.label, "type": type(exc).__name__,
            "message": str(exc),
            "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))}


def raise_any_failure(world: MpiWorld, worker: DeviceWorker, error: BaseException | None,
                      reports: list[dict]) -> None:
    """Collective: every rank raises if any rank failed, instead of some waiting
    forever. A rank that failed raises its own error; the others a DeviceError
    naming the first rank that failed. `reports`: on rank 0, the error reports of
    every rank that failed (its own included); ignored elsewhere."""
    failure = remote_traceback = None
    if world.rank == 0 and reports:
        first = min(reports, key=lambda r: r["rank"])
        failure = (f"MPI rank {first['rank']} ({first['where']}) failed: "
                   f"{first['type']}: {first['message']}")
        if len(reports) > 1:
            failure += f" (and {len(reports) - 1} other rank(s))"
        remote_traceback = first["traceback"] if first["rank"] else ""
    failure = world.comm.bcast(failure, root=0)
    if error is not None:
        raise annotate(error, worker)
    if failure is not None:
        exc = DeviceError(failure)
        if world.rank == 0:
            exc.remote_traceback = remote_traceback  # type: ignore[attr-defined]
        raise exc


def run_on_ranks(world: MpiWorld, worker: DeviceWorker, n_items: int, *, mode: str,
                 progress_for: Callable[[int], Progress]):
    """Run this rank's share; on rank 0 return ([(Batch, result)], [BatchRecord]) for
    all items, elsewhere None. Every rank must call it with the same n_items."""
    if mode not in MODES:
        raise OptionError("mpi-mode", f"{mode!r} is not one of: {', '.join(MODES)}")
    if mode == "dynamic" and not world.threads_ok:
        warnings.warn("the MPI library does not allow MPI calls from a helper thread "
                      "(MPI_THREAD_SERIALIZED); splitting items in static blocks instead",
                      RuntimeWarning, stacklevel=3)
        mode = "static"
    comm, rank = world.comm, world.rank
    pieces: list[tuple[Batch, Any]] = []
    records: list[BatchRecord] = []
    remote = _RemoteQueue(comm) if mode == "dynamic" and rank > 0 else None
    if mode == "dynamic":
        total = n_items if rank == 0 else 0
    else:
        start, stop = static_block(n_items, rank, world.size)
        total = stop - start if rank == 0 else 0  # rank 0 sees only its own block
    progress = progress_for(total)

    def on_batch(record: BatchRecord, result: Any) -> None:
        pieces.append((Batch(record.start, record.stop), result))
        records.append(record)
        if remote is not None:
            remote.done += record.size
        else:
            progress.advance(record.size)

    worker.on_batch = on_batch
    worker.rank = rank
    error: BaseException | None = None
    with progress:
        if mode == "static":
            try:
                worker.run(WorkQueue(start, stop).take)
            except BaseException as exc:  # noqa: BLE001 - reported to every rank below
                error = exc
        elif rank == 0:
            queue = WorkQueue(0, n_items)
            server = _Server(comm, queue, world.size - 1, progress)
            server.start()
            try:
                worker.run(queue.take)
            except BaseException as exc:  # noqa: BLE001
                error = exc
                queue.close()
            while server.is_alive():
                server.join(0.2)
        else:
            try:
                worker.run(remote.take)
            except BaseException as exc:  # noqa: BLE001
                error = exc
            finally:
                remote.finish(failed=error is not None)
    return _gather(world, worker, pieces, records, error)


def _gather(world: MpiWorld, worker: DeviceWorker, pieces, records, error):
    comm, rank = world.comm, world.rank
    report = None if error is None else error_report(error, worker, rank)
    payload = None
    if rank > 0:
        try:
            payload = pickle.dumps((pieces, records, report), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - an unpicklable result must not hang rank 0
            report = error_report(exc, worker, rank)
            report["message"] = f"its results cannot be sent to rank 0: {exc}"
            payload = pickle.dumps(([], [], report))
    gathered = comm.gather(payload, root=0)
    reports = []
    if rank == 0:
        reports = [report] if report else []
        for blob in gathered[1:]:
            more_pieces, more_records, more_report = pickle.loads(blob)
            pieces.extend(more_pieces)
            records.extend(more_records)
            if more_report:
                reports.append(more_report)
    raise_any_failure(world, worker, error, reports)
    if rank == 0:
        return pieces, records
    return None
