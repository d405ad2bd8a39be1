"""The persistent kernel's host side (kernels/persistent.cu): the whole SIVIA runs on
the device; the host fills the box queue, launches, and between launches drains
what the kernel hands back.

A launch ends when no box is left (the search is done), or early: the queue or the
output is full, the box budget is reached, or the launch's time slice is over. Then
the kernel has put every box it did not finish into its spill rows, so the host
takes back the queue's unread slots and the spilled boxes (into sivia.Search's
queue), the kept boxes (into Search's paving) and the counters, and relaunches with
an empty queue. The same Search then ends the run as the multi-kernel loop does
(program.py): a budget that stops it keeps the queue as undetermined.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from sbmlgpu.errors import DeviceError, OptionError

from .engines import Data, DeviceBuild, Limits
from .sivia import Budget, Search

# ctl[] words: IV_CTL_* in kernels/persistent.cu
CTL_HEAD, CTL_TAIL, CTL_ACTIVE, CTL_STARTED, CTL_STOP, CTL_KEPT, CTL_SPILLED = range(7)
COUNTERS = ("evaluated", "feasible", "rejected", "bisected", "undetermined", "failed")
CTL_COUNTERS = 7  # the first of COUNTERS, then steps, split and enclosures
CTL_STEPS, CTL_SPLIT = CTL_COUNTERS + len(COUNTERS), CTL_COUNTERS + len(COUNTERS) + 1
CTL_ENCLOSURES = CTL_SPLIT + 1
CTL_WORDS = CTL_ENCLOSURES + 1
STOPS = {1: "queue full", 2: "output full", 4: "time slice"}  # IV_STOP_*
BOX_LIMIT = 3  # not a stop: the kernel began all the boxes it could and finished them
SPILL_QUEUED = -1  # IV_SPILL_QUEUED: a box to check again (0, 1: kept)

DEFAULT_CAPACITY = 1 << 22
#: at most this share of the free device memory for the queue and the output
MEMORY_SHARE = 0.25
WARP = 32
MAX_BLOCKS_PER_SM = 32  # every architecture since sm_50 (sm_90: 32)


@dataclass(frozen=True)
class QueueSettings:
    """The persistent kernel's options (IntervalOptions' fields of the same names)."""

    capacity: int  # boxes in the queue and in the output (0: DEFAULT_CAPACITY or less)
    step_budget: int
    fetch_idle: int  # idle lanes that make a warp fetch; WARP: no eager fetch
    eager_create: bool
    launch_seconds: float  # 0: none
    warps_per_sm: int = 0  # resident warps per SM (0: as many as the registers allow)

    @classmethod
    def of(cls, options) -> "QueueSettings":
        return cls(int(options.queue_capacity), int(options.step_budget),
                   int(options.fetch_idle) if options.eager_fetch else WARP,
                   bool(options.eager_create), float(options.launch_seconds),
                   int(options.warps_per_sm))


@dataclass
class PersistentRun:
    """What the launches did (the paving's statistics)."""

    launches: int = 0
    kernel_seconds: float = 0.0
    steps: int = 0
    enclosures: int = 0  # evaluated at data times inside steps (a span check: one)
    split: int = 0  # boxes bisected by eager create
    ended_by: dict = field(default_factory=dict)  # launches ended early, by STOPS reason
    stopped: str | None = None  # the budget that stopped the search (Budget.exceeded)
    grid: int = 0
    block: int = 0
    capacity: int = 0
    slice_seconds: float = 0.0  # a launch's time (0: none); doubled when one got nothing done


def resident_blocks(properties, attributes, block: int, warps_per_sm: int = 0) -> int:
    """Blocks of `block` threads one SM holds at once with the kernel's registers
    (the occupancy calculation: registers are given per warp in units of 256), or
    fewer: as many as hold `warps_per_sm` warps (0: no such cap; at least one block)."""
    warps = math.ceil(block / WARP)
    by_threads = properties.max_threads_per_sm // block
    per_warp = math.ceil(max(attributes.registers, 1) * WARP / 256) * 256
    by_registers = properties.registers_per_sm // (per_warp * warps)
    blocks = min(by_threads, by_registers, MAX_BLOCKS_PER_SM)
    if warps_per_sm:
        blocks = min(blocks, warps_per_sm // warps)
    return max(1, blocks)


class PersistentEngine(DeviceBuild):
    name = "gpu-persistent"

    def search(self, search: Search, fixed_lo, fixed_hi, point, data: Data, limits: Limits,
               settings: QueueSettings, budget: Budget,
               progress: Callable[[int, int], None] | None = None) -> PersistentRun:
        """Run SIVIA on the device until `search`'s queue is empty or `budget` stops
        it. progress(new boxes, boxes evaluated) after each launch."""
        if self.block_size % WARP:
            raise OptionError("block-size", f"the persistent kernel runs whole warps: "
                                            f"{self.block_size} is not a multiple of {WARP}")
        self.compile()
        self.upload(point, data)
        device = self.device
        nk = len(search.lower)
        block = self.block_size
        grid = device.properties.sm_count * resident_blocks(
            device.properties, self._function.attributes, block, settings.warps_per_sm)
        capacity = self._capacity(settings.capacity, nk)
        run = PersistentRun(grid=grid, block=block, capacity=capacity,
                            slice_seconds=settings.launch_seconds)
        spill_rows = 2 * grid * block  # no lane spills more than two boxes a launch
        buffers = _Buffers(device, nk, capacity, spill_rows, fixed_lo, fixed_hi,
                           search.scale)
        try:
            while search.queued:
                run.stopped = budget.exceeded(search)
                if run.stopped:
                    break
                self._launch(search, buffers, data, limits, settings, budget, run, progress)
        finally:
            buffers.free()
            self.release()
        return run

    def _capacity(self, asked: int, nk: int) -> int:
        # per box: the queue's two corners and flag, the output's corners and code
        per_box = 2 * (2 * nk * 8) + 4 + 1
        if asked:
            return asked
        room = int(self.device.free_memory() * MEMORY_SHARE) // per_box
        if room < 2:
            raise DeviceError(f"{self.device}: no memory left for the box queue "
                              f"({per_box} bytes a box)")
        return min(DEFAULT_CAPACITY, room)

    def _launch(self, search: Search, buffers: "_Buffers", data: Data, limits: Limits,
                settings: QueueSettings, budget: Budget, run: PersistentRun,
                progress) -> None:
        device, capacity = self.device, buffers.capacity
        # half the queue for the boxes given, half for the halves the kernel pushes
        lo, hi = search.take(min(search.queued, max(1, capacity // 2)))
        n = len(lo)
        device.upload(buffers.queue_lo, lo)
        device.upload(buffers.queue_hi, hi)
        ready = np.zeros(capacity, np.int32)
        ready[:n] = 1
        device.upload(buffers.ready, ready)
        ctl = np.zeros(CTL_WORDS, np.uint64)
        ctl[CTL_TAIL] = ctl[CTL_ACTIVE] = n
        device.upload(buffers.ctl, ctl)
        device.upload(buffers.volume, np.zeros(1))
        box_limit = budget.boxes_left(search)
        slices = [s for s in (run.slice_seconds or None, budget.seconds_left())
                  if s is not None]
        slice_ns = max(1, int(min(slices) * 1e9)) if slices else 0
        point, times, first, output, lower, upper = self._static
        args = [buffers.queue_lo, buffers.queue_hi, buffers.ready, np.uint64(capacity),
                buffers.ctl, buffers.volume, buffers.out_lo, buffers.out_hi, buffers.out_code,
                np.uint64(capacity), buffers.spill_lo, buffers.spill_hi, buffers.spill_code,
                buffers.fixed_lo, buffers.fixed_hi, buffers.scale, np.float64(search.epsilon),
                point, np.int32(len(data.times)), times, first, output, lower,
                upper, np.float64(limits.wide), np.float64(limits.max_step),
                np.float64(limits.tolerance),
                np.int32(limits.max_halvings),
                np.int64(limits.max_steps), np.int32(limits.span),
                np.int32(limits.step_rule), np.uint64(box_limit),
                np.int64(settings.step_budget), np.int32(settings.fetch_idle),
                np.int32(1 if settings.eager_create else 0),
                np.int64(slice_ns)]
        timing = self._function.launch((run.grid,), (run.block,), args)
        run.launches += 1
        run.kernel_seconds += timing.ms / 1e3
        ctl = device.from_device(buffers.ctl, (CTL_WORDS,), np.uint64).astype(np.int64)
        drained = _drain(device, buffers, ctl, search)
        counts = dict(zip(COUNTERS, ctl[CTL_COUNTERS:CTL_COUNTERS + len(COUNTERS)].tolist()))
        volume = float(device.from_device(buffers.volume, (1,), np.float64)[0])
        search.tally(counts, volume)
        run.steps += int(ctl[CTL_STEPS])
        run.enclosures += int(ctl[CTL_ENCLOSURES])
        run.split += int(ctl[CTL_SPLIT])
        reason = int(ctl[CTL_STOP])
        if not reason and int(ctl[CTL_STARTED]) >= box_limit and drained:
            reason = BOX_LIMIT
        if reason:
            name = "box limit" if reason == BOX_LIMIT else STOPS.get(reason, f"code {reason}")
            run.ended_by[name] = run.ended_by.get(name, 0) + 1
        if STOPS.get(reason) == "time slice" and not counts["evaluated"]:
            # no box finished in a slice: a longer one, or the search would never end
            run.slice_seconds *= 2
        _check_launch(n, ctl, drained, reason)
        if progress is not None:
            progress(2 * int(ctl[CTL_COUNTERS + COUNTERS.index("bisected")])
                     + int(ctl[CTL_SPLIT]), counts["evaluated"])


def _drain(device, buffers: "_Buffers", ctl: np.ndarray, search: Search) -> int:
    """What the launch left: kept rows into the paving; the queue's unread slots and
    the spilled boxes back into the queue. Returns the boxes queued again."""
    nk = buffers.nk
    kept = int(ctl[CTL_KEPT])
    if kept:
        search.keep(device.from_device(buffers.out_lo, (kept, nk), np.float64),
                    device.from_device(buffers.out_hi, (kept, nk), np.float64),
                    device.from_device(buffers.out_code, (kept,), np.int8))
    head, tail = int(ctl[CTL_HEAD]), int(ctl[CTL_TAIL])
    if tail > head:  # every reserved slot is written before the kernel ends
        search.put(device.from_device(buffers.queue_lo, (tail, nk), np.float64)[head:],
                   device.from_device(buffers.queue_hi, (tail, nk), np.float64)[head:])
    spilled = int(ctl[CTL_SPILLED])
    queued = 0
    if spilled:
        lo = device.from_device(buffers.spill_lo, (spilled, nk), np.float64)
        hi = device.from_device(buffers.spill_hi, (spilled, nk), np.float64)
        code = device.from_device(buffers.spill_code, (spilled,), np.int8)
        again = code == SPILL_QUEUED
        search.put(lo[again], hi[again])
        search.keep(lo[~again], hi[~again], code[~again])
        queued = int(again.sum())
    return (tail - head) + queued


def _check_launch(given: int, ctl: np.ndarray, queued_again: int, reason: int) -> None:
    """Nothing lost: every box given or made (halves, eager create's extra halves)
    was evaluated or is queued again; a launch that did not stop early left none."""
    evaluated = int(ctl[CTL_COUNTERS])
    bisected = int(ctl[CTL_COUNTERS + COUNTERS.index("bisected")])
    made = given + 2 * bisected + int(ctl[CTL_SPLIT])
    if made != evaluated + queued_again:
        raise DeviceError(f"persistent kernel: {given} boxes given and {made - given} made, "
                          f"but {evaluated} evaluated and {queued_again} handed back")
    if not reason and (queued_again or ctl[CTL_ACTIVE]):
        raise DeviceError(f"persistent kernel: ended without a stop or the box limit but "
                          f"left {queued_again} box(es) ({int(ctl[CTL_ACTIVE])} active)")


class _Buffers:
    """The device memory of one search (the queue, the output, the spill rows)."""

    def __init__(self, device, nk: int, capacity: int, spill_rows: int, fixed_lo, fixed_hi,
                 scale):
        self.nk, self.capacity = nk, capacity
        self._all = []
        box = 8 * nk

        def alloc(nbytes):
            buffer = device.alloc(max(int(nbytes), 1))
            self._all.append(buffer)
            return buffer

        def put(array, dtype=np.float64):
            array = np.ascontiguousarray(array, dtype)
            buffer = alloc(array.nbytes)
            device.upload(buffer, array)
            return buffer

        try:
            self.queue_lo, self.queue_hi = alloc(capacity * box), alloc(capacity * box)
            self.ready = alloc(4 * capacity)
            self.ctl = alloc(8 * CTL_WORDS)
            self.volume = alloc(8)
            self.out_lo, self.out_hi = alloc(capacity * box), alloc(capacity * box)
            self.out_code = alloc(capacity)
            self.spill_lo, self.spill_hi = alloc(spill_rows * box), alloc(spill_rows * box)
            self.spill_code = alloc(spill_rows)
            self.fixed_lo, self.fixed_hi = put(fixed_lo), put(fixed_hi)
            self.scale = put(scale)
        except BaseException:
            self.free()
            raise

    def free(self) -> None:
        for buffer in self._all:
            buffer.free()
        self._all = []
