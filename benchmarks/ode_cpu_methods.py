#!/usr/bin/env python3
"""Where the CPU path's time goes on a PEtab model, by method (issue 13).

    python benchmarks/ode_cpu_methods.py MODEL[,MODEL...] [--n 1000]
                                         [--methods rodas4,dopri5] [--gpu]
                                         [--no-slowest] [--out DIR]

For each PEtab model of ../shared/models/petab-benchmark (an entry holding a "/" is a
PEtab folder anywhere): the same --n parameter
sets, first condition, output times and tolerances as benchmarks/ode_cpu_path.py
(benchmarks/ode_petab.py's helpers), run on the CPU path (`sbmlgpu.run(...,
device="cpu")`, the second of two runs) with each --methods value: wall time, the
members' statuses, steps per member (mean, largest), and the second pass (members past
the first pass's --pass-steps budget, their seconds and steps), which is where a few
hard members show; `auto` also says which method it chose, and the second pass's
method and fallback members where they differ (plugins/ode/passes.py: under auto the
members rodas4 leaves past the budget run again with bdf). --gpu: the same runs on
GPU 0 instead (the second pass then runs on the device or on the host's cores, as
`second_pass_where` says). Then, unless --no-slowest, the slowest member alone: ours
with the first method on the CPU path, and libRoadRunner (CVODE, same tolerances)
where the roadrunner module is installed. JSON to DIR/ode_cpu_methods.json (DIR:
--out, else $OUT, else .).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.ode_petab import (ATOL, DEFAULT_ROOT, POINTS, RTOL, end_time,  # noqa: E402
                                  parameter_sets, petab_problem)

METHODS = ("rodas4", "dopri5", "rk4", "bdf", "auto")


def _ours(network, times, sets, method: str, device="cpu") -> tuple[float, object]:
    import sbmlgpu

    options = {"method": method, "rtol": RTOL, "atol": ATOL}
    for _ in range(2):  # the second run: compiled, its host build loaded
        started = time.perf_counter()
        result = sbmlgpu.run(network, times=times, parameters=sets, options=options,
                             device=device, progress=False)
        wall = time.perf_counter() - started
    return wall, result


def _roadrunner_one(sbml: Path, values: dict, t_end: float) -> float | str:
    try:
        import roadrunner
    except ImportError:
        return "not available"
    roadrunner.Logger.disableLogging()
    rr = roadrunner.RoadRunner(sbml.read_text())
    # as benchmarks/ode_petab.py's _rr_simulate: parameters set, then reset() computes
    # the initial assignments from them (set alone, a parameter that an initial
    # assignment reads would leave libRoadRunner at the file's initial state), then
    # species' values as current values
    species = set(rr.model.getFloatingSpeciesIds()) | set(rr.model.getBoundarySpeciesIds())
    rr.resetAll()
    for key, value in values.items():
        if key not in species:
            rr.setValue(key, value)
    rr.reset()
    for key, value in values.items():
        if key in species:
            rr.setValue(key, value)
    rr.integrator.relative_tolerance = RTOL
    rr.integrator.absolute_tolerance = ATOL
    rr.integrator.maximum_num_steps = 10**7
    started = time.perf_counter()
    try:
        rr.simulate(0.0, t_end, POINTS)
    except RuntimeError as exc:
        return f"failed after {time.perf_counter() - started:.3f} s: {str(exc)[:80]}"
    return time.perf_counter() - started


def _folder(name: str) -> Path:
    return Path(name) if "/" in name else DEFAULT_ROOT / name


def model_rows(name: str, n: int, methods: list[str], device="cpu",
               slowest_alone: bool = True) -> dict:
    import sbmlgpu

    problem = petab_problem(_folder(name))
    network = sbmlgpu.load(str(problem["sbml"]))
    condition, sets, _ = parameter_sets(problem, network, n)
    t_end = end_time(problem, condition)
    times = np.linspace(0.0, t_end, POINTS)
    out = {"model": _folder(name).name, "states": len(network.species), "n": n, "methods": []}
    for method in methods:
        wall, result = _ours(network, times, sets, method, device)
        meta = result.metadata
        second = meta.get("second_pass_steps") or {}
        row = {"method": method, "chosen": meta.get("method"),
               "method_reason": meta.get("method_reason"), "wall_s": wall,
               "device": meta.get("device"),
               "second_pass_where": meta.get("second_pass_where"),
               "second_pass_method": meta.get("second_pass_method"),
               "second_pass_fallback": meta.get("second_pass_fallback"),
               "later_passes": meta.get("later_passes"),
               "slowest_member_detail": meta.get("slowest_member"),
               "status_counts": {str(k): int(v) for k, v in
                                 zip(*np.unique(result.status, return_counts=True))},
               "steps_mean": meta.get("steps_mean"), "steps_max": meta.get("steps_max"),
               "slowest_member": meta.get("steps_max_member"),
               "first_pass_s": meta.get("first_pass_seconds"),
               "second_pass_members": meta.get("second_pass_members"),
               "second_pass_s": meta.get("second_pass_seconds"),
               "second_pass_steps": second.get("sum")}
        out["methods"].append(row)
        print(f"{out['model']:36} {method:7}->{row['chosen']:7} wall {wall:7.3f} s  steps mean "
              f"{row['steps_mean']:9.0f} max {row['steps_max']:8d}  second pass "
              f"{row['second_pass_members']} members {row['second_pass_s'] or 0:.3f} s "
              f"({row['second_pass_where']}, {row['second_pass_method'] or row['chosen']}; "
              f"fallback {(row['second_pass_fallback'] or {}).get('count', 0)})", flush=True)
    slowest = out["methods"][0]["slowest_member"]
    if slowest is not None and slowest_alone:
        one = {k: np.asarray(v)[slowest:slowest + 1] for k, v in sets.items()}
        wall, result = _ours(network, times, one, methods[0])
        rr = _roadrunner_one(Path(problem["sbml"]),
                             {k: float(v[0]) for k, v in one.items()}, t_end)
        out["slowest"] = {"member": int(slowest), "method": methods[0], "ours_s": wall,
                          "steps": result.metadata.get("steps_max"), "roadrunner_s": rr}
        print(f"{out['model']:36} slowest member {slowest}: ours ({methods[0]}) {wall:.3f} s, "
              f"libRoadRunner {rr if isinstance(rr, str) else f'{rr:.3f} s'}", flush=True)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", help="comma-separated PEtab problem folders")
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--methods", default="rodas4,dopri5")
    parser.add_argument("--gpu", action="store_true", help="run ours on GPU 0")
    parser.add_argument("--no-slowest", action="store_true",
                        help="skip the slowest member alone")
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    args = parser.parse_args(argv)
    methods = args.methods.split(",")
    names = args.models.split(",")
    bad = [m for m in methods if m not in METHODS]
    missing = [m for m in names if not _folder(m).is_dir()]
    if bad or missing or args.n < 1:
        parser.error(f"unknown method {', '.join(bad)} (one of {', '.join(METHODS)})" if bad
                     else f"no PEtab folder {', '.join(missing)} in {DEFAULT_ROOT}"
                     if missing else f"--n must be at least 1, not {args.n}")
    report = {"benchmark": "ode_cpu_methods", "date": datetime.now(timezone.utc).isoformat(),
              "cpu_count": os.cpu_count(), "load_average": os.getloadavg(),
              "rtol": RTOL, "atol": ATOL, "command": " ".join(sys.argv), "models": []}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        report["models"].append(model_rows(name, args.n, methods, 0 if args.gpu else "cpu",
                                           not args.no_slowest))
        (out / "ode_cpu_methods.json").write_text(json.dumps(report, indent=1, default=str))
    print(f"wrote {out / 'ode_cpu_methods.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
