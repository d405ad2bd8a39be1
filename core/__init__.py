"""sbmlgpu: ensemble analyses of SBML models on GPUs."""

from __future__ import annotations

__version__ = "0.1.0"

from .errors import (  # noqa: E402
    DeviceError,
    OptionError,
    SBMLImportError,
    SbmlGpuError,
    SimulationError,
    UnsupportedModelError,
)
from .ir import Network  # noqa: E402


def load(source, *, validate: bool = True) -> Network:
    """Load an SBML model from a path, an SBML string or a libsbml document."""
    from .sbml.load import load as _load

    return _load(source, validate=validate)


from .api import run, task_function  # noqa: E402
from .combine import run_omex  # noqa: E402
from .results import (DbnResult, Paving, Result, StateDistribution,  # noqa: E402
                      TimeCourseResult)
from .tasks import DbnApproximation, Estimation, SteadyState, TimeCourse  # noqa: E402

def simulate_petab(problem, **settings):
    """Simulate a PEtab problem (YAML path): sbmlgpu.petab.simulate_problem (docs/petab.md)."""
    from .petab import simulate_problem

    return simulate_problem(problem, **settings)


#: one function per task (sbmlgpu.tasks), generated from the task's fields
steady_state = task_function(SteadyState)
estimate = task_function(Estimation)
dbn = task_function(DbnApproximation)

__all__ = [
    "load",
    "run",
    "steady_state",
    "estimate",
    "dbn",
    "run_omex",
    "simulate_petab",
    "TimeCourse",
    "SteadyState",
    "Estimation",
    "DbnApproximation",
    "Result",
    "TimeCourseResult",
    "StateDistribution",
    "Paving",
    "DbnResult",
    "Network",
    "SbmlGpuError",
    "SBMLImportError",
    "UnsupportedModelError",
    "OptionError",
    "DeviceError",
    "SimulationError",
    "__version__",
]
