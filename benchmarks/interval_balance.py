#!/usr/bin/env python3
"""Dynamic against static balancing of the interval backend's boxes over MPI ranks
(issue 15): wall time, speed-up, efficiency, chunks and idle time per rank, and
whether the paving is the same whatever the number of ranks.

    python benchmarks/interval_balance.py [--case seir3] [--ranks 1 2 4]
        [--balances dynamic static] [--cpu] [--epsilon E] [--points N]
        [--batch B] [--time-limit S] [--out DIR]

After one untimed warm-up run (the kernel's build), each run is the CLI under
mpirun, as a user runs it (`--bind-to none` with Open MPI, whose default binding
would put a rank's OpenMP threads on one core):
`mpirun -n R python -m sbmlgpu estimate MODEL --data DATA --unknown ... --epsilon E
--kernel multi --mpi --balance B [--cpu] -o DIR`. The case's data come from
benchmarks/interval_data.py (`--points`: fewer data times, for a quick run). Ranks
share the host's GPUs (rank r uses GPU r mod count): on a machine with one GPU, R
ranks share it, which measures the balancing's cost, not a speed-up. With `--cpu`
each rank runs the host engine on cores / R OpenMP threads.

Per run: the summary's search_seconds (the search on rank 0, without the kernel's
build and the presplit), boxes evaluated, complete,
and each rank's chunks, busy and idle seconds (the summary's per_device rows; a rank
that never launched idled the whole search: `ranks_with_work`), the
wall time of mpirun, and a digest of the paving file. speed-up = T(1 rank, same
balance) / T(R); efficiency = speed-up / R. `same_paving`: the paving file equals
the 1-rank run's byte for byte (the backend's promise). Writes
DIR/interval_balance.json (--out, else $OUT, else benchmarks/results) and prints a
table. Exit status 1 when a paving differs; 2 without mpirun.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from interval_data import CASES, DATASETS, write_data  # noqa: E402
from ssa_common import commit, describe, table, write_json  # noqa: E402


def mpirun_path() -> str | None:
    """The mpirun beside this Python first (the venv's `mpich` wheel, matching its
    mpi4py), else one on PATH."""
    beside = Path(sys.executable).parent / "mpirun"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("mpirun") or shutil.which("mpiexec")


def command(case, data: Path, out: Path, ranks: int, balance: str, epsilon: float,
            cpu: bool, time_limit: float, batch: int = 0) -> list[str]:
    dataset = DATASETS[case.dataset]
    line = [sys.executable, "-m", "sbmlgpu", "estimate", str(dataset.path), "--data",
            str(data), "--epsilon", repr(epsilon), "--kernel", "multi", "--mpi",
            "--balance", balance, "--no-progress", "-o", str(out)]
    for sid, (lo, hi) in case.unknown.items():
        line += ["--unknown", f"{sid}={lo!r}:{hi!r}"]
    if cpu:
        line.append("--cpu")
    if time_limit:
        line += ["--time-limit", repr(time_limit)]
    if batch:
        line += ["--batch", str(batch)]
    return [mpirun_path(), "-n", str(ranks), *binding(), *line]


def binding() -> list[str]:
    """Open MPI binds each rank to a core when there are few ranks, so a rank's OpenMP
    threads (the host engine) would share one core: `--bind-to none` there (measured
    on the H100 host: SEIR-2P on one rank of 16 cores took 111 s bound, 9.6 s not)."""
    try:
        version = subprocess.run([mpirun_path(), "--version"], capture_output=True,
                                 text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return ["--bind-to", "none"] if "Open MPI" in version or "OpenRTE" in version else []


def read_summary(path: Path) -> dict[str, str]:
    with open(path, encoding="utf-8") as source:
        rows = list(csv.reader(source))
    return {row[0]: row[1] for row in rows[1:] if len(row) == 2}


def per_rank(summary: dict[str, str]) -> dict[str, dict[str, float]]:
    """{"rank:device": {chunks, busy_seconds, idle_seconds}} from the summary's rows."""
    out: dict[str, dict[str, float]] = {}
    for key, value in summary.items():
        if key.startswith("per_device."):
            _, where, field = key.split(".", 2)
            out.setdefault(where, {})[field] = float(value)
    return out


def run(case, data: Path, folder: Path, ranks: int, balance: str, args,
        name: str | None = None) -> dict:
    out = folder / (name or f"{balance}-{ranks}")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    if args.cpu:
        env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // ranks))
    started = time.perf_counter()
    done = subprocess.run(command(case, data, out, ranks, balance, args.epsilon or case.epsilon,
                                  args.cpu, args.time_limit, args.batch),
                          capture_output=True, text=True, env=env)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{balance} on {ranks} rank(s) failed ({done.returncode}):\n"
                         f"{done.stdout}\n{done.stderr}")
    stem = Path(DATASETS[case.dataset].model).stem
    paving = out / f"{stem}.paving.csv"
    summary = read_summary(out / f"{stem}.paving.summary.csv")
    ranks_rows = per_rank(summary)
    # the search alone (the backend's per_device idle times are against it); the
    # run's `seconds` also hold its kernel build and presplit
    seconds = float(summary.get("search_seconds", summary["seconds"]))
    # a rank that never launched (a static share too small to hold a chunk) idled
    # through the whole search
    idle = [r["idle_seconds"] for r in ranks_rows.values()] + \
        [seconds] * max(0, ranks - len(ranks_rows))
    return {"balance": balance, "ranks": ranks, "seconds": seconds,
            "ranks_with_work": len(ranks_rows),
            "wall_seconds": wall, "boxes_evaluated": int(summary["boxes_evaluated"]),
            "complete": summary.get("complete") == "True",
            "per_rank": ranks_rows, "idle_max_seconds": max(idle, default=0.0),
            "paving_digest": hashlib.sha256(paving.read_bytes()).hexdigest()[:16]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--case", choices=sorted(CASES), default="seir3")
    p.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--balances", nargs="+", choices=("dynamic", "static"),
                   default=["dynamic", "static"])
    p.add_argument("--cpu", action="store_true", help="the host engine on every rank")
    p.add_argument("--epsilon", type=float, default=None, help="[default: the case's]")
    p.add_argument("--points", type=int, default=None, help="fewer data times")
    p.add_argument("--batch", type=int, default=0,
                   help="boxes per chunk (the backend's --batch; 0: its default): a "
                        "static split shares out chunks, so a small run needs small ones")
    p.add_argument("--time-limit", type=float, default=0.0,
                   help="stop each search after this many seconds (marked incomplete)")
    p.add_argument("--out", default=os.environ.get("OUT") or str(ROOT / "benchmarks" / "results"))
    argv = list(sys.argv[1:] if argv is None else argv)
    args = p.parse_args(argv)
    if mpirun_path() is None:
        print("no mpirun or mpiexec on this machine", file=sys.stderr)
        return 2
    if min(args.ranks) < 1:
        p.error("--ranks: at least 1")
    case = CASES[args.case]
    folder = Path(args.out) / "interval_balance_runs"
    folder.mkdir(parents=True, exist_ok=True)
    data = write_data(DATASETS[case.dataset], folder / f"{case.dataset}.csv", args.points)
    counts = sorted(set(args.ranks) | {1})
    # a warm-up run, not kept: nvcc's build of the kernel (or the host build) goes to
    # the cache, so that no timed run holds it
    run(case, data, folder, 1, args.balances[0], args, name="warm-up")
    rows = []
    for balance in args.balances:
        base = None
        for ranks in counts:
            row = run(case, data, folder, ranks, balance, args)
            base = base or row
            row["speedup"] = base["seconds"] / row["seconds"]
            row["efficiency"] = row["speedup"] / ranks
            row["same_paving"] = row["paving_digest"] == rows[0]["paving_digest"] \
                if rows else True
            rows.append(row)
            print(f"{balance} {ranks} rank(s): {row['seconds']:.3f} s, speed-up "
                  f"{row['speedup']:.2f}, {row['boxes_evaluated']:,} boxes, most idle "
                  f"{row['idle_max_seconds']:.3f} s, same paving {row['same_paving']}",
                  flush=True)
    device = None
    if not args.cpu:
        from sbmlgpu import runtime

        found = runtime.get_devices()
        device = found[0] if found else None
    write_json(args.out, "interval_balance", {
        "benchmark": "interval_balance", "machine": describe(device), **commit(),
        "command": [sys.argv[0], *argv],
        "settings": {"case": args.case, "epsilon": args.epsilon or case.epsilon,
                     "points": args.points, "batch": args.batch, "cpu": args.cpu, "time_limit": args.time_limit},
        "rows": rows})
    print(table(rows, [("balance", "balance", "s"), ("ranks", "ranks", "d"),
                       ("seconds", "seconds", ".3f"), ("speed-up", "speedup", ".2f"),
                       ("efficiency", "efficiency", ".2f"),
                       ("boxes", "boxes_evaluated", ",d"),
                       ("ranks working", "ranks_with_work", "d"),
                       ("most idle s", "idle_max_seconds", ".3f"),
                       ("same paving", "same_paving", "")]))
    return 0 if all(r["same_paving"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
