"""GPU: the delay test's ensemble (lagged feedback, tau uniform 0.3-1.7, dopri5 rtol 1e-8)
with lanes that refill and with one member per thread, each against the host build."""
import sys
import numpy as np
sys.path.insert(0, ".")
from tests.test_ode_delay_ring import lagged_feedback
from sbmlgpu.api import run
from sbmlgpu import runtime
from sbmlgpu.ode.delays import MAX_HISTORY_BYTES

net = lagged_feedback()
n = 20000
taus = np.random.default_rng(7).uniform(0.3, 1.7, n)
times = np.linspace(0.0, 5.0, 11)
dev = [runtime.get_devices()[0].index]
base = {"method": "dopri5", "rtol": 1e-8, "atol": 1e-10}
for nodes in (None, MAX_HISTORY_BYTES // 24):
    extra = {} if nodes is None else {"history_nodes": nodes}
    res = {}
    for refill in (True, False):
        res[refill] = run(net, "ode", times=times, parameters={"tau": taus},
                          options={**base, "lane_refill": refill, **extra}, device=dev, progress=False)
    host = run(net, "ode", times=times, parameters={"tau": taus},
               options={**base, "cpu_engine": "native", **extra}, device="cpu", progress=False)
    for refill, r in res.items():
        gap = np.abs(r.data - host.data) / (1e-8 + 1e-6 * np.abs(host.data))
        per = gap.reshape(n, -1).max(axis=1)
        w = int(per.argmax())
        print(f"nodes {nodes} refill {refill} lanes {r.metadata.get('lanes')} max gap {gap.max():.3g} "
              f"members over 1: {int((per > 1).sum())} worst {w} tau {taus[w]:.4f} "
              f"steps gpu {r.metadata.get('steps_max')} ok {int(r.ok.sum())}")
    print("refill == plain:", np.array_equal(res[True].data, res[False].data, equal_nan=True),
          "status:", np.array_equal(res[True].status, res[False].status), flush=True)
