#!/usr/bin/env python3
"""Scratch (issue 13): one Beer_MolBioSystems2014 member where our objective and
libRoadRunner's disagree (set 1 of beer_tolerances.py's 200, condition typeIDT3_ExpID4): Bac starts
at init_Bac = 6.9e-20, far below atol, and grows as a logistic (rate beta = 3.5 after
tau) to Bacmax. rodas4 and bdf, with and without --max-step and a smaller atol: Bac at
the output times (dopri5 and libRoadRunner: 3.65e-19 at t = 0.5, 8.86e-4 from t = 15).

    python3 benchmarks/results/2026-12-02-dev-beer/beer_member.py
"""
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
import sbmlgpu  # noqa: E402
from tests.shared_data import MODELS  # noqa: E402

PARAMS = {'Bacmax': 0.0008859499456251082, 'beta': 3.5142061566188048, 'tau': 0.026511884316705536, 'kdegi': 461.7907207232345, 'kdim': 5.205059533749661, 'ksyn': 0.04603670880819588, 'init_Bac': 6.918381702212817e-20}
TIMES = np.array([0, 0.5, 1, 5, 15, 70.0])


def main() -> None:
    net = sbmlgpu.load(str(MODELS / "petab-benchmark" / "Beer_MolBioSystems2014"
                           / "model_Beer_MolBioSystems2014.xml"))
    for method in ("dopri5", "rodas4", "bdf"):
        for max_step in (0.0, 1.0, 0.3, 0.1):
            for atol in (1e-14, 1e-22):
                r = sbmlgpu.run(net, times=TIMES, parameters={k: np.array([v, v]) for k, v in PARAMS.items()},
                                options={"method": method, "rtol": 1e-10, "atol": atol,
                                         "max_step": max_step}, device="cpu", progress=False)
                bac = r.data[0, :, list(r.ids).index("Bac")]
                print(method, "max_step", max_step, "atol", atol, "status", int(r.status[0]),
                      "steps", r.metadata.get("steps_max"), np.array2string(bac, precision=3), flush=True)


if __name__ == "__main__":
    main()
