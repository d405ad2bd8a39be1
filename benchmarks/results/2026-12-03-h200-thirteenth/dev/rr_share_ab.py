import sys
sys.path.insert(0, 'benchmarks'); sys.path.insert(0, '.')
import petab_objective as NEW
import _old_po_tmp as OLD
from tests.shared_data import MODELS
from sbmlgpu.petab import objective
from sbmlgpu.petab.values import sampled_sets
if __name__ == "__main__":
    for name in sys.argv[1:]:
        yaml = MODELS / 'petab-benchmark' / name / f'{name}.yaml'
        prepared = objective(yaml, device='cpu')
        sets = sampled_sets(prepared.problem, 20000, 0)
        for label, mod in (("old", OLD), ("new", NEW), ("old", OLD), ("new", NEW)):
            r = mod.roadrunner(yaml, sets, 2, 4.0)
            print(name, label, "sets %d in %.2f s: %.0f sets/s" % (r["sets"], r["seconds"], r["sets_per_s"]), flush=True)
