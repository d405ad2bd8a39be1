#!/usr/bin/env python3
"""Scratch (issue 13): what --scaled-atol costs and changes on the PEtab models.

    python3 benchmarks/results/2026-12-02-dev-scaled-atol/steps.py N MODEL[,MODEL...]

Each model's N PEtab-sampled members (benchmarks/ode_petab.py's sets, first
condition, times and tolerances rtol 1e-6 / atol 1e-12) on the CPU path with rodas4,
--scaled-atol on and off: members whose initial state has a nonzero value below
atol / rtol, total steps, failures, and how far the outputs move (largest relative
difference over outputs above 1e-9, and the members moved by more than 1e-3)."""

import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from benchmarks.ode_cpu_methods import _folder  # noqa: E402
from benchmarks.ode_petab import ATOL, POINTS, RTOL, end_time, parameter_sets, petab_problem  # noqa: E402


def main() -> None:
    import sbmlgpu

    n, names = int(sys.argv[1]), sys.argv[2].split(",")
    for name in names:
        problem = petab_problem(_folder(name))
        network = sbmlgpu.load(str(problem["sbml"]))
        condition, sets, _ = parameter_sets(problem, network, n)
        times = np.linspace(0.0, end_time(problem, condition), POINTS)
        row = {"model": name}
        results = {}
        for scaled in (False, True):
            options = {"method": "rodas4", "rtol": RTOL, "atol": ATOL, "scaled_atol": scaled,
                       "pass_steps": 0}
            started = time.perf_counter()
            r = sbmlgpu.run(network, times=times, parameters=sets, options=options,
                            device="cpu", progress=False)
            key = "on" if scaled else "off"
            results[key] = r
            row[key] = {"s": round(time.perf_counter() - started, 2),
                        "failed": int(np.sum(r.status != 0)),
                        "steps_mean": round(r.metadata["steps_mean"], 1),
                        "steps_max": r.metadata["steps_max"]}
        a, b = results["off"].data, results["on"].data
        ok = (results["off"].status == 0) & (results["on"].status == 0)
        big = (np.abs(a) > 1e-9) | (np.abs(b) > 1e-9)
        with np.errstate(all="ignore"):
            rel = np.where(big, np.abs(a - b) / np.maximum(np.abs(a), np.abs(b)), 0.0)
        rel = np.nan_to_num(rel[ok], nan=0.0)
        per_member = rel.reshape(rel.shape[0], -1).max(axis=1) if rel.size else rel
        row["largest_rel_change"] = float(per_member.max()) if per_member.size else None
        row["members_moved_1e-3"] = int(np.sum(per_member > 1e-3))
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
