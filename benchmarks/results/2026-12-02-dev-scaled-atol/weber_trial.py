#!/usr/bin/env python3
"""Scratch (issue 13): Weber_BMC2015's objective, N sets (seed 0), CPU path, rtol 1e-6 /
atol 1e-12, with --method auto (the trial that counts failures, b6c6561), rodas4, bdf:
failed sets of each.

    python3 benchmarks/results/2026-12-02-dev-scaled-atol/weber_trial.py [N]
"""
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from benchmarks.petab_objective import ATOL, DEFAULT_ROOT, RTOL  # noqa: E402


def main() -> None:
    from sbmlgpu.petab import objective
    from sbmlgpu.petab.values import sampled_sets

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 600
    yaml = next((DEFAULT_ROOT / "Weber_BMC2015").glob("*.yaml"))
    for method in ("auto", "rodas4", "bdf"):
        prepared = objective(yaml, device="cpu",
                             options={"rtol": RTOL, "atol": ATOL, "method": method})
        result = prepared.evaluate(sampled_sets(prepared.problem, n, 0))
        print(f"Weber_BMC2015 {n} sets, --method {method}: failed "
              f"{int(np.sum(result.status != 0))}, method {result.method}", flush=True)


if __name__ == "__main__":
    main()
