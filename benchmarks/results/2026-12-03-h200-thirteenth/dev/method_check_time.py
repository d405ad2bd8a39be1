import sys, time, cProfile, pstats
sys.path.insert(0, 'benchmarks'); sys.path.insert(0, '.')  # run from the repository root
import numpy as np
from pathlib import Path
import ode_petab as B
import sbmlgpu
from sbmlgpu.api import execute, time_course
from sbmlgpu.plugins.ode import stiffness
name = sys.argv[1]; n = int(sys.argv[2]) if len(sys.argv) > 2 else 100000
folder = B.MODELS / 'petab-benchmark' / name if hasattr(B, 'MODELS') else None
problem = B.petab_problem(folder)
network = sbmlgpu.load(str(problem['sbml']))
condition, sets, nominal = B.parameter_sets(problem, network, n)
t_end = B.end_time(problem, condition)
times = np.linspace(0.0, t_end, B.POINTS)
class Stop(Exception): pass
orig = stiffness.choose_method
def timed(*a, **k):
    pr = cProfile.Profile(); t = time.perf_counter(); pr.enable()
    r = orig(*a, **k)
    pr.disable(); dt = time.perf_counter() - t
    print(name, 'choose_method %.3f s' % dt, r)
    if '--prof' in sys.argv:
        pstats.Stats(pr).sort_stats('cumulative').print_stats(25)
    raise Stop
stiffness.choose_method = timed
import sbmlgpu.plugins.ode.program as P
task = time_course(times=times, parameters=sets, progress=False)
for rep in range(2):
    try:
        execute(network, task, 'ode', device='cpu', options={'method': 'auto', 'rtol': B.RTOL, 'atol': B.ATOL})
    except Stop:
        pass
