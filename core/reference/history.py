"""The state's past, for delay(e, d): dense output of every accepted step.

x(tau) for tau before the start is the initial-value expression evaluated at
time tau (SBML: an initial assignment that depends on time says how the
variable behaved before the simulation; the test suite's delay cases rely on
this). Inside the simulated range it is the integrator's interpolant of the
step that covers tau, the post-event value at an event instant. Beyond the last
accepted step (an integrator stage within the step being taken, when the lag is
shorter than the step) it is interpolated linearly between the last accepted
point and the stage's own state.
"""

from __future__ import annotations

import bisect
from typing import Callable

import numpy as np


class History:
    def __init__(self, t0: float, before_start: Callable[[float], np.ndarray]):
        self.t0 = t0
        self.before_start = before_start
        self._starts: list[float] = []
        self._ends: list[float] = []
        self._interp: list[Callable[[float], np.ndarray]] = []
        self.t_last = t0
        self.x_last: np.ndarray | None = None

    def add_point(self, t: float, x: np.ndarray) -> None:
        """The state at t after an instant (events) or at the start."""
        xc = np.array(x, dtype=float, copy=True)
        self._starts.append(t)
        self._ends.append(t)
        self._interp.append(lambda _tau, xc=xc: xc)
        self.t_last, self.x_last = t, xc

    def add_segment(self, t_a: float, t_b: float, interp: Callable, x_b: np.ndarray) -> None:
        if t_b <= t_a:
            return
        self._starts.append(t_a)
        self._ends.append(t_b)
        self._interp.append(interp)
        self.t_last, self.x_last = t_b, np.array(x_b, dtype=float, copy=True)

    def state(self, tau: float, t_now: float, x_now: np.ndarray) -> np.ndarray:
        if tau < self.t0:
            return self.before_start(tau)
        if tau >= t_now:
            return x_now
        if tau > self.t_last or self.x_last is None:
            if self.x_last is None or t_now <= self.t_last:
                return x_now
            w = (tau - self.t_last) / (t_now - self.t_last)
            return self.x_last + w * (np.asarray(x_now, dtype=float) - self.x_last)
        # the last piece that starts at or before tau: post-event values at an instant
        k = bisect.bisect_right(self._starts, tau) - 1
        while k > 0 and self._ends[k] < tau:  # pragma: no cover - gaps do not occur
            k -= 1
        return np.asarray(self._interp[k](tau), dtype=float)
