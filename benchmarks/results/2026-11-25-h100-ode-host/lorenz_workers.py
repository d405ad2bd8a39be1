"""Experiment: k worker threads on one GPU (the scheduler given the device k times)."""
import numpy as np, time, sys, statistics
import sbmlgpu
from sbmlgpu import api
from sbmlgpu.schedule import Scheduler
from sbmlgpu.api import execute, time_course
net = sbmlgpu.load("sbml_models/lorenz.xml")
M = 10_000_000
p = {"rho": np.linspace(0, 21, M)}
opts = {"method": "rk4", "dt": 1e-3, "precision": "double"}
ref = None
def go(k):
    api.Scheduler = lambda devices, **kw: Scheduler(devices=list(devices) * k, **kw)
    task = time_course(times=np.array([0.0, 1.0]), parameters=p, n=M, progress=False)
    return execute(net, task, "ode", options=opts, device=[0])
for k in (1, 2, 3):
    go(k)
for rnd in range(2):
    for k in (1, 2, 3):
        ts = []
        for i in range(5):
            t = time.perf_counter(); o = go(k); ts.append(time.perf_counter() - t)
            if ref is None:
                ref = np.array(o.result.data, copy=True)
            elif i == 0:
                same = np.array_equal(np.asarray(o.result.data), ref)
            o = None
        print(f"round {rnd} workers {k}: median {statistics.median(ts):.4f} min {min(ts):.4f}",
              "identical" if k == 1 and rnd == 0 else f"identical {same}", flush=True)
