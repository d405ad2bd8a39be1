"""Diagnostic (kept with its log): how far FMA contraction alone moves a method's values
on the host build (as nvcc contracts on the GPU). Run once plainly and once with
SBMLGPU_EXTRA_CXXFLAGS="-mfma -ffp-contract=fast", then compare:

    python fma_sensitivity.py METHOD OUT.npy     (each build)
    python fma_sensitivity.py --compare A.npy B.npy
SEIR, 512 members (tests/test_ode_gpu.py's seir_ensemble), default tolerances."""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
if sys.argv[1] == "--compare":
    a, b = np.load(sys.argv[2]), np.load(sys.argv[3])
    d = np.abs(a - b)
    print(f"max abs {d.max():.3g}, max rel {(d / (np.abs(a) + 1e-9)).max():.3g}, "
          f"share of the rtol 1e-5 / atol 1e-9 allowance {(d / (1e-9 + 1e-5 * np.abs(b))).max():.3g}")
    sys.exit(0)
from tests.ode_helpers import load, run_cpu  # noqa: E402
from tests.test_ode_gpu import seir_ensemble  # noqa: E402

result = run_cpu(load("seir_epidemic"), sys.argv[1], times=np.linspace(0, 160, 17),
                 parameters=seir_ensemble(512), dt=1e-2)
np.save(sys.argv[2], result.data)
