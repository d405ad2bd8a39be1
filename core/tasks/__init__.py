"""The analyses a user can ask for, one small dataclass each (see base.py for the contract).

    TimeCourse         sbmlgpu run           sbmlgpu.run          TimeCourseResult
    SteadyState        sbmlgpu steady-state  sbmlgpu.steady_state StateDistribution
    Estimation         sbmlgpu estimate      sbmlgpu.estimate     Paving
    DbnApproximation   sbmlgpu dbn           sbmlgpu.dbn          DbnResult
"""

from __future__ import annotations

from ..errors import OptionError
from .base import Task
from .dbn import DbnApproximation
from .estimation import Estimation, Measurements, read_measurements
from .steady_state import SteadyState
from .time_course import DEFAULT_POINTS, TimeCourse, output_times

#: every task kind core knows, in the order `sbmlgpu --help` lists them
TASKS: tuple[type[Task], ...] = (TimeCourse, SteadyState, Estimation, DbnApproximation)


def task_class(kind: str) -> type[Task]:
    """The task class of a kind ("time-course", ...) or of its command ("run", ...)."""
    for cls in TASKS:
        if kind in (cls.kind, cls.command):
            return cls
    raise OptionError("task", f"{kind!r} is not a task; tasks: "
                              f"{', '.join(c.kind for c in TASKS)}")


__all__ = ["Task", "TASKS", "task_class", "TimeCourse", "SteadyState", "Estimation",
           "DbnApproximation", "Measurements", "read_measurements", "output_times",
           "DEFAULT_POINTS"]
