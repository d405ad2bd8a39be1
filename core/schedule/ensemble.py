"""One runner for ensembles of one member per item: pilot -> plan -> map -> combine/spill.

A backend that runs members independently (an ODE time course, an SSA
realisation) describes its work as an `EnsembleJob`, and `run_ensemble` does the
rest, the same way for every backend:

1. pilot (optional): some members run first, on the first device (of MPI rank 0),
   with full time courses. From them the backend may choose a launch order (`order`:
   bundling by predicted cost), and a summary gets its histogram grid and shift
   (`SummaryRules.grid`, the pilot mean). A backend that knows the launch order
   beforehand (`launch_order`: a cost model of an earlier run) needs no pilot for it. A pilot `in_ensemble` (members
   0..p-1) is part of the result and does not run again; otherwise its members
   run again in their batch.
2. plan and map: the other members go through `Scheduler.map_batches` in launch
   order (batches that fit device memory by `memory(time_courses, bundled)`,
   aligned to warps where bundled, at most `max_batch` members where the job sets
   it, over every GPU and MPI rank, with the progress bar), each batch through the
   backend's `run_batch(device, MemberBatch)`.
3. combine or spill: full time courses go into one float64 (members, times,
   outputs) array, in memory or a memory-mapped file above the backend's limit
   (spill.py). A batch of consecutive members is handed its rows (`rows`) so that
   an engine can write them in place; so is a bundled batch whose members form a
   contiguous range (one batch of the whole ensemble), which the engine writes in
   member order; other bundled batches are scattered by member;
   under MPI the batches' data travel to rank 0, which places them. With a summary,
   each batch is reduced where it ran (the backend's device statistics) or folded
   on the host (`SummaryRules.fold`), and the partials merge in member order.
4. statuses and the backend's per-member arrays (`extras`: steps, firings, ...)
   are put back in member order; the summary is read under the backend's rules.

On an MPI rank other than 0 the outcome is empty (`root` False, no members,
data of shape (0, times, outputs)): rank 0 holds the result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..ensemble_summary import BinGrid, EnsembleStats, SummaryRules, pilot_mean
from ..profile import phase
from ..results import DEFAULT_QUANTILES, Summary
from .bundling import Permutation
from .spill import Spill, destination


@dataclass(frozen=True)
class BatchMemory:
    """Device memory one member needs, one launch needs beyond that, and the multiple
    that batch starts must be (32 when bundled: a warp holds similar members)."""

    per_member: float
    fixed: float = 0.0
    align: int = 1


@dataclass(frozen=True)
class Pilot:
    """Members that run first (original indices, sorted)."""

    members: np.ndarray
    in_ensemble: bool = False  # members 0..p-1, kept as the ensemble's own results

    @classmethod
    def first(cls, count: int) -> "Pilot":
        """Members 0..count-1, part of the ensemble (they do not run again)."""
        return cls(np.arange(int(count)), True)

    @classmethod
    def sample(cls, members) -> "Pilot":
        """These members, run again later in their batches."""
        return cls(np.asarray(members, dtype=np.int64), False)


@dataclass(frozen=True)
class SummaryTarget:
    """What a batch reduced on its device bins into and shifts by."""

    grid: BinGrid | None
    shift: np.ndarray  # (cols,) the pilot mean


@dataclass
class MemberBatch:
    """One launch's members, for the backend's `run_batch`."""

    start: int  # positions in launch order
    stop: int
    members: np.ndarray | None  # the member at each position; None: start..stop-1
    # rows of the result to write into, if given: members start..stop-1, or with
    # `members` the rows of members.min() .. members.max(), in member order
    rows: np.ndarray | None = None
    summary: SummaryTarget | None = None  # reduce with these, when the engine can
    pilot: bool = False

    @property
    def size(self) -> int:
        return self.stop - self.start

    def take(self, table: np.ndarray) -> np.ndarray:
        """This batch's columns of a (rows, members) table."""
        if self.members is not None:
            # np.take, not table[:, members]: that one is column-major, and the engine's
            # upload would copy it a second time to make it row-major
            return np.take(table, self.members, axis=1)
        return table[:, self.start:self.stop]


@dataclass
class MemberResults:
    """What `run_batch` returns for a batch of b members."""

    status: np.ndarray  # (b,) int8 Status codes
    data: np.ndarray | None = None  # (b, times, outputs); `rows` itself if written there
    stats: EnsembleStats | None = None  # the batch reduced on its device (then no data)
    extras: dict[str, np.ndarray] = field(default_factory=dict)  # (b,) per member
    kernel_ms: float = 0.0


@dataclass
class EnsembleJob:
    n_members: int
    shape: tuple[int, int]  # (times, outputs) of one member
    run_batch: Callable[[Any, MemberBatch], MemberResults]
    memory: Callable[[bool, bool], BatchMemory]  # (time courses?, bundled?)
    summary: SummaryRules | None = None  # None: keep every time course
    bins: int = 0  # histogram bins of the summary (0: none, no quantiles)
    quantiles: tuple[float, ...] = DEFAULT_QUANTILES
    pilot: Pilot | None = None  # a summary needs one (its grid)
    order: Callable[[MemberResults, np.ndarray], Permutation | None] | None = None
    #: a launch order known before the run (e.g. from a cost model fitted on an earlier
    #: run of the same kernel), used where no pilot gives one: the pilot is then spared
    launch_order: Permutation | None = None
    spill: Spill = Spill()
    progress: bool = True
    desc: str = "members"
    max_batch: int | None = None  # members per launch at most (None: as memory allows)
    #: host threads per GPU taking batches (Scheduler.map_batches): run_batch must be
    #: safe to call from several threads for one device
    workers_per_device: int = 1

    def replaced(self, **changes) -> "EnsembleJob":
        """dataclasses.replace(self, **changes): the same shallow copy of this plain
        dataclass (every field set by __init__ as given, no __post_init__), without
        replace's loop over the fields and a new __init__ (~5 us; a pass makes one)."""
        unknown = changes.keys() - self.__dataclass_fields__.keys()
        if unknown:
            raise TypeError(f"EnsembleJob has no field {', '.join(sorted(unknown))}")
        job = object.__new__(type(self))
        job.__dict__.update(self.__dict__, **changes)
        return job


@dataclass
class EnsembleOutcome:
    """The ensemble in member order (on MPI rank 0; elsewhere `root` False, empty)."""

    root: bool
    status: np.ndarray
    data: np.ndarray | None  # (members, times, outputs); None with a summary
    summary: Summary | None = None
    stats: EnsembleStats | None = None
    extras: dict[str, np.ndarray] = field(default_factory=dict)
    pilot: MemberResults | None = None
    permutation: Permutation | None = None
    target: SummaryTarget | None = None
    spill_path: str | None = None
    spill_kept: bool = False
    spill_note: str = ""
    kernel_ms: float = 0.0


def default_scheduler(scheduler, device, progress: bool):
    """`scheduler`, or one over `device` (the host when None) for a Program run alone."""
    if scheduler is not None:
        return scheduler
    from .scheduler import Scheduler

    return Scheduler(devices=[device] if device is not None else [], progress=progress)


def run_ensemble(job: EnsembleJob, scheduler, profiler=None) -> EnsembleOutcome:
    """Run `job` through `scheduler` (see the module docstring)."""
    return _Run(job, scheduler, profiler).go()


class _Run:
    def __init__(self, job: EnsembleJob, scheduler, profiler):
        self.job, self.scheduler, self.profiler = job, scheduler, profiler
        self.n = int(job.n_members)
        self.shape = tuple(int(v) for v in job.shape)
        self.root = getattr(scheduler, "is_root", True)
        self.distributed = getattr(scheduler, "size", 1) > 1
        if job.summary is not None and job.pilot is None:
            raise ValueError("an ensemble summary needs a pilot (its histogram grid and shift)")
        if job.pilot is not None and job.pilot.in_ensemble and job.order is not None:
            raise ValueError("a pilot that is part of the ensemble fixes its members' "
                             "order: it cannot be combined with a launch order")
        if job.launch_order is not None:
            if job.order is not None or (job.pilot is not None and job.pilot.in_ensemble):
                raise ValueError("a launch order given beforehand cannot be combined with "
                                 "one from the pilot, or a pilot part of the ensemble")
            if len(job.launch_order) != job.n_members:
                raise ValueError(f"a launch order of {len(job.launch_order)} members for "
                                 f"{job.n_members}")

    def go(self) -> EnsembleOutcome:
        job = self.job
        pilot, permutation, target = self._pilot()
        if permutation is None:
            permutation = job.launch_order
        offset = len(job.pilot.members) if job.pilot is not None and job.pilot.in_ensemble else 0
        order = permutation.order if permutation is not None else None
        time_courses = job.summary is None
        where = destination((self.n,) + self.shape, job.spill) \
            if time_courses and self.root else None
        data = where.data if where is not None else None
        if offset and data is not None:
            data[:offset] = pilot.data

        def work(device, a: int, b: int) -> MemberResults:
            start, stop = offset + a, offset + b
            members = order[start:stop] if order is not None else None
            local = data is not None and not self.distributed
            # a bundled batch that holds a contiguous range of members (one batch of
            # the whole ensemble) gets their rows too: the engine writes them in
            # member order, and no scatter by member remains
            first = start if members is None else _first_of_range(members)
            rows = data[first:first + stop - start] if local and first is not None else None
            out = job.run_batch(device, MemberBatch(start, stop, members, rows,
                                                    None if time_courses else target))
            self._check(out, stop - start)
            piece = MemberResults(out.status, None, out.stats, out.extras, out.kernel_ms)
            if not time_courses:
                if piece.stats is None:
                    piece.stats = job.summary.fold(out.data, out.status, target.grid)
            elif self.distributed:
                piece.data = np.asarray(out.data)  # travels to rank 0
            elif rows is None:
                data[members] = out.data
            elif out.data is not rows:
                rows[...] = out.data
            return piece

        memory = job.memory(time_courses, order is not None)
        pieces = []
        if self.n - offset > 0:
            pieces = self.scheduler.map_batches(
                work, self.n - offset, memory.per_member, fixed_bytes=memory.fixed,
                align=memory.align, combine="batches", progress=job.progress, desc=job.desc,
                **({"max_items": job.max_batch} if job.max_batch is not None else {}),
                **({"workers_per_device": job.workers_per_device}
                   if job.workers_per_device != 1 else {}))
        if not self.root:
            return EnsembleOutcome(False, np.zeros(0, np.int8), np.zeros((0,) + self.shape),
                                   permutation=permutation, target=target)
        return self._combine(pieces or [], pilot, offset, permutation, target, where)

    # -- the pilot ------------------------------------------------------------------------
    def _pilot(self):
        """(pilot results, launch order, summary target). Under MPI rank 0 runs the
        pilot and sends the order and the target to every rank, so that all bin and
        order alike whatever their devices."""
        job = self.job
        if job.pilot is None:
            return None, None, None
        pilot = permutation = target = None
        if self.root:
            members = np.asarray(job.pilot.members)
            devices = getattr(self.scheduler, "local_devices", ()) or (None,)
            batch = MemberBatch(0, len(members), None if job.pilot.in_ensemble else members,
                                pilot=True)
            with phase(self.profiler, "pilot"):
                pilot = job.run_batch(devices[0], batch)
            self._check(pilot, len(members))
            if pilot.data is None:
                raise RuntimeError("the pilot returned no time courses")
            permutation = job.order(pilot, members) if job.order is not None else None
            if job.summary is not None:
                values = job.summary.values(pilot.data, pilot.status)
                grid = job.summary.grid(values, job.bins) if job.bins else None
                target = SummaryTarget(grid, pilot_mean(values))
        world = getattr(self.scheduler, "world", None)
        if self.distributed and world is not None:
            permutation, target = world.comm.bcast((permutation, target), root=0)
        return pilot, permutation, target

    # -- putting it together ------------------------------------------------------------
    def _combine(self, pieces, pilot, offset, permutation, target, where) -> EnsembleOutcome:
        job = self.job
        parts = [(0, pilot)] if offset else []
        parts += [(offset + batch.start, piece) for batch, piece in pieces]
        status = _concat([p.status for _, p in parts], np.int8)
        if status.size != self.n:
            raise RuntimeError(f"{status.size} member results for {self.n} members")
        extras = {key: np.concatenate([p.extras[key] for _, p in parts])
                  for key in (parts[0][1].extras if parts else {})}
        data = where.data if where is not None else None
        if data is not None and self.distributed:
            for start, piece in parts[1 if offset else 0:]:
                stop = start + len(piece.status)
                if permutation is not None:
                    data[permutation.order[start:stop]] = piece.data
                else:
                    data[start:stop] = piece.data
        kernel_ms = float(sum(p.kernel_ms for _, p in parts))
        if offset == 0 and pilot is not None:
            kernel_ms += pilot.kernel_ms
        if permutation is not None:
            status = permutation.restore(status)
            extras = {key: permutation.restore(value) for key, value in extras.items()}
        stats = summary = None
        if job.summary is not None:
            cols = self.shape[0] * self.shape[1]
            stats = EnsembleStats.empty(cols, target.grid)
            if offset:
                stats = stats.merge(job.summary.fold(pilot.data, pilot.status, target.grid))
            for _, piece in pieces:
                stats = stats.merge(piece.stats)
            ok = int((status == 0).sum())
            summary = stats.summary(job.summary, self.shape, job.quantiles, ok, self.n - ok)
        return EnsembleOutcome(
            True, status, data, summary, stats, extras, pilot, permutation, target,
            where.path if where is not None else None, bool(where and where.kept),
            where.note if where is not None else "", kernel_ms)

    def _check(self, out: MemberResults, size: int) -> None:
        if len(out.status) != size:
            raise RuntimeError(f"a batch of {size} members returned {len(out.status)} "
                               "statuses")
        for key, value in out.extras.items():
            if len(value) != size:
                raise RuntimeError(f"a batch of {size} members returned {len(value)} "
                                   f"values of {key!r}")


def _first_of_range(members: np.ndarray) -> int | None:
    """m when `members` are m, m+1, ..., m+len-1 in some order (distinct, as a slice of
    a permutation is), else None."""
    if not len(members):
        return None
    first = int(members.min())
    return first if int(members.max()) - first == len(members) - 1 else None


def _concat(arrays, dtype) -> np.ndarray:
    return np.concatenate(arrays).astype(dtype, copy=False) if arrays else np.zeros(0, dtype)
