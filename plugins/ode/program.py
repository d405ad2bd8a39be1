"""`OdeProgram.run`: one ensemble from task to Result.

1. Specialise: the kernel (kernels/ode.cu, composed from sbmlgpu.ode's templates)
   is generated for this run's varied parameters and outputs (cached per
   combination), the method resolved (`--method auto`).
2. Pilot (adaptive methods with bundling, and `--summary`): `pilot_size` random
   members run first; their step counts train the bundling predictor and their
   outputs fix the histogram ranges of the on-device quantiles. Not in a first run
   under lanes that refill with more members than lanes (the order would save about
   what the pilot costs), nor in a repeated run, which orders by the cost model fitted
   on the run before.
3. The ensemble runs through the scheduler's batch planner (memory per member: its
   table column, its outputs, status and steps; a delay() model's history ring), in
   bundled order if bundling is on;
   results go back to the original order (a bundled batch of a contiguous range of
   members, e.g. the whole ensemble in one batch, is written in member order by the
   kernel itself: `_first_member`). Full time courses are written batch by batch
   into the result array, a memory-mapped file when larger than `--spill-bytes`;
   with `--summary` each batch is reduced where it ran; with `TimeCourse.reduce`
   (the PEtab objective) each batch is reduced to a few numbers per member on the
   GPU and no time courses are kept. Members past the first pass's step budget run
   again in a second pass (passes.py); the launch's limits per member are limits.py's.
4. The Result: time courses or summary, one status per member, metadata (method,
   engine, bundling, steps, tolerances).
"""

from __future__ import annotations


import logging
import threading
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from sbmlgpu.backend import Program
from sbmlgpu.tasks import TimeCourse
from sbmlgpu.ensemble_summary import OVER_OK_MEMBERS
from sbmlgpu.errors import DeviceError, OptionError
from sbmlgpu.ode.engines import BatchOutput, GpuEngine, LaunchConfig, bytes_per_member
from sbmlgpu.ode.kernel_source import DEFAULT_HISTORY_NODES, KernelSource
from sbmlgpu.ode.sinks import LAUNCH_ORDER
from sbmlgpu.outputs import default_outputs
from sbmlgpu.profile import phase
from sbmlgpu.results import Status, TimeCourseResult
from sbmlgpu.runtime.host_threads import over_pieces
from sbmlgpu.runtime.layout import stage_ahead
from sbmlgpu.runtime.resident import ResidentTable
from sbmlgpu.schedule.ensemble import (BatchMemory, EnsembleJob, MemberBatch, MemberResults,
                                       Pilot, default_scheduler)
from sbmlgpu.schedule.spill import Spill

from . import bundling, failures, host_pass, limits, method_trial, passes, prefetch
from .options import OdeOptions
from .specialised import LaterKernel, Specialisation, SpecialisationCache

if TYPE_CHECKING:  # pragma: no cover - these import sympy, which a cached run skips
    from sbmlgpu.ir import Network
    from sbmlgpu.ode.model import KernelModel
    from sbmlgpu.views.ode import OdeSystem

log = logging.getLogger("sbmlgpu.ode")
WARP = 32
#: an unbundled run of several varied columns keeps its table on the GPU from this
#: many members (its batches' columns are then gathered there, not copied on the host)
RESIDENT_MIN_MEMBERS = 4096
#: the method trial's statuses that are not failures: ok, and the first pass's budget
#: (method_trial.choose counts the others)
TRIAL_UNFAILED = (int(Status.ok), int(Status.max_steps))
#: this backend's kernel: sbmlgpu.ode's templates with the trajectory sink
KERNEL = ("sbmlgpu.plugins.ode", "ode.cu")


def kernel_source(model: KernelModel, method: str, precision: str = "double", *,
                  block_size: int = 128, jacobian: str = "auto",
                  history_nodes: int = DEFAULT_HISTORY_NODES,
                  refill: bool = False, scaled_atol: bool = True) -> KernelSource:
    """The source of this backend's kernel for `model` integrated with `method`
    (`refill`: its CUDA entry point's lanes take the next member, --lane-refill;
    `scaled_atol`: --scaled-atol)."""
    from sbmlgpu.ode.codegen import generate

    return generate(model, method, precision, template=KERNEL, block_size=block_size,
                    jacobian=jacobian, history_nodes=history_nodes, fixed="auto",
                    refill=refill, scaled_atol=scaled_atol)


class OdeProgram(Program):
    def __init__(self, network: Network, ode: OdeSystem, options: OdeOptions, device=None):
        self.network = network
        self.ode = ode
        self.options = options
        self.device = device
        self._sources: dict[str, str] = {}
        self._engines: dict[tuple, tuple[KernelSource, Any]] = {}
        self._engine_lock = threading.RLock()
        #: per kernel model and method: the later passes' kernel (_later_kernel)
        self._later_kernels: dict[tuple, LaterKernel] = {}
        #: a GPU run's host builds for its second pass that failed (not tried again)
        self._failed_host_builds = host_pass.FailedBuilds()
        #: per (varied, outputs, constants): the kernel model; per parameter values
        #: too: the method check's answer (plugins/ode/specialised.py)
        self.specialised = SpecialisationCache(auto_method=options.method == "auto")
        # kept from run to run of this program (core's compiled_program keeps it per
        # loaded model): the stiffness check's probes (lambdified model, reference)
        self._probes: dict = {}
        #: per kernel (its text fixes the table's rows) and output times: the cost
        #: model fitted on the last bundled run's own steps; the next run of that
        #: kernel bundles by it without a pilot (a repeated PEtab objective: 1-3 % of
        #: each call), where it covers what varies there
        self._cost_fits: dict[tuple, bundling.CostFit] = {}
        #: per kernel and output times, where lanes refill: seconds a step of repeated
        #: runs bundled (True) and not (False), which bundling.measured_verdict reads
        self._order_timings: dict[tuple, dict[bool, float]] = {}
        #: per kernel model and time span: the CPU path's trial pick (method_trial.py),
        #: kept for runs with other parameter values (which method is faster is the
        #: model's more than the values'; a trial per run would cost a sampler's every
        #: call ~4 x 32 members)
        self._trial_picks: dict[tuple, tuple[str, str]] = {}
        self._run_lock = threading.Lock()  # one run at a time of a shared program
        self.last_run: dict[str, Any] = {}

    # -- sources ----------------------------------------------------------------
    @property
    def sources(self) -> dict[str, str]:
        """Every kernel generated so far; before the first run, the kernel of a run at
        nominal parameters with the default outputs (so that --keep-source right after
        compile has something to keep)."""
        if not self._sources:
            from sbmlgpu.ode.model import KernelModel

            from .stiffness import choose_method

            model = KernelModel(self.ode, (), default_outputs(self.network))
            method = self.options.method
            if method == "auto":
                method, _ = choose_method(model, np.zeros((1, 0)), 0.0, 1.0)
            self._source(model, method)
        return dict(self._sources)

    def _source(self, model: KernelModel, method: str) -> KernelSource:
        o = self.options
        source = kernel_source(model, method, o.precision, block_size=o.block_size,
                               jacobian=o.jacobian, history_nodes=o.history_nodes,
                               refill=o.lane_refill and self.device is not None,
                               scaled_atol=o.scaled_atol)
        self._sources[source.name] = source.text
        return source

    def _engine(self, model: KernelModel, method: str):
        key = (*_kernel_model_key(model), method)
        # under a lock: the prefetch thread (prefetch.py), the CPU path's trial and a GPU
        # run's host-pass build (LaterKernel) may ask for one kernel at once
        with self._engine_lock:
            if key not in self._engines:
                source = self._source(model, method)
                self._engines[key] = (source, self._engine_of(source, model, method))
            source, engine = self._engines[key]
        self._sources[source.name] = source.text  # this run's kernel, also when reused
        return source, engine

    def _engine_of(self, source: KernelSource, model: KernelModel, method: str):
        if self.device is not None:
            return GpuEngine(source, self.options.fast_math)
        from .cpu import cpu_engine

        return cpu_engine(source, model, method, self.options)

    def _later_kernel(self, model: KernelModel, first: str) -> LaterKernel | None:
        """The kernel of the later passes' method (passes.later_method), generated and
        built when first asked for, once per kernel model (the specialisations of other
        parameter values share it) through the engine table (the trial's, if it ran)."""
        method = passes.later_method(self.options.method, first, self.options.later_as_auto)
        if method is None:
            return None
        key = (*_kernel_model_key(model), method)
        with self._engine_lock:
            if key not in self._later_kernels:
                self._later_kernels[key] = LaterKernel(
                    method, lambda: self._engine(model, method)[0],
                    lambda source: self._engine(model, method)[1])
            return self._later_kernels[key]

    # -- run --------------------------------------------------------------------
    def run(self, task: TimeCourse, scheduler=None, profiler=None) -> TimeCourseResult:
        with self._run_lock:
            self._sources = {}  # `sources`: the kernels of this run
            return self._run(task, scheduler, profiler)

    def _run(self, task: TimeCourse, scheduler, profiler) -> TimeCourseResult:
        started = time.perf_counter()
        o = self.options
        outputs = self._outputs(task)
        times = np.asarray(task.times, dtype=float)
        n = int(task.ensemble_size)
        params = dict(task.parameters or {})
        scheduler = default_scheduler(scheduler, self.device, task.progress)
        devices = list(getattr(scheduler, "local_devices", ()) or ([self.device] if self.device
                                                                  else []))
        distributed = getattr(scheduler, "size", 1) > 1
        local = tuple(getattr(scheduler, "local_devices", ()) or ())
        if self.device is not None and len(local) == 1 and not distributed \
                and not task.summary and task.reduce is None:
            # a launch's time courses: their download's staging pinned on a thread while
            # the method check runs (runtime.layout.stage_ahead; a first run's cost, not
            # a repeat's). One GPU alone: where several share the batches, which one
            # downloads what is the scheduler's. A launch: as passes and the scheduler
            # cap it (launch_cap, max_batch_items)
            launch_members = min(n, passes.launch_cap(n, local),
                                 getattr(scheduler, "max_batch_items", None) or n)
            stage_ahead(local[0], launch_members * len(times) * len(outputs)
                        * (4 if o.precision == "float" else 8))
        with phase(profiler, "parameter table"):
            # a column with one value over an ensemble does not vary: it becomes a literal
            # of the kernel (a single member keeps its values in the table, so that runs
            # one after another with other values reuse the compiled kernel, as do the
            # columns the task keeps: table_columns)
            keep = set(task.table_columns)
            constant = {k: float(np.asarray(v, dtype=float).reshape(-1)[0])
                        for k, v in params.items()
                        if n > 1 and k not in keep and _is_constant(v)}
            varied = tuple(k for k in params if k not in constant)
            # members that end at their own time (TimeCourse.member_ends): their counts
            # of output times go in a row after the parameters', which the kernels read
            # (limits.cuh) and which travels with the columns wherever they go
            counts = task.own_times()
            full = _table(params, varied, n, counts)
            table64 = full[:len(varied)]  # the parameters alone (a view)
        spec = self._specialise(varied, outputs, constant, table64, times, profiler,
                                seed=int(task.seed))
        method, why, source, engine = spec.method, spec.why, spec.source, spec.engine
        # the kernels (GPU, native) stop each member at its count, read from the table;
        # numpy's engine runs the members of each count on those times alone
        # (_run_by_own_times)
        ends_in_kernel = counts is not None and engine.name in ("gpu", "native")
        table = (full if ends_in_kernel else table64).astype(engine.dtype, copy=False)
        times_row = len(varied) if ends_in_kernel else -1
        rtol, atol = o.tolerances

        def launch(max_steps: int) -> LaunchConfig:
            # a config per step budget (dataclasses.replace of one cost ~5 us a pass)
            return launch_config(o, method, max_steps, int(task.seed), times_row)

        config = launch(o.max_steps)
        # rk4's steps are fixed by --dt (alike over members): no second pass
        budget = passes.StepBudget(o.pass_steps if method != "rk4" else 0, o.max_steps)
        self._compile_everywhere(engine, devices, profiler)
        on_device = isinstance(engine, GpuEngine)
        # a per-member reduction of the time courses where they lie (the PEtab
        # objective): on the GPU only; the host returns the time courses as before
        reduce = task.reduce if on_device and not task.summary else None

        def batch_runner(launch: LaunchConfig, engine=engine):
            return lambda device, batch: run_batch(device, batch, launch, engine)

        def run_batch(device, batch: MemberBatch, launch: LaunchConfig,
                      engine) -> MemberResults:
            device = device if device is not None else self.device
            ids = batch.members.astype(np.uint64) if batch.members is not None else None
            first, scatter = _first_member(batch, engine)
            # the GPU reduces a summary's batches where they ran; the host's time
            # courses are folded by the runner
            where = {"histogram": batch.summary.grid} if batch.summary is not None \
                and on_device else {"reduce": reduce} if reduce is not None else {}
            # a batch's columns come from the table on the device where it has a copy
            # (on the host: a random-access gather for a bundled batch, a strided copy
            # of each row's range for an unbundled one)
            columns = resident[0].gather(device, batch.members, batch.start, batch.stop) \
                if resident else None
            if counts is not None and not ends_in_kernel:
                out = _run_by_own_times(engine, device, batch.take(table), times,
                                        len(outputs), launch, ids, first, counts, profiler)
            else:
                out = engine.run(device, columns if columns is not None
                                 else batch.take(table), times, len(outputs),
                                 launch, ids, first_member=first, profiler=profiler,
                                 destination=None if scatter else batch.rows, **where)
            if scatter:  # an engine without member order, given the rows of a bundle
                batch.rows[batch.members - batch.members.min()] = out.out
                out.out = batch.rows
            return MemberResults(out.status, out.out, out.stats,
                                 {"steps": out.steps, **out.reduced}, out.kernel_ms)

        # pilot: bundling and the ranges of the on-device quantile histograms
        reason = bundling.should_bundle(o.bundling, method, n, len(varied), o.pilot_size)
        if reason is None and not on_device:
            # the host's OpenMP threads take members as they finish: nothing waits for
            # a warp's slowest member, and the pilot and scatter cost ~4 % of CPU time
            reason = "not used on the CPU path (no warps to fill)"
        plans: list[bundling.BundlePlan] = []
        resident: list[ResidentTable] = []  # the table on the GPUs

        def keep_table_on_devices(bundled: bool) -> None:
            """The table on the GPUs, where that pays: a bundled run (its batches are
            random-access gathers), or a large one of several rows (strided copies);
            a small run keeps its one launch and copies (the fixed cost of a run)."""
            pays = bundled or (table.shape[0] > 1 and n >= RESIDENT_MIN_MEMBERS)
            if on_device and table.size and pays and not resident:
                # before the batches are planned, so that their memory counts it
                with phase(profiler, "upload the table", category="transfer"):
                    resident.append(ResidentTable.upload(devices, table))

        # what ordering gains depends on the lanes: a refill kernel's (the members the
        # GPUs hold at once) or one member per thread (None)
        lanes = sum(engine.resident_lanes(d, o.block_size, o.max_lanes) for d in devices) \
            if reason is None and on_device and getattr(engine, "refills", False) else None

        def order(pilot: MemberResults, members: np.ndarray):
            with phase(profiler, "bundling plan"):  # a fit on the pilot, a sort of all
                plans.append(bundling.plan(table64, members, pilot.extras["steps"], WARP,
                                           lanes))
            keep_table_on_devices(plans[-1].permutation is not None)
            return plans[-1].permutation

        # a repeated run of this kernel (one process, one GPU rank) bundles by the cost
        # model of the last run instead of a pilot's; a summary still needs its pilot
        fit_key = (source.name, times.tobytes())
        reuse = reason is None and not task.summary and not distributed
        known = self._cost_fits.get(fit_key) if reuse else None
        if known is not None and not known.covers(
                table64, bundling.run_sample(n, o.pilot_size, task.seed)):
            known = None  # a row it never saw vary, or a value log cannot take: a pilot
        # under refill, repeated runs time both orders and keep the faster (the list
        # schedule in steps does not say what ordering saves in time)
        timed = known is not None and lanes is not None and n > lanes
        # and a first run there has no pilot (plain order; its own steps fit the cost
        # model of the runs after it): with more members than lanes no lane waits for
        # its warp, and the order only starts the costliest members first, which saves
        # at most about the slowest member's time (a list schedule ends within one
        # item of the mean load), while the pilot's launch costs about its slowest
        # member's time too (H200, 10^5 PEtab sets: pilots of 0.009-0.18 s, after which
        # 19 of 22 models kept their order)
        # (`reuse`: no summary, which needs its pilot, and not distributed, where ranks
        # could count their lanes differently and every rank must take the pilot's way)
        unpiloted = reuse and known is None and lanes is not None and n > lanes
        if unpiloted:
            plans.append(bundling.BundlePlan(None, bundling.FIRST_UNDER_REFILL))
        if known is not None:
            with phase(profiler, "bundling plan"):
                plans.append(bundling.plan_by(
                    table64, known, lanes, WARP,
                    self._order_timings.get(fit_key) if timed else None))

        itemsize = np.dtype(engine.dtype).itemsize
        cols = len(times) * len(outputs)

        def memory(time_courses: bool, bundled: bool) -> BatchMemory:
            per_member = bytes_per_member(table.shape[0], len(times), len(outputs), itemsize,
                                          bundled, time_courses=time_courses and reduce is None,
                                          history_reals=source.history_reals) \
                + (8 * len(reduce.names) if reduce is not None else 0)
            fixed = (0 if time_courses else cols * (6 * 8 + 4 * o.quantile_bins + 16)) \
                + len(times) * itemsize \
                + source.history_buffer_reals(1) * itemsize  # delay(): a last block's padding
            return BatchMemory(per_member, fixed, WARP if bundled else 1)

        pilot = (reason is None and known is None and not unpiloted) or task.summary
        first_pass = launch(budget.first_pass_steps)
        job = EnsembleJob(
            n, (len(times), 0 if reduce is not None else len(outputs)),
            batch_runner(first_pass), memory,
            summary=OVER_OK_MEMBERS if task.summary else None, bins=o.quantile_bins,
            pilot=Pilot.sample(bundling.pilot(n, o.pilot_size, task.seed)) if pilot else None,
            order=order if reason is None and known is None and not unpiloted else None,
            launch_order=plans[0].permutation if known is not None else None,
            spill=Spill(o.spill_bytes, prefix="sbmlgpu-ode-"), progress=task.progress,
            desc="trajectories",
            # several host threads per GPU overlap one batch's transfers and host work
            # with another's kernel (the engine is thread-safe per device); the
            # objective's reduction is not measured so, and keeps one
            workers_per_device=o.threads_per_gpu if on_device and reduce is None else 1)
        # under --method auto, the members past --pass-steps run again with another
        # method (passes.later_method): on the CPU path the whole second pass, on a GPU
        # the host's (its device passes keep this kernel: no second nvcc build)
        later = spec.later if budget.two_passes and not distributed else None
        rerun = batch_runner(config)

        def host_for(kernel, early: bool = True,
                     later_method: bool = False) -> host_pass.HostSecondPass | None:
            # on a GPU, a second pass of few members runs on the host's cores, and a
            # reduction (the objective) scores them there (its build
            # started early where no pilot will tell: `early`; a fallback's build starts
            # with the later pass, passes._later_passes)
            return host_pass.for_run(kernel, table, times, len(outputs), config, budget,
                                     on_device, scheduler,
                                     pilot or known is not None or not early, reduce,
                                     later_method, self._failed_host_builds)

        # the later method's build waits for a paused member (no sympy work in the
        # background of a run that may never need its kernel)
        host = host_for(later.source if later is not None else source, early=later is None,
                        later_method=later is not None)
        if later is not None:
            fallback = rerun
            if not on_device:  # its kernel built when a member first needs it
                rerun = lambda device, batch: run_batch(device, batch, config,  # noqa: E731
                                                        later.engine())
            later_run = passes.LaterMethod(
                later.method, method, fallback, in_rerun=not on_device,
                fallback_host=host_for(source, early=False) if host is not None else None,
                ready=None if on_device else lambda: _later_built(later, method))
        try:
            if job.order is None:  # with a pilot, its order() decides the upload
                keep_table_on_devices(bool(plans) and plans[0].permutation is not None)
            outcome, second = passes.run_in_passes(
                job, scheduler, profiler, budget, rerun, host,
                limits.bound_hint(o), lambda steps: batch_runner(launch(steps)),
                later_run if later is not None else None, counts)
        finally:
            for table_copies in resident:
                table_copies.free()
            # what the reduction's launches kept on the devices (its tables, once a run)
            release = getattr(reduce, "release", None)
            if release is not None:
                release()
        if not outcome.root:  # an MPI rank other than the root: the root has the result
            return TimeCourseResult(times=times, ids=outputs, data=outcome.data,
                                    status=outcome.status,
                                    metadata={"backend": "ode", "mpi_rank": scheduler.rank})
        plan = plans[0] if plans else bundling.BundlePlan(None, reason or "")
        # the kernels' int32 counts as they came: a conversion of 10^7 of them cost more
        # than the statistics below (the H100 profile of a 10^7-member Lorenz run)
        steps = np.asarray(outcome.extras.get("steps", ()))
        if steps.dtype.kind not in "iu":
            steps = steps.astype(np.int64)
        first_steps = steps
        if second.method and steps.size == n:
            # the cost model and the order's timings are the first method's: a member
            # the later method ran took at least --pass-steps of the first's steps
            first_steps = steps.copy()
            first_steps[second.rerun] = np.maximum(steps[second.rerun], second.pass_steps)
        if timed and steps.size == n:  # the whole run's seconds a step, this order
            self._order_timings.setdefault(fit_key, {})[plan.permutation is not None] = \
                (time.perf_counter() - started) / max(float(first_steps.sum(dtype=np.int64)),
                                                      1.0)
        if reuse and steps.size == n:
            with phase(profiler, "fit the next run's cost model"):
                sample = bundling.run_sample(n, o.pilot_size, task.seed)
                self._cost_fits[fit_key] = bundling.fit(table64, sample, first_steps[sample],
                                                        "the previous run")
        slowest = int(steps.argmax()) if steps.size else None
        extra: dict[str, Any] = {}
        if task.summary:
            grid = outcome.target.grid
            extra["quantile_resolution_max"] = float(np.nanmax(grid.width)) if cols else 0.0
            extra["quantiles_from"] = (f"on-{'device' if on_device else 'host'} "
                                       f"histograms, {o.quantile_bins} bins per column over "
                                       f"the pilot's range")
        self.last_run = {
            "method": method, "method_reason": why,
            "engine": engine.name, "kernel": source.name, "precision": o.precision,
            "lanes": ("refill: threads take the next member when theirs ends"
                      if getattr(engine, "refills", False) else "one member per thread"),
            **_kernel_resources(engine, devices if on_device else ()),
            "rtol": rtol, "atol": atol, "bundling": plan.reason or "bundled",
            "bundling_info": plan.info,
            "steps_mean": float(steps.sum(dtype=np.int64)) / steps.size if steps.size else 0.0,
            "steps_max": int(steps[slowest]) if slowest is not None else 0,
            "jacobian": source.jacobian,
            "wall_seconds": time.perf_counter() - started,
            # TimeCourse.member_ends: each member stopped at its own end (by the kernel,
            # or numpy's engine run per count), so that sbmlgpu.api cuts nothing
            **({"member_ends": "integrated"} if counts is not None else {}),
            **limits.metadata(o, outcome.status, steps, second, slowest), **extra,
        }
        if outcome.spill_note:
            self.last_run["data"] = outcome.spill_note
        # the reduction's numbers per member, original order (no time courses then)
        reduced = {"reduced": {name: outcome.extras[name] for name in reduce.names}} \
            if reduce is not None else {}
        self.last_steps = steps  # per member, original order
        # launch order (bundled), None when unbundled
        self.last_order = outcome.permutation.order if outcome.permutation is not None else None
        metadata = {"backend": "ode", "device": ", ".join(
            d.properties.name for d in devices) if devices else f"cpu ({engine.name})",
            "options": o.as_dict(), **self.last_run, **reduced}
        with phase(profiler, "build the result"):
            return TimeCourseResult(times=times, ids=outputs,
                                    data=None if reduce is not None else outcome.data,
                                    status=outcome.status, summary=outcome.summary,
                                    metadata=metadata, messages=failures.messages(
                                        outcome.status, times,
                                        None if task.summary or reduce is not None
                                        else outcome.data,
                                        draws=spec.draws, delays=spec.delays,
                                        fast=spec.fast,
                                        reference=not getattr(engine, "vectorised", True)))

    # -- helpers ----------------------------------------------------------------
    def _specialise(self, varied: tuple[str, ...], outputs: tuple[str, ...],
                    constant: dict[str, float], table: np.ndarray, times: np.ndarray,
                    profiler=None, seed: int = 0) -> Specialisation:
        """The kernel and engine of a run: the method checked once per model and
        parameter values, the kernel generated once per model and method."""
        cache = self.specialised
        key = cache.key(varied, outputs, constant, table, times)
        if key in cache.runs:
            spec = cache.runs[key]
            self._sources[spec.source.name] = spec.source.text  # this run's kernel too
            return spec
        from sbmlgpu.ode.model import KernelModel

        model = cache.model(
            varied, outputs, constant, lambda: KernelModel(self.ode, varied, outputs, constant))
        # --method auto: a large model's likely kernel compiles while the check runs
        ahead = prefetch.Prefetch(self, model) \
            if self.options.method == "auto" and prefetch.worth_it(model) else None
        with phase(profiler, "choose method"):
            method, why = cache.method(key, lambda: self._method(model, table, times, seed))
        if ahead is not None:
            with phase(profiler, "wait for the kernel built ahead"):
                ahead.join(method)
        with phase(profiler, "generate kernel"):
            source, engine = self._engine(model, method)
        return cache.add(key, Specialisation(method, why, source, engine, bool(model.draws),
                                             bool(model.delayed), model.fast_rates is not None,
                                             self._later_kernel(model, method)))

    def warm_state(self, previous: dict | None = None) -> dict:
        """What a run in a new process needs to skip sympy (sbmlgpu.model_cache;
        warm.py reads it): the default outputs and every specialisation so far,
        merged with `previous` (the entry's state before)."""
        from .native import host_library
        from .warm import merged

        return merged(previous, {
            "default_outputs": list(default_outputs(self.network)),
            "runs": self.specialised.export(lambda source: str(host_library(source)))})

    def _outputs(self, task: TimeCourse) -> tuple[str, ...]:
        return tuple(task.outputs or default_outputs(self.network))

    def _method(self, model: KernelModel, table: np.ndarray, times: np.ndarray,
                seed: int = 0):
        if self.options.method != "auto":
            return self.options.method, "chosen with --method"
        from .stiffness import choose_method, screen_members, screen_size

        # many members are screened at their initial state first (stiffness.py), as
        # many as the model's size allows
        count = screen_size(model.n_states)
        screen = screen_members(table, count) if count else None
        # the probes' members (a median over every member) only where the screen did
        # not find the model stiff
        method, why = choose_method(model, lambda: _probe_members(table), float(times[0]),
                                    float(times[-1] - times[0]), screen=screen,
                                    probes=self._probes)
        n = table.shape[1]
        if not method_trial.wanted(self.options.method, method, n, self.device is not None):
            return method, why
        # the CPU path: rodas4 or bdf by a timed trial (method_trial.py), once per model
        # and time span
        trial_key = (*_kernel_model_key(model), float(times[0]), float(times[-1]))
        if trial_key in self._trial_picks:
            pick, trial = self._trial_picks[trial_key]
            return pick, f"{why}; {trial}, in an earlier run of this model"
        members = method_trial.sample(n, seed)
        columns = np.ascontiguousarray(table[:, members])
        ids = members.astype(np.uint64)

        def run(candidate: str, warm_up: bool) -> int:
            """The trial's members with `candidate`: how many failed (the budget's
            max_steps is not a failure: those go on in a later pass)."""
            _, engine = self._engine(model, candidate)
            steps = 1 if warm_up else self._trial_steps()
            out = engine.run(None, columns.astype(engine.dtype, copy=False), times,
                             len(model.outputs),
                             launch_config(self.options, candidate, steps, seed),
                             ids, first_member=LAUNCH_ORDER)
            return int(np.sum(~np.isin(out.status, TRIAL_UNFAILED)))

        engines = [self._engine(model, m)[1] for m in method_trial.CANDIDATES]
        if any(engine.name != "native" for engine in engines):
            return method, why  # numpy's engine runs scipy member by member: no trial
        pick, trial, _ = method_trial.choose(run)
        self._trial_picks[trial_key] = (pick, trial)
        return pick, f"{why}; {trial}"

    def _trial_steps(self) -> int:
        """The trial's step budget: the first pass's (a member past it costs no more)."""
        o = self.options
        return passes.StepBudget(o.pass_steps, o.max_steps).first_pass_steps

    def _compile_everywhere(self, engine, devices, profiler) -> None:
        if not isinstance(engine, GpuEngine):
            return
        for device in devices:
            if profiler is not None:
                with profiler.span("compile ode kernel", category="compile", device=device):
                    engine.kernel(device)
            else:
                engine.kernel(device)


def _later_built(later: LaterKernel, first: str) -> bool:
    """The CPU path's later kernel (`later`) generated and built; False, with a
    warning the first time, where the build failed (the compiler rejected the source,
    or is gone): the members past --pass-steps then run with `first`, as they would
    without the later method (a failed build of an optional kernel is no reason to
    lose the run). An error in generating the source is a bug, and the run's."""
    if later.build_error is not None:
        return False  # said when it failed; not built again
    try:
        later.engine()
    except (DeviceError, OSError) as exc:
        # the message's head (a compiler's whole log would bury the warning); the
        # full error: the same run with --method <later method>
        head = " ".join(str(exc).split())[:300]
        log.warning("the %s kernel for the members past --pass-steps could not be built "
                    "(%s: %s): they run with %s (--method %s shows the whole error)",
                    later.method, type(exc).__name__, head, first, later.method)
        return False
    return True


def _kernel_model_key(model: KernelModel) -> tuple:
    """What tells kernel models apart: varied ids, outputs, the literal constants."""
    return model.varied, model.outputs, tuple(sorted(model.fixed_values.items()))


def _kernel_resources(engine, devices) -> dict:
    """A GPU kernel's registers and local memory a thread (spills and stack arrays: a
    large model's rodas4 keeps its stages and LU there), as the first device compiled
    it, for the metadata (what --max-lanes trades against the L2 cache); {} elsewhere."""
    if not devices or not hasattr(engine, "kernel"):
        return {}
    attributes = engine.kernel(devices[0]).attributes
    return {"kernel_registers": int(attributes.registers),
            "kernel_local_bytes": int(attributes.local_bytes)}


def launch_config(o: OdeOptions, method: str, max_steps: int, seed: int,
                  times_row: int = -1) -> LaunchConfig:
    """A launch's settings under options `o` for `method`, with a budget of `max_steps`;
    `times_row`: the table's row of the members' output counts (-1: none)."""
    rtol, atol = o.tolerances
    return LaunchConfig(rtol=rtol, atol=atol, h0=o.h0, max_step=o.max_step, dt=o.dt,
                        max_steps=max_steps, seed=seed, block_size=o.block_size,
                        scaled_atol=o.scaled_atol, times_row=times_row,
                        max_lanes=o.max_lanes,
                        **limits.launch_limits(o, method))


def _run_by_own_times(engine, device, table: np.ndarray, times: np.ndarray, n_outputs: int,
                      launch: LaunchConfig, ids: np.ndarray | None, first: int,
                      counts: np.ndarray, profiler) -> BatchOutput:
    """A batch on an engine that integrates every member to the last output time (numpy's):
    the members of each count of output times (TimeCourse.member_ends) run on those times
    alone, under their own member numbers, so that each status is its own span's (a
    member that would fail past its end does not). Later outputs NaN, launch order."""
    b = table.shape[1]
    numbers = ids.astype(np.int64) if ids is not None else first + np.arange(b)
    own = counts[numbers]
    out = np.full((b, len(times), n_outputs), np.nan, dtype=engine.dtype)
    status = np.zeros(b, np.int8)
    steps = np.zeros(b, np.int32)
    ms = 0.0
    for count in np.unique(own):
        group = np.flatnonzero(own == count)
        part = engine.run(device, table[:, group], times[:int(count)], n_outputs, launch,
                          numbers[group].astype(np.uint64), first_member=LAUNCH_ORDER,
                          profiler=profiler)
        out[group, :int(count)] = part.out
        status[group], steps[group] = part.status, part.steps
        ms += part.kernel_ms
    return BatchOutput(status, steps, out, None, ms)


def _first_member(batch: MemberBatch, engine) -> tuple[int, bool]:
    """(first_member of the launch, whether the rows of a bundled batch must be put
    in member order here). The runner hands a bundled batch the rows of its members
    when they are a contiguous range (sbmlgpu.schedule.ensemble): the kernel then
    writes in member order from the range's first member; other bundled batches, and
    engines that cannot, run in launch order."""
    if batch.members is None:
        return batch.start, False
    if batch.rows is None or not len(batch.members):
        return LAUNCH_ORDER, False
    low, high = int(batch.members.min()), int(batch.members.max())
    if high - low + 1 != len(batch.members):
        # not a range: rows given in launch order (the second pass over the members
        # past --pass-steps, passes.py), written so by the kernel
        return LAUNCH_ORDER, False
    if getattr(engine, "writes_member_order", False):
        return low, False
    return LAUNCH_ORDER, True


def _is_constant(column) -> bool:
    values = np.asarray(column, dtype=float).reshape(-1)
    if values.size == 0:
        return False
    first = values[0]
    if first != first:
        return bool(np.all(values != values))
    # a varied column usually differs at its last value or within a few: no pass
    # over all of it then (7 ms at 10^7 members)
    if values[-1] != first or np.any(values[:: max(1, values.size // 64)] != first):
        return False
    return bool(np.all(values == first))


def _probe_members(table: np.ndarray, count: int = 8) -> np.ndarray:
    """(count, varied) parameter sets for the stiffness check: the median member and
    random ones (a wide ensemble holds stiff and non-stiff members)."""
    if not table.size:
        return np.zeros((1, 0))
    rng = np.random.default_rng(0)
    picks = rng.choice(table.shape[1], size=min(count - 1, table.shape[1]), replace=False)
    return np.vstack([_row_medians(table)[None, :], table[:, picks].T])


def _row_medians(table: np.ndarray) -> np.ndarray:
    """np.median(table, axis=1), its rows on the host-memory threads (a partition
    releases the GIL): 27 x 10^5 values took 40 ms on one core of the development
    machine, 80 % of a stiff PEtab model's method check then (issue 13)."""
    rows, n = table.shape
    if rows < 2 or rows * n < (1 << 18):
        return np.median(table, axis=1)
    return np.concatenate(over_pieces(lambda a, b: np.median(table[a:b], axis=1), rows,
                                      min_items=1))


def _table(params: dict, varied: tuple[str, ...], n: int,
           counts: np.ndarray | None = None) -> np.ndarray:
    """The (varied, n) float64 table of the ensemble's parameter columns, and with
    `counts` (the members' output counts) one row more, after them: one column of
    n float64 values is used as it is, through a read-only view (a copy of 10^7 took
    23 ms of a 0.29 s Lorenz run on the H100), more are copied into one array."""
    if len(varied) == 1 and counts is None:
        column = np.asarray(params[varied[0]], dtype=np.float64).reshape(-1)
        if column.size == n:
            view = column.reshape(1, n)
            view.flags.writeable = False  # the caller's values: read, never written
            return view
    table = np.empty((len(varied) + (counts is not None), n), dtype=np.float64)
    columns = []
    for pid in varied:
        column = np.asarray(params[pid], dtype=float).reshape(-1)
        if column.size not in (1, n):
            raise OptionError("parameters", f"column {pid!r} has {column.size} values for "
                                            f"{n} members")
        columns.append(column)
    if counts is not None:
        columns.append(np.asarray(counts).reshape(-1))

    def piece(start: int, stop: int) -> None:  # members start..stop-1, on a thread
        for row, column in zip(table, columns):
            row[start:stop] = column if column.size == 1 else column[start:stop]

    # (pieces of 1 MiB, so that a first run's page faults fell on several threads, made
    # the H200 host's first runs slower: 0.018-0.045 s against 0.001-0.029 s on 21 of 22
    # PEtab models at 10^5 members, issue 13)
    over_pieces(piece, n)
    return table
