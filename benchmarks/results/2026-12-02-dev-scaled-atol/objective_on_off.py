#!/usr/bin/env python3
"""Scratch (issue 13): --scaled-atol on a PEtab problem's objective (preequilibrations
included: their end states start the main runs, and states left at noise level there
get per-state tolerances), CPU path.

    python3 benchmarks/results/2026-12-02-dev-scaled-atol/objective_on_off.py N PROBLEM[,...] [METHOD]

N sets (benchmarks/petab_objective.py's sampler, seed 0), rtol 1e-6 / atol 1e-12, the
objective with the option on and off: seconds, statuses, and the sets whose NLL
moved by more than 1e-3 (relative, as that benchmark's agreement). METHOD (default
auto): on the CPU path auto's choice between rodas4 and bdf is a timed trial, which
the machine's load can tip, so a comparison that should see the option alone names
the method."""

import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from benchmarks.petab_objective import ATOL, RTOL  # noqa: E402
from benchmarks.petab_objective import problem_folders  # noqa: E402
from benchmarks.ode_petab import DEFAULT_ROOT  # noqa: E402


def main() -> None:
    from sbmlgpu.petab import objective
    from sbmlgpu.petab.values import sampled_sets

    n = int(sys.argv[1])
    method = sys.argv[3] if len(sys.argv) > 3 else "auto"
    for folder in problem_folders(Path(DEFAULT_ROOT), sys.argv[2]):
        yaml = next(folder.glob("*.yaml"))
        row, nll, status = {"problem": folder.name, "n": n, "method": method}, {}, {}
        for scaled in (True, False):
            key = "on" if scaled else "off"
            started = time.perf_counter()
            prepared = objective(yaml, device="cpu",
                                 options={"rtol": RTOL, "atol": ATOL, "scaled_atol": scaled,
                                          "method": method})
            result = prepared.evaluate(sampled_sets(prepared.problem, n, 0))
            nll[key], status[key] = result.nll, result.status
            row[key] = {"s": round(time.perf_counter() - started, 1),
                        "failed": int(np.sum(result.status != 0)), "chosen": result.method}
        both = (status["on"] == 0) & (status["off"] == 0)
        diff = np.abs(nll["on"][both] - nll["off"][both]) / np.maximum(np.abs(nll["off"][both]), 1)
        row["compared"] = int(both.sum())
        row["moved_1e-3"] = int(np.sum(diff > 1e-3))
        row["largest_rel_change"] = float(diff.max()) if diff.size else None
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
