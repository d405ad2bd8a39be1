"""Self-check of the scheduler on host work, for MPI set-ups:

    mpirun -n 2 python -m sbmlgpu.schedule --items 20000 [--mode static]
    mpirun -n 3 python -m sbmlgpu.schedule --queue --depth 14 [--budget-items 300]

map_batches (the default): each item's result is a known function of its index,
so rank 0 can check that every item came back once and in order. --queue:
run_queue over a tree of intervals bisected up to --depth (queue_demo.py), which
rank 0 checks against the tree built by recursion; --budget-items / --budget-seconds
stop it early, and rank 0 checks that what finished and what was left cover the
tree's frontier. Rank 0 prints one JSON line (items per rank) and exits 1 on a
wrong result. --slow-rank R makes rank R ten times slower, to see the queue give
the others more; --fail-rank R makes rank R raise, to see every rank stop with
the error instead of hanging.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from typing import Any

import numpy as np

from ..errors import SbmlGpuError
from . import queue_demo
from .mpi import mpi_world
from .scheduler import Scheduler


def expected(start: int, stop: int) -> np.ndarray:
    index = np.arange(start, stop, dtype=float)
    return np.sqrt(index) + 0.5 * index


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sbmlgpu.schedule", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=20000)
    parser.add_argument("--max-batch-items", type=int, default=500)
    parser.add_argument("--mode", choices=("dynamic", "static"), default="dynamic")
    parser.add_argument("--no-mpi", action="store_true", help="run on this process only")
    parser.add_argument("--seconds-per-item", type=float, default=2e-6)
    parser.add_argument("--slow-rank", type=int, default=-1)
    parser.add_argument("--fail-rank", type=int, default=-1)
    queue = parser.add_argument_group("growing work queue (run_queue)")
    queue.add_argument("--queue", action="store_true", help="check run_queue, not map_batches")
    queue.add_argument("--depth", type=int, default=14, help="bisect down to width 2**-depth")
    queue.add_argument("--limit", type=int, default=None, help="run_queue's limit")
    queue.add_argument("--budget-items", type=int, default=None)
    queue.add_argument("--budget-seconds", type=float, default=None)
    queue.add_argument("--starts", type=int, default=1,
                       help="start from this many equal pieces of [0, 1]")
    queue.add_argument("--balance", choices=("dynamic", "static"), default="dynamic",
                       help="run_queue's balancing")
    queue.add_argument("--unpicklable-rank", type=int, default=-1,
                       help="this rank's results cannot be pickled (a lock each)")
    queue.add_argument("--no-threads", action="store_true",
                       help="act as if MPI allowed no helper thread: rank 0 only serves")
    args = parser.parse_args(argv)

    try:
        mpi = False if args.no_mpi else mpi_world()
        if args.no_threads and mpi:
            mpi = dataclasses.replace(mpi, threads_ok=False)
        scheduler = Scheduler(mpi=mpi, mpi_mode=args.mode,
                              max_batch_items=args.max_batch_items, progress=False)
    except SbmlGpuError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.queue:
        return run_queue_check(scheduler, args)
    rank = scheduler.rank

    def work(device, start, stop):
        if rank == args.fail_rank:
            raise RuntimeError(f"rank {rank} was told to fail")
        slow = 10.0 if rank == args.slow_rank else 1.0
        time.sleep(args.seconds_per_item * slow * (stop - start))
        return expected(start, stop)

    started = time.perf_counter()
    result, code = run_on_rank(scheduler, lambda: scheduler.map_batches(work, args.items))
    if code is not None:
        return code
    ok = result is not None and np.array_equal(result, expected(0, args.items))
    per_rank: dict[int, int] = {}
    for record in scheduler.last_batches:
        per_rank[record.rank] = per_rank.get(record.rank, 0) + record.size
    print(json.dumps({"ok": bool(ok), "ranks": scheduler.size, "mode": args.mode,
                      "items": args.items, "items_per_rank": per_rank,
                      "batches": len(scheduler.last_batches),
                      "seconds": round(time.perf_counter() - started, 3)}))
    return 0 if ok else 1


def run_on_rank(scheduler: Scheduler, call) -> tuple[Any, int | None]:
    """(call()'s result, None) on rank 0; elsewhere, or when it raised, (None, the exit
    code): 3 after an error (printed), 1 if a rank other than 0 got a result, else 0."""
    rank = scheduler.rank
    try:
        result = call()
    except SbmlGpuError as exc:
        print(f"rank {rank}: error: {exc}", file=sys.stderr)
        return None, 3
    except Exception as exc:  # noqa: BLE001 - the rank that was told to fail
        print(f"rank {rank}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return None, 3
    if scheduler.is_root:
        return result, None
    if result is not None:
        print(f"rank {rank}: expected None off rank 0", file=sys.stderr)
        return None, 1
    return None, 0


def run_queue_check(scheduler: Scheduler, args) -> int:
    rank, span = scheduler.rank, (0.0, 1.0)
    slow = 10.0 if rank == args.slow_rank else 1.0
    work = queue_demo.make_work(args.depth, args.seconds_per_item * slow,
                                fail=rank == args.fail_rank,
                                unpicklable=rank == args.unpicklable_rank)
    started = time.perf_counter()
    k = max(1, args.starts)
    roots = [(span[0] + (span[1] - span[0]) * i / k, span[0] + (span[1] - span[0]) * (i + 1) / k)
             for i in range(k)]
    roots[-1] = (roots[-1][0], span[1])
    done, code = run_on_rank(scheduler, lambda: scheduler.run_queue(
        work, roots, ordered=True, limit=args.limit, budget_items=args.budget_items,
        budget_seconds=args.budget_seconds, balance=args.balance))
    if code is not None:
        if code == 0 and scheduler.last_queue_left is not None:
            print(f"rank {rank}: expected no left items off rank 0", file=sys.stderr)
            return 1
        return code
    budgeted = args.budget_items is not None or args.budget_seconds is not None
    out = queue_demo.report(scheduler, done, depth=args.depth, span=span, budgeted=budgeted,
                            roots=roots)
    out["balance"] = args.balance
    out["seconds"] = round(time.perf_counter() - started, 3)
    print(json.dumps(out))
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
