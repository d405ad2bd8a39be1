"""Scratch (2026-12-02): one CPU-path run of N PEtab-sampled members of MODEL, --method auto;
its passes' seconds. python3 elowitz_cpu_path.py Elowitz_Nature2000 100000 (2-core dev machine)."""
import json, sys, time
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3]))
import numpy as np
import sbmlgpu
from benchmarks.ode_cpu_methods import _folder
from benchmarks.ode_petab import POINTS, RTOL, ATOL, end_time, parameter_sets, petab_problem
name, n = sys.argv[1], int(sys.argv[2])
problem = petab_problem(_folder(name))
network = sbmlgpu.load(str(problem["sbml"]))
condition, sets, _ = parameter_sets(problem, network, n)
times = np.linspace(0.0, end_time(problem, condition), POINTS)
t = time.perf_counter()
r = sbmlgpu.run(network, times=times, parameters=sets, options={"method": "auto", "rtol": RTOL, "atol": ATOL}, device="cpu", progress=False)
wall = time.perf_counter() - t
m = r.metadata
print(json.dumps({"wall_s": wall, "method": m.get("method"), "first_pass_s": m.get("first_pass_seconds"), "second_pass_members": m.get("second_pass_members"), "second_pass_s": m.get("second_pass_seconds"), "later_passes": m.get("later_passes"), "status": {str(k): int(v) for k, v in zip(*np.unique(r.status, return_counts=True))}}))
