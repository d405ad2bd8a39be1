"""`IntervalProgram.run`: an Estimation task from data to a Paving.

1. The interval inputs: the unknowns (searched, bisected) and the initial values
   given as intervals (fixed, never bisected); with the states they span the
   mean-value form's dimension (model.py).
2. The kernel: Taylor, initial-value and output functions generated for this model
   and these inputs (kernels.py), compiled for the GPU or the host.
3. SIVIA (sivia.py): on a GPU by default the persistent kernel (persistent.py: the
   whole search on the device, the host relaunching when a queue fills); else
   (--kernel multi, and always on the host) batches of boxes, breadth first, each
   box's verdict from the kernel and the bisection on the host. Feasible kept,
   rejected dropped, the rest bisected down to epsilon. A box or time budget stops
   the search with the queue kept as undetermined.
"""

from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from sbmlgpu.backend import Program
from sbmlgpu.errors import OptionError
from sbmlgpu.ir import Network
from sbmlgpu.profile import phase
from sbmlgpu.results import Paving
from sbmlgpu.schedule.progress import Progress
from sbmlgpu.tasks import Estimation
from sbmlgpu.views.ode import OdeSystem

from .engines import Data, GpuEngine, HostEngine, Limits
from .kernels import interval_source, persistent_source
from .model import IntervalModel
from .options import IntervalOptions
from .persistent import PersistentEngine, QueueSettings
from .sivia import Budget, Search

log = logging.getLogger("sbmlgpu.interval")
GPU_BATCH = 65_536
HOST_BATCH_PER_CORE = 256
#: 2**15 boxes to start with: an H100 holds ~34,000 threads of this kernel at once
GPU_PRESPLIT = 15


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

    def enclose(self, ids, lower, upper, times, order_of_states=None) -> np.ndarray:
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
        measurements = task.measurements
        model = IntervalModel.of(self.ode, tuple(task.unknown), tuple(task.initial),
                                 measurements.ids)
        point = _point_values(model, task)
        data = _data(measurements, model)
        kernel = self.kernel
        with phase(profiler, "generate kernels"):
            source = (persistent_source if kernel == "persistent" else interval_source)(
                model, o.order)
        self._sources[source.name] = source.text
        if kernel == "persistent":
            engine = PersistentEngine(source, self.device, o.block_size)
        elif self.device is not None:
            engine = GpuEngine(source, self.device, o.block_size)
        else:
            engine = HostEngine(source)
        with phase(profiler, "compile"):
            engine.compile()
        limits = _limits(o, float(task.epsilon))
        search_lo = np.array([task.unknown[u][0] for u in model.unknown])
        search_hi = np.array([task.unknown[u][1] for u in model.unknown])
        fixed_lo = np.array([task.initial[i][0] for i in model.initial])
        fixed_hi = np.array([task.initial[i][1] for i in model.initial])
        search = Search(search_lo, search_hi, float(task.epsilon),
                        presplit=_presplit(o.presplit, self.device is not None))
        budget = Budget(int(o.max_boxes), float(o.time_limit), started)
        with Progress(1, enabled=bool(getattr(task, "progress", True)),
                      desc="boxes") as bar:
            def progress(grown: int, evaluated: int) -> None:
                bar.grow(grown, search.queued)
                bar.advance(evaluated)

            if kernel == "persistent":
                with phase(profiler, "verdicts"):
                    done = engine.search(search, fixed_lo, fixed_hi, point, data, limits,
                                         QueueSettings.of(o), budget, progress)
            else:
                done = _multi_loop(engine, search, fixed_lo, fixed_hi, point, data, limits,
                                   budget, o.batch or (
                                       GPU_BATCH if self.device is not None
                                       else HOST_BATCH_PER_CORE * (os.cpu_count() or 1)),
                                   progress, profiler)
        stopped = done.stopped
        left = search.stop() if stopped else 0
        if stopped:
            log.warning("interval: the search stopped early (%s); %d queued box(es) are kept "
                        "as undetermined and the paving is incomplete", stopped, left)
        if isinstance(engine, GpuEngine):
            engine.release()
        lower, upper, verdict = search.paving()
        seconds = time.perf_counter() - started
        counts = search.counts
        statistics = {
            "complete": stopped is None, "stopped_by": stopped or "",
            "boxes_evaluated": counts["evaluated"], "boxes_feasible": counts["feasible"],
            "boxes_rejected": counts["rejected"], "boxes_bisected": counts["bisected"],
            "boxes_undetermined": counts["undetermined"] + left,
            "boxes_left_in_queue": left,
            "boxes_integration_failed": counts["failed"], "boxes_presplit": counts["presplit"],
            "volume_rejected_proved": search.rejected_volume,
            "seconds": seconds, "boxes_per_second": counts["evaluated"] / max(seconds, 1e-12),
            "kernel_seconds": done.kernel_seconds, "launches": done.launches,
            "taylor_steps": done.steps,
        }
        metadata = {"engine": engine.name, "order": o.order,
                    "initial_intervals": {k: list(v) for k, v in task.initial.items()},
                    "measurements": len(measurements), "kernel": kernel,
                    "source": source.name}
        if kernel == "persistent":
            statistics["boxes_split_eagerly"] = done.split
            metadata.update(grid=done.grid, block=done.block, queue_capacity=done.capacity,
                            launches_ended_by=dict(done.ended_by))
        else:
            metadata["batch"] = done.batch
        paving = Paving(model.unknown, lower, upper, verdict,
                        np.stack([search_lo, search_hi], axis=1), float(task.epsilon),
                        statistics)
        paving.metadata = metadata
        self.last_run = dict(statistics)
        return paving

    @property
    def kernel(self) -> str:
        """The SIVIA loop that runs: `persistent` (a GPU, unless --kernel multi) or
        `multi` (the host always: its OpenMP build checks batches)."""
        if self.device is None or self.options.kernel == "multi":
            return "multi"
        return "persistent"


@dataclass
class MultiRun:
    """What the multi-kernel loop did (the paving's statistics)."""

    batch: int
    launches: int = 0
    kernel_seconds: float = 0.0
    steps: int = 0
    stopped: str | None = None


def _multi_loop(engine, search: Search, fixed_lo, fixed_hi, point, data: Data,
                limits: Limits, budget: Budget, batch: int, progress, profiler) -> MultiRun:
    """SIVIA with the host bisecting: batches of the oldest boxes, one launch (or one
    host call) each for their verdicts."""
    run = MultiRun(batch)
    while search.queued:
        run.stopped = budget.exceeded(search)
        if run.stopped:
            break
        lo, hi = search.take(min(batch, budget.boxes_left(search)))
        lows = np.hstack([lo, np.broadcast_to(fixed_lo, (len(lo), len(fixed_lo)))])
        highs = np.hstack([hi, np.broadcast_to(fixed_hi, (len(hi), len(fixed_hi)))])
        with phase(profiler, "verdicts"):
            verdicts = engine.check(lows, highs, point, data, limits)
        run.kernel_seconds += verdicts.seconds
        run.launches += 1
        run.steps += int(verdicts.steps.sum())
        before = search.queued
        search.give(lo, hi, verdicts.verdict)
        progress(search.queued - before, len(lo))
    return run


def _presplit(option: int, gpu: bool) -> int:
    if option >= 0:
        return option
    return GPU_PRESPLIT if gpu else max(int(math.log2(4 * (os.cpu_count() or 1))), 0)


def _limits(o: IntervalOptions, epsilon: float = 0.0) -> Limits:
    return Limits(float(epsilon), float(o.wide), float(o.max_step),
                  float(o.tolerance), int(o.max_halvings), int(o.max_steps))


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
