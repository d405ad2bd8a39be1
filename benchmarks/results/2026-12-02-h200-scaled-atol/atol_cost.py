#!/usr/bin/env python3
"""Scratch (issue 13): what --scaled-atol's per-member tolerance array costs on a GPU.

    python3 benchmarks/results/2026-12-02-h200-scaled-atol/atol_cost.py

Lorenz (sbml_models/lorenz.xml, rho varied over [0, 21]) with dopri5 at rtol = atol
= 1e-8, 10^6 members, and PEtab models' sampled members (benchmarks/ode_petab.py's
sets, times, rtol 1e-6 / atol 1e-12) with rodas4, 10^5 members: `sbmlgpu.run(...,
summary=True)` on GPU 0 with --scaled-atol on and off, alternating, the best of three
after a warm-up; steps and failures of each."""

import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from benchmarks.ode_cpu_methods import _folder  # noqa: E402
from benchmarks.ode_petab import ATOL, POINTS, RTOL, end_time, parameter_sets, petab_problem  # noqa: E402


def timed(network, times, sets, options):
    import sbmlgpu

    best, result = {}, {}
    for scaled in (True, False):  # warm-up (compile)
        sbmlgpu.run(network, times=times, parameters=sets, summary=True, device=[0],
                    options={**options, "scaled_atol": scaled}, progress=False)
    for _ in range(3):
        for scaled in (True, False):
            started = time.perf_counter()
            r = sbmlgpu.run(network, times=times, parameters=sets, summary=True, device=[0],
                            options={**options, "scaled_atol": scaled}, progress=False)
            wall = time.perf_counter() - started
            best[scaled] = min(best.get(scaled, np.inf), wall)
            result[scaled] = r
    return {("on" if s else "off"): {"s": round(best[s], 4),
                                      "steps_mean": round(result[s].metadata["steps_mean"], 1),
                                      "failed": int(np.sum(result[s].status != 0))}
            for s in (True, False)}


def main() -> None:
    import sbmlgpu

    lorenz = sbmlgpu.load(str(ROOT / "sbml_models" / "lorenz.xml"))
    row = timed(lorenz, np.linspace(0, 1, 11), {"rho": np.linspace(0, 21, 10**6)},
                {"method": "dopri5", "rtol": 1e-8, "atol": 1e-8})
    print(json.dumps({"model": "lorenz", "n": 10**6, "method": "dopri5", **row}), flush=True)
    for name in sys.argv[1].split(",") if len(sys.argv) > 1 else ():
        problem = petab_problem(_folder(name))
        network = sbmlgpu.load(str(problem["sbml"]))
        condition, sets, _ = parameter_sets(problem, network, 10**5)
        times = np.linspace(0.0, end_time(problem, condition), POINTS)
        row = timed(network, times, sets, {"method": "rodas4", "rtol": RTOL, "atol": ATOL})
        print(json.dumps({"model": name, "n": 10**5, "method": "rodas4", **row}), flush=True)


if __name__ == "__main__":
    main()
