"""Cases in worker processes, with a time limit per case.

Each worker runs one case at a time. A case that runs past the limit has its
worker killed (that process only) and replaced, and becomes a FAIL 'timeout';
so does a worker that dies. Workers are forked where the platform allows it,
so they start with everything the parent has imported.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from multiprocessing.connection import wait
from typing import Iterable, Iterator

from .cases import Case
from .outcome import FAIL, Outcome
from .runner import RunConfig, run_case

TASKS_PER_WORKER = 100  # fresh processes now and then: caches do not grow without end


def _worker(conn, config: RunConfig) -> None:
    while True:
        try:
            task = conn.recv()
        except EOFError:
            return
        if task is None:
            return
        number, folder = task
        outcome = run_case(Case(number, folder), config)
        conn.send(outcome.record())


def _context():
    methods = mp.get_all_start_methods()
    return mp.get_context("fork" if "fork" in methods else "spawn")


class _Worker:
    def __init__(self, ctx, config: RunConfig):
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_worker, args=(child, config), daemon=True)
        self.process.start()
        child.close()
        self.case: Case | None = None
        self.deadline = float("inf")
        self.started = 0.0
        self.done = 0

    def give(self, case: Case, timeout: float) -> None:
        self.case = case
        self.started = time.monotonic()
        self.deadline = self.started + timeout if timeout > 0 else float("inf")
        self.conn.send((case.number, case.folder))

    def stop(self, kill: bool = False) -> None:
        if kill:
            self.process.kill()
        else:
            try:
                self.conn.send(None)
            except (BrokenPipeError, OSError):
                self.process.kill()
        self.process.join(5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()


def run_cases(cases: Iterable[Case], config: RunConfig, *, jobs: int = 1,
              timeout: float = 60.0) -> Iterator[Outcome]:
    """Outcomes in the order the cases finish. timeout <= 0 with jobs == 1 runs
    in this process (no isolation: for debugging)."""
    cases = list(cases)
    if jobs <= 1 and timeout <= 0:
        for case in cases:
            yield run_case(case, config)
        return
    ctx = _context()
    todo = list(reversed(cases))
    workers: list[_Worker] = []
    try:
        while todo or any(w.case for w in workers):
            while todo and (len(workers) < jobs or any(w.case is None for w in workers)):
                idle = next((w for w in workers if w.case is None), None)
                if idle is None:
                    idle = _Worker(ctx, config)
                    workers.append(idle)
                idle.give(todo.pop(), timeout)
            busy = [w for w in workers if w.case is not None]
            now = time.monotonic()
            limit = min(w.deadline for w in busy) - now
            ready = wait([w.conn for w in busy] + [w.process.sentinel for w in busy],
                         timeout=None if limit == float("inf") else max(limit, 0.0))
            for w in busy:
                outcome = None
                if w.conn in ready:
                    try:
                        outcome = Outcome.from_record(w.conn.recv())
                    except (EOFError, OSError):
                        outcome = None
                if outcome is not None:
                    w.case, w.done = None, w.done + 1
                    yield outcome
                    if w.done >= TASKS_PER_WORKER:
                        w.stop()
                        workers.remove(w)
                    continue
                died = w.process.sentinel in ready and not w.process.is_alive()
                late = time.monotonic() >= w.deadline
                if died or late:
                    case, seconds = w.case, time.monotonic() - w.started
                    w.stop(kill=True)
                    workers.remove(w)
                    why = f"timeout ({timeout:g} s)" if late and not died else \
                        f"the worker process died (exit code {w.process.exitcode})"
                    yield Outcome(case.number, FAIL, why, seconds=seconds)
    finally:
        for w in workers:
            w.stop(kill=w.case is not None)
