"""Diagnostic (kept with its log): per-member steps of a PEtab objective on the CPU path
(the steps the GPU takes too) and the list schedule over lanes that refill, in steps:
member order against longest first. Usage: python list_schedule_in_steps.py PROBLEM SETS
(the lanes: 33,792 of the H200 at 10^5 sets, scaled to SETS)."""
import sys, time, json
import numpy as np
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.shared_data import MODELS
from sbmlgpu.plugins.ode import program as prog, bundling
from sbmlgpu.schedule import refill_makespan, bundle
from sbmlgpu.petab import objective
from sbmlgpu.petab.values import sampled_sets

captured = []
orig = prog.OdeProgram._run
def _run(self, task, scheduler, profiler):
    r = orig(self, task, scheduler, profiler)
    captured.append((np.asarray(self.last_steps).copy(), task))
    return r
prog.OdeProgram._run = _run

name, nsets, lanes_full, full_sets = sys.argv[1], int(sys.argv[2]), 33792, 100000
lanes = max(1, round(lanes_full * nsets / full_sets))
yaml = MODELS / "petab-benchmark" / name / f"{name}.yaml"
p = objective(yaml, device="cpu", options={"rtol": 1e-6, "atol": 1e-12})
sets = sampled_sets(p.problem, nsets, 0)
t = time.time(); p.evaluate(sets); print(name, "eval", time.time() - t, "s")
for steps, task in captured:
    c = np.maximum(steps.astype(float), 1)
    n = c.size
    if n <= lanes * nsets / nsets and n <= lanes: 
        print("  n", n, "<= lanes", lanes); continue
    un = refill_makespan(c, lanes); lpt = refill_makespan(c, lanes, bundle(c))
    fluid = float(np.max((np.cumsum(c) - c) / lanes + c)); ideal = max(c.max(), c.sum() / lanes)
    print(f"  n {n} lanes {lanes} mean {c.mean():.0f} max {c.max():.0f} share {c.sum()/lanes:.0f} "
          f"sim unordered {un:.0f} true-LPT {lpt:.0f} gain {un/lpt:.2f}; fluid {fluid:.0f}/ideal {ideal:.0f} = {fluid/ideal:.2f}")
