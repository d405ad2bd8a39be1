import cProfile, pstats, numpy as np, time, sys
import sbmlgpu
from sbmlgpu.api import execute, time_course
net = sbmlgpu.load("sbml_models/lorenz.xml")
M = 10_000_000
p = {"rho": np.linspace(0, 21, M)}
opts = {"method": "rk4", "dt": 1e-3, "precision": "double"}
def go():
    task = time_course(times=np.array([0.0, 1.0]), parameters=p, n=M, progress=False)
    return execute(net, task, "ode", options=opts, device=[0])
go(); o = None
for i in range(2):
    t=time.perf_counter(); o = go(); print("s", time.perf_counter()-t); o = None
pr = cProfile.Profile(); pr.enable(); t=time.perf_counter(); o = go(); print("s", time.perf_counter()-t); pr.disable()
st = pstats.Stats(pr); st.sort_stats("tottime").print_stats(30)
st.sort_stats("cumulative").print_stats(60)
