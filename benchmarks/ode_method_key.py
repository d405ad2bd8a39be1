#!/usr/bin/env python3
"""The cost of the --method auto check's cache key (plugins/ode/specialised.py
values_key), which every auto run pays over its whole parameter table, against the
one sha256 over a tobytes() copy that it replaced (the anchor, in the same run).

    python benchmarks/ode_method_key.py [--shapes 141x100000,26x100000,40x1600000]
                                        [--repeat 3] [--out DIR]

Prints one line per (rows x members) table of uniform values; JSON to
DIR/ode_method_key.json (DIR: --out, else $OUT, else .).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def copied_sha256(table: np.ndarray, times: np.ndarray) -> str:
    """The key as it was before b718862: one sha256 over a copy of the table."""
    digest = hashlib.sha256(np.ascontiguousarray(table, dtype=np.float64).tobytes())
    digest.update(repr((table.shape, float(times[0]), float(times[-1]))).encode())
    return digest.hexdigest()


def best_seconds(key, table, times, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        key(table, times)
        best = min(best, time.perf_counter() - started)
    return best


def shape(text: str) -> tuple[int, int]:
    try:
        rows, members = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not ROWSxMEMBERS") from None
    if rows < 1 or members < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: rows and members must be at least 1")
    return rows, members


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default="141x100000,26x100000,40x1600000",
                        type=lambda text: [shape(s) for s in text.split(",")])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat must be at least 1, not {args.repeat}")
    from sbmlgpu.plugins.ode.specialised import values_key
    from sbmlgpu.runtime.prefault import threads

    times = np.linspace(0.0, 10.0, 51)
    rows = []
    for n_rows, members in args.shapes:
        table = np.random.default_rng(0).uniform(size=(n_rows, members))
        anchor = best_seconds(copied_sha256, table, times, args.repeat)
        ours = best_seconds(values_key, table, times, args.repeat)
        rows.append({"rows": n_rows, "members": members, "megabytes": table.nbytes / 1e6,
                     "anchor_s": anchor, "values_key_s": ours, "speedup": anchor / ours})
        print(f"{n_rows} x {members} ({table.nbytes / 1e6:.0f} MB): one sha256 over a copy "
              f"{anchor * 1e3:.1f} ms, values_key {ours * 1e3:.1f} ms, x{anchor / ours:.2f}",
              flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "ode_method_key.json").write_text(json.dumps({
        "benchmark": "ode_method_key", "date": datetime.now(timezone.utc).isoformat(),
        "threads": threads(), "cores": os.cpu_count(),
        "command": " ".join([sys.argv[0], *(argv if argv is not None else sys.argv[1:])]),
        "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
