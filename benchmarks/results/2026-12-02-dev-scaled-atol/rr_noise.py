#!/usr/bin/env python3
"""Scratch (issue 13): libRoadRunner on tests/test_ode_scaled_atol.py's NOISE model (written to
/tmp/noise.xml first), rtol 1e-8 / atol 1e-10: its per-state tolerances and C."""
import roadrunner, numpy as np
rr = roadrunner.RoadRunner("/tmp/noise.xml")
rr.integrator.relative_tolerance = 1e-8
rr.integrator.absolute_tolerance = 1e-10
print("atol vector", list(rr.integrator.getAbsoluteToleranceVector()), rr.model.getStateVectorIds() if hasattr(rr.model, "getStateVectorIds") else "")
try:
    r = rr.simulate(0, 10, 11, selections=["time", "C"])
    print("C", np.asarray(r)[:, 1])
except Exception as exc:
    print("failed:", str(exc)[:300])
