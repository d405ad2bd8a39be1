"""Options of the `cme` backend (the task's own fields — bounds, initial state, tol —
are SteadyState's: sbmlgpu.tasks)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from sbmlgpu.backend import BackendOptions, option
from sbmlgpu.errors import OptionError

from .aggregation import DEFAULT_AGGREGATE, DEFAULT_COARSEST
from .solvers import SOLVERS, SolverSettings

#: storage formats of the off-diagonal part of the matrix on the GPU (formats.py)
FORMATS = ("dia+sell", "dia+ell", "ell", "csr")


@dataclass
class CmeOptions(BackendOptions):
    solver: str = option(
        "auto", "auto: IDR(s), then Jacobi if it stops short; idr: the Krylov method "
                "IDR(s) over Jacobi sweeps (short recurrences, 3s + 11 vectors); jacobi: "
                "Jacobi sweeps with periodic normalisation (Maggioni et al. 2013); "
                "aggregation: multilevel aggregation V-cycles", choices=SOLVERS)
    matrix_format: str = option(
        "dia+sell", "GPU storage of the matrix for Jacobi sweeps: DIA bands + warp-grained "
                    "sliced ELL, DIA + ELL, ELL, or CSR", choices=FORMATS)
    max_sweeps: int = option(1_000_000, "most Jacobi sweeps before giving up", minimum=1)
    max_cycles: int = option(5_000, "most aggregation V-cycles before giving up", minimum=1)
    max_seconds: float = option(math.inf, "wall-time limit of the solver in seconds",
                                minimum=0.0, infinite=True)
    check_every: int = option(100, "Jacobi sweeps between two normalisations and "
                                   "residual checks", minimum=1)
    aggregate: int = option(DEFAULT_AGGREGATE, "states per aggregate in the aggregation "
                                               "hierarchy", minimum=2)
    coarsest: int = option(DEFAULT_COARSEST, "the aggregation hierarchy's coarsest level, "
                                             "solved directly, has at most this many states",
                           minimum=1, maximum=8192)
    accelerate: int = option(0, "aggregation: V-cycle iterates combined by Anderson "
                                "acceleration (0 or 1: none; it halved the cycles on "
                                "small switches but cost 23 % more at 10^7 states, "
                                "docs/cme.md)", minimum=0, maximum=16)
    idr_shadow: int = option(4, "idr: s, the dimension of IDR(s)'s shadow space (memory "
                                "grows by 3 vectors per unit)", minimum=1, maximum=16)
    idr_sweeps: int = option(8, "idr: Jacobi sweeps per application of its operator "
                                "(more: fewer vector operations per sweep, more sweeps)",
                             minimum=1, maximum=1000)
    max_states: int = option(0, "refuse a state space larger than this (0: as large as "
                                "memory allows)", minimum=0)

    def solver_settings(self, tol: float) -> SolverSettings:
        if tol >= 1:  # ||A p||_inf <= ||A||_inf ||p||_inf: every vector would pass
            raise OptionError("tol", f"{tol!r}: the normalised residual of any vector is at "
                                     f"most 1, so a tolerance of 1 or more accepts the "
                                     f"starting guess; give one below 1 (default 1e-8)")
        return SolverSettings(solver=self.solver, tol=tol, max_sweeps=self.max_sweeps,
                              max_cycles=self.max_cycles, max_seconds=self.max_seconds,
                              check_every=self.check_every, accelerate=self.accelerate,
                              idr_shadow=self.idr_shadow, idr_sweeps=self.idr_sweeps)
