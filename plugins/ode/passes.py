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

Under --method auto, members that rodas4 left past the first pass's budget run again
with bdf (`later_method`; after dopri5 too where auto's choice was kept from an earlier
run, LATER_METHODS_KEPT): a member that needs more than --pass-steps (10,000) rodas4
steps is one where the problem is very stiff over a long span, where a variable-order
BDF that keeps its Jacobian and LU takes far fewer and cheaper steps (the slowest of
1,000 PEtab-sampled members alone, 2 cores: Okuonghae_ChaosSolitonsFractals2020
136,965 rodas4 steps against 10,910, 0.31 s against 0.055 s; Liu_IFACPapersOnLine2025
11,548 against 360; Elowitz_Nature2000 434,057 against 289,588, 1.43 s against 0.68
s; docs/benchmarks.md), while bdf is the slower method over most members of most
models (it starts at order 1), so the first pass keeps rodas4. Those members' results
are then bdf's, within the same tolerances, not those of a single rodas4 pass. Members
bdf does not finish (a step size that underflows, a step limit: any status but ok and
time_limit) run once more with rodas4 and the full budget (`LaterMethod.fallback`), so
that a member fails only where both methods fail: on the host's cores where bdf ran
there (a GPU run; on the device these hard members cost a GPU thread each, ~30x a core:
Elowitz_Nature2000, 10^4 members on an H200, 34 of them took 33.8 s there), each in its
thread as soon as bdf gives up on it (host_pass.Retry: after the whole bdf pass, the
same 34 took 3.64 s on top of its 2.29 s), else through the scheduler. The CPU path runs the whole second
pass with bdf; on a GPU only the host's second pass does (below), as a bdf kernel on
the device would be a second nvcc build and is not measured there.

On a GPU, a second pass of few members runs on the host's cores instead (host_pass.py:
the native build of the same kernel, one member per core at a time; the rule is
HostSecondPass.takes: more members per core for a middle pass's tail and where the host
runs bdf), whose build starts in the background as soon as a
launch (the pilot first) returns members past the budget. A pass that runs longer than
LONG_PASS_S says so once on stderr, with the members left and --member-time-limit, the
option that bounds them (no wall-time limit by default: which members it stops would
depend on the machine and its load). The report keeps each pass's wall time and every
member's seconds: its launch's wall time (an upper bound: a GPU thread lasts at most its
launch), or on the host its own.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from sbmlgpu.profile import phase
from sbmlgpu.results import Status
from sbmlgpu.schedule.ensemble import (EnsembleJob, EnsembleOutcome, MemberBatch,
                                       MemberResults, run_ensemble)
from sbmlgpu.schedule.progress import Progress

from . import host_pass

log = logging.getLogger("sbmlgpu.ode")


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


#: under --method auto: the method that the members past --pass-steps run again with,
#: per method of the first pass (module doc)
LATER_METHODS = {"rodas4": "bdf"}
#: the same for a method kept from an earlier run's auto check (`as_auto`: the PEtab
#: objective's later calls): its check screened other members, and one past
#: --pass-steps dopri5 steps there is stiff where it is (Boehm_JProteomeRes2014's
#: nominal set failed so after a first call at all-ones sets kept dopri5). Not in a
#: fresh auto run, whose check screened these members: a long non-stiff member
#: (Lorenz to t = 200) would run bdf's 62,369 steps for dopri5's 23,281
LATER_METHODS_KEPT = {"rodas4": "bdf", "dopri5": "bdf"}
#: statuses of the later method that are final: others run again with the first method
FINAL_STATUSES = (int(Status.ok), int(Status.time_limit))


def later_method(chosen: str, first: str, as_auto: bool = False) -> str | None:
    """The later passes' method for --method `chosen` whose check picked `first`, or
    None where they keep `first` (a method the user chose is the method of every pass;
    `as_auto`: `chosen` is auto's choice kept from an earlier run, OdeOptions.later_as_auto)."""
    if as_auto:
        return LATER_METHODS_KEPT.get(first)
    return LATER_METHODS.get(first) if chosen == "auto" else None


@dataclass(frozen=True)
class LaterMethod:
    """A run whose members past the first pass's budget run again with another method
    (`later_method`): `name` (that method), `first` (the first pass's), `fallback`
    (a run of batches with `first` and the full budget, for the members `name` does
    not finish) and `in_rerun` (whether run_in_passes's `rerun` integrates with
    `name` too, as on the CPU path, or only the host's pass does, as in a GPU run)."""

    name: str
    first: str
    fallback: "RunBatch"
    in_rerun: bool
    #: a GPU run: the host build of the first method's kernel (host_pass.py), which
    #: runs the fallback where the later method ran on the host and the members are
    #: few (on the device each of these hard members took a GPU thread's ~30x a
    #: core's time: Elowitz_Nature2000, 10^4 members on an H200, 34 of them 33.8 s)
    fallback_host: Any = None
    #: where `in_rerun`: builds the later method's kernel before its pass, False where
    #: that failed (said in a warning), and the pass then keeps the first method
    ready: Callable[[], bool] | None = None


@dataclass
class PassReport:
    """What the passes did, for the result's metadata."""

    pass_steps: int  # the first pass's budget (0: one pass)
    rerun: np.ndarray  # members run again in the second pass (sorted)
    seconds: float = 0.0  # the second pass's wall time
    kernel_ms: float = 0.0  # its kernels' time
    first_seconds: float = 0.0  # the first pass's wall time (its pilot included)
    where: str = ""  # where the second pass ran: "device" or "host"
    threads: int = 0  # host threads of a second pass on the host
    #: per member (NaN: not known, e.g. run on another MPI rank): its wall time on a host
    #: thread, else its last launch's wall time (an upper bound)
    member_seconds: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: members whose member_seconds are their own (the host pass), not a launch's
    measured: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    #: the passes after the first: {max_steps, members, where, seconds} each
    stages: list = field(default_factory=list)
    stage_seconds: float = 0.0  # the last pass's wall time (while they run)
    method: str = ""  # the last pass's method where it is not the first's (LaterMethod)
    #: members the later method did not finish, run again with the first (sorted)
    fallback: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))


RunBatch = Callable[[Any, MemberBatch], MemberResults]
#: a pass is split into at least this many launches where it is larger than the
#: devices hold at once, so that its progress moves during a long run
PROGRESS_LAUNCHES = 16
#: members one launch on the host keeps at least (OpenMP threads over members)
HOST_LAUNCH_MIN = 1024
#: a pass running longer than this says so once on stderr (LongPassNote)
LONG_PASS_S = 10.0
#: the middle pass's step budget, in --pass-steps (_later_passes)
MIDDLE_PASS_FACTOR = 10


def launch_cap(n_members: int, devices) -> int:
    """The most members per launch: a pass in PROGRESS_LAUNCHES launches or more, none
    smaller than what the devices run at once (a GPU: SMs x resident threads per SM;
    fewer members would leave it part idle while the launch's slowest warp runs)."""
    floor = max((d.properties.sm_count * d.properties.max_threads_per_sm for d in devices),
                default=HOST_LAUNCH_MIN)
    return max(-(-int(n_members) // PROGRESS_LAUNCHES), floor, 1)


def run_in_passes(job: EnsembleJob, scheduler, profiler, budget: StepBudget,
                  rerun: RunBatch, host=None, bound_hint: str = "",
                  rerun_at: Callable[[int], RunBatch] | None = None,
                  later: LaterMethod | None = None, own_counts: np.ndarray | None = None,
                  ) -> tuple[EnsembleOutcome, PassReport]:
    """`job` (whose run_batch integrates with `budget.first_pass_steps`), then the
    members it paused again with `rerun` (the full step budget; its batches name
    their members), merged into the first outcome. One pass when the budget is not
    below --max-steps. Each pass is split into launches of at most `launch_cap`
    members, so that its progress moves. `host`: a host_pass.HostSecondPass where
    the host may take the second pass (a GPU run), else None; `rerun_at(steps)`:
    `rerun` with another step budget, for the middle pass (see _later_passes).
    `bound_hint`: what the long-pass note says bounds the members. `later`: the
    method of the later passes where it is not the first's (module doc).
    `own_counts`: each member's own count of output times where members end at their
    own times (TimeCourse.member_ends), else None (least_advanced_first)."""
    devices = tuple(getattr(scheduler, "local_devices", ()) or ())
    distributed = getattr(scheduler, "size", 1) > 1
    note = LongPassNote(bound_hint, quiet=not getattr(scheduler, "is_root", True))
    seconds = np.full(job.n_members, np.nan)
    clock = MemberClock(seconds, host.start_build if host is not None else None)
    first = job.replaced(max_batch=launch_cap(job.n_members, devices),
                         run_batch=clock.wrap(job.run_batch))
    started = time.perf_counter()
    with note.watch("the first pass", job.n_members, lambda: job.n_members - clock.done):
        outcome = run_ensemble(first, scheduler, profiler)
    report = PassReport(budget.pass_steps if budget.two_passes else 0,
                        np.zeros(0, np.int64), first_seconds=time.perf_counter() - started,
                        member_seconds=seconds)
    if not budget.two_passes:
        return outcome, report
    # np.flatnonzero's steps as methods (its wrappers cost more than the test)
    paused = least_advanced_first((outcome.status == int(Status.max_steps)).ravel()
                                  .nonzero()[0], outcome.data, own_counts) \
        if outcome.root else None
    world = getattr(scheduler, "world", None)
    if distributed and world is not None:
        # every rank runs the second pass, in the root's order (only it holds the data)
        paused = world.comm.bcast(paused, root=0)
    report.rerun = np.sort(paused) if outcome.root else paused  # (the root reports)
    if not len(paused):
        return outcome, report
    started = time.perf_counter()
    if host is None or distributed:
        host = rerun_at = None
    if distributed:
        later = None  # every rank would have to agree on its fallback members
    _later_passes(outcome, paused, job, scheduler, profiler, budget, rerun, rerun_at, host,
                  note, report, devices, later)
    report.seconds = time.perf_counter() - started
    return outcome, report


#: members whose time courses least_advanced_first reads at a time (a block's copy)
ORDER_BLOCK = 4096


def least_advanced_first(paused: np.ndarray, data: np.ndarray | None,
                         own_counts: np.ndarray | None = None) -> np.ndarray:
    """The members past the first pass's budget, those that got least far in it
    first (ties in member order): the share of their output times reached (of their
    own count, `own_counts`, where members end at their own times). With the same
    steps spent, a member that got less far is likely to need more, and a pass over
    few members on few threads (the CPU path, the host's threads) ends sooner when
    the longest start first (a dynamic schedule's longest-processing-time rule).
    Elowitz_Nature2000, 1,000 members on the 2-core development machine: its 17
    members, alone with bdf, take 0.04-1.98 s; in member order 2 threads need 3.06 s
    for them, this order 2.61 s, as longest-first by their measured times. Without
    time courses on the host (a summary, a reduction) the order stays the members'."""
    if data is None or len(paused) < 2:
        return paused
    reached = np.empty(len(paused))
    for start in range(0, len(paused), ORDER_BLOCK):  # (a spilled result: read in blocks)
        block = paused[start:start + ORDER_BLOCK]
        reached[start:start + len(block)] = np.isfinite(data[block]).any(axis=2).sum(axis=1)
    if own_counts is not None:
        reached /= np.maximum(np.asarray(own_counts)[paused], 1)
    return paused[np.argsort(reached, kind="stable")]


def _later_passes(outcome, paused, job, scheduler, profiler, budget, rerun, rerun_at, host,
                  note, report, devices, later) -> None:
    """The members past the first pass's budget to the end, merged into `outcome`: on
    the host's threads where they are few (host.takes); else on the device, first (with
    a host) in a middle pass of MIDDLE_PASS_FACTOR x --pass-steps, which finishes the
    members of moderate length in a bounded device time and leaves the long tail
    (Elowitz, 1,000 members: 4 of the 16 past 10,000 steps need more than 100,000, and
    3/4 of the 16's steps), which goes to the host where it is few and to the device
    with the full budget otherwise (then the middle pass cost at most its own bounded
    time: MIDDLE_PASS_FACTOR x --pass-steps steps of one GPU thread)."""
    if later is not None and later.in_rerun and later.ready is not None \
            and not later.ready():
        rerun, later = later.fallback, None  # the first method, as without `later`
    middle = min(budget.pass_steps * MIDDLE_PASS_FACTOR, budget.max_steps)
    can_middle = host is not None and rerun_at is not None and middle < budget.max_steps

    def middle_pass(paused: np.ndarray) -> np.ndarray:
        """`paused` on the device up to `middle` steps, merged; those left past it."""
        again = _on_device(job, paused, rerun_at(middle), middle, scheduler, profiler, note,
                           report, devices, "middle pass")
        _merge(outcome, again, paused, job)
        report.where = "device"
        report.stages.append({"max_steps": middle, "members": int(len(paused)),
                              "where": "device", "seconds": report.stage_seconds})
        return paused[again.status == Status.max_steps]

    tail = False  # whether `paused` is what a middle pass left (host_pass: the rule)
    if can_middle and not host.takes(len(paused)):
        paused, tail = middle_pass(paused), True
        if not len(paused):
            return
    again = retried = None
    if host is not None and host.takes(len(paused), tail=tail):
        retry = None
        if later is not None and later.fallback_host is not None:
            later.fallback_host.start_build()  # built while the later method runs
            # each of the later method's failures again with the first method in its
            # thread at once (host_pass.Retry): some of the members the host took, each
            # of which would cost a GPU thread ~30x a core's time on the device
            retry = host_pass.Retry(later.fallback_host, FINAL_STATUSES)
        with phase(profiler, "second pass on host threads"):
            again, retried = _on_host(host, paused, job, note, report, retry)
        if again is None and can_middle and not tail:
            # the host's build failed: the device takes them as if the host had not,
            # a middle pass first (the host's rule may have taken many more members
            # than a device pass of the full budget should hold: host_pass.LATER_FACTOR)
            paused, tail = middle_pass(paused), True
            if not len(paused):
                return
    by_later = later is not None and (again is not None or later.in_rerun)
    on_host = again is not None
    if again is None:
        again = _on_device(job, paused, rerun, budget.max_steps, scheduler, profiler, note,
                           report, devices, "second pass")
        report.where = "device" if devices else "host"
    stage = {"max_steps": budget.max_steps, "members": int(len(paused)),
             "where": report.where, "seconds": report.stage_seconds}
    if by_later:
        stage["method"] = report.method = later.name
    report.stages.append(stage)
    if not outcome.root:
        return
    if by_later:
        if retried is not None and retried.mask.any():
            _retried_on_host(paused, retried, budget, later, report)
        _fallback(again, paused, job, scheduler, profiler, budget, later, note, report,
                  devices, on_host, retried)
    _merge(outcome, again, paused, job)


def _retried_on_host(paused: np.ndarray, retried: RetriedOnHost, budget: StepBudget,
                     later: LaterMethod, report: PassReport) -> None:
    """The report of the later method's failures that the host pass ran again in
    their threads: a stage whose wall time (from the first retry's start to the last
    one's end) overlaps the later method's."""
    members = paused[retried.mask]
    report.fallback = np.sort(members)
    report.stages.append({"max_steps": budget.max_steps, "members": int(members.size),
                          "where": "host", "method": later.first,
                          "seconds": retried.span, "overlaps": later.name,
                          "on_speculation": {"begun": retried.speculated[0],
                                             "used": retried.speculated[1]}})


def _fallback(again: EnsembleOutcome, paused: np.ndarray, job, scheduler, profiler, budget,
              later: LaterMethod, note, report: PassReport, devices, on_host: bool,
              retried: "RetriedOnHost | None" = None) -> None:
    """The members of `again` (the later method's pass over `paused`) that it did not
    finish and the host pass did not run again already (`retried`), run again with the
    first method and the full budget, into `again`: on the host's threads where the
    later pass ran there (a GPU run) and they are few, else through the scheduler."""
    unfinished = ~np.isin(again.status, FINAL_STATUSES)
    if retried is not None:
        unfinished &= ~retried.mask
    unfinished = unfinished.nonzero()[0]
    if not unfinished.size:
        return
    members = paused[unfinished]
    started = time.perf_counter()
    # a member's seconds: its later-method attempt's and then its fallback's (each pass
    # writes its own)
    earlier = report.member_seconds[members].copy()
    redo, where = None, "device" if devices else "host"
    host = later.fallback_host
    if on_host and host is not None and host.takes(len(members)):
        kept = report.where, report.threads, report.measured
        with phase(profiler, "fallback on host threads"):
            redo, _ = _on_host(host, members, job, note, report)
        report.where, report.threads = kept[0], kept[1]
        if redo is not None:
            report.measured, where = np.union1d(kept[2], members), "host"
    if redo is None:
        redo = _on_device(job, members, later.fallback, budget.max_steps, scheduler,
                          profiler, note, report, devices,
                          f"{later.first} again for {later.name}'s failures")
    report.member_seconds[members] += np.nan_to_num(earlier)
    _merge_rows(again, redo, unfinished)
    report.fallback = np.union1d(report.fallback, members)
    report.stages.append({"max_steps": budget.max_steps, "members": int(members.size),
                          "where": where, "method": later.first,
                          "seconds": time.perf_counter() - started})


def _on_device(job, members, rerun, steps, scheduler, profiler, note, report, devices,
               what) -> EnsembleOutcome:
    """`members` again through the scheduler (the device, or the CPU path's host), with
    a budget of `steps` (what `rerun` integrates with)."""
    started = time.perf_counter()
    clock = MemberClock(report.member_seconds)
    desc = f"{what}: {len(members):,} members past {report.pass_steps:,} steps" + (
        f", up to {steps:,}" if what == "middle pass" else "")
    again_job = _second_pass(job, members, clock.wrap(rerun), desc).replaced(
        max_batch=launch_cap(len(members), devices))
    with note.watch(f"the {what}", len(members), lambda: len(members) - clock.done):
        again = run_ensemble(again_job, scheduler, profiler)
    report.kernel_ms += again.kernel_ms
    report.stage_seconds = time.perf_counter() - started
    return again


@dataclass(frozen=True)
class RetriedOnHost:
    """The members of a host pass that ran again with host_pass.Retry's kernel:
    `mask` over the pass's members, `span` the retries' wall time (first start to
    last end)."""

    mask: np.ndarray
    span: float
    #: retries run on speculation (host_pass.Retry): (begun, used as the result)
    speculated: tuple[int, int] = (0, 0)


def _on_host(host, paused: np.ndarray, job: EnsembleJob, note: "LongPassNote",
             report: PassReport, retry=None,
             ) -> tuple[EnsembleOutcome | None, RetriedOnHost | None]:
    """The second pass on the host's threads (host_pass.py), with `retry`'s members
    run again in their threads; (None, None) where its build failed (the device then
    runs it)."""
    threads = min(host.cores, len(paused) * (2 if retry is not None else 1))  # (host.run's)
    progress = Progress(len(paused), enabled=job.progress,
                        desc=f"{job.desc} (second pass on {threads} host threads: "
                             f"{len(paused):,} members past {report.pass_steps:,} steps)")
    done = [0]
    lock = threading.Lock()

    def advance(k: int) -> None:  # from the host pass's threads
        with lock:
            done[0] += k
        progress.advance(k)

    started = time.perf_counter()
    try:
        with note.watch("the second pass (on the host)", len(paused),
                        lambda: len(paused) - done[0]):
            result = host.run(paused, done=advance, retry=retry)
    finally:
        progress.close()
    report.stage_seconds = time.perf_counter() - started
    if result is None:
        return None, None
    report.where, report.threads = "host", result.threads
    report.member_seconds[paused] = result.seconds
    report.measured = np.sort(paused)
    retried = RetriedOnHost(result.retried, result.retry_span, result.speculated) \
        if result.retried is not None else None
    return EnsembleOutcome(True, result.status, result.data,
                           extras={"steps": result.steps, **result.reduced}), retried


class MemberClock:
    """Wraps a pass's run_batch: each launch's wall time goes to its members' entries
    of `seconds` (the pilot's members run again later: not theirs), the members done
    are counted (for the long-pass note), and `on_paused()` is called when a launch
    (the pilot included) returns members past the pass's budget."""

    def __init__(self, seconds: np.ndarray, on_paused: Callable[[], None] | None = None):
        self.seconds = seconds
        self.on_paused = on_paused
        self.done = 0
        self._lock = threading.Lock()

    def wrap(self, run_batch: RunBatch) -> RunBatch:
        def timed(device, batch: MemberBatch) -> MemberResults:
            started = time.perf_counter()
            out = run_batch(device, batch)
            wall = time.perf_counter() - started
            if self.on_paused is not None and np.any(out.status == Status.max_steps):
                self.on_paused()
            if not batch.pilot:  # a range of members by its slice (not np.arange's indices)
                members = batch.members if batch.members is not None \
                    else slice(batch.start, batch.stop)
                self.seconds[members] = wall
                with self._lock:
                    self.done += batch.size
            return out

        return timed


class LongPassNote:
    """Says once per run on stderr that a pass has run past LONG_PASS_S seconds, with
    the members it has left and what bounds them."""

    def __init__(self, bound_hint: str, quiet: bool = False):
        self.bound_hint = bound_hint
        self.quiet = quiet  # an MPI rank other than the root
        self.said = False

    def watch(self, what: str, total: int, left: Callable[[], int]) -> "_Watch":
        """A context that says so if `what` runs past LONG_PASS_S."""
        return _Watch(self, what, total, left)

    def _say(self, what: str, total: int, left: Callable[[], int]) -> None:
        if self.said:
            return
        self.said = True
        hint = f"; {self.bound_hint}" if self.bound_hint else ""
        print(f"sbmlgpu: {what} has run {LONG_PASS_S:g} s with {left():,} of {total:,} "
              f"members left{hint}", file=sys.stderr, flush=True)


class _Watch:
    """LongPassNote.watch's context: an alarm for its note while the pass runs (a
    class, not a contextlib generator, which cost ~2.5 us more a pass; issue 13)."""

    __slots__ = ("note", "what", "total", "left", "key")

    def __init__(self, note: LongPassNote, what: str, total: int, left: Callable[[], int]):
        self.note, self.what, self.total, self.left = note, what, total, left
        self.key = None

    def __enter__(self) -> None:
        note = self.note
        if not (note.quiet or note.said):
            self.key = _ALARMS.set(LONG_PASS_S, lambda: note._say(  # noqa: SLF001
                self.what, self.total, self.left))

    def __exit__(self, *exc) -> None:
        if self.key is not None:
            _ALARMS.cancel(self.key)


def _poll_s() -> float:
    """How often the alarms' thread looks for a due note: a 20th of LONG_PASS_S."""
    return min(max(LONG_PASS_S / 20, 1e-3), 0.5)


class _Alarms:
    """Calls due after a delay, from one daemon thread for the whole process: a
    threading.Timer per run started a thread per run, which a one-member run on the
    CPU path paid for in every call (~0.1-0.5 ms, more than the run)."""

    def __init__(self):
        self._new_lock()
        self._due: dict[int, tuple[float, Callable[[], None]]] = {}
        self._next_key = 0
        self._thread: threading.Thread | None = None
        self._waiting_until = float("-inf")  # the thread's next look (monotonic)

    def _new_lock(self) -> None:
        # set and cancel (every pass) take the lock itself: Condition's __enter__ is
        # Python code, the lock's is not
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)

    def set(self, delay: float, call: Callable[[], None]) -> int:
        with self._lock:
            key = self._next_key
            self._next_key += 1
            self._due[key] = (time.monotonic() + delay, call)
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, daemon=True,
                                                name="sbmlgpu-long-pass-note")
                self._thread.start()
            if self._due[key][0] < self._waiting_until:
                self._cond.notify()  # due before the thread looks again (rare: a wake-up
                # per run would cost a context switch; a note due in 10 s never needs it)
            return key

    def cancel(self, key: int) -> None:
        with self._lock:
            self._due.pop(key, None)

    def _serve(self) -> None:
        while True:
            with self._cond:
                now = time.monotonic()
                ready = [k for k, (at, _) in self._due.items() if at <= now]
                calls = [self._due.pop(k)[1] for k in ready]
                if not calls:
                    poll = _poll_s()
                    soonest = min((at for at, _ in self._due.values()), default=now + poll)
                    wait = min(max(soonest - now, 0.0), poll)
                    self._waiting_until = now + wait
                    self._cond.wait(wait)
                    continue
            for call in calls:
                try:
                    call()
                except Exception as exc:  # noqa: BLE001 - a note that failed must not end
                    log.debug("long-pass note failed: %s", exc)  # the thread for later runs

    def forget_thread(self) -> None:
        """In a forked child: the thread is not there (a new one starts on first use)."""
        self._new_lock()
        self._thread = None
        self._waiting_until = float("-inf")


_ALARMS = _Alarms()
os.register_at_fork(after_in_child=_ALARMS.forget_thread)


def _second_pass(job: EnsembleJob, paused: np.ndarray, rerun: RunBatch,
                 what: str) -> EnsembleJob:
    def run_batch(device, batch: MemberBatch) -> MemberResults:
        # positions in the second pass -> the members themselves (their parameters,
        # random streams and, unless bundled, their rows of this pass's result)
        members = paused[batch.start:batch.stop]
        # the rows are in this pass's (launch) order; a range of members out of order
        # (least_advanced_first) would be written in member order there (program.py's
        # _first_member: a bundled batch's rules), so it gets rows of its own
        rows = batch.rows if batch.rows is None or not _permuted_range(members) else None
        return rerun(device, MemberBatch(batch.start, batch.stop, members, rows))

    return job.replaced(n_members=len(paused), run_batch=run_batch,
                        memory=lambda time_courses, bundled: job.memory(True, True),
                        summary=None, pilot=None, order=None, launch_order=None,
                        desc=f"{job.desc} ({what})")


def _permuted_range(members: np.ndarray) -> bool:
    """Whether `members` are a contiguous range of member numbers, not ascending."""
    if len(members) < 2:
        return False
    low, high = int(members.min()), int(members.max())
    return high - low + 1 == len(members) and not bool(np.all(np.diff(members) > 0))


def _merge(outcome: EnsembleOutcome, again: EnsembleOutcome, paused: np.ndarray,
           job: EnsembleJob) -> None:
    """The second pass's members into the first pass's outcome, in place."""
    _merge_rows(outcome, again, paused)
    if job.summary is not None:
        grid = outcome.target.grid
        stats = outcome.stats.merge(job.summary.fold(again.data, again.status, grid))
        ok = int((outcome.status == Status.ok).sum())
        outcome.stats = stats
        outcome.summary = stats.summary(job.summary, tuple(job.shape), job.quantiles, ok,
                                        len(outcome.status) - ok)


def _merge_rows(outcome: EnsembleOutcome, again: EnsembleOutcome, rows: np.ndarray) -> None:
    """`again`'s statuses, extras, time courses and kernel time into `rows` of
    `outcome`, in place."""
    outcome.status[rows] = again.status
    for key, values in again.extras.items():
        outcome.extras[key][rows] = values
    outcome.kernel_ms += again.kernel_ms
    if outcome.data is not None:
        outcome.data[rows] = again.data
