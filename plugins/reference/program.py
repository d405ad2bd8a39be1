"""The reference backend's Program: every member through the CPU reference solver."""

from __future__ import annotations

import contextlib
import time
from dataclasses import asdict
from typing import Any

import numpy as np

from sbmlgpu.backend import Program
from sbmlgpu.errors import SimulationError
from sbmlgpu.ir import Network
from sbmlgpu.outputs import default_outputs, evaluate
from sbmlgpu.results import Status, TimeCourseResult
from sbmlgpu.tasks import TimeCourse

from .backend import ReferenceOptions


def _progress(scheduler, total: int, enabled: bool):
    """The scheduler's progress bar over members (it appears only for runs longer
    than the scheduler's delay); none without a scheduler."""
    try:
        from sbmlgpu.schedule import Progress
    except ImportError:
        Progress = None
    if Progress is None or scheduler is None:
        return contextlib.nullcontext(_NoBar())
    return Progress(total, enabled=enabled and getattr(scheduler, "progress", True),
                    delay=getattr(scheduler, "progress_delay", 2.0), desc="reference")


def _states_finite(traj) -> tuple[Status, str]:
    """ok, or non_finite naming the states and the first output time where they are
    not finite: the solver may step on with NaN states (sqrt of a negative number
    in a rate) and still report success."""
    bad = ~np.isfinite(np.asarray(traj.x, dtype=float))
    if not bad.any():
        return Status.ok, ""
    row = int(np.argmax(bad.any(axis=1)))
    ids = [sid for sid, b in zip(traj.state_ids, bad[row]) if b]
    return Status.non_finite, (f"state {', '.join(ids[:8])} not finite at "
                               f"t = {float(traj.times[row])!r}")


class _NoBar:
    def advance(self, items: int) -> None:
        pass


class ReferenceProgram(Program):
    def __init__(self, network: Network, compiled, options: ReferenceOptions):
        self.network = network
        self.compiled = compiled
        self.options = options
        self.sources = {}  # nothing is generated on the CPU path

    def _member(self, task: TimeCourse, i: int, outputs) -> tuple[np.ndarray | None,
                                                                     Status, str]:
        """One member's outputs, with the status of its integration: the solver's,
        or non_finite where a state stopped being finite. Outputs that the model's
        math makes infinite or NaN (a parameter set to INF, a rule dividing by zero)
        are results, not failures: the SBML Test Suite expects some."""
        from sbmlgpu import reference

        params = ({k: float(np.asarray(v).reshape(-1)[i]) for k, v in task.parameters.items()}
                  if task.parameters else None)
        o = self.options
        try:
            # a member with its own end (TimeCourse.member_ends) on its own times
            own = task.own_times()
            times = task.times if own is None else task.times[:int(own[i])]
            traj = reference.simulate(self.compiled, times, parameters=params,
                                      rtol=o.rtol, atol=o.atol, method=o.method,
                                      max_step=o.max_step, seed=task.seed, member=i,
                                      scaled_atol=o.scaled_atol)
        except SimulationError as exc:
            return None, Status.failed, str(exc)
        values = evaluate(traj, outputs)
        status, message = Status.parse(traj.status), getattr(traj, "message", "") or ""
        if status == Status.ok:
            status, message = _states_finite(traj)
        return values, status, message

    def run(self, task: TimeCourse, scheduler=None, profiler=None) -> TimeCourseResult:
        outputs = tuple(task.outputs or default_outputs(self.network))
        n, times = task.ensemble_size, task.times
        data = np.full((n, len(times), len(outputs)), np.nan)
        status = np.zeros(n, np.int8)
        messages: dict[int, str] = {}
        started = time.perf_counter()
        with _progress(scheduler, n, task.progress) as bar:
            for i in range(n):
                values, st, message = self._member(task, i, outputs)
                if values is not None:
                    rows = min(len(values), len(times))  # a failed run may stop early
                    data[i, :rows] = values[:rows]
                status[i] = st
                if st != Status.ok:
                    messages[i] = message or st.message
                bar.advance(1)
        metadata = self._metadata(time.perf_counter() - started)
        if task.own_times() is not None:
            metadata["member_ends"] = "integrated"  # each member on its own times
        result = TimeCourseResult(times=times, ids=outputs, data=data, status=status, messages=messages,
                        metadata=metadata)
        return result.with_summary(keep_members=False) if task.summary else result

    def _metadata(self, seconds: float) -> dict[str, Any]:
        return {"backend": "reference", "device": "cpu", "options": asdict(self.options),
                "wall_seconds": seconds}
