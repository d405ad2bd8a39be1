"""Several GPUs of one host: one thread per device, all taking from one queue.

Threads rather than processes because each GPU is driven through its own CUDA
context and the host work between launches is small: the GIL is released while a
thread waits for its GPU, so the devices overlap. Each thread activates its device
itself because a CUDA context is current per thread.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from typing import Any, Callable, Sequence

from ..runtime.base import Device
from .worker import DeviceWorker, WorkQueue, device_label

log = logging.getLogger("sbmlgpu.schedule")


def annotate(exc: BaseException, worker: DeviceWorker) -> BaseException:
    """Say on which device (and MPI rank) `exc` happened, keeping its type.

    The type is kept so that callers (and the CLI) treat a SimulationError from
    device 1 like one from device 0; sbmlgpu's own errors also get the device in
    their message, which is what the CLI prints."""
    return annotate_device(exc, worker.device, worker.rank)


def annotate_device(exc: BaseException, device: Device | None, rank: int = 0) -> BaseException:
    """annotate() for work that ran on `device` (None: the host) outside a worker."""
    label = device_label(device)
    where = label + (f" on MPI rank {rank}" if rank else "")
    exc.device_index = None if device is None else device.index  # type: ignore[attr-defined]
    exc.rank = rank  # type: ignore[attr-defined]
    if device is None and not rank:
        return exc  # the host path: nothing to tell apart
    from ..errors import SbmlGpuError

    if isinstance(exc, SbmlGpuError) and exc.args and isinstance(exc.args[0], str) \
            and label not in exc.args[0]:
        exc.args = (f"{where}: {exc.args[0]}",) + exc.args[1:]
    elif sys.version_info >= (3, 11):
        exc.add_note(f"(raised on {where})")
    return exc


class Stopped(Exception):
    """Raised by on_each_device's work when its `stop` is set: another device failed
    or the run was interrupted, and this device's part is no longer wanted."""


def on_each_device(devices: Sequence[Device | None],
                   work: Callable[[Device | None, threading.Event], Any]) -> list:
    """[work(device, stop) for device in devices], each call on its own thread with
    its device current (None: the host, nothing to activate), the results in the
    order of `devices`.

    For work that splits itself over devices ahead of time (a static share each,
    e.g. one that keeps a share's values on its device between two calls) rather
    than taking batches from a queue as run_workers' workers do. One device runs on
    the calling thread (its errors as they are: there is no other device to tell
    apart). With several, a failure (or Ctrl-C on the calling thread) sets `stop`,
    which `work` checks between its launches (raising Stopped, or returning); every
    thread is joined before anything is raised, so that nothing runs on after the
    call (a caller frees what the work used); then the first failure in device
    order is raised with its device named, and the others are logged."""
    stop = threading.Event()
    if len(devices) == 1:
        device = devices[0]
        with device.activate() if device is not None else contextlib.nullcontext():
            return [work(device, stop)]

    results: list = [None] * len(devices)
    failures: list = [None] * len(devices)

    def target(i: int) -> None:
        try:
            with devices[i].activate() if devices[i] is not None \
                    else contextlib.nullcontext():
                results[i] = work(devices[i], stop)
        except BaseException as exc:  # noqa: BLE001 - raised by the caller below
            failures[i] = exc
            stop.set()

    threads = [threading.Thread(target=target, args=(i,), daemon=True,
                                name=f"sbmlgpu-{device_label(d)}")
               for i, d in enumerate(devices)]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            while thread.is_alive():  # with a timeout so that Ctrl-C reaches this thread
                thread.join(0.2)
    except BaseException:
        stop.set()  # the others stop at their next launch; wait for them
        for thread in threads:
            thread.join()
        raise
    raised = [(device, exc) for device, exc in zip(devices, failures)
              if exc is not None and not isinstance(exc, Stopped)]
    if raised:
        for device, exc in raised[1:]:
            log.warning("also failed on %s: %s: %s", device_label(device),
                        type(exc).__name__, exc)
        raise annotate_device(raised[0][1], raised[0][0])
    if stop.is_set():  # stopped without a failure of their own: cannot be, but say so
        raise RuntimeError("on_each_device: work stopped without a failure")
    return results


def run_workers(workers: Sequence[DeviceWorker], queue) -> None:
    """Run every worker on `queue` until it is empty; re-raise the first failure.
    (`queue`: a WorkQueue of item ranges, or growing.GrowingQueue; or a list of
    queues, one per worker, for work split ahead of time: a static split.)

    One worker runs on the calling thread (no thread needed, and tracebacks stay
    simple). With several, a failure closes the queue (every queue) and sets the
    shared stop event, the others finish the batch they are running, and the first
    exception is raised here with its device named (`exc.device_index`)."""
    queues = list(queue) if isinstance(queue, (list, tuple)) else [queue] * len(workers)
    if len(queues) != len(workers):
        raise ValueError(f"{len(queues)} queues for {len(workers)} workers")
    if len(workers) == 1:
        try:
            workers[0].run(queues[0].take)
        except BaseException as exc:
            raise annotate(exc, workers[0])
        return

    failures: list[tuple[DeviceWorker, BaseException]] = []
    lock = threading.Lock()

    def close_all() -> None:
        for q in {id(q): q for q in queues}.values():
            q.close()

    def target(worker: DeviceWorker, own) -> None:
        try:
            worker.run(own.take)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller below
            with lock:
                failures.append((worker, exc))
            close_all()
            worker.stop.set()

    threads = [threading.Thread(target=target, args=(w, q), daemon=True,
                                name=f"sbmlgpu-{w.label}") for w, q in zip(workers, queues)]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            # join with a timeout so that Ctrl-C reaches the main thread
            while thread.is_alive():
                thread.join(0.2)
    except BaseException:
        close_all()
        for worker in workers:
            worker.stop.set()
        for thread in threads:  # they finish the batch they run: nothing runs on after
            thread.join()
        raise
    if failures:
        worker, exc = failures[0]
        raise annotate(exc, worker)
