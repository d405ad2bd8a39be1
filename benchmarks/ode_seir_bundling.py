#!/usr/bin/env python3
"""SEIR (Kovac et al. 2019) with parameters from a wide prior: bundled vs unbundled DOPRI5.

    python benchmarks/ode_seir_bundling.py [--n 1000000] [--points 41] [--lane-refill]
                                           [--out DIR]

sbml_models/seir_epidemic.xml; beta, gamma, alpha, sigma log-uniform over two decades
around their nominal values (Philox-sampled, seed 1), so that step counts vary by an
order of magnitude between members; t in [0, 160]; DOPRI5, rtol 1e-6, atol 1e-9.
The same ensemble runs twice on the GPU in this one process: with bundling (a pilot
of 1,000 members trains the step predictor, members sorted by predicted steps) and
with --no-bundling. Reported: kernel time (sum of the launches, pilot included, from
the profiler), wall time of the run, the lane efficiency of the warps (sum of steps /
(32 x the slowest member of each warp), from the measured step counts, in launch
order), the predictor's R^2, and a check that both runs give identical time courses.
Kovac et al. report 40-80 % less time with bundling. Both runs keep one member per
thread, as Kovac et al. do (the lane efficiency above is that kernel's), unless
--lane-refill (the backend's default on a GPU: lanes take the next member when theirs
ends). JSON to DIR/ode_seir_bundling.json.
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
PRIOR = {"beta": (0.03, 3.0), "gamma": (0.02, 2.0), "alpha": (1e-4, 1e-2), "sigma": (0.01, 1.0)}


def run_once(device, network, times, params, bundling: bool, lane_refill: bool):
    from sbmlgpu.tasks import TimeCourse
    from sbmlgpu.plugins.ode.backend import OdeBackend
    from sbmlgpu.plugins.ode.options import OdeOptions
    from sbmlgpu.profile import Profiler
    from sbmlgpu.schedule import Scheduler

    options = OdeOptions(method="dopri5", rtol=1e-6, atol=1e-9, bundling=bundling,
                         lane_refill=lane_refill).validate()
    program = OdeBackend().compile(network, options, device)
    request = TimeCourse(times=times, parameters=params, progress=False)
    # compile (and load) before timing
    warm = TimeCourse(times=times, parameters={k: v[:64] for k, v in params.items()},
                      progress=False)
    program.run(warm, Scheduler(devices=[device], progress=False), None)
    profiler = Profiler()
    scheduler = Scheduler(devices=[device], progress=False, profiler=profiler)
    started = time.perf_counter()
    result = program.run(request, scheduler, profiler)
    wall = time.perf_counter() - started
    launches = [r for r in profiler.records if r.kernel.startswith("sbmlgpu_ode_dopri5")]
    return result, program.last_steps, wall, launches, program.last_order


def lane_efficiency(steps_in_launch_order: np.ndarray, warp: int = 32) -> float:
    from sbmlgpu.schedule import lane_efficiency as efficiency

    return float(efficiency(np.maximum(steps_in_launch_order, 1), warp))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--points", type=int, default=41)
    parser.add_argument("--lane-refill", action="store_true",
                        help="lanes that take the next member (default: one member per thread)")
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    args = parser.parse_args(argv)

    import sbmlgpu
    from sbmlgpu import ensemble, runtime

    devices = runtime.get_devices()
    if not devices:
        print(f"no GPU: {runtime.no_gpu_reason()}", file=sys.stderr)
        return 2
    device = devices[0]
    network = sbmlgpu.load(str(ROOT / "sbml_models" / "seir_epidemic.xml"))
    specs = {k: f"loguniform:{lo}:{hi}" for k, (lo, hi) in PRIOR.items()}
    params = ensemble.sample(specs, args.n, seed=1)
    times = np.linspace(0.0, 160.0, args.points)

    rows = {}
    results = {}
    for bundling in (True, False):
        result, steps, wall, launches, order = run_once(device, network, times, params,
                                                        bundling, args.lane_refill)
        kernel_ms = sum(r.ms for r in launches)
        pilot_ms = launches[0].ms if bundling and launches else 0.0
        info = result.metadata.get("bundling_info") or {}
        rows["bundled" if bundling else "unbundled"] = {
            "wall_s": wall, "kernel_ms": kernel_ms, "pilot_ms": pilot_ms,
            "launches": len(launches), "steps_mean": float(np.mean(steps)),
            "steps_max": int(np.max(steps)), "failed": int(result.n_failed),
            "bundling": result.metadata.get("bundling"), "bundling_info": info,
            "gflops": sum(r.flops for r in launches) / (kernel_ms / 1e3) / 1e9 if kernel_ms else None,
        }
        results[bundling] = (result, steps, order)
        print(f"{'bundled' if bundling else 'unbundled':>10}: kernel {kernel_ms:9.2f} ms "
              f"(pilot {pilot_ms:.2f} ms), wall {wall:7.2f} s, steps mean "
              f"{np.mean(steps):.0f} max {np.max(steps)}, failed {result.n_failed}", flush=True)

    steps = results[False][1]
    # lane efficiency in the order each run launched its members
    unbundled_eff = lane_efficiency(steps)
    order = results[True][2]
    bundled_eff = lane_efficiency(steps[order]) if order is not None else None
    info = rows["bundled"]["bundling_info"]
    identical = bool(np.array_equal(results[True][0].data, results[False][0].data))
    speedup = rows["unbundled"]["kernel_ms"] / rows["bundled"]["kernel_ms"]
    report = {
        "benchmark": "ode_seir_bundling", "date": datetime.now(timezone.utc).isoformat(),
        "device": device.properties.name, "n": args.n, "points": args.points, "prior": PRIOR,
        "lane_refill": args.lane_refill,
        "rows": rows, "lane_efficiency_unbundled": unbundled_eff,
        "lane_efficiency_bundled": bundled_eff, "kernel_speedup": speedup,
        "kernel_time_saved": 1 - 1 / speedup,
        "wall_speedup": rows["unbundled"]["wall_s"] / rows["bundled"]["wall_s"],
        "identical_results": identical, "command": " ".join(sys.argv),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "ode_seir_bundling.json").write_text(json.dumps(report, indent=1, default=float))
    print(f"kernel time: bundled {rows['bundled']['kernel_ms']:.2f} ms vs unbundled "
          f"{rows['unbundled']['kernel_ms']:.2f} ms: x{speedup:.2f} "
          f"({100 * (1 - 1 / speedup):.0f} % less); lane efficiency {unbundled_eff:.3f} -> "
          f"{bundled_eff if bundled_eff is None else round(bundled_eff, 3)}; "
          f"R^2 {info.get('r_squared', float('nan')):.3f}; identical results: {identical}")
    print(f"wrote {out / 'ode_seir_bundling.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
