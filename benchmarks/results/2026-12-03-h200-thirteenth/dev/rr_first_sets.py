import sys, time
sys.path.insert(0, 'benchmarks'); sys.path.insert(0, '.')
import numpy as np
import petab_objective as B
from tests.shared_data import MODELS
from sbmlgpu.petab import objective
from sbmlgpu.petab.values import sampled_sets
for name in sys.argv[1:]:
    yaml = MODELS / 'petab-benchmark' / name / f'{name}.yaml'
    prepared = objective(yaml, device='cpu')
    sets = sampled_sets(prepared.problem, 60, 0)
    B._init(str(yaml))
    t = time.perf_counter(); B._work(B._take(sets, np.arange(3))); first3 = (time.perf_counter() - t) / 3
    t = time.perf_counter(); B._work(B._take(sets, np.arange(3, 6))); next3 = (time.perf_counter() - t) / 3
    t = time.perf_counter(); B._work(B._take(sets, np.arange(6, 46))); next40 = (time.perf_counter() - t) / 40
    print(name, 'per set: first 3 %.5f, next 3 %.5f, next 40 %.5f' % (first3, next3, next40), flush=True)
