"""Per-member outcome of a simulation, with a message that tells the user what to do.

Like diffrax's RESULTS: a backend sets one status per ensemble member; the
framework reports the failed ones and leaves them out of summaries.
"""

from __future__ import annotations

import enum

import numpy as np


class Status(enum.IntEnum):
    ok = 0
    max_steps = 1
    step_size_underflow = 2
    non_finite = 3
    failed = 4

    @property
    def message(self) -> str:
        return _MESSAGES[self]

    @classmethod
    def parse(cls, value) -> "Status":
        """A Status from a Status, its integer code or its name (as solvers report
        it, e.g. the reference's 'ok'); any other failure name is `failed`."""
        if isinstance(value, Status):
            return value
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            return cls(int(value))
        name = str(value).strip().lower().replace("-", "_").replace(" ", "_")
        name = _ALIASES.get(name, name)
        return cls.__members__.get(name, cls.failed)


# Names other solvers use for the same outcomes (the CPU reference, scipy, diffrax).
_ALIASES = {
    "success": "ok",
    "successful": "ok",
    "nonfinite_state": "non_finite",
    "nonfinite": "non_finite",
    "nan": "non_finite",
    "max_steps_reached": "max_steps",
    "too_many_steps": "max_steps",
    "dt_min_reached": "step_size_underflow",
    "step_too_small": "step_size_underflow",
}


_MESSAGES = {
    Status.ok: "reached the end time",
    Status.max_steps: (
        "the solver took its maximum number of steps before the end time: raise the "
        "step limit, shorten the time span, or use a stiff (implicit) method if the "
        "model is stiff"),
    Status.step_size_underflow: (
        "the step size fell below the smallest the solver allows: the model is stiff "
        "or runs into a singularity (e.g. a division by zero) at this time; loosen "
        "rtol/atol, use a stiff method, or check the parameter values of this member"),
    Status.non_finite: (
        "a value became NaN or infinite: check this member's parameter values and "
        "initial values (division by zero, log or sqrt of a negative number, overflow "
        "from unbounded growth)"),
    Status.failed: (
        "the simulation of this member failed: see the member's message for the "
        "reason"),
}
