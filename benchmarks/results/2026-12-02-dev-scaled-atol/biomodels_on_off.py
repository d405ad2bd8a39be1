#!/usr/bin/env python3
"""Scratch (issue 13): the BioModels of ../shared/models/biomodels, rodas4 on the CPU path
over [0, 100] (101 points), --scaled-atol on and off: statuses, the largest member's steps,
and the largest relative change of the outputs (those above 1e-9).

    python3 benchmarks/results/2026-12-02-dev-scaled-atol/biomodels_on_off.py
"""
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from tests.shared_data import MODELS  # noqa: E402


def main() -> None:
    import sbmlgpu

    for path in sorted((MODELS / "biomodels").glob("*.xml")):
        net = sbmlgpu.load(str(path))
        res = {s: sbmlgpu.run(net, end=100, points=101, device="cpu", progress=False,
                              options={"method": "rodas4", "scaled_atol": s})
               for s in (True, False)}
        a, b = res[True].data, res[False].data
        big = (np.abs(a) > 1e-9) | (np.abs(b) > 1e-9)
        with np.errstate(all="ignore"):
            rel = np.where(big, np.abs(a - b) / np.maximum(np.abs(a), np.abs(b)), 0.0)
        print(path.name, " | ".join(f"{'on' if s else 'off'}: status {r.status.tolist()} "
                                    f"steps {r.metadata['steps_max']}" for s, r in res.items()),
              f"| largest rel change {np.nanmax(rel):.1e}", flush=True)


if __name__ == "__main__":
    main()
