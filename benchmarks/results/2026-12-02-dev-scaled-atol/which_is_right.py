#!/usr/bin/env python3
"""Scratch (issue 13): where --scaled-atol moves a PEtab model's outputs, which of the
two is right? The members of steps.py (N sets, rodas4, rtol 1e-6 / atol 1e-12) with it
on and off, against the same members at rtol 1e-10 / atol 1e-20 (off): each member's
largest relative error (outputs above 1e-9), for the members the two settings differ
on by more than 1e-3.

    python3 benchmarks/results/2026-12-02-dev-scaled-atol/which_is_right.py N MODEL
"""
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from benchmarks.ode_cpu_methods import _folder  # noqa: E402
from benchmarks.ode_petab import POINTS, end_time, parameter_sets, petab_problem  # noqa: E402


def rel(a, b):
    big = (np.abs(a) > 1e-9) | (np.abs(b) > 1e-9)
    with np.errstate(all="ignore"):
        r = np.where(big, np.abs(a - b) / np.maximum(np.abs(a), np.abs(b)), 0.0)
    return np.nan_to_num(r, nan=np.inf).reshape(r.shape[0], -1).max(axis=1)


def main() -> None:
    import sbmlgpu

    n, name = int(sys.argv[1]), sys.argv[2]
    problem = petab_problem(_folder(name))
    network = sbmlgpu.load(str(problem["sbml"]))
    condition, sets, _ = parameter_sets(problem, network, n)
    times = np.linspace(0.0, end_time(problem, condition), POINTS)

    def run(rtol, atol, scaled):
        return sbmlgpu.run(network, times=times, parameters=sets, device="cpu", progress=False,
                           options={"method": "rodas4", "rtol": rtol, "atol": atol,
                                    "scaled_atol": scaled, "pass_steps": 0})

    on, off, tight = run(1e-6, 1e-12, True), run(1e-6, 1e-12, False), run(1e-10, 1e-20, False)
    ok = (on.status == 0) & (off.status == 0) & (tight.status == 0)
    moved = ok & (rel(on.data, off.data) > 1e-3)
    e_on, e_off = rel(on.data, tight.data), rel(off.data, tight.data)
    print(json.dumps({"model": name, "members": n, "all_ok": int(ok.sum()),
                      "moved_1e-3": int(moved.sum()),
                      "moved_error_on": [float(f"{v:.2e}") for v in e_on[moved]],
                      "moved_error_off": [float(f"{v:.2e}") for v in e_off[moved]],
                      "largest_error_on": float(f"{e_on[ok].max():.2e}"),
                      "largest_error_off": float(f"{e_off[ok].max():.2e}")}))


if __name__ == "__main__":
    main()
