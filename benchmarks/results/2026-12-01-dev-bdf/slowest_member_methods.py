import sys, time, numpy as np
sys.path.insert(0, "/work/main")
from benchmarks.ode_petab import ATOL, POINTS, RTOL, end_time, parameter_sets, petab_problem, DEFAULT_ROOT
import sbmlgpu
name, member = sys.argv[1], int(sys.argv[2])
problem = petab_problem(DEFAULT_ROOT / name)
network = sbmlgpu.load(str(problem["sbml"]))
condition, sets, _ = parameter_sets(problem, network, 1000)
t_end = end_time(problem, condition)
times = np.linspace(0.0, t_end, POINTS)
one = {k: np.asarray(v)[member:member + 1] for k, v in sets.items()}
res = {}
for method in ("rodas4", "bdf"):
    for i in range(2):
        t = time.perf_counter()
        r = sbmlgpu.run(network, times=times, parameters=one, options={"method": method, "rtol": RTOL, "atol": ATOL}, device="cpu", progress=False)
        w = time.perf_counter() - t
    res[method] = r
    print(method, round(w, 4), "s", r.metadata.get("steps_max"), r.status)
a, b = res["rodas4"].data[0], res["bdf"].data[0]
print("max rel diff", np.nanmax(np.abs(a - b) / (np.abs(a) + 1e-6)))
