#!/usr/bin/env python3
"""No stalled ensembles (issue 13): a real model whose slow members held the GPU.

    python benchmarks/ode_stalls.py [--models Elowitz_Nature2000,SalazarCavazos_MBoC2020]
                                    [--n 1000,100000] [--member-time-limit 1.0]
                                    [--skip-before] [--runs one_pass,default,...]
                                    [--out DIR]

For each PEtab model (../shared/models/petab-benchmark; the first condition, output
times, parameter sets within the PEtab bounds and tolerances as benchmarks/ode_petab.py
chooses them) and each ensemble size of --n, the `ode` backend on the GPU (the CPU
path without one) runs the same ensemble these ways, after a 64-member run that
compiles its kernel (and, having no pilot, starts the host build of the second pass,
cached for the runs below):

- `before`: one pass, no per-interval step limit, no time limit (the behaviour before
  issue 13: only --max-steps 10^6; Elowitz_Nature2000's 373 slow members of 10^5 made
  a 64 s kernel, its 1,000-member pilot alone 30 s). `--skip-before` leaves it out.
- `one_pass`: the per-interval limit (default 20,000), one pass.
- `device_pass`: two passes (--pass-steps 10,000), the second on the GPU whatever its
  size (plugins/ode/host_pass.py's HOST_MEMBERS_PER_CORE set to 0): last round's default.
- `host_pass`: two passes, the second on the host's cores whatever its size
  (HOST_MEMBERS_PER_CORE set very high): with `device_pass`, what the rule weighs.
- `default`: the defaults: two passes, the second on the host's cores where it has at
  most HOST_MEMBERS_PER_CORE members per core, else on the GPU.
- `time_limit`: the defaults and --member-time-limit.

Reported per run: wall time, kernel time, members/s, statuses, the slowest member's
steps and seconds (`slowest_member`: its own seconds where it ran on a host thread,
else its launch's), the members each limit stopped, each pass's wall time and where
the second ran and its members' steps (max, mean, sum: what the rule weighs); and how
`default`, `device_pass` and `host_pass` compare with `one_pass` member for member
(statuses equal; values equal on the device, within the rounding of the host build
where the host ran the second pass). JSON to DIR/ode_stalls.json (DIR: --out, else
$OUT, else .), rewritten after every run.

On the H100 (the lead's command):
    python3 benchmarks/ode_stalls.py --n 1000,100000 --skip-before --out $OUT
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ode_petab import (ATOL, DEFAULT_ROOT, POINTS, RTOL, end_time,  # noqa: E402
                       parameter_sets, petab_problem)

DEFAULT_MODELS = "Elowitz_Nature2000,SalazarCavazos_MBoC2020"
RUNS = ("before", "one_pass", "device_pass", "host_pass", "default", "time_limit")
#: the runs compared with one_pass member for member
COMPARED = ("device_pass", "host_pass", "default")
#: HOST_MEMBERS_PER_CORE for the runs that force where the second pass runs
FORCED = {"device_pass": 0, "host_pass": 10**9}


def runs(time_limit: float, skip_before: bool, chosen=RUNS) -> dict[str, dict]:
    """{run name: its ode options beyond the tolerances}; `device_pass` and `host_pass`
    are `default` with the second pass kept on the device or the host (FORCED)."""
    out = {"before": {"pass_steps": 0, "max_steps_per_interval": 0},
           "one_pass": {"pass_steps": 0}, "device_pass": {}, "host_pass": {}, "default": {},
           "time_limit": {"member_time_limit": time_limit}}
    return {k: v for k, v in out.items()
            if k in chosen and not (skip_before and k == "before")}


@contextmanager
def second_pass_rule(per_core: int | None):
    """host_pass's HOST_MEMBERS_PER_CORE set to `per_core` (None: left alone)."""
    from sbmlgpu.plugins.ode import host_pass

    kept = host_pass.HOST_MEMBERS_PER_CORE
    if per_core is not None:
        host_pass.HOST_MEMBERS_PER_CORE = per_core
    try:
        yield
    finally:
        host_pass.HOST_MEMBERS_PER_CORE = kept


def compare(one, other) -> dict:
    """`other` against `one_pass`, member for member."""
    ok = (one.status == 0) & (other.status == 0)
    a, b = np.asarray(one.data)[ok], np.asarray(other.data)[ok]
    scale = np.maximum(np.abs(a), 1e-12)
    with np.errstate(invalid="ignore"):
        rel = float(np.nanmax(np.abs(a - b) / scale)) if a.size else 0.0
    return {"status_equal": bool(np.array_equal(one.status, other.status)),
            "values_equal": bool(np.array_equal(one.data, other.data, equal_nan=True)),
            "max_rel_diff_ok_members": rel}


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
        "slowest_member": meta.get("slowest_member"),
        "limit_members": {name: v["count"] for name, v in meta.get("limit_members", {}).items()},
        "first_pass_seconds": meta.get("first_pass_seconds"),
        "second_pass_members": meta.get("second_pass_members"),
        "second_pass_steps": meta.get("second_pass_steps"),
        "second_pass_seconds": meta.get("second_pass_seconds"),
        "second_pass_where": meta.get("second_pass_where"),
        "second_pass_threads": meta.get("second_pass_threads"),
        "later_passes": meta.get("later_passes"),
        "method": meta.get("method"), "limits": meta.get("limits"),
    }, result


def run_model(folder: Path, n: int, args, device, save) -> dict:
    import sbmlgpu

    problem = petab_problem(folder)
    network = sbmlgpu.load(str(problem["sbml"]))
    condition, sets, _ = parameter_sets(problem, network, n)
    times = np.linspace(0.0, end_time(problem, condition), POINTS)
    base = {"method": args.method, "rtol": RTOL, "atol": ATOL}
    row = {"model": folder.name, "n": n, "condition": condition, "t_end": times[-1]}
    started = time.perf_counter()  # the kernel's build, cached for the runs below
    measure(network, times, {k: v[:64] for k, v in sets.items()}, base, device)
    row["compile_s"] = time.perf_counter() - started
    results = {}
    chosen = args.runs.split(",") if args.runs else RUNS
    for name, extra in runs(args.member_time_limit, args.skip_before, chosen).items():
        with second_pass_rule(FORCED.get(name)):
            row[name], results[name] = measure(network, times, sets, {**base, **extra},
                                               device)
        print(f"{folder.name:<34}{n:>8}{name:>12}{row[name]['wall_s']:>9.2f} s"
              f"{row[name]['steps_max']:>10}  second pass: {row[name]['second_pass_members']}"
              f" on {row[name]['second_pass_where']} {row[name]['second_pass_seconds']:.2f} s"
              f"  {row[name]['status_counts']}", flush=True)
        save(row)
        if name not in ("one_pass",) + COMPARED:
            results.pop(name)  # 10^5 time courses of a large model take gigabytes
    for name in COMPARED:
        if "one_pass" in results and name in results:
            row[f"{name}_vs_one_pass"] = compare(results["one_pass"], results[name])
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default=str(DEFAULT_ROOT))
    parser.add_argument("--models", default=DEFAULT_MODELS, help="comma-separated folders")
    parser.add_argument("--n", default="1000", help="ensemble sizes, comma-separated")
    parser.add_argument("--method", default="auto")
    parser.add_argument("--member-time-limit", type=float, default=1.0)
    parser.add_argument("--skip-before", action="store_true")
    parser.add_argument("--runs", default="", help=f"some of {','.join(RUNS)} (default all)")
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    args = parser.parse_args(argv)

    from sbmlgpu import runtime
    from sbmlgpu.plugins.ode.host_pass import HOST_MEMBERS_PER_CORE, host_cores

    devices = runtime.get_devices()
    device = [devices[0].index] if devices else "cpu"
    if not devices:
        print(f"no GPU ({runtime.no_gpu_reason()}): running the CPU path", file=sys.stderr)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = {"benchmark": "ode_stalls", "date": datetime.now(timezone.utc).isoformat(),
              "device": devices[0].properties.name if devices else "cpu",
              "command": " ".join(sys.argv), "rtol": RTOL, "atol": ATOL,
              "host_cores": host_cores(), "host_members_per_core": HOST_MEMBERS_PER_CORE,
              "models": []}

    def write() -> None:
        (out / "ode_stalls.json").write_text(json.dumps(report, indent=1, default=str))

    for name in args.models.split(","):
        for n in (int(v) for v in args.n.split(",")):
            row = {"model": name, "n": n}
            report["models"].append(row)

            def save(done: dict, row=row) -> None:
                row.update(done)
                write()

            try:
                save(run_model(Path(args.root) / name, n, args, device, save))
            except Exception as exc:  # noqa: BLE001 - report and go on with the next
                save({"error": f"{type(exc).__name__}: {exc}",
                      "traceback": traceback.format_exc()[-2000:]})
                print(f"{name} ({n}): {row['error']}", flush=True)
    write()
    print(f"wrote {out / 'ode_stalls.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
