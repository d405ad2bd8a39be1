"""SBML event semantics (L3V2, sec. 4.11) at one instant of time.

What happens when the integrator stops at time t (a trigger's atom crossed zero,
a delayed event is due, or an output or end time is reached):

1. Every trigger is evaluated. An event whose trigger went from false to true is
   *triggered*: its delay is evaluated now, and, if useValuesFromTriggerTime, so
   are its assignment values. It joins the pending set with execution time t + delay.
   A pending non-persistent event whose trigger is now false is cancelled.
2. While pending events are due (execution time <= t): evaluate the priorities of
   the due ones, execute the highest (ties in random order, from the seeded
   generator; events without a priority come after those with one, in the order
   they were triggered), then go back to 1: an execution can trigger, re-trigger
   or cancel events, and triggered events with zero delay are due at once.

A trigger that stays true never fires again; it must first become false. The
value before the start is the trigger's initialValue, so initialValue=false with
a trigger true at t0 fires at t0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .model import CompiledModel


class EventError(Exception):
    """An event that cannot be executed (negative or undefined delay, an infinite
    cascade); turned into the trajectory's failure status."""


@dataclass
class Pending:
    time: float
    seq: int  # order of triggering, for a stable order among unprioritised events
    event: int
    values: np.ndarray | None  # assignment values fixed at trigger time, else None


class EventQueue:
    MAX_PER_INSTANT = 100_000

    def __init__(self, model: CompiledModel, p: np.ndarray, rng: np.random.Generator):
        self.model = model
        self.events = model.events
        self.p = p
        self.rng = rng
        self.previous = [e.trigger_initial_value for e in self.events]
        self.pending: list[Pending] = []
        self._seq = 0
        self.executed: list[tuple[float, str]] = []

    def next_time(self, after: float) -> float:
        later = [pe.time for pe in self.pending if pe.time > after]
        return min(later) if later else np.inf

    def process(self, t: float, x: np.ndarray, triggers, final_triggers=None) -> np.ndarray:
        """Run the instant at time t from state x; returns the new state.

        `triggers(t, x)`: the trigger values at this instant; `final_triggers`, if
        given, their values just after it (they differ only for == and != relations
        that hold exactly at a crossing), applied once nothing more is due."""
        x = np.array(x, dtype=float, copy=True)
        self._transitions(t, x, triggers(t, x))
        count = 0
        final_done = final_triggers is None
        while True:
            due = [pe for pe in self.pending if pe.time <= t]
            if not due:
                if final_done:
                    return x
                final_done = True
                triggers = final_triggers
                self._transitions(t, x, triggers(t, x))
                continue
            pe = self._choose(due, t, x)
            self.pending.remove(pe)
            x = self._execute(pe, t, x)
            count += 1
            if count > self.MAX_PER_INSTANT:
                raise EventError(f"more than {self.MAX_PER_INSTANT} event executions at "
                                 f"t = {t!r}: the events trigger each other without end")
            self._transitions(t, x, triggers(t, x))

    # -- steps ------------------------------------------------------------------
    def _transitions(self, t: float, x: np.ndarray, now: list[bool]) -> None:
        for i, value in enumerate(now):
            if value and not self.previous[i]:
                self._schedule(i, t, x)
        self.previous = list(now)
        if self.pending:
            self.pending = [pe for pe in self.pending
                            if self.events[pe.event].persistent or now[pe.event]]

    def _schedule(self, i: int, t: float, x: np.ndarray) -> None:
        e = self.events[i]
        delay = 0.0
        if e.delay is not None:
            delay = float(e.delay(t, x, self.p))
            if not delay >= 0.0:
                raise EventError(f"event {e.id}: its delay is {delay!r} at t = {t!r}; "
                                 f"SBML requires a delay >= 0")
        values = None
        if e.use_values_from_trigger_time:
            values = np.array(e.values(t, x, self.p), dtype=float)
        self.pending.append(Pending(t + delay, self._seq, i, values))
        self._seq += 1

    def _choose(self, due: list[Pending], t: float, x: np.ndarray) -> Pending:
        if len(due) == 1:
            return due[0]
        ranked = []
        for pe in due:
            prio = self.events[pe.event].priority
            if prio is None:
                ranked.append((pe, None))
            else:
                v = float(prio(t, x, self.p))
                ranked.append((pe, -np.inf if v != v else v))
        with_priority = [(pe, v) for pe, v in ranked if v is not None]
        if with_priority:
            best = max(v for _, v in with_priority)
            tied = [pe for pe, v in with_priority if v == best]
            if len(tied) == 1:
                return tied[0]
            tied.sort(key=lambda pe: pe.seq)
            return tied[int(self.rng.integers(len(tied)))]
        return min(due, key=lambda pe: pe.seq)

    def _execute(self, pe: Pending, t: float, x: np.ndarray) -> np.ndarray:
        e = self.events[pe.event]
        values = pe.values if pe.values is not None else np.asarray(e.values(t, x, self.p),
                                                                     dtype=float)
        if len(e.targets):
            x = x.copy()
            x[e.targets] = values
        self.executed.append((t, e.id))
        return x
