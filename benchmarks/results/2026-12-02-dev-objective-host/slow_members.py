#!/usr/bin/env python3
# Scratch (issue 13, fifth session), kept for the figures of docs/benchmarks.md that cite it.
"""Crauste's members past --pass-steps in the benchmark's 10^5 sets: which, and what
bdf and rodas4 do with each alone (CPU path)."""
import sys, time, warnings; warnings.simplefilter("ignore")
from pathlib import Path; sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
import numpy as np
from tests.shared_data import MODELS
import sbmlgpu.api as api
from sbmlgpu.petab import objective
from sbmlgpu.petab.values import sampled_sets

name = sys.argv[1]; n = int(sys.argv[2])
yaml = MODELS / "petab-benchmark" / name / f"{name}.yaml"
prep = objective(yaml, device="cpu", options={"rtol": 1e-6, "atol": 1e-12, "method": "rodas4", "max_steps": 10000, "pass_steps": 10000})
sets = sampled_sets(prep.problem, n, 0)
t = time.perf_counter(); r = prep.evaluate(sets); print("capped pass", time.perf_counter() - t)
from sbmlgpu.results import Status
slow = np.flatnonzero(r.status == int(Status.max_steps))
print("status", dict(zip(*np.unique(r.status, return_counts=True))), "slow", len(slow))
np.save(f"/tmp/{name}_slow.npy", slow)
sub = {k: (v[slow] if np.ndim(v) and len(v) == n else v) for k, v in sets.items()}
for method in ("rodas4", "bdf"):
    p2 = objective(yaml, device="cpu", options={"rtol": 1e-6, "atol": 1e-12, "method": method})
    for j in range(len(slow)):
        one = {k: (v[j:j+1] if np.ndim(v) else v) for k, v in sub.items()}
        t = time.perf_counter(); q = p2.evaluate(one); dt = time.perf_counter() - t
        print(method, int(slow[j]), Status(int(q.status[0])).name, f"{dt:.3f}s", float(q.nll[0]))
