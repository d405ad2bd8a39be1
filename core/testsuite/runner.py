"""One case, start to finish, never raising: every problem becomes an Outcome.

Skipped, and only these: a case whose testType is not a time course, and a model
that the simulator refuses with a typed UnsupportedModelError (a feature it
declines, named with its elements). Every other problem is a FAIL with its
reason: unreadable case files, SBML the importer cannot read, an option the
backend rejects, a compile or device error, a printer gap (InternalError), a
failed simulation, a case with nothing to compare, or any other exception (a bug).
"""

from __future__ import annotations

import functools
import time
import traceback
from dataclasses import dataclass

from ..errors import SbmlGpuError, UnsupportedModelError
from .cases import STOCHASTIC, Case, CaseError
from .outcome import FAIL, Outcome
from .semantic import backend_values, reference_values, run_semantic
from .stochastic import run_stochastic

# The suite's testTypes that are time courses (semantic; DSMTS and its
# distrib-package variant); any other, e.g. FluxBalanceSteadyState, is not.
TIME_COURSES = ("TimeCourse", "StochasticTimeCourse", "StatisticalDistribution")


@dataclass(frozen=True)
class RunConfig:
    backend: str | None = None  # None: the CPU reference, called directly
    stochastic_runs: int = 10_000
    seed: int = 0
    rtol: float = 1e-8
    atol: float = 1e-10
    #: the backend's device: "gpu-if-present" (a case is one member, which device
    #: "auto" would run on the CPU: the suite is there to check the GPU), or "cpu"
    device: str = "gpu-if-present"
    #: the backend's options for every case, as (name, value) pairs (--backend-option)
    options: tuple[tuple[str, object], ...] = ()


def run_case(case: Case, config: RunConfig) -> Outcome:
    start = time.perf_counter()
    outcome = _run(case, config)
    outcome.seconds = time.perf_counter() - start
    return outcome


def _run(case: Case, config: RunConfig) -> Outcome:
    try:
        test_type = case.test_type()
        if test_type and test_type not in TIME_COURSES:
            return Outcome.not_time_course(case.number, f"testType {test_type}: "
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
                values = functools.partial(backend_values, backend=config.backend,
                                           device=config.device, options=dict(config.options))
            outcome = run_semantic(case, settings, values)
        outcome.model = model.name
        return outcome
    except CaseError as exc:
        return Outcome(case.number, FAIL, f"bad case files: {exc}")
    except UnsupportedModelError as exc:  # the one typed refusal
        return Outcome.refused(case.number, " ".join(str(exc).split()))
    except SbmlGpuError as exc:  # compile, device, option, simulation, import, bugs
        return Outcome(case.number, FAIL, f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # a bug somewhere: a failure, never the end of the run
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return Outcome(case.number, FAIL,
                       f"error: {type(exc).__name__}: {' '.join(str(exc).split())} "
                       f"({where.filename.rsplit('/', 1)[-1]}:{where.lineno})")
