"""Each state's absolute tolerance from the member's initial state (--scaled-atol).

A state whose initial value is nonzero but below atol / rtol is held to
rtol x |its initial value| instead of atol (never looser than atol, never below
FLOOR). Under atol alone such a value is noise to the error control; where it grows by
many orders (Beer_MolBioSystems2014's Bac, from init_Bac ~ 1e-20 in its PEtab bounds,
grows logistically to ~1e-3), rodas4's and bdf's long steps gave it a wrong growth
factor, even a sign change. libRoadRunner scales its absolute tolerance by each
state's initial value too (more strongly: atol x |x0|).

The kernels do the same in templates/adaptive.cuh (ode_start_atol, ODE_ATOL_FLOOR);
this is the numpy form for the CPU engines and the reference. numpy only.
"""

from __future__ import annotations

import numpy as np

#: the smallest per-state tolerance in double: (error / weight)^2 stays finite for
#: errors up to 1 (templates/prelude.cuh's ODE_ATOL_FLOOR)
FLOOR = 1e-150


def start_atol(x0: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    """The absolute tolerances of states starting at `x0` (any shape: states first,
    members after), as the kernels set them."""
    x0 = np.asarray(x0, dtype=float)
    scaled = rtol * np.abs(x0)  # 0 where it underflows: then FLOOR
    with np.errstate(invalid="ignore"):
        tighter = (x0 != 0) & (scaled < atol)  # NaN compares false: atol
    return np.where(tighter, np.maximum(scaled, FLOOR), atol)
