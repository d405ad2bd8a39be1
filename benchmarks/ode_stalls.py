#!/usr/bin/env python3
"""No stalled ensembles (issue 13): a real model whose slow members held the GPU.

    python benchmarks/ode_stalls.py [--models Elowitz_Nature2000,Crauste_CellSystems2017]
                                    [--n 1000] [--member-time-limit 1.0] [--skip-before]
                                    [--out DIR]

For each PEtab model (../shared/models/petab-benchmark; the first condition, output
times, parameter sets within the PEtab bounds and tolerances as benchmarks/ode_petab.py
chooses them), the `ode` backend on the GPU (the CPU path without one) runs the same
ensemble four ways, after a run that compiles its kernel:

- `before`: one pass, no per-interval step limit, no time limit (the behaviour before
  issue 13: only --max-steps 10^6; Elowitz_Nature2000's 373 slow members of 10^5 made
  a 64 s kernel, its 1,000-member pilot alone 30 s). `--skip-before` leaves it out.
- `one_pass`: the per-interval limit (default 20,000), one pass.
- `default`: the defaults: the per-interval limit and two passes (--pass-steps 10,000).
- `time_limit`: the defaults and --member-time-limit.

Reported per run: wall time, kernel time, members/s, statuses, the slowest member's
steps (`steps_max`), the members each limit stopped, the second pass's members and
time; and whether `default` equals `one_pass` member for member (status, steps and
every value: it must). JSON to DIR/ode_stalls.json (DIR: --out, else $OUT, else .).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ode_petab import (ATOL, DEFAULT_ROOT, POINTS, RTOL, end_time,  # noqa: E402
                       parameter_sets, petab_problem)

DEFAULT_MODELS = "Elowitz_Nature2000,Crauste_CellSystems2017"


def runs(time_limit: float, skip_before: bool) -> dict[str, dict]:
    """{run name: its ode options beyond the tolerances}."""
    out = {} if skip_before else {"before": {"pass_steps": 0, "max_steps_per_interval": 0}}
    out.update({"one_pass": {"pass_steps": 0}, "default": {},
                "time_limit": {"member_time_limit": time_limit}})
    return out


def measure(network, times, sets, options, device) -> tuple[dict, object]:
    from sbmlgpu.api import execute
    from sbmlgpu.results import Status
    from sbmlgpu.tasks import TimeCourse

    started = time.perf_counter()
    outcome = execute(network, TimeCourse(times=times, parameters=sets, progress=False),
                      "ode", options=options, device=device)
    wall = time.perf_counter() - started
    result = outcome.result
    meta = result.metadata
    kernel_ms = sum(r.ms for r in outcome.profiler.records
                    if r.kernel.startswith("sbmlgpu_ode_")) if outcome.profiler else None
    n = len(result.status)
    codes = np.bincount(result.status.astype(int), minlength=len(Status.names()))
    return {
        "wall_s": wall, "kernel_s": kernel_ms / 1e3 if kernel_ms else None,
        "members_per_s": n / wall,
        "status_counts": {Status(c).name: int(k) for c, k in enumerate(codes) if k},
        "steps_max": meta.get("steps_max"), "steps_mean": meta.get("steps_mean"),
        "steps_max_member": meta.get("steps_max_member"),
        "limit_members": {name: v["count"] for name, v in meta.get("limit_members", {}).items()},
        "second_pass_members": meta.get("second_pass_members"),
        "second_pass_seconds": meta.get("second_pass_seconds"),
        "method": meta.get("method"), "limits": meta.get("limits"),
    }, result


def run_model(folder: Path, args, device) -> dict:
    import sbmlgpu

    problem = petab_problem(folder)
    network = sbmlgpu.load(str(problem["sbml"]))
    condition, sets, _ = parameter_sets(problem, network, args.n)
    times = np.linspace(0.0, end_time(problem, condition), POINTS)
    base = {"method": args.method, "rtol": RTOL, "atol": ATOL}
    row = {"model": folder.name, "n": args.n, "condition": condition, "t_end": times[-1]}
    started = time.perf_counter()  # the kernel's build, cached for the runs below
    measure(network, times, {k: v[:64] for k, v in sets.items()}, base, device)
    row["compile_s"] = time.perf_counter() - started
    results = {}
    for name, extra in runs(args.member_time_limit, args.skip_before).items():
        row[name], results[name] = measure(network, times, sets, {**base, **extra}, device)
        print(f"{folder.name:<34}{name:>11}{row[name]['wall_s']:>9.2f} s"
              f"{row[name]['steps_max']:>10}  {row[name]['status_counts']}", flush=True)
    one, two = results["one_pass"], results["default"]
    row["default_equals_one_pass"] = bool(
        np.array_equal(one.status, two.status)
        and np.array_equal(one.data, two.data, equal_nan=True))
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default=str(DEFAULT_ROOT))
    parser.add_argument("--models", default=DEFAULT_MODELS, help="comma-separated folders")
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--method", default="auto")
    parser.add_argument("--member-time-limit", type=float, default=1.0)
    parser.add_argument("--skip-before", action="store_true")
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    args = parser.parse_args(argv)

    from sbmlgpu import runtime

    devices = runtime.get_devices()
    device = [devices[0].index] if devices else "cpu"
    if not devices:
        print(f"no GPU ({runtime.no_gpu_reason()}): running the CPU path", file=sys.stderr)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = {"benchmark": "ode_stalls", "date": datetime.now(timezone.utc).isoformat(),
              "device": devices[0].properties.name if devices else "cpu",
              "command": " ".join(sys.argv), "rtol": RTOL, "atol": ATOL, "models": []}
    for name in args.models.split(","):
        try:
            row = run_model(Path(args.root) / name, args, device)
        except Exception as exc:  # noqa: BLE001 - report and go on with the next model
            row = {"model": name, "error": f"{type(exc).__name__}: {exc}",
                   "traceback": traceback.format_exc()[-2000:]}
            print(f"{name}: {row['error']}", flush=True)
        report["models"].append(row)
        (out / "ode_stalls.json").write_text(json.dumps(report, indent=1, default=str))
    print(f"wrote {out / 'ode_stalls.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
