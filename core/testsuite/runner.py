"""One case, start to finish, never raising: every problem becomes an Outcome."""

from __future__ import annotations

import functools
import time
import traceback
from dataclasses import dataclass

from ..errors import SbmlGpuError, SimulationError
from .cases import STOCHASTIC, Case, CaseError
from .outcome import FAIL, SKIP, Outcome
from .semantic import backend_values, reference_values, run_semantic
from .stochastic import run_stochastic

FBA = "FluxBalanceSteadyState"


@dataclass(frozen=True)
class RunConfig:
    backend: str | None = None  # None: the CPU reference, called directly
    stochastic_runs: int = 10_000
    seed: int = 0
    rtol: float = 1e-8
    atol: float = 1e-10


def run_case(case: Case, config: RunConfig) -> Outcome:
    start = time.perf_counter()
    outcome = _run(case, config)
    outcome.seconds = time.perf_counter() - start
    return outcome


def _run(case: Case, config: RunConfig) -> Outcome:
    try:
        if case.test_type() == FBA:
            return Outcome(case.number, SKIP, f"flux balance case (testType: {FBA}): "
                                              f"not a time course")
        settings = case.settings()
        model = case.model_path()
        if settings.kind == STOCHASTIC:
            outcome = run_stochastic(case, settings, config.backend, runs=config.stochastic_runs,
                                     seed=config.seed)
        else:
            if config.backend is None:
                values = functools.partial(reference_values, rtol=config.rtol, atol=config.atol)
            else:
                values = functools.partial(backend_values, backend=config.backend)
            outcome = run_semantic(case, settings, values)
        outcome.model = model.name
        return outcome
    except CaseError as exc:
        return Outcome(case.number, FAIL, f"bad case files: {exc}")
    except SimulationError as exc:
        return Outcome(case.number, FAIL, str(exc))
    except SbmlGpuError as exc:  # refusals: unsupported features, invalid SBML, options
        return Outcome(case.number, SKIP, " ".join(str(exc).split()))
    except Exception as exc:  # a bug somewhere: a failure, never the end of the run
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return Outcome(case.number, FAIL,
                       f"error: {type(exc).__name__}: {' '.join(str(exc).split())} "
                       f"({where.filename.rsplit('/', 1)[-1]}:{where.lineno})")
