"""Two passes over an ensemble, so that a few slow members do not set the run's time.

On a GPU a warp runs as long as its slowest member: one parameter set that needs
10^6 stiff steps holds 31 fast ones, and one slow warp holds its launch (Elowitz:
373 such members made a 64 s kernel). So the ensemble first runs with a step budget
per member (`--pass-steps`, far above what well-behaved members need): members that
reach it stop with max_steps, which in this pass means "paused" (nothing of them is
kept but their index). A second pass runs only those members, from t0, with the full
--max-steps, through the same batch machinery (sbmlgpu.schedule.ensemble.run_ensemble,
with its own progress report). A member's integration depends only on its
parameters and member number (the random stream of event tie-breaks and draws), so
its results are those of a single pass, member for member; a restart from t0
rather than from a saved state keeps that exact at the cost of repeating at most
`--pass-steps` steps per slow member.

With --summary the slow members' time courses come back to the host (there are
few) and are folded into the first pass's statistics over its histogram grid: the
counts are those of a single pass, the mean and sd equal up to the rounding of a
different merge order, and the quantiles agree within their resolution (one bin),
as the pilot that sets the histogram range runs with the first pass's budget (its
slow members do not widen the range).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np

from sbmlgpu.results import Status
from sbmlgpu.schedule.ensemble import (EnsembleJob, EnsembleOutcome, MemberBatch,
                                       MemberResults, run_ensemble)


@dataclass(frozen=True)
class StepBudget:
    """The first pass's step budget and the full one (--pass-steps, --max-steps)."""

    pass_steps: int
    max_steps: int

    @property
    def two_passes(self) -> bool:
        return 0 < self.pass_steps < self.max_steps

    @property
    def first_pass_steps(self) -> int:
        return self.pass_steps if self.two_passes else self.max_steps


@dataclass
class PassReport:
    """What the second pass did, for the result's metadata."""

    pass_steps: int  # the first pass's budget (0: one pass)
    rerun: np.ndarray  # members run again in the second pass (sorted)
    seconds: float = 0.0  # the second pass's wall time
    kernel_ms: float = 0.0  # its kernels' time


RunBatch = Callable[[Any, MemberBatch], MemberResults]
#: a pass is split into at least this many launches where it is larger than the
#: devices hold at once, so that its progress moves during a long run
PROGRESS_LAUNCHES = 16
#: members one launch on the host keeps at least (OpenMP threads over members)
HOST_LAUNCH_MIN = 1024


def launch_cap(n_members: int, devices) -> int:
    """The most members per launch: a pass in PROGRESS_LAUNCHES launches or more, none
    smaller than what the devices run at once (a GPU: SMs x resident threads per SM;
    fewer members would leave it part idle while the launch's slowest warp runs)."""
    floor = max((d.properties.sm_count * d.properties.max_threads_per_sm for d in devices),
                default=HOST_LAUNCH_MIN)
    return max(-(-int(n_members) // PROGRESS_LAUNCHES), floor, 1)


def run_in_passes(job: EnsembleJob, scheduler, profiler, budget: StepBudget,
                  rerun: RunBatch) -> tuple[EnsembleOutcome, PassReport]:
    """`job` (whose run_batch integrates with `budget.first_pass_steps`), then the
    members it paused again with `rerun` (the full step budget; its batches name
    their members), merged into the first outcome. One pass when the budget is not
    below --max-steps. Each pass is split into launches of at most `launch_cap`
    members, so that its progress moves."""
    devices = tuple(getattr(scheduler, "local_devices", ()) or ())
    job = replace(job, max_batch=launch_cap(job.n_members, devices))
    outcome = run_ensemble(job, scheduler, profiler)
    if not budget.two_passes:
        return outcome, PassReport(0, np.zeros(0, np.int64))
    paused = np.flatnonzero(outcome.status == Status.max_steps) if outcome.root else None
    world = getattr(scheduler, "world", None)
    if getattr(scheduler, "size", 1) > 1 and world is not None:
        paused = world.comm.bcast(paused, root=0)  # every rank runs the second pass
    report = PassReport(budget.pass_steps, paused)
    if not len(paused):
        return outcome, report
    second = replace(_second_pass(job, paused, rerun, budget),
                     max_batch=launch_cap(len(paused), devices))
    started = time.perf_counter()
    again = run_ensemble(second, scheduler, profiler)
    report.seconds, report.kernel_ms = time.perf_counter() - started, again.kernel_ms
    if outcome.root:
        _merge(outcome, again, paused, job)
    return outcome, report


def _second_pass(job: EnsembleJob, paused: np.ndarray, rerun: RunBatch,
                 budget: StepBudget) -> EnsembleJob:
    def run_batch(device, batch: MemberBatch) -> MemberResults:
        # positions in the second pass -> the members themselves (their parameters,
        # random streams and, unless bundled, their rows of this pass's result)
        return rerun(device, MemberBatch(batch.start, batch.stop,
                                         paused[batch.start:batch.stop], batch.rows))

    return replace(job, n_members=len(paused), run_batch=run_batch,
                   memory=lambda time_courses, bundled: job.memory(True, True),
                   summary=None, pilot=None, order=None,
                   desc=f"{job.desc} (second pass: {len(paused):,} members past "
                        f"{budget.pass_steps:,} steps)")


def _merge(outcome: EnsembleOutcome, again: EnsembleOutcome, paused: np.ndarray,
           job: EnsembleJob) -> None:
    """The second pass's members into the first pass's outcome, in place."""
    outcome.status[paused] = again.status
    for key, values in again.extras.items():
        outcome.extras[key][paused] = values
    outcome.kernel_ms += again.kernel_ms
    if outcome.data is not None:
        outcome.data[paused] = again.data
    if job.summary is not None:
        grid = outcome.target.grid
        stats = outcome.stats.merge(job.summary.fold(again.data, again.status, grid))
        ok = int((outcome.status == Status.ok).sum())
        outcome.stats = stats
        outcome.summary = stats.summary(job.summary, tuple(job.shape), job.quantiles, ok,
                                        len(outcome.status) - ok)
