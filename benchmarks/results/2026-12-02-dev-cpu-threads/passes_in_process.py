# The CPU path on one PEtab model, 1,000 members (issue 13), three in-process runs: wall time, method, passes.
#   python benchmarks/results/2026-12-02-dev-cpu-threads/passes_in_process.py [MODEL [METHOD [OPTION=VALUE ...]]]
# (from the repository root; default Elowitz_Nature2000, auto).
import sys, time, os
import numpy as np
sys.path.insert(0, ".")
import sbmlgpu
from benchmarks.ode_petab import (ATOL, DEFAULT_ROOT, POINTS, RTOL, end_time, parameter_sets, petab_problem)
name = sys.argv[1] if len(sys.argv) > 1 else "Elowitz_Nature2000"
method = sys.argv[2] if len(sys.argv) > 2 else "auto"
extra = dict(a.split("=") for a in sys.argv[3:])
extra = {k: int(v) if v.isdigit() else v for k, v in extra.items()}
problem = petab_problem(DEFAULT_ROOT / name)
network = sbmlgpu.load(str(problem["sbml"]))
condition, sets, _ = parameter_sets(problem, network, 1000)
times = np.linspace(0.0, end_time(problem, condition), POINTS)
options = {"method": method, "rtol": RTOL, "atol": ATOL, **extra}
for rep in range(3):
    t0 = time.perf_counter()
    run = sbmlgpu.run(network, times=times, parameters=sets, options=options, device="cpu", progress=False)
    dt = time.perf_counter() - t0
    m = run.metadata
    print(f"{dt:.3f} s method {m['method']} first {m.get('first_pass_seconds')} second {m.get('second_pass_members')} {m.get('second_pass_seconds')} threads {m.get('second_pass_threads')} steps {m.get('second_pass_steps')} later {m.get('later_passes')} fails {(np.asarray(run.status)!=0).sum()}")
