import numpy as np, time, sys, statistics
import sbmlgpu
from sbmlgpu.api import execute, time_course
net = sbmlgpu.load(sys.argv[1])
M = 10_000_000
p = {"rho": np.linspace(0, 21, M)}
opts = {"method": "rk4", "dt": 1e-3, "precision": "double"}
def go():
    task = time_course(times=np.array([0.0, 1.0]), parameters=p, n=M, progress=False)
    return execute(net, task, "ode", options=opts, device=[0])
go()
ts = []
for i in range(int(sys.argv[2])):
    t = time.perf_counter(); o = go(); ts.append(time.perf_counter() - t); o = None
print(sys.argv[3], "median", round(statistics.median(ts), 4), "min", round(min(ts), 4), [round(t, 3) for t in ts])
