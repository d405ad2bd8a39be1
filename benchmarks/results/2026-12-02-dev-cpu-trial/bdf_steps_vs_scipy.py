# Steps of our bdf (native CPU path) against scipy's BDF on one PEtab member (issue 13):
#   python benchmarks/results/2026-12-02-dev-cpu-trial/bdf_steps_vs_scipy.py MODEL [N [MEMBER]]
# (from the repository root): the member of most bdf steps among benchmarks/ode_cpu_path.py's
# N (1,000) parameter sets (or MEMBER), then that member alone with our bdf and with scipy's BDF (the
# CPU reference, sbmlgpu.reference, method="BDF"), counting scipy's accepted steps.
import sys
import time
import numpy as np
sys.path.insert(0, ".")
import sbmlgpu
from benchmarks.ode_petab import (ATOL, DEFAULT_ROOT, POINTS, RTOL, end_time, parameter_sets,
                                  petab_problem)
from sbmlgpu import reference
from sbmlgpu.reference import timeloop
from sbmlgpu.views.ode import ode_system
from scipy.integrate import BDF

name = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
problem = petab_problem(DEFAULT_ROOT / name)
network = sbmlgpu.load(str(problem["sbml"]))
condition, sets, _ = parameter_sets(problem, network, n)
times = np.linspace(0.0, end_time(problem, condition), POINTS)
options = {"method": "bdf", "rtol": RTOL, "atol": ATOL, "pass_steps": 0}
run = sbmlgpu.run(network, times=times, parameters=sets, options=options, device="cpu",
                  progress=False)
member = int(sys.argv[3]) if len(sys.argv) > 3 else run.metadata["steps_max_member"]
one = {k: np.asarray(v)[member:member + 1] for k, v in sets.items()}
started = time.perf_counter()
ours = sbmlgpu.run(network, times=times, parameters=one, options=options, device="cpu",
                   progress=False)
print(f"{name} member {member}: our bdf {ours.metadata['steps_max']} steps "
      f"(status {int(ours.status[0])}), {time.perf_counter() - started:.3f} s")
count = [0]


class CountingBDF(BDF):
    def _step_impl(self):
        count[0] += 1
        return super()._step_impl()


timeloop.METHODS["BDF"] = CountingBDF
started = time.perf_counter()
traj = reference.simulate(reference.compile_model(ode_system(network)), times,
                          parameters={k: float(v[0]) for k, v in one.items()},
                          rtol=RTOL, atol=ATOL, method="BDF")
print(f"{name} member {member}: scipy BDF {count[0]} steps ({traj.status}), "
      f"{time.perf_counter() - started:.1f} s")
