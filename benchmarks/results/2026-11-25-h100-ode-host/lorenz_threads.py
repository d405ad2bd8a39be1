import numpy as np, time, sys, statistics
import sbmlgpu
from sbmlgpu.api import execute, time_course
net = sbmlgpu.load("sbml_models/lorenz.xml")
M = 10_000_000
p = {"rho": np.linspace(0, 21, M)}
def go(k):
    opts = {"method": "rk4", "dt": 1e-3, "precision": "double", "threads_per_gpu": k}
    task = time_course(times=np.array([0.0, 1.0]), parameters=p, n=M, progress=False)
    return execute(net, task, "ode", options=opts, device=[0])
for k in (1, 2, 3, 4):
    go(k)
for rnd in range(2):
    for k in (1, 2, 3, 4):
        ts = []
        for i in range(5):
            t = time.perf_counter(); o = go(k); ts.append(time.perf_counter() - t); o = None
        print(f"round {rnd} threads_per_gpu {k}: median {statistics.median(ts):.4f} min {min(ts):.4f}", flush=True)
