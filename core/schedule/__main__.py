"""Self-check of the scheduler on host work, for MPI set-ups:

    mpirun -n 2 python -m sbmlgpu.schedule --items 20000 [--mode static]

Each item's result is a known function of its index, so rank 0 can check that
every item came back once and in order. It prints one JSON line (items per rank)
and exits 1 on a wrong result. --slow-rank R makes rank R ten times slower, to
see the dynamic queue give the others more; --fail-rank R makes rank R raise, to
see every rank stop with the error instead of hanging.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from ..errors import SbmlGpuError
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
    args = parser.parse_args(argv)

    try:
        scheduler = Scheduler(mpi=not args.no_mpi, mpi_mode=args.mode,
                              max_batch_items=args.max_batch_items, progress=False)
    except SbmlGpuError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    rank = scheduler.rank

    def work(device, start, stop):
        if rank == args.fail_rank:
            raise RuntimeError(f"rank {rank} was told to fail")
        slow = 10.0 if rank == args.slow_rank else 1.0
        time.sleep(args.seconds_per_item * slow * (stop - start))
        return expected(start, stop)

    started = time.perf_counter()
    try:
        result = scheduler.map_batches(work, args.items)
    except SbmlGpuError as exc:
        print(f"rank {rank}: error: {exc}", file=sys.stderr)
        return 3
    except Exception as exc:  # noqa: BLE001 - the rank that was told to fail
        print(f"rank {rank}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 3
    if not scheduler.is_root:
        if result is not None:
            print(f"rank {rank}: expected None off rank 0", file=sys.stderr)
            return 1
        return 0
    ok = result is not None and np.array_equal(result, expected(0, args.items))
    per_rank: dict[int, int] = {}
    for record in scheduler.last_batches:
        per_rank[record.rank] = per_rank.get(record.rank, 0) + record.size
    print(json.dumps({"ok": bool(ok), "ranks": scheduler.size, "mode": args.mode,
                      "items": args.items, "items_per_rank": per_rank,
                      "batches": len(scheduler.last_batches),
                      "seconds": round(time.perf_counter() - started, 3)}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
