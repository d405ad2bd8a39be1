"""`OdeProgram.run`: one ensemble from request to Result.

1. Specialise: the kernel (kernels/ode.cu, composed from sbmlgpu.ode's templates)
   is generated for this run's varied parameters and outputs (cached per
   combination), the method resolved (`--method auto`).
2. Pilot (adaptive methods with bundling, and `--summary`): `pilot_size` random
   members run first; their step counts train the bundling predictor and their
   outputs fix the histogram ranges of the on-device quantiles.
3. The ensemble runs through the scheduler's batch planner (memory per member: its
   table column, its outputs, status and steps), in bundled order if bundling is on;
   results go back to the original order. Full time courses are written batch by
   batch into the result array, a memory-mapped file when larger than
   `--spill-bytes`; with `--summary` each batch is reduced where it ran.
4. The Result: time courses or summary, one status per member, metadata (method,
   engine, bundling, steps, tolerances).
"""

from __future__ import annotations


import logging
import os
import tempfile
import time
from dataclasses import asdict
from typing import Any

import numpy as np

from sbmlgpu.backend import Program, RunRequest
from sbmlgpu.errors import OptionError
from sbmlgpu.ir import Network
from sbmlgpu.ode.codegen import KernelSource, generate
from sbmlgpu.ode.engines import BatchOutput, GpuEngine, LaunchConfig, bytes_per_member
from sbmlgpu.ode.model import KernelModel
from sbmlgpu.ode.summary import BatchStats, ranges_from_pilot, to_summary
from sbmlgpu.outputs import default_outputs
from sbmlgpu.profile import phase
from sbmlgpu.results import DEFAULT_QUANTILES
from sbmlgpu.results import Status, TimeCourseResult
from sbmlgpu.views.ode import OdeSystem

from . import bundling
from .cpu import cpu_engine
from .options import OdeOptions
from .stiffness import choose_method

log = logging.getLogger("sbmlgpu.ode")
WARP = 32
#: this backend's kernel: sbmlgpu.ode's templates with the trajectory sink
KERNEL = ("sbmlgpu.plugins.ode", "ode.cu")


def kernel_source(model: KernelModel, method: str, precision: str = "double", *,
                  block_size: int = 128, jacobian: str = "auto") -> KernelSource:
    """The source of this backend's kernel for `model` integrated with `method`."""
    return generate(model, method, precision, template=KERNEL, block_size=block_size,
                    jacobian=jacobian)


class OdeProgram(Program):
    def __init__(self, network: Network, ode: OdeSystem, options: OdeOptions, device=None):
        self.network = network
        self.ode = ode
        self.options = options
        self.device = device
        self._sources: dict[str, str] = {}
        self._engines: dict[tuple, tuple[KernelSource, Any]] = {}
        self.last_run: dict[str, Any] = {}

    # -- sources ----------------------------------------------------------------
    @property
    def sources(self) -> dict[str, str]:
        """Every kernel generated so far; before the first run, the kernel of a run at
        nominal parameters with the default outputs (so that --keep-source right after
        compile has something to keep)."""
        if not self._sources:
            model = KernelModel(self.ode, (), default_outputs(self.network))
            method = self.options.method
            if method == "auto":
                method, _ = choose_method(model, np.zeros((1, 0)), 0.0, 1.0)
            self._source(model, method)
        return dict(self._sources)

    def _source(self, model: KernelModel, method: str) -> KernelSource:
        o = self.options
        source = kernel_source(model, method, o.precision, block_size=o.block_size,
                               jacobian=o.jacobian)
        self._sources[source.name] = source.text
        return source

    def _engine(self, model: KernelModel, method: str):
        key = (model.varied, model.outputs, method, tuple(sorted(model.fixed_values.items())))
        if key not in self._engines:
            source = self._source(model, method)
            if self.device is not None:
                engine = GpuEngine(source, self.options.fast_math)
            else:
                engine = cpu_engine(source, model, method, self.options)
            self._engines[key] = (source, engine)
        return self._engines[key]

    # -- run --------------------------------------------------------------------
    def run(self, request: RunRequest, scheduler=None, profiler=None) -> TimeCourseResult:
        started = time.perf_counter()
        o = self.options
        outputs = tuple(request.outputs or default_outputs(self.network))
        times = np.asarray(request.times, dtype=float)
        n = int(request.ensemble_size)
        params = dict(request.parameters or {})
        # a column with one value over an ensemble does not vary: it becomes a literal
        # of the kernel (a single member keeps its values in the table, so that runs
        # one after another with other values reuse the compiled kernel)
        constant = {k: float(np.asarray(v, dtype=float).reshape(-1)[0]) for k, v in params.items()
                    if n > 1 and _is_constant(v)}
        varied = tuple(k for k in params if k not in constant)
        model = KernelModel(self.ode, varied, outputs, constant)
        table64 = _table(params, varied, n)
        with phase(profiler, "choose method"):
            method, why = self._method(model, table64, times)
        with phase(profiler, "generate kernel"):
            source, engine = self._engine(model, method)
        table = table64.astype(engine.dtype, copy=False)
        rtol, atol = o.tolerances
        config = LaunchConfig(rtol=rtol, atol=atol, h0=o.h0, max_step=o.max_step, dt=o.dt,
                              max_steps=o.max_steps, seed=int(request.seed),
                              block_size=o.block_size, bins=o.quantile_bins)
        scheduler = scheduler or _default_scheduler(self.device, request.progress)
        devices = list(getattr(scheduler, "local_devices", ()) or ([self.device] if self.device
                                                                  else []))
        if self.device is not None and not devices:
            devices = [self.device]
        self._compile_everywhere(engine, devices, profiler)
        first_device = devices[0] if devices else None

        # pilot: bundling and the ranges of the on-device quantile histograms
        reason = bundling.should_bundle(o.bundling, method, n, len(varied), o.pilot_size)
        plan = bundling.BundlePlan(None, reason or "")
        ranges = None
        cols = len(times) * len(outputs)
        if reason is None or request.summary:
            members = bundling.pilot(n, o.pilot_size, request.seed)
            with phase(profiler, "pilot"):
                pilot = engine.run(first_device, table[:, members], times, len(outputs),
                                   config, members.astype(np.uint64), profiler=profiler)
            if reason is None:
                plan = bundling.plan(table64, members, pilot.steps, WARP)
            if request.summary:
                ok = pilot.status == Status.ok
                values = pilot.out.reshape(-1, cols)[ok]
                ranges = ranges_from_pilot(values, cols)
        permutation = plan.permutation
        order = permutation.order if permutation is not None else None
        run_table = table[:, order] if order is not None else table
        member_ids = order.astype(np.uint64) if order is not None else None

        itemsize = np.dtype(engine.dtype).itemsize
        per_member = bytes_per_member(len(varied), len(times), len(outputs), itemsize,
                                      order is not None, time_courses=not request.summary)
        fixed = (cols * (6 * 8 + 4 * o.quantile_bins + 16) if request.summary else 0) \
            + len(times) * itemsize
        data, data_note = (None, "") if request.summary else self._destination(
            n, len(times), len(outputs))

        def work(device, start: int, stop: int):
            ids = member_ids[start:stop] if member_ids is not None else None
            # unbundled batches are rows start:stop of the result: the engine writes
            # them in place (when the dtypes agree); bundled ones are scattered by row
            direct = data[start:stop] if data is not None and order is None else None
            out: BatchOutput = engine.run(device, run_table[:, start:stop], times,
                                          len(outputs), config, ids, first_member=start,
                                          ranges=ranges, profiler=profiler,
                                          destination=direct)
            if data is not None and out.out is not direct:
                rows = order[start:stop] if order is not None else slice(start, stop)
                data[rows] = out.out
            return out.status, out.steps, out.stats

        combined = scheduler.map_batches(
            work, n, per_member, fixed_bytes=fixed, align=WARP if order is not None else 1,
            combine=_combine, progress=request.progress, desc="trajectories")
        if combined is None:  # an MPI rank other than the root: the root has the result
            return TimeCourseResult(times=times, ids=outputs,
                          data=np.zeros((0, len(times), len(outputs))),
                          metadata={"backend": "ode", "mpi_rank": getattr(scheduler, "rank", 0)})
        status, steps, batch_stats = combined
        status = np.asarray(status, dtype=np.int8)
        steps = np.asarray(steps, dtype=np.int64)
        if permutation is not None:
            status = permutation.restore(status)
            steps = permutation.restore(steps)
        summary = None
        extra: dict[str, Any] = {}
        if request.summary:
            merged: BatchStats | None = None
            for stats in batch_stats:
                merged = stats if merged is None else merged.merge(stats)
            summary, resolution = to_summary(merged, ranges, (len(times), len(outputs)),
                                             DEFAULT_QUANTILES, n)
            extra["quantile_resolution_max"] = float(np.nanmax(resolution)) if resolution.size \
                else 0.0
            extra["quantiles_from"] = (f"on-{'device' if first_device else 'host'} "
                                       f"histograms, {o.quantile_bins} bins per column over "
                                       f"the pilot's range")
        self.last_run = {
            "method": method, "method_reason": why,
            "engine": engine.name, "kernel": source.name, "precision": o.precision,
            "rtol": rtol, "atol": atol, "bundling": plan.reason or "bundled",
            "bundling_info": plan.info, "steps_mean": float(steps.mean()) if n else 0.0,
            "steps_max": int(steps.max()) if n else 0, "jacobian": source.jacobian,
            "wall_seconds": time.perf_counter() - started, **extra,
        }
        if data_note:
            self.last_run["data"] = data_note
        self.last_steps = steps  # per member, original order
        self.last_order = order  # launch order (bundled), None when unbundled
        metadata = {"backend": "ode", "device": ", ".join(
            d.properties.name for d in devices) if devices else f"cpu ({engine.name})",
            "options": asdict(o), **self.last_run}
        if request.summary:
            return TimeCourseResult(times=times, ids=outputs, data=None, status=status, summary=summary,
                          metadata=metadata)
        return TimeCourseResult(times=times, ids=outputs, data=data, status=status, metadata=metadata)

    # -- helpers ----------------------------------------------------------------
    def _method(self, model: KernelModel, table: np.ndarray, times: np.ndarray):
        if self.options.method != "auto":
            return self.options.method, "chosen with --method"
        return choose_method(model, _probe_members(table), float(times[0]),
                             float(times[-1] - times[0]))

    def _compile_everywhere(self, engine, devices, profiler) -> None:
        if not isinstance(engine, GpuEngine):
            return
        for device in devices:
            if profiler is not None:
                with profiler.span("compile ode kernel", category="compile", device=device):
                    engine.kernel(device)
            else:
                engine.kernel(device)

    def _destination(self, n: int, n_times: int, n_outputs: int):
        """The (members, times, outputs) float64 array the batches write into: in
        memory, or a memory-mapped file (already unlinked, so it disappears with the
        result) when larger than --spill-bytes."""
        nbytes = n * n_times * n_outputs * 8
        if nbytes <= self.options.spill_bytes:
            return np.empty((n, n_times, n_outputs), dtype=np.float64), ""
        fd, path = tempfile.mkstemp(prefix="sbmlgpu-ode-", suffix=".npy")
        os.close(fd)
        data = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64,
                                         shape=(n, n_times, n_outputs))
        os.unlink(path)  # the mapping keeps the pages; the file goes with the last reference
        return data, f"{nbytes / 1e9:.3g} GB of time courses memory-mapped from {path} (unlinked)"


def _is_constant(column) -> bool:
    values = np.asarray(column, dtype=float).reshape(-1)
    if values.size == 0:
        return False
    first = values[0]
    return bool(np.all(values == first)) if first == first else bool(np.all(values != values))


def _probe_members(table: np.ndarray, count: int = 8) -> np.ndarray:
    """(count, varied) parameter sets for the stiffness check: the median member and
    random ones (a wide ensemble holds stiff and non-stiff members)."""
    if not table.size:
        return np.zeros((1, 0))
    rng = np.random.default_rng(0)
    picks = rng.choice(table.shape[1], size=min(count - 1, table.shape[1]), replace=False)
    return np.vstack([np.median(table, axis=1)[None, :], table[:, picks].T])


def _table(params: dict, varied: tuple[str, ...], n: int) -> np.ndarray:
    """The (varied, n) float64 table of the ensemble's parameter columns."""
    table = np.empty((len(varied), n), dtype=np.float64)
    for j, pid in enumerate(varied):
        column = np.asarray(params[pid], dtype=float).reshape(-1)
        if column.size not in (1, n):
            raise OptionError("parameters", f"column {pid!r} has {column.size} values for "
                                            f"{n} members")
        table[j] = column
    return table


def _combine(ordered) -> tuple[np.ndarray, np.ndarray, list]:
    """(status, steps, [batch stats]) from the [(Batch, (status, steps, stats))] in order."""
    if not ordered:
        return np.zeros(0, np.int8), np.zeros(0, np.int64), []
    status = np.concatenate([r[0] for _, r in ordered])
    steps = np.concatenate([r[1] for _, r in ordered])
    return status, steps, [r[2] for _, r in ordered if r[2] is not None]


def _default_scheduler(device, progress: bool):
    from sbmlgpu.schedule import Scheduler

    return Scheduler(devices=[device] if device is not None else [], progress=progress)
