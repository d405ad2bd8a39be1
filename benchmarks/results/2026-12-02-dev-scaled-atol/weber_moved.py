#!/usr/bin/env python3
"""Scratch (issue 13): Weber_BMC2015's objective, 300 sets, rodas4, CPU path: --scaled-atol on and off
at rtol 1e-6 / atol 1e-12, and both at rtol 1e-10 / atol 1e-16; the sets whose NLL the option
moves by more than 1e-3, with the four NLLs."""
import sys, numpy as np
sys.path.insert(0, "/work/main")
from benchmarks.petab_objective import DEFAULT_ROOT
from sbmlgpu.petab import objective
from sbmlgpu.petab.values import sampled_sets
yaml = next((DEFAULT_ROOT / "Weber_BMC2015").glob("*.yaml"))
out = {}
for key, opts in (("on", {"rtol": 1e-6, "atol": 1e-12, "scaled_atol": True}),
                  ("off", {"rtol": 1e-6, "atol": 1e-12, "scaled_atol": False}),
                  ("tight_off", {"rtol": 1e-10, "atol": 1e-16, "scaled_atol": False}),
                  ("tight_on", {"rtol": 1e-10, "atol": 1e-16, "scaled_atol": True})):
    prep = objective(yaml, device="cpu", options={**opts, "method": "rodas4"})
    r = prep.evaluate(sampled_sets(prep.problem, 300, 0))
    out[key] = r
ok = np.all([out[k].status == 0 for k in out], axis=0)
d = np.abs(out["on"].nll - out["off"].nll) / np.maximum(np.abs(out["off"].nll), 1)
moved = np.flatnonzero(ok & (d > 1e-3))
print("moved", moved, "failed", {k: int(np.sum(out[k].status != 0)) for k in out})
for i in moved:
    print(i, {k: float(out[k].nll[i]) for k in out})
