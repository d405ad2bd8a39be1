"""Several GPUs of one host: one thread per device, all taking from one queue.

Threads rather than processes because each GPU is driven through its own CUDA
context and the host work between launches is small: the GIL is released while a
thread waits for its GPU, so the devices overlap. Each thread activates its device
itself because a CUDA context is current per thread.
"""

from __future__ import annotations

import sys
import threading
from typing import Sequence

from .worker import DeviceWorker, WorkQueue


def annotate(exc: BaseException, worker: DeviceWorker) -> BaseException:
    """Say on which device (and MPI rank) `exc` happened, keeping its type.

    The type is kept so that callers (and the CLI) treat a SimulationError from
    device 1 like one from device 0; sbmlgpu's own errors also get the device in
    their message, which is what the CLI prints."""
    where = worker.label + (f" on MPI rank {worker.rank}" if worker.rank else "")
    exc.device_index = None if worker.device is None else worker.device.index  # type: ignore[attr-defined]
    exc.rank = worker.rank  # type: ignore[attr-defined]
    if worker.device is None and not worker.rank:
        return exc  # the host path: nothing to tell apart
    from ..errors import SbmlGpuError

    if isinstance(exc, SbmlGpuError) and exc.args and isinstance(exc.args[0], str) \
            and worker.label not in exc.args[0]:
        exc.args = (f"{where}: {exc.args[0]}",) + exc.args[1:]
    elif sys.version_info >= (3, 11):
        exc.add_note(f"(raised on {where})")
    return exc


def run_workers(workers: Sequence[DeviceWorker], queue: WorkQueue) -> None:
    """Run every worker on `queue` until it is empty; re-raise the first failure.
    (`queue`: a WorkQueue of item ranges, or growing.GrowingQueue.)

    One worker runs on the calling thread (no thread needed, and tracebacks stay
    simple). With several, a failure closes the queue and sets the shared stop
    event, the others finish the batch they are running, and the first exception
    is raised here with its device named (`exc.device_index`)."""
    if len(workers) == 1:
        try:
            workers[0].run(queue.take)
        except BaseException as exc:
            raise annotate(exc, workers[0])
        return

    failures: list[tuple[DeviceWorker, BaseException]] = []
    lock = threading.Lock()

    def target(worker: DeviceWorker) -> None:
        try:
            worker.run(queue.take)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller below
            with lock:
                failures.append((worker, exc))
            queue.close()
            worker.stop.set()

    threads = [threading.Thread(target=target, args=(w,), daemon=True,
                                name=f"sbmlgpu-{w.label}") for w in workers]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            # join with a timeout so that Ctrl-C reaches the main thread
            while thread.is_alive():
                thread.join(0.2)
    except BaseException:
        queue.close()
        for worker in workers:
            worker.stop.set()
        raise
    if failures:
        worker, exc = failures[0]
        raise annotate(exc, worker)
