"""sbmlgpu: ensemble analyses of SBML models on GPUs.

`import sbmlgpu` imports only what every use needs (the errors); the rest of the
public names are imported on first use (PEP 562 `__getattr__` below), so that a
command that does not touch sympy, scipy or the plugins does not pay for them
(issue 13: `import sbmlgpu` took 3.6 s on the GPU machine).
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

from .errors import (  # noqa: E402
    DeviceError,
    OptionError,
    SBMLImportError,
    SbmlGpuError,
    SimulationError,
    UnsupportedModelError,
)


def load(source, *, validate: bool = True):
    """Load an SBML model from a path, an SBML string or a libsbml document."""
    from .sbml.load import load as _load

    return _load(source, validate=validate)


def simulate_petab(problem, **settings):
    """Simulate a PEtab problem (YAML path): sbmlgpu.petab.simulate_problem (docs/petab.md)."""
    from .petab import simulate_problem

    return simulate_problem(problem, **settings)


#: public name -> the module that defines it, imported when the name is first used
_LAZY = {
    "Network": "ir",
    "run": "api", "task_function": "api",
    "run_omex": "combine",
    "Result": "results", "TimeCourseResult": "results", "StateDistribution": "results",
    "Paving": "results", "DbnResult": "results",
    "TimeCourse": "tasks", "SteadyState": "tasks", "Estimation": "tasks",
    "DbnApproximation": "tasks",
}
#: one function per task (sbmlgpu.tasks), generated from the task's fields
_TASK_FUNCTIONS = {"steady_state": "SteadyState", "estimate": "Estimation",
                   "dbn": "DbnApproximation"}


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    elif name in _TASK_FUNCTIONS:
        from .api import task_function

        value = task_function(__getattr__(_TASK_FUNCTIONS[name]))
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # once: later uses are plain attribute reads
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | set(_TASK_FUNCTIONS))


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
