"""Set inversion via interval analysis (Jaulin and Walter 1993), the host's side:
a queue of boxes, their verdicts, and bisection.

A box found FEASIBLE is kept; REJECTED is dropped (its volume is counted);
UNDECIDED or FAILED is bisected across its widest edge *relative to the search box*
(so unknowns of different scales are split fairly) unless every edge is already
narrower than epsilon, when it is kept as undetermined. Batches go breadth first:
the frontier grows until it fills the device, and each batch is the oldest boxes.
Nothing is lost when a budget stops the search: the boxes still queued are kept
as undetermined and the paving is marked incomplete.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from .verdicts import FAILED, FEASIBLE, REJECTED, UNDECIDED


@dataclass
class Search:
    lower: np.ndarray  # (k,) the search box
    upper: np.ndarray
    epsilon: float
    _queue: deque = field(default_factory=deque, repr=False)
    kept_lower: list = field(default_factory=list, repr=False)
    kept_upper: list = field(default_factory=list, repr=False)
    kept_verdict: list = field(default_factory=list, repr=False)  # 0 feasible, 1 undetermined
    counts: dict = field(default_factory=lambda: {"evaluated": 0, "feasible": 0,
                                                  "rejected": 0, "bisected": 0,
                                                  "undetermined": 0, "failed": 0})
    rejected_volume: float = 0.0
    #: bisect every box this many times before the first verdict (a device with many
    #: threads would otherwise wait through the first levels of the search, one box,
    #: two, four...; the paving is as sound, its feasible boxes may be smaller)
    presplit: int = 0

    def __post_init__(self):
        self.lower = np.asarray(self.lower, dtype=np.float64)
        self.upper = np.asarray(self.upper, dtype=np.float64)
        self.scale = self.upper - self.lower
        lower, upper = self.lower[None, :].copy(), self.upper[None, :].copy()
        for _ in range(int(self.presplit)):
            splittable = np.any(upper - lower > self.epsilon, axis=1)
            if not splittable.any():
                break
            halves = self._halves(lower[splittable], upper[splittable])
            lower = np.concatenate([lower[~splittable], halves[0]])
            upper = np.concatenate([upper[~splittable], halves[1]])
        self._queue.append((lower, upper))
        self._queued = len(lower)
        self.counts["presplit"] = len(lower)

    @property
    def queued(self) -> int:
        return self._queued

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

    def give(self, lower: np.ndarray, upper: np.ndarray, verdict: np.ndarray) -> None:
        """The verdicts of boxes taken: keep, drop, or bisect into the queue."""
        verdict = np.asarray(verdict)
        self.counts["evaluated"] += len(verdict)
        feasible = verdict == FEASIBLE
        rejected = verdict == REJECTED
        open_ = (verdict == UNDECIDED) | (verdict == FAILED)
        if np.any(~(feasible | rejected | open_)):
            raise ValueError(f"unknown verdict codes {sorted(set(verdict[~(feasible | rejected | open_)].tolist()))}")
        self.counts["failed"] += int((verdict == FAILED).sum())
        self.counts["feasible"] += int(feasible.sum())
        self.counts["rejected"] += int(rejected.sum())
        self.rejected_volume += float(np.prod(upper[rejected] - lower[rejected], axis=1).sum())
        self._keep(lower[feasible], upper[feasible], 0)
        lo, hi = lower[open_], upper[open_]
        width = hi - lo
        small = np.all(width <= self.epsilon, axis=1)
        self.counts["undetermined"] += int(small.sum())
        self._keep(lo[small], hi[small], 1)
        lo, hi, width = lo[~small], hi[~small], width[~small]
        if len(lo):
            axis, middle = self._cut(lo, hi)
            rows = np.arange(len(lo))
            stuck = (middle <= lo[rows, axis]) | (middle >= hi[rows, axis])  # no double between
            if np.any(stuck):
                self.counts["undetermined"] += int(stuck.sum())
                self._keep(lo[stuck], hi[stuck], 1)
                lo, hi = lo[~stuck], hi[~stuck]
            halves = self._halves(lo, hi)
            self._queue.append(halves)
            self._queued += len(halves[0])
            self.counts["bisected"] += len(lo)

    def _cut(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(axis, midpoint) of each box's widest edge relative to the search box,
        among the edges wider than epsilon."""
        width = hi - lo
        relative = np.where(width > self.epsilon, width / self.scale, -1.0)
        axis = np.argmax(relative, axis=1)
        rows = np.arange(len(lo))
        return axis, lo[rows, axis] + 0.5 * width[rows, axis]

    def _halves(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each box split in two at `_cut`; the halves share the midpoint."""
        axis, middle = self._cut(lo, hi)
        rows = np.arange(len(lo))
        left_hi, right_lo = hi.copy(), lo.copy()
        left_hi[rows, axis] = middle
        right_lo[rows, axis] = middle
        return np.concatenate([lo, right_lo]), np.concatenate([left_hi, hi])

    def _keep(self, lower, upper, code) -> None:
        if len(lower):
            self.kept_lower.append(lower)
            self.kept_upper.append(upper)
            self.kept_verdict.append(np.broadcast_to(np.asarray(code, np.int8),
                                                     (len(lower),)).copy())

    # What a device that runs SIVIA itself (persistent.py) hands back between launches:
    # boxes still to check, boxes kept (codes as kept_verdict), and its counters.

    def put(self, lower: np.ndarray, upper: np.ndarray) -> None:
        """Queue boxes to check (b, k)."""
        if len(lower):
            self._queue.append((np.asarray(lower, np.float64), np.asarray(upper, np.float64)))
            self._queued += len(lower)

    def keep(self, lower: np.ndarray, upper: np.ndarray, code) -> None:
        """Keep boxes with their codes (0 feasible, 1 undetermined; one or one each)."""
        code = np.asarray(code)
        if np.any((code != 0) & (code != 1)):
            raise ValueError(f"kept boxes need codes 0 or 1, got {sorted(set(code.ravel().tolist()))}")
        self._keep(np.asarray(lower, np.float64), np.asarray(upper, np.float64), code)

    def tally(self, counts: dict, rejected_volume: float) -> None:
        """Add counters of verdicts computed elsewhere (the keys of `counts`)."""
        for key, value in counts.items():
            self.counts[key] += int(value)
        self.rejected_volume += float(rejected_volume)

    def stop(self) -> int:
        """End early: every queued box is kept as undetermined; returns how many."""
        left = self._queued
        lo, hi = self.take(left)
        self._keep(lo, hi, 1)
        return left

    def paving(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        k = len(self.lower)
        if not self.kept_lower:
            return np.zeros((0, k)), np.zeros((0, k)), np.zeros(0, np.int8)
        return (np.concatenate(self.kept_lower), np.concatenate(self.kept_upper),
                np.concatenate(self.kept_verdict))


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
