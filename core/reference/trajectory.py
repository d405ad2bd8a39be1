"""The result of one reference simulation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

OK = "ok"
# failure codes (`Trajectory.status`); the message says what happened and what to try
INTEGRATOR_FAILED = "integrator_failed"
MAX_STEPS = "max_steps"  # more integrator steps between two outputs than allowed
TOO_MANY_EVENTS = "too_many_events"
EVENT_ERROR = "event_error"  # e.g. a negative event delay
NONFINITE = "nonfinite_state"
INVALID_DRAW = "invalid_draw"  # a distrib draw with arguments outside its domain


@dataclass
class Trajectory:
    """States at the output times. `x[k]` is the state at `times[k]` after every
    event due at that time. Rows after a failure are NaN; `status` says why.

    `events`: (time, event id) of every event executed, in order."""

    times: np.ndarray
    x: np.ndarray
    p: np.ndarray
    status: str
    message: str
    state_ids: tuple[str, ...]
    events: list[tuple[float, str]] = field(default_factory=list)
    n_reached: int = -1  # rows filled; -1: all
    _model: object = field(default=None, repr=False)
    _delay: object = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def p_ids(self) -> tuple[str, ...]:
        return self._model.ode.p_ids

    def evaluate(self, ids: Sequence[str] | str, kind: str = "value") -> np.ndarray:
        """SBML values (or species amounts/concentrations) at the output times:
        an array (len(times), len(ids)); NaN in rows the simulation did not reach."""
        if isinstance(ids, str):
            ids = (ids,)
        ids = tuple(ids)
        if kind not in ("value", "amount", "concentration"):
            from ..errors import OptionError

            raise OptionError("kind", f"{kind!r} is not one of: value, amount, concentration")
        f = self._model.output_function(ids, kind)
        if self._delay is not None:
            self._model.bind_delay(self._delay)
        out = np.full((len(self.times), len(ids)), np.nan)
        reached = len(self.times) if self.n_reached < 0 else self.n_reached
        for k in range(reached):
            out[k] = f(float(self.times[k]), self.x[k], self.p)
        return out

    def to_dict(self, ids: Sequence[str], kind: str = "value") -> dict[str, np.ndarray]:
        values = self.evaluate(ids, kind)
        return {"time": self.times, **{sid: values[:, i] for i, sid in enumerate(ids)}}
