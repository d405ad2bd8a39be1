"""`IntervalProgram.run`: an Estimation task from data to a Paving.

1. The interval inputs: the unknowns (searched, bisected) and the initial values
   given as intervals (fixed, never bisected); with the states they span the
   mean-value form's dimension (model.py).
2. The kernel: Taylor, initial-value and output functions generated for this model
   and these inputs (kernels.py), compiled for the GPU or the host.
3. SIVIA (sivia.py): on one GPU the persistent kernel runs the whole search on the
   device (persistent.py: a device box queue, the host only refills and drains it
   between launches); otherwise (the host, several GPUs, MPI ranks, or --kernel multi)
   chunks of boxes go through the scheduler's growing queue, each launch giving
   verdicts and the host bisecting (the multi-kernel scheme). Feasible boxes are
   kept, rejected ones dropped, the rest bisected down to epsilon. A box or time
   budget stops the search with the queue kept as undetermined.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from typing import Any

import numpy as np

from sbmlgpu.backend import Program
from sbmlgpu.errors import OptionError
from sbmlgpu.ir import Network
from sbmlgpu.profile import phase
from sbmlgpu.results import Paving
from sbmlgpu.schedule import Scheduler
from sbmlgpu.schedule.progress import Progress
from sbmlgpu.tasks import Estimation
from sbmlgpu.views.ode import OdeSystem

from .engines import Data, GpuEngine, HostEngine, Limits
from .kernels import interval_source, persistent_source
from .model import IntervalModel
from .options import STEP_RULES, IntervalOptions
from .persistent import PersistentEngine, QueueSettings
from .sivia import COUNTS, KEPT_UNDETERMINED, Bisection, Budget, Chunk, Search, chunks_of

log = logging.getLogger("sbmlgpu.interval")
#: boxes per queue item: a GPU launch takes many chunks, a host call fewer
GPU_CHUNK = 4096
HOST_CHUNK_PER_CORE = 16
#: 2**15 boxes to start with: an H100 holds ~34,000 threads of this kernel at once
GPU_PRESPLIT = 15
#: --span -1: data times one span check covers at most. The host engine: LV near the
#: truth at epsilon 1e-5 (2 cores) 14.5 s without spans, 2.4 s with 256; SEIR-2P 11.6
#: against 7.5 s. The GPU's persistent kernel (H200): no gain, SEIR-3P 2.8 s without and
#: 3.6 s with 64 (a warp checks as many times as its slowest lane; docs/benchmarks.md)
HOST_SPAN = 256
GPU_SPAN = 0


class IntervalProgram(Program):
    def __init__(self, network: Network, ode: OdeSystem, options: IntervalOptions,
                 device=None):
        self.network = network
        self.ode = ode
        self.options = options
        self.device = device
        self._sources: dict[str, str] = {}
        self.last_run: dict[str, Any] = {}

    @property
    def sources(self) -> dict[str, str]:
        """The kernels of the runs so far; before the first, the one for every
        parameter a point and every state measured (so --keep-source has one)."""
        if not self._sources:
            model = IntervalModel.of(self.ode, (), (), self.ode.state_ids)
            source = interval_source(model, self.options.order)
            self._sources[source.name] = source.text
        return dict(self._sources)

    def enclose(self, ids, lower, upper, times) -> np.ndarray:
        """Guaranteed boxes of the states at `times` (ascending, >= 0) for each box of
        inputs: `ids` are parameter ids (values from the file otherwise), `lower` and
        `upper` (b, len(ids)). Returns (b, len(times), n_states, 2) as [lower, upper];
        -inf/+inf from where a box's integration failed."""
        ids = tuple(ids)
        lower = np.atleast_2d(np.asarray(lower, dtype=np.float64))
        upper = np.atleast_2d(np.asarray(upper, dtype=np.float64))
        times = np.asarray(times, dtype=np.float64)
        if lower.shape != upper.shape or lower.shape[1:] != (len(ids),):
            raise OptionError("unknown", f"need boxes of shape (b, {len(ids)}), got "
                                         f"{lower.shape} and {upper.shape}")
        if np.any(lower > upper) or not np.all(np.isfinite(lower) & np.isfinite(upper)):
            raise OptionError("unknown", "need finite boxes with lower <= upper")
        if np.any(times < 0) or np.any(np.diff(times) <= 0) or not np.all(np.isfinite(times)):
            raise OptionError("times", "need finite times >= 0, strictly increasing")
        _check_step_count(self.options, float(times[-1]) if len(times) else 0.0)
        model = IntervalModel.of(self.ode, ids, (), ())
        source = interval_source(model, self.options.order)
        engine = (GpuEngine(source, self.device, self.options.block_size)
                  if self.device is not None else HostEngine(source))
        point = model.point_values().copy()
        point[list(model.varied_index)] = 0.0
        empty_i, empty_f = np.zeros(len(times) + 1, np.int32), np.zeros(0)
        data = Data(times, empty_i, np.zeros(0, np.int32), empty_f, empty_f)
        o = self.options
        try:
            return engine.check(lower, upper, point, data,
                                _limits(o), record=True).record
        finally:
            if isinstance(engine, GpuEngine):
                engine.release()

    def run(self, task: Estimation, scheduler=None, profiler=None) -> Paving:
        started = time.perf_counter()
        o = self.options
        if scheduler is None or (o.mpi and scheduler.world is None):
            devices = (scheduler.devices if scheduler is not None
                       else [self.device] if self.device is not None else [])
            scheduler = Scheduler(devices=devices, mpi=o.mpi,
                                  progress=bool(getattr(task, "progress", True)))
        measurements = task.measurements
        model = IntervalModel.of(self.ode, tuple(task.unknown), tuple(task.initial),
                                 measurements.ids)
        point = _point_values(model, task)
        data = _data(measurements, model)
        _check_step_count(o, float(data.times[-1]) if len(data.times) else 0.0)
        devices = scheduler.local_devices
        if self.kernel == "persistent" and len(devices) == 1 and scheduler.size == 1:
            return self._run_persistent(task, model, point, data, devices[0], started,
                                        profiler)
        with phase(profiler, "generate kernels"):
            source = interval_source(model, o.order)
        self._sources[source.name] = source.text
        engines = _Engines(source, o.block_size, point, data,
                           _limits(o, float(task.epsilon), gpu=bool(devices)))
        with phase(profiler, "compile"):
            for device in devices or (None,):
                engines.get(device)
        search_lo, search_hi, fixed = _search_box(task, model)
        bisection = Bisection(search_hi - search_lo, float(task.epsilon))
        gpu = bool(devices)
        chunk = o.batch or (GPU_CHUNK if gpu else HOST_CHUNK_PER_CORE * (os.cpu_count() or 1))
        first = bisection.presplit(search_lo, search_hi, _presplit(o.presplit, gpu))

        def work(device, chunks: list[Chunk]):
            engine = engines.get(device)
            lo = np.concatenate([c.lower for c in chunks])
            hi = np.concatenate([c.upper for c in chunks])
            b = len(lo)
            verdicts = engine.check(np.hstack([lo, np.broadcast_to(fixed[0], (b, len(fixed[0])))]),
                                    np.hstack([hi, np.broadcast_to(fixed[1], (b, len(fixed[1])))]),
                                    point, data, engines.limits)
            decisions, children, offset = [], [], 0
            for c in chunks:
                decision = bisection.decide(c, verdicts.verdict[offset:offset + len(c)])
                decision.steps = int(verdicts.steps[offset:offset + len(c)].sum())
                decision.enclosures = int(verdicts.enclosures[offset:offset + len(c)].sum())
                children.append(chunks_of(decision.halves, chunk))
                decision.halves = None  # they travel as new items, not in the result
                decisions.append((decision, verdicts.seconds * len(c) / max(b, 1)))
                offset += len(c)
            return decisions, children

        budget_boxes = None if o.max_boxes <= 0 else max(o.max_boxes // chunk, 1)
        search_started = time.perf_counter()
        try:
            finished = scheduler.run_queue(
                work, chunks_of(first, chunk), bytes_per_item=chunk * _box_bytes(model),
                order="fifo", ordered=True, budget_items=budget_boxes,
                budget_seconds=o.time_limit or None, progress=getattr(task, "progress", True),
                desc="chunks of boxes", balance=o.balance)
        finally:
            engines.release()
        search_seconds = time.perf_counter() - search_started
        if finished is None:  # an MPI rank other than the root: the root has the paving
            return Paving(model.unknown, np.zeros((0, len(model.unknown))),
                          np.zeros((0, len(model.unknown))), np.zeros(0, np.int8),
                          np.stack([search_lo, search_hi], axis=1), float(task.epsilon),
                          {}, {"mpi_rank": scheduler.rank})
        left = [item for _, item in scheduler.last_queue_left or ()]
        stopped = scheduler.last_queue_stopped
        if stopped:  # in the options' words (the queue counts items, not boxes)
            stopped = (f"time-limit: {o.time_limit:g} s ({stopped})" if o.time_limit
                       and "second" in stopped else f"max-boxes: {o.max_boxes} ({stopped})")
        if left:
            _warn_stopped(stopped, sum(len(c) for c in left))
        paving, statistics = _assemble(model, finished, left, search_lo, search_hi, task)
        seconds = time.perf_counter() - started
        statistics.update({
            "complete": not left, "stopped_by": (stopped or "") if left else "",
            "boxes_presplit": len(first), "seconds": seconds,
            "boxes_per_second": statistics["boxes_evaluated"] / max(seconds, 1e-12),
            "launches": len(scheduler.last_queue_batches), "ranks": scheduler.size,
            "devices": max(len(devices), 1), "balance": o.balance,
            "search_seconds": search_seconds,
            "per_device": _per_device(scheduler.last_queue_batches, search_seconds)})
        paving.statistics = statistics
        paving.metadata = {"engine": "gpu" if gpu else "native",
                           **_run_metadata(o, task, source), "chunk": chunk,
                           "kernel": "multi"}
        self.last_run = dict(statistics)
        return paving

    def _run_persistent(self, task: Estimation, model: IntervalModel, point, data: Data,
                        device, started: float, profiler) -> Paving:
        """The whole search on one GPU in the persistent kernel (persistent.py)."""
        o = self.options
        with phase(profiler, "generate kernels"):
            source = persistent_source(model, o.order)
        self._sources[source.name] = source.text
        engine = PersistentEngine(source, device, o.block_size)
        with phase(profiler, "compile"):
            engine.compile()
        search_lo, search_hi, (fixed_lo, fixed_hi) = _search_box(task, model)
        search = Search(search_lo, search_hi, float(task.epsilon),
                        presplit=_presplit(o.presplit, True))
        budget = Budget(int(o.max_boxes), float(o.time_limit), started)
        with Progress(search.queued, enabled=bool(getattr(task, "progress", True)),
                      desc="boxes") as bar:
            def progress(grown: int, evaluated: int) -> None:
                bar.grow(grown, search.queued)
                bar.advance(evaluated)

            with phase(profiler, "verdicts"):
                done = engine.search(search, fixed_lo, fixed_hi, point, data,
                                     _limits(o, float(task.epsilon), gpu=True),
                                     QueueSettings.of(o),
                                     budget, progress)
        stopped = done.stopped
        left = search.stop() if stopped else 0
        if stopped:
            _warn_stopped(stopped, left)
        lower, upper, verdict = search.paving()
        seconds = time.perf_counter() - started
        counts = search.counts
        statistics = {
            "complete": stopped is None, "stopped_by": stopped or "",
            **_box_statistics(counts, left, search.rejected_volume),
            "kernel_seconds": done.kernel_seconds, "taylor_steps": done.steps,
            "data_enclosures": done.enclosures,
            "boxes_presplit": counts["presplit"], "seconds": seconds,
            "boxes_per_second": counts["evaluated"] / max(seconds, 1e-12),
            "launches": done.launches, "ranks": 1, "devices": 1,
            "boxes_split_eagerly": done.split}
        paving = Paving(model.unknown, lower, upper, verdict,
                        np.stack([search_lo, search_hi], axis=1), float(task.epsilon),
                        statistics)
        paving.metadata = {"engine": engine.name, **_run_metadata(o, task, source),
                           "kernel": "persistent", "grid": done.grid, "block": done.block,
                           "queue_capacity": done.capacity,
                           "launches_ended_by": dict(done.ended_by)}
        self.last_run = dict(statistics)
        return paving

    @property
    def kernel(self) -> str:
        """The SIVIA loop on one device: `persistent` (a GPU, unless --kernel multi) or
        `multi` (the host always; also several GPUs and MPI ranks, see run)."""
        if self.device is None or self.options.kernel == "multi":
            return "multi"
        return "persistent"


class _Engines:
    """One engine per device (compiled and given the data once), the host's for None."""

    def __init__(self, source, block_size, point, data, limits):
        self.source, self.block_size = source, block_size
        self.point, self.data, self.limits = point, data, limits
        self._engines: dict = {}
        self._lock = threading.Lock()

    def get(self, device):
        key = None if device is None else device.index
        with self._lock:
            if key not in self._engines:
                engine = (HostEngine(self.source) if device is None
                          else GpuEngine(self.source, device, self.block_size))
                engine.compile()
                if device is not None:
                    engine.upload(self.point, self.data)
                self._engines[key] = engine
            return self._engines[key]

    def release(self) -> None:
        for engine in self._engines.values():
            if isinstance(engine, GpuEngine):
                engine.release()


def _box_bytes(model: IntervalModel) -> float:
    """Device memory of one box in a launch: its bounds in and its verdict out."""
    return 2 * 8 * len(model.varied) + 1 + 8


def _assemble(model, finished, left, search_lo, search_hi, task):
    """The paving from every chunk's decision, in the queue's id order; the chunks
    a budget left queued are kept as undetermined."""
    decisions = [done.result[0] for done in finished]
    k = len(model.unknown)
    lower = [d.lower for d in decisions] + [c.lower for c in left]
    upper = [d.upper for d in decisions] + [c.upper for c in left]
    kept = [d.kept for d in decisions] + [np.full(len(c), KEPT_UNDETERMINED, np.int8)
                                          for c in left]
    counts = {key: sum(d.counts[key] for d in decisions) for key in COUNTS}
    statistics = {
        **_box_statistics(counts, sum(len(c) for c in left),
                          float(sum(d.rejected_volume for d in decisions))),
        "kernel_seconds": float(sum(done.result[1] for done in finished)),
        "taylor_steps": int(sum(d.steps for d in decisions)),
        "data_enclosures": int(sum(d.enclosures for d in decisions)),
    }
    paving = Paving(model.unknown,
                    np.concatenate(lower) if lower else np.zeros((0, k)),
                    np.concatenate(upper) if upper else np.zeros((0, k)),
                    np.concatenate(kept) if kept else np.zeros(0, np.int8),
                    np.stack([search_lo, search_hi], axis=1), float(task.epsilon))
    return paving, statistics


def _search_box(task: Estimation, model: IntervalModel):
    """(lower, upper) of the unknowns' search box, and (lower, upper) of the initial
    intervals, which every box carries whole."""
    return (np.array([task.unknown[u][0] for u in model.unknown]),
            np.array([task.unknown[u][1] for u in model.unknown]),
            (np.array([task.initial[i][0] for i in model.initial]),
             np.array([task.initial[i][1] for i in model.initial])))


def _box_statistics(counts: dict, left: int, rejected_volume: float) -> dict:
    """The paving's box counts, either loop; `left`: boxes a budget left queued (kept
    as undetermined)."""
    return {"boxes_evaluated": counts["evaluated"], "boxes_feasible": counts["feasible"],
            "boxes_rejected": counts["rejected"], "boxes_bisected": counts["bisected"],
            "boxes_undetermined": counts["undetermined"] + left, "boxes_left_in_queue": left,
            "boxes_integration_failed": counts["failed"],
            "volume_rejected_proved": float(rejected_volume)}


def _run_metadata(o: IntervalOptions, task: Estimation, source) -> dict:
    return {"order": o.order,
            "initial_intervals": {k: list(v) for k, v in task.initial.items()},
            "measurements": len(task.measurements), "source": source.name}


def _warn_stopped(stopped: str, left: int) -> None:
    log.warning("interval: the search stopped early (%s); %d queued box(es) are kept as "
                "undetermined and the paving is incomplete", stopped, left)


def _presplit(option: int, gpu: bool) -> int:
    if option >= 0:
        return option
    return GPU_PRESPLIT if gpu else max(int(math.log2(4 * (os.cpu_count() or 1))), 0)


def _check_step_count(o: IntervalOptions, span: float) -> None:
    """OptionError for a --max-step under which every box would reach --max-steps
    before the last data time (--max-step 1e-300 held the search for good: one box
    at a time stepping a million times, past --time-limit, which is read between
    work items)."""
    # the kernel leaves a box undecided once it has taken --max-steps steps, the one
    # that lands on the last time included
    if o.max_step > 0 and math.ceil(span / o.max_step) >= o.max_steps:
        raise OptionError("max-step", f"{o.max_step!r} would take --max-steps "
                                      f"({o.max_steps:,}) steps or more to reach the last time, "
                                      f"{span:g}: every box would stop there undecided; "
                                      f"raise --max-step (0: as long as the data allow)")


def _limits(o: IntervalOptions, epsilon: float = 0.0, gpu: bool = False) -> Limits:
    span = o.span if o.span >= 0 else (GPU_SPAN if gpu else HOST_SPAN)
    return Limits(float(epsilon), float(o.wide), float(o.max_step),
                  float(o.tolerance), int(o.max_halvings), int(o.max_steps), int(span),
                  STEP_RULES.index(o.step_rule))


def _point_values(model: IntervalModel, task: Estimation) -> np.ndarray:
    """c at the file's values; the interval inputs' entries are overwritten per box."""
    point = model.point_values().copy()
    varied = set(model.varied_index)
    missing = [pid for j, pid in enumerate(model.ode.p_ids)
               if j not in varied and not math.isfinite(point[j])]
    if missing:
        raise OptionError("unknown", f"{', '.join(missing)} has no finite value in the model "
                                     f"file; give it as --unknown or --initial")
    point[list(varied)] = 0.0
    return point


def _data(measurements, model: IntervalModel) -> Data:
    order = np.argsort(measurements.time, kind="stable")
    times_all = measurements.time[order]
    times, first = np.unique(times_all, return_index=True)
    output = np.array([model.measured.index(measurements.id[k]) for k in order], np.int32)
    return Data(times, np.append(first, len(order)).astype(np.int32), output,
                measurements.lower[order], measurements.upper[order])


def _per_device(records, seconds: float) -> dict:
    """{"rank:device": {"chunks", "busy_seconds", "idle_seconds"}} of the multi loop's
    launches: how the work was balanced (idle: the search's wall time, `seconds`,
    not spent in a launch of that device; a device without a launch is not listed)."""
    table: dict = {}
    for r in records:
        key = f"{r.rank}:{'host' if r.device_index is None else r.device_index}"
        row = table.setdefault(key, {"chunks": 0, "busy_seconds": 0.0})
        row["chunks"] += r.items
        row["busy_seconds"] += r.seconds
    for row in table.values():
        row["idle_seconds"] = max(0.0, seconds - row["busy_seconds"])
    return table
