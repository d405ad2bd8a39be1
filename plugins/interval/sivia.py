"""Set inversion via interval analysis (Jaulin and Walter 1993), the host's side:
what a box's verdict means for the paving, and bisection.

A box found FEASIBLE is kept; REJECTED is dropped (its volume is counted);
UNDECIDED or FAILED is bisected across its widest edge *relative to the search box*
(so unknowns of different scales are split fairly) unless every edge is already
narrower than epsilon, when it is kept as undetermined. The functions work on
chunks of boxes (numpy arrays): program.py hands chunks to the scheduler's growing
queue (one host or GPU thread per device, MPI ranks), and each chunk's decision
depends on that chunk alone, so the paving is the same however the chunks were
spread. Nothing is lost when a budget stops the search: the chunks still queued
are kept as undetermined and the paving is marked incomplete.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from .verdicts import FAILED, FEASIBLE, REJECTED, UNDECIDED

KEPT_FEASIBLE, KEPT_UNDETERMINED = 0, 1  # the Paving's verdict codes
COUNTS = ("evaluated", "feasible", "rejected", "bisected", "undetermined", "failed")


@dataclass(frozen=True)
class Chunk:
    """Boxes that travel together: lower, upper (m, k)."""

    lower: np.ndarray
    upper: np.ndarray

    def __len__(self) -> int:
        return len(self.lower)


@dataclass
class Decision:
    """What the verdicts of one chunk gave: boxes kept (with Paving verdict codes),
    counts, the volume proved inconsistent, and the halves to check next."""

    lower: np.ndarray
    upper: np.ndarray
    kept: np.ndarray  # KEPT_FEASIBLE / KEPT_UNDETERMINED per kept box
    counts: dict = field(default_factory=dict)
    rejected_volume: float = 0.0
    halves: Chunk | None = None
    steps: int = 0
    enclosures: int = 0  # evaluated at data times inside steps (a span check: one)


@dataclass(frozen=True)
class Bisection:
    """How boxes are cut: the search box's widths (the scale of "relative") and
    epsilon (edges no wider are never cut)."""

    scale: np.ndarray
    epsilon: float

    def cut(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(axis, midpoint) of each box's widest edge relative to the search box,
        among the edges wider than epsilon."""
        width = hi - lo
        relative = np.where(width > self.epsilon, width / self.scale, -1.0)
        axis = np.argmax(relative, axis=1)
        rows = np.arange(len(lo))
        return axis, lo[rows, axis] + 0.5 * width[rows, axis]

    def halves(self, lo: np.ndarray, hi: np.ndarray, axis, middle) -> Chunk:
        """Each box split in two at (axis, middle); the halves share the midpoint."""
        rows = np.arange(len(lo))
        left_hi, right_lo = hi.copy(), lo.copy()
        left_hi[rows, axis] = middle
        right_lo[rows, axis] = middle
        return Chunk(np.concatenate([lo, right_lo]), np.concatenate([left_hi, hi]))

    def splittable(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        return np.any(hi - lo > self.epsilon, axis=1)

    def presplit(self, lower: np.ndarray, upper: np.ndarray, times: int) -> Chunk:
        """The search box bisected `times` times before any verdict (a device with
        many threads would otherwise wait through the first levels of the search,
        one box, two, four...; the paving is as sound, feasible boxes may be smaller)."""
        lo, hi = np.asarray(lower, float)[None, :], np.asarray(upper, float)[None, :]
        for _ in range(int(times)):
            split = self.splittable(lo, hi)
            if not split.any():
                break
            axis, middle = self.cut(lo[split], hi[split])
            halves = self.halves(lo[split], hi[split], axis, middle)
            lo = np.concatenate([lo[~split], halves.lower])
            hi = np.concatenate([hi[~split], halves.upper])
        return Chunk(lo, hi)

    def decide(self, chunk: Chunk, verdict: np.ndarray) -> Decision:
        """Keep, drop or bisect each box of `chunk` by its verdict."""
        lower, upper, verdict = chunk.lower, chunk.upper, np.asarray(verdict)
        feasible = verdict == FEASIBLE
        rejected = verdict == REJECTED
        open_ = (verdict == UNDECIDED) | (verdict == FAILED)
        unknown = ~(feasible | rejected | open_)
        if np.any(unknown):
            raise ValueError(f"unknown verdict codes {sorted(set(verdict[unknown].tolist()))}")
        counts = dict.fromkeys(COUNTS, 0)
        counts.update(evaluated=len(verdict), feasible=int(feasible.sum()),
                      rejected=int(rejected.sum()), failed=int((verdict == FAILED).sum()))
        lo, hi = lower[open_], upper[open_]
        small = ~self.splittable(lo, hi)
        axis, middle = self.cut(lo[~small], hi[~small])
        rows = np.arange(len(axis))
        split_lo, split_hi = lo[~small], hi[~small]
        # no double strictly between the ends: the box cannot shrink, keep it
        stuck = (middle <= split_lo[rows, axis]) | (middle >= split_hi[rows, axis])
        undetermined_lo = np.concatenate([lo[small], split_lo[stuck]])
        undetermined_hi = np.concatenate([hi[small], split_hi[stuck]])
        counts["undetermined"] = len(undetermined_lo)
        counts["bisected"] = int((~stuck).sum())
        halves = self.halves(split_lo[~stuck], split_hi[~stuck], axis[~stuck], middle[~stuck])
        kept = np.concatenate([np.full(int(feasible.sum()), KEPT_FEASIBLE, np.int8),
                               np.full(len(undetermined_lo), KEPT_UNDETERMINED, np.int8)])
        return Decision(np.concatenate([lower[feasible], undetermined_lo]),
                        np.concatenate([upper[feasible], undetermined_hi]), kept, counts,
                        float(np.prod(upper[rejected] - lower[rejected], axis=1).sum()),
                        halves if len(halves) else None)


def chunks_of(chunk: Chunk | None, size: int) -> list[Chunk]:
    """`chunk` cut into chunks of at most `size` boxes."""
    if chunk is None or not len(chunk):
        return []
    return [Chunk(chunk.lower[a:a + size], chunk.upper[a:a + size])
            for a in range(0, len(chunk), size)]


class Search:
    """One host's queue and paving, for a device that runs SIVIA itself (persistent.py):
    it takes boxes to check, puts back the boxes the device did not finish, and keeps
    what the device kept, with its counters. `give` applies the host's own rule
    (Bisection.decide) to verdicts, as the multi loop does per chunk."""

    def __init__(self, lower, upper, epsilon: float, presplit: int = 0):
        self.lower = np.asarray(lower, dtype=np.float64)
        self.upper = np.asarray(upper, dtype=np.float64)
        self.epsilon = float(epsilon)
        self.bisection = Bisection(self.upper - self.lower, self.epsilon)
        first = self.bisection.presplit(self.lower, self.upper, presplit)
        self._queue: deque = deque([(first.lower, first.upper)])
        self._queued = len(first)
        self.counts = {**dict.fromkeys(COUNTS, 0), "presplit": len(first)}
        self.rejected_volume = 0.0
        self._kept: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    @property
    def queued(self) -> int:
        return self._queued

    @property
    def scale(self) -> np.ndarray:
        """The widths that make an edge's width relative (the search box's)."""
        return self.bisection.scale

    @scale.setter
    def scale(self, value) -> None:
        self.bisection = Bisection(np.asarray(value, dtype=np.float64), self.epsilon)

    def take(self, count: int) -> tuple[np.ndarray, np.ndarray]:
        """Up to `count` boxes, oldest first, as (lower, upper) arrays (b, k)."""
        lows, highs, taken = [], [], 0
        while self._queue and taken < count:
            lo, hi = self._queue.popleft()
            room = count - taken
            if len(lo) > room:
                self._queue.appendleft((lo[room:], hi[room:]))
                lo, hi = lo[:room], hi[:room]
            lows.append(lo)
            highs.append(hi)
            taken += len(lo)
        self._queued -= taken
        k = len(self.lower)
        if not lows:
            return np.zeros((0, k)), np.zeros((0, k))
        return np.concatenate(lows), np.concatenate(highs)

    def put(self, lower: np.ndarray, upper: np.ndarray) -> None:
        """Queue boxes to check (b, k)."""
        if len(lower):
            self._queue.append((np.asarray(lower, np.float64), np.asarray(upper, np.float64)))
            self._queued += len(lower)

    def keep(self, lower: np.ndarray, upper: np.ndarray, code) -> None:
        """Keep boxes with their Paving codes (KEPT_FEASIBLE / KEPT_UNDETERMINED; one
        for all or one each)."""
        code = np.asarray(code)
        if np.any((code != KEPT_FEASIBLE) & (code != KEPT_UNDETERMINED)):
            raise ValueError(f"kept boxes need codes 0 or 1, got "
                             f"{sorted(set(code.ravel().tolist()))}")
        if len(lower):
            self._kept.append((np.asarray(lower, np.float64), np.asarray(upper, np.float64),
                               np.broadcast_to(code.astype(np.int8), (len(lower),)).copy()))

    def tally(self, counts: dict, rejected_volume: float) -> None:
        """Add counters of verdicts computed elsewhere (the keys of `counts`)."""
        for key, value in counts.items():
            self.counts[key] = self.counts.get(key, 0) + int(value)
        self.rejected_volume += float(rejected_volume)

    def give(self, lower: np.ndarray, upper: np.ndarray, verdict: np.ndarray) -> None:
        """Verdicts of boxes taken: keep, drop, or bisect into the queue."""
        decision = self.bisection.decide(Chunk(lower, upper), verdict)
        self.tally(decision.counts, decision.rejected_volume)
        self.keep(decision.lower, decision.upper, decision.kept)
        if decision.halves is not None:
            self.put(decision.halves.lower, decision.halves.upper)

    def stop(self) -> int:
        """End early: every queued box is kept as undetermined; returns how many."""
        left = self._queued
        lo, hi = self.take(left)
        self.keep(lo, hi, KEPT_UNDETERMINED)
        return left

    def paving(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        k = len(self.lower)
        if not self._kept:
            return np.zeros((0, k)), np.zeros((0, k)), np.zeros(0, np.int8)
        return tuple(np.concatenate(parts) for parts in zip(*self._kept))


@dataclass(frozen=True)
class Budget:
    """When a search stops early: boxes evaluated (max_boxes) or seconds since
    `started` (time_limit, 0: none), as the --max-boxes and --time-limit options say."""

    max_boxes: int
    time_limit: float
    started: float

    def exceeded(self, search: Search) -> str | None:
        """Why the search must stop now (the paving's stopped_by), or None."""
        evaluated = search.counts["evaluated"]
        if evaluated >= self.max_boxes:
            return f"max-boxes: {evaluated} boxes evaluated"
        if self.time_limit and time.perf_counter() - self.started > self.time_limit:
            return f"time-limit: {self.time_limit:g} s"
        return None

    def boxes_left(self, search: Search) -> int:
        return max(0, self.max_boxes - search.counts["evaluated"])

    def seconds_left(self) -> float | None:
        """None: no time limit."""
        if not self.time_limit:
            return None
        return max(0.0, self.time_limit - (time.perf_counter() - self.started))
