# the fallback members of an H200 run (their ids from its JSON), each alone with rodas4 on one core of the development machine:
# python fallback_on_one_core.py MODEL N JSON [METHOD, default rodas4] (run from the repository root; OMP_NUM_THREADS=1)
import sys, time, json, numpy as np, os
os.environ["OMP_NUM_THREADS"] = "1"
sys.path.insert(0, "."); 
import sbmlgpu
from benchmarks.ode_petab import petab_problem, parameter_sets, end_time, POINTS, RTOL, ATOL, DEFAULT_ROOT
name, n, js = sys.argv[1], int(sys.argv[2]), sys.argv[3]
METHOD = sys.argv[4] if len(sys.argv) > 4 else "rodas4"
d = json.load(open(js))
row = [r for r in d["models"][0]["methods"] if r["method"] == "auto"][0]
members = row["second_pass_fallback"]["members"]
problem = petab_problem(DEFAULT_ROOT / name)
network = sbmlgpu.load(str(problem["sbml"]))
condition, sets, _ = parameter_sets(problem, network, n)
times = np.linspace(0.0, end_time(problem, condition), POINTS)
secs = []
for m in members:
    one = {k: np.asarray(v)[m:m+1] for k, v in sets.items()}
    for method in (METHOD,):
        for rep in range(2 if not secs else 1):
            t = time.perf_counter()
            r = sbmlgpu.run(network, times=times, parameters=one, options={"method": method, "rtol": RTOL, "atol": ATOL, "pass_steps": 0}, device="cpu", progress=False)
            w = time.perf_counter() - t
    secs.append(w)
    print(m, f"{w:.3f}", r.metadata["steps_max"], int(r.status[0]), flush=True)
secs = np.array(secs)
print(f"{name}: {len(secs)} members, {METHOD} on one core: sum {secs.sum():.2f} s, max {secs.max():.2f} s; on 16 threads at least {max(secs.max(), secs.sum()/16):.2f} s")
