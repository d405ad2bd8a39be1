#!/usr/bin/env python3
# Scratch (issue 13, seventh session), kept for the figures of docs/benchmarks.md that cite it:
# the members an ensemble's first pass (bdf, --pass-steps 10,000) leaves past its budget,
# how many output times each reached, and each alone with bdf (CPU path).
#   python second_pass_members.py MODEL N     (from anywhere; the repository is found)
import sys, time, warnings; warnings.simplefilter("ignore")
from pathlib import Path; sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
import numpy as np
from benchmarks.ode_petab import ATOL, DEFAULT_ROOT, POINTS, RTOL, end_time, parameter_sets, petab_problem
import sbmlgpu
from sbmlgpu.results import Status
name = sys.argv[1]; n = int(sys.argv[2])
problem = petab_problem(DEFAULT_ROOT / name)
network = sbmlgpu.load(str(problem["sbml"]))
condition, sets, _ = parameter_sets(problem, network, n)
t_end = end_time(problem, condition)
times = np.linspace(0.0, t_end, POINTS)
first = {"method": "bdf", "rtol": RTOL, "atol": ATOL, "max_steps": 10000, "pass_steps": 0}
r = sbmlgpu.run(network, times=times, parameters=sets, options=first, device="cpu", progress=False)
slow = np.flatnonzero(r.status == int(Status.max_steps))
valid = np.isfinite(r.data[slow, :, 0]).sum(axis=1)
print("paused", len(slow), list(zip(slow.tolist(), valid.tolist())))
opts = {"method": "bdf", "rtol": RTOL, "atol": ATOL}
rows = []
for j in slow:
    one = {k: (np.asarray(v)[j:j+1] if np.size(v) > 1 else v) for k, v in sets.items()}
    sbmlgpu.run(network, times=times, parameters=one, options=opts, device="cpu", progress=False)
    t = time.perf_counter()
    q = sbmlgpu.run(network, times=times, parameters=one, options=opts, device="cpu", progress=False)
    rows.append((int(j), time.perf_counter() - t, q.metadata["steps_max"], Status(int(q.status[0])).name))
for row in rows: print(row)
np.save(f"/tmp/elo/{name}_second.npy", np.array([(a, b, c) for a, b, c, _ in rows]))
