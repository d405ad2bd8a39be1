#!/usr/bin/env python3
"""Scratch (issue 13): libRoadRunner's absolute tolerance of each state, on
Beer_MolBioSystems2014 at atol 1e-12, for several init_Bac (the first state, Bac):
its CVODE integrator scales a scalar atol by each state's initial value.

    python3 benchmarks/results/2026-12-02-dev-scaled-atol/rr_atol.py
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
import roadrunner  # noqa: E402

from tests.shared_data import MODELS  # noqa: E402

path = MODELS / "petab-benchmark" / "Beer_MolBioSystems2014" / "model_Beer_MolBioSystems2014.xml"
rr = roadrunner.RoadRunner(str(path))
rr.integrator.relative_tolerance = 1e-6
rr.integrator.absolute_tolerance = 1e-12
print("roadrunner", roadrunner.__version__, "species", rr.model.getFloatingSpeciesIds())
for init in (None, 6.9e-20, 0.0, 1e-3, 1e3):
    if init is not None:
        rr.setValue("init_Bac", init)
        rr.reset()
    print("init_Bac", init, "amounts", list(rr.model.getFloatingSpeciesAmounts()),
          "atol", [float(v) for v in rr.integrator.getAbsoluteToleranceVector()])
