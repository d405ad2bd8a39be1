"""The numpy engine: the kernel's loop (kernels/ssa.cu), vectorised over realisations.

Every realisation takes the same steps as its GPU thread: the same Philox block per
firing attempt (codegen/philox.py is the numpy twin of the device generator), the
same propensities (twin.py prints them from the same CSE block), a0 summed in the
same order, the same selection rule, the same event handling. So a realisation
is the same on the CPU as on the GPU, up to the last bit of library functions
(log) and nvcc's FMA contraction, which move a firing time by an ulp and change a
sample only if a firing lands within that ulp of a sample time.

Each step works on the realisations still running: propensities, one Philox block,
samples recorded while the next change lies beyond them, then either the next
time-triggered event or the firing. Cost per step is a few dozen numpy calls, so
it pays off from a few thousand realisations; `host.py` (the compiled kernel on the
CPU cores) is much faster where a C++ compiler is present.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sbmlgpu.codegen.philox import philox4x32, u01_double

from .codegen import Variant
from .expressions import Expressions
from .twin import TwinFunctions

# Detail codes, as in kernels/ssa.cu
WHY_NEGATIVE, WHY_NOT_FINITE, WHY_FIRINGS, WHY_EVENTS, WHY_DRAW = 1, 2, 3, 4, 5
STATUS_OF_WHY = {0: 0, WHY_NEGATIVE: 4, WHY_NOT_FINITE: 3, WHY_FIRINGS: 1, WHY_EVENTS: 4,
                 WHY_DRAW: 4}
_MASK32 = np.uint64(0xFFFFFFFF)


@dataclass
class EngineOutput:
    """One batch. `data` (members, times, outputs) or None when only counted."""

    data: np.ndarray | None
    status: np.ndarray  # int8 Status codes
    why: np.ndarray  # int32 detail codes
    firings: np.ndarray  # uint64
    reaction_counts: np.ndarray | None = None  # (reactions,) firings per reaction


class NumpyEngine:
    def __init__(self, exprs: Expressions, variant: Variant):
        self.exprs = exprs
        self.variant = variant
        self.fns = TwinFunctions(exprs)
        self.stoich = np.asarray(exprs.stoichiometry, dtype=float)
        self.dependents = exprs.dependents

    def run(self, seed: int, first_item: int, n: int, ptab: np.ndarray, times: np.ndarray,
            max_firings: int = 0, record: bool = True,
            count_reactions: bool = False) -> EngineOutput:
        """Realisations first_item .. first_item + n - 1. ptab: (varied, n). `record`
        False keeps no outputs and `count_reactions` counts firings per reaction (the
        optimized method's presimulation)."""
        return _Run(self, seed, first_item, n, ptab, np.asarray(times, float), max_firings,
                    record, count_reactions).go()


class _Run:
    def __init__(self, engine: NumpyEngine, seed, first_item, n, ptab, times, max_firings,
                 record, count_reactions):
        e = engine.exprs
        self.e, self.fns, self.variant = e, engine.fns, engine.variant
        self.stoich, self.dependents = engine.stoich, engine.dependents
        self.n, self.times, self.K = n, times, len(times)
        self.max_firings = int(max_firings)
        self.record = record
        self.S, self.M, self.O = e.n_states, e.n_reactions, len(e.outputs)
        self.P = np.asarray(ptab, float).reshape(len(e.varied), n)
        self.key = np.array([seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF], np.uint64)
        items = np.uint64(first_item) + np.arange(n, dtype=np.uint64)
        self.item_words = np.stack([items & _MASK32, items >> np.uint64(32)])
        self.X = np.empty((self.S, n))
        with np.errstate(all="ignore"):
            self.fns.x0(self.P, times[0], self.X)
        self.A = np.zeros((self.M, n))
        self.a0 = np.zeros(n)
        self.dirty = np.ones(n, bool)
        self.t = np.full(n, times[0])
        self.k = np.zeros(n, np.int64)
        self.block = np.zeros(n, np.uint64)
        self.firings = np.zeros(n, np.uint64)
        self.why = np.zeros(n, np.int32)
        self.ev = [np.full(n, ev.initial) for ev in e.events]
        self.T = [None if ev.time_threshold is None else
                  np.broadcast_to(np.asarray(self.fns.thresholds[i](self.X, self.P), float),
                                  (n,)).copy()
                  for i, ev in enumerate(e.events)]
        # thresholds that read a clock's offset: recomputed after every event firing
        self.moving = [i for i, ev in enumerate(e.events) if ev.threshold_reads_state(e.x)]
        self.out = np.full((self.K, self.O, n), np.nan) if record else None
        # the optimized method with sparse updates keeps a running a0 (the kernel's
        # sparse switch); every other variant recomputes all propensities and re-sums
        # a0 each step, which gives the same numbers as the kernel's direct sparse update
        self.incremental = self.variant.method == "optimized" and self.variant.update == "sparse"
        self.counts = np.zeros(self.M, np.int64) if count_reactions else None

    # -- pieces of the loop ----------------------------------------------------------
    def propensities(self, idx: np.ndarray) -> np.ndarray:
        A = np.empty((self.M, idx.size))
        with np.errstate(all="ignore"):
            self.fns.propensities(self.X[:, idx], self.P[:, idx], A)
        return A

    def full_sum(self, idx: np.ndarray) -> np.ndarray:
        a0 = np.zeros(idx.size)
        for j in range(self.M):  # in code order, as the kernel adds them
            a0 = a0 + self.A[j, idx]
        return a0

    def check(self, idx: np.ndarray, negative: np.ndarray) -> None:
        bad_negative = negative & (self.why[idx] == 0)
        self.why[idx[bad_negative]] = WHY_NEGATIVE
        not_finite = ~(self.a0[idx] < np.inf) & (self.why[idx] == 0)
        self.why[idx[not_finite]] = WHY_NOT_FINITE

    def recompute(self, idx: np.ndarray) -> None:
        if idx.size == 0:
            return
        self.A[:, idx] = self.propensities(idx)
        self.a0[idx] = self.full_sum(idx)
        self.dirty[idx] = False
        self.check(idx, np.any(self.A[:, idx] < 0, axis=0))

    def run_events(self, idx: np.ndarray) -> None:
        """As the kernel does: every trigger at the current state, the first (document
        order) that rose fires, the others that rose stay pending, all again after the
        assignments; events that keep triggering each other fail the realisation."""
        if not self.e.events or idx.size == 0:
            return
        todo = idx[self.why[idx] == 0]
        rounds = 0
        while todo.size:
            which = np.full(todo.size, -1)
            for i in range(len(self.e.events)):
                with np.errstate(all="ignore"):
                    now = np.broadcast_to(np.asarray(
                        self.fns.triggers[i](self.X[:, todo], self.P[:, todo], self.t[todo]),
                        bool), (todo.size,))
                rose = now & ~self.ev[i][todo]
                first = rose & (which < 0)
                which[first] = i
                self.ev[i][todo] = now & ~(rose & ~first)  # pending ones stay false
            fire = which >= 0
            if not fire.any():
                return
            rounds += 1
            if rounds > self.variant.max_event_rounds:
                self.why[todo[fire]] = WHY_EVENTS
                return
            for i, ev in enumerate(self.e.events):
                sub = todo[which == i]
                if sub.size == 0:
                    continue
                with np.errstate(all="ignore"):
                    values = self.fns.assignments[i](self.X[:, sub], self.P[:, sub],
                                                     self.t[sub])
                for (target, _), v in zip(ev.assignments, values):
                    self.X[target, sub] = v
                self.dirty[sub] = True
            fired = todo[fire]
            for i in self.moving:  # as the kernel does, after the round's assignments
                with np.errstate(all="ignore"):
                    self.T[i][fired] = np.broadcast_to(np.asarray(self.fns.thresholds[i](
                        self.X[:, fired], self.P[:, fired]), float), (fired.size,))
            todo = todo[fire]

    def draw(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """r1, r2 from Philox block `block` of each realisation; block += 1."""
        b = self.block[idx]
        counter = np.stack([b & _MASK32, b >> np.uint64(32),
                            self.item_words[0, idx], self.item_words[1, idx]], axis=-1)
        w = philox4x32(counter, self.key)
        self.block[idx] += np.uint64(1)
        return u01_double(w[:, 0], w[:, 1]), u01_double(w[:, 2], w[:, 3])

    def record_samples(self, idx: np.ndarray, limit: np.ndarray) -> None:
        while idx.size:
            k = self.k[idx]
            due = k < self.K
            due[due] = self.times[k[due]] < limit[due]
            if not due.any():
                return
            sub, ks, limit = idx[due], k[due], limit[due]
            if self.record:
                values = np.empty((self.O, sub.size))
                with np.errstate(all="ignore"):
                    self.fns.outputs(self.X[:, sub], self.P[:, sub], self.times[ks], values)
                self.out[ks, :, sub] = values.T
            self.k[sub] += 1
            idx = sub

    def select(self, idx: np.ndarray, r2: np.ndarray) -> np.ndarray:
        target = r2 * self.a0[idx]
        prefix = np.cumsum(self.A[:, idx], axis=0)  # sequential, as the kernel adds
        M = self.M
        if self.variant.method == "direct":
            sel = np.sum(prefix[:M - 1] <= target, axis=0)
            fallback = (sel == M - 1) & ~(self.A[M - 1, idx] > 0)
        else:
            above = prefix > target
            sel = np.where(above.any(axis=0), np.argmax(above, axis=0), -1)
            fallback = sel < 0
            if fallback.any():
                self.a0[idx[fallback]] = self.full_sum(idx[fallback])
        if fallback.any():
            positive = self.A[:, idx[fallback]] > 0
            last = np.where(positive.any(axis=0), M - 1 - np.argmax(positive[::-1], axis=0),
                            -1 if self.variant.method != "direct" else M - 1)
            sel[fallback] = last
        return sel

    def fire(self, idx: np.ndarray, sel: np.ndarray) -> None:
        ok = sel >= 0
        if self.counts is not None:
            np.add.at(self.counts, sel[ok], 1)
        self.X[:, idx[ok]] += self.stoich[sel[ok]].T
        if self.incremental:
            self._update_optimized(idx, sel)

    def _update_optimized(self, idx: np.ndarray, sel: np.ndarray) -> None:
        """The kernel's sparse update: each dependent's new value, a0 += new - old in
        dependent order, a0 re-summed every `refresh` firings."""
        new = self.propensities(idx)
        negative = np.zeros(idx.size, bool)
        for j in np.unique(sel[sel >= 0]):
            m = sel == j
            cols = idx[m]
            for d in self.dependents[j]:
                value = new[d, m]
                negative[m] |= value < 0
                self.a0[cols] = self.a0[cols] + (value - self.A[d, cols])
                self.A[d, cols] = value
        refresh = self.variant.refresh
        due = (self.firings[idx] & np.uint64(refresh - 1)) == np.uint64(refresh - 1)
        if due.any():
            self.a0[idx[due]] = self.full_sum(idx[due])
        self.check(idx, negative)

    # -- the loop ----------------------------------------------------------------------
    def go(self) -> EngineOutput:
        everyone = np.arange(self.n)
        self.run_events(everyone)
        active = everyone[self.why == 0]
        while active.size:
            self.recompute(active[self.dirty[active]] if self.incremental else active)
            active = active[self.why[active] == 0]
            if not active.size:
                break
            m = active.size
            tnew = np.full(m, np.inf)
            r2 = np.zeros(m)
            positive = self.a0[active] > 0
            if positive.any():
                r1, r2p = self.draw(active[positive])
                r2[positive] = r2p
                with np.errstate(divide="ignore"):
                    tnew[positive] = self.t[active[positive]] + (
                        -np.log(r1) / self.a0[active[positive]])
            tevent = np.full(m, np.inf)
            for i, T in enumerate(self.T):
                if T is not None:
                    pending = ~self.ev[i][active]
                    tevent = np.where(pending & (T[active] < tevent), T[active], tevent)
            self.record_samples(active, np.minimum(tevent, tnew))
            going = self.k[active] < self.K
            active, tnew, tevent, r2 = active[going], tnew[going], tevent[going], r2[going]
            if not active.size:
                break
            at_event = tevent < tnew
            if at_event.any():
                sub = active[at_event]
                self.t[sub] = tevent[at_event]
                self.run_events(sub)
                self.dirty[sub] = True
            firing = ~at_event
            if firing.any():
                sub = active[firing]
                self.t[sub] = tnew[firing]
                self.fire(sub, self.select(sub, r2[firing]))
                self.firings[sub] += np.uint64(1)
                if self.max_firings:
                    hit = (self.firings[sub] >= np.uint64(self.max_firings)) & \
                        (self.why[sub] == 0)
                    self.why[sub[hit]] = WHY_FIRINGS
                self.run_events(sub[self.why[sub] == 0])
            active = active[self.why[active] == 0]
        status = np.array([STATUS_OF_WHY[int(w)] for w in range(len(STATUS_OF_WHY))], np.int8)[self.why]
        data = None if self.out is None else np.ascontiguousarray(self.out.transpose(2, 0, 1))
        return EngineOutput(data, status, self.why.copy(), self.firings.copy(), self.counts)
