"""CmeProgram: one SteadyState task from enumeration to distribution.

    states  <- statespace.enumerate_states (host C++, depth-first order)
    rates   <- the generated propensity kernel (GPU) or its host build (CPU)
    matrix  <- the GPU engine's formats, or scipy.sparse (matrix.py)
    p       <- solvers.solve on that engine
    result  <- StateDistribution with the diagnostics that say how far to trust it:
               residual, iterations, solver, the truncation-error indicator (the
               probability on states from which a reaction leaves the bounds)
"""

from __future__ import annotations

import math
import time

import numpy as np

from sbmlgpu.backend import Program
from sbmlgpu.results import StateDistribution
from sbmlgpu.schedule.progress import Progress
from sbmlgpu.tasks import SteadyState

from .options import CmeOptions
from .solvers import NEGATIVE_TOLERANCE, ConvergenceError, solve


class CmeProgram(Program):
    def __init__(self, model, options: CmeOptions, device=None):
        self.model, self.options, self.device = model, options, device
        text = model.propensity_source()
        self.sources = {model.source_name("propensities", text): text}
        self.last_timings: dict[str, float] = {}

    def run(self, task: SteadyState, scheduler=None, profiler=None) -> StateDistribution:
        from .statespace import enumerate_states

        timings = {}
        settings = self.options.solver_settings(task.tol)  # bad --tol: before any work
        start = time.perf_counter()
        space = enumerate_states(self.model, task.bounds, task.initial,
                                 max_states=self.options.max_states or None,
                                 progress=getattr(task, "progress", True))
        timings["enumerate_s"] = time.perf_counter() - start
        mark = time.perf_counter()
        engine, engine_info = (self._gpu_engine(space) if self.device is not None
                               else self._cpu_engine(space))
        timings["matrix_s"] = time.perf_counter() - mark
        p0 = np.full(space.n, 1.0 / space.n)
        mark = time.perf_counter()
        with _ResidualProgress(task.tol, enabled=getattr(task, "progress", True)) as bar:
            try:
                solution = solve(engine, p0, settings, progress=bar.update)
            except ConvergenceError as error:
                # the partial answer rides on the error for Python callers (never written)
                try:
                    error.result = self._result(space, engine, error.solution, engine_info,
                                                timings)
                except ValueError:  # not a distribution (a diverged iterate): none
                    error.result = None
                raise
        timings["solve_s"] = time.perf_counter() - mark
        self.last_timings = timings
        return self._result(space, engine, solution, engine_info, timings)

    # -- engines ----------------------------------------------------------------------
    def _cpu_engine(self, space):
        from .cpu_engine import CpuEngine
        from .matrix import diagonal, offdiag_csr
        from .statespace import propensities_host

        _check_host_memory(space, self.options)
        prop = propensities_host(self.model, space)
        offdiag = offdiag_csr(space, prop)
        engine = CpuEngine(offdiag, diagonal(space, prop), self.options.aggregate,
                           self.options.coarsest)
        return engine, {"engine": "cpu (scipy.sparse)", "format": "csr",
                        "nnz": int(offdiag.nnz)}

    def _gpu_engine(self, space):
        from .gpu_rates import build_engine

        engine, info = build_engine(self.model, space, self.options, self.device)
        for what, text in info.pop("sources").items():
            self.sources[self.model.source_name(what, text)] = text
        return engine, info

    # -- the result ---------------------------------------------------------------------
    def _result(self, space, engine, solution, engine_info, timings) -> StateDistribution:
        p = np.asarray(engine.host(solution.p), dtype=np.float64)
        total = p.sum()
        if total > 0:
            p = p / total
        p = np.where(np.abs(p) < 1e-300, 0.0, p)
        # the Krylov solver's iterates may hold rounding-sized negatives on states of
        # next to no probability (solvers.NEGATIVE_TOLERANCE bounds them before it
        # reports convergence): set to 0, their mass reported. A partial answer (the
        # error path) gets the same treatment within the same bound; beyond it, it is
        # no distribution and StateDistribution refuses it
        small = p.size and p.min() >= -NEGATIVE_TOLERANCE * max(p.max(), 0.0)
        clipped = float(-p[p < 0].sum()) if small else 0.0
        if clipped > 0:
            p = np.maximum(p, 0.0)
            p = p / p.sum()
        diagnostics = {
            "solver": solution.solver,
            "converged": solution.converged,
            "residual": solution.residual,
            "residual_definition": "||A p||_inf / (||A||_inf ||p||_inf)",
            "residual_l1": solution.residual_l1,
            "clipped_negative_mass": clipped,
            "iterations": solution.iterations,
            "jacobi_sweeps": solution.sweeps,
            "aggregation_cycles": solution.cycles,
            "solve_seconds": solution.seconds,
            "truncation_error_indicator": float(p[space.boundary].sum()),
            "boundary_states": int(np.count_nonzero(space.boundary)),
            "n_states": int(space.n),
            "bounds": {k: int(v) for k, v in space.bounds.items()},
            "bound_origin": dict(space.bound_origin),
            "history": [list(h) for h in solution.history[-200:]],
            **engine_info, **{k: round(v, 6) for k, v in timings.items()},
        }
        return StateDistribution(space.species, space.states.T, p, diagnostics)


def _check_host_memory(space, options) -> None:
    """OptionError before the CPU path allocates what will not fit in host memory: the
    propensities (8 R n), the matrix as it is assembled (COO and CSR: about 40 bytes an
    entry, at most R entries a row), the diagonal and the solver's vectors (10 of n;
    idr and auto: 3 s + 8 more)."""
    from sbmlgpu.errors import OptionError
    from sbmlgpu.runtime.host_memory import available_memory

    from .statespace import _gib

    n, r = space.n, len(space.reaction_ids)
    vectors = 11 + (3 * options.idr_shadow + 8 if options.solver in ("idr", "auto") else 0)
    needed = 8 * r * n + 40 * int(np.count_nonzero(space.sources >= 0)) + 8 * vectors * n
    free = available_memory()
    if needed > free:
        raise OptionError("bound", f"the CPU path for {n} states needs about "
                                   f"{_gib(needed)} of memory, but {_gib(free)} are "
                                   "available: lower the --bound values, or use a GPU")


class _ResidualProgress:
    """A progress bar over decades of the residual (from the first check down to
    tol): the solver's progress is the residual falling, not a count of items."""

    def __init__(self, tol: float, enabled: bool = True):
        self.tol, self.enabled = tol, enabled
        self.bar: Progress | None = None
        self.shown = 0

    def update(self, phase: str, iteration: int, residual: float) -> None:
        if not self.enabled or not (residual > 0 and math.isfinite(residual)):
            return
        if self.bar is None:
            total = max(1, math.ceil(10 * math.log10(max(residual / self.tol, 1.0))))
            self.bar = Progress(total, desc="residual (0.1 decades)")
            self.top = residual
            return
        reached = min(self.bar.total, int(10 * math.log10(self.top / min(residual, self.top))))
        if reached > self.shown:
            self.bar.advance(reached - self.shown)
            self.shown = reached

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.close()
        return False
