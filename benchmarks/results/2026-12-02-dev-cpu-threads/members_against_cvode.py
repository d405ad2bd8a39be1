# Elowitz_Nature2000, 1,000 PEtab-sampled members (benchmarks/ode_petab.py helpers): our bdf one member at a time
# against libRoadRunner (CVODE) one member at a time on one core, for its 25 slowest members and member 550.
#   python benchmarks/results/2026-12-02-dev-cpu-threads/members_against_cvode.py
import sys, time
import numpy as np
sys.path.insert(0, ".")
import sbmlgpu
from benchmarks.ode_petab import (ATOL, DEFAULT_ROOT, POINTS, RTOL, end_time, parameter_sets,
                                  petab_problem, rr_selections)
import benchmarks.ode_petab as op
name = "Elowitz_Nature2000"
problem = petab_problem(DEFAULT_ROOT / name)
network = sbmlgpu.load(str(problem["sbml"]))
condition, sets, _ = parameter_sets(problem, network, 1000)
t_end = end_time(problem, condition)
times = np.linspace(0.0, t_end, POINTS)
options = {"method": "bdf", "rtol": RTOL, "atol": ATOL, "pass_steps": 0}
run = sbmlgpu.run(network, times=times, parameters=sets, options=options, device="cpu", progress=False)
steps = np.asarray(run.metadata.get("steps"))
op._rr_init(problem["sbml"].read_text())
ids = list(sets)
names = rr_selections(network, ids)
table = np.column_stack([np.asarray(sets[k], float) for k in ids])
outputs = rr_selections(network, list(run.arrays()["ids"]))
rr_t = np.zeros(len(table)); rr_fail = np.zeros(len(table), bool)
for i, row in enumerate(table):
    s, f, _ = op._rr_simulate((names, row[None], t_end, outputs))
    rr_t[i] = s; rr_fail[i] = f > 0
print("RR total", rr_t.sum(), "fails", rr_fail.sum())
ours_status = np.asarray(run.status)
print("ours bdf fails", (ours_status != 0).sum(), "both fail", ((ours_status != 0) & rr_fail).sum())
order = np.argsort(-rr_t)[:25]
one_opts = dict(options)
res = []
for i in sorted(set(order) | {550}):
    one = {k: np.asarray(v)[i:i+1] for k, v in sets.items()}
    t0 = time.perf_counter()
    r = sbmlgpu.run(network, times=times, parameters=one, options=one_opts, device="cpu", progress=False)
    dt = time.perf_counter() - t0
    print(f"member {i}: RR {rr_t[i]*1e3:8.1f} ms fail={rr_fail[i]}  ours bdf {dt*1e3:8.1f} ms steps {r.metadata['steps_max']} status {int(r.status[0])}")
