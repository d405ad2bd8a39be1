"""The `ssa` Program: the automatic choices, the kernels, and the runs of ensembles.

SsaProgram (made by backend.py's compile()): the automatic choices (tuning.py:
method, layout, update), the reaction order for the optimized method (a short
presimulation), and the default kernel source (nominal parameters, default
outputs) for --keep-source; kept sources are named after the model
(codegen.source_name).

run(): the task's varied parameters and outputs fix the generated text (varied
parameters come from a table, the others are literals); then core's ensemble
runner (sbmlgpu.schedule.ensemble) takes the realisations through the scheduler to
the GPU engine (gpu.py) or a CPU engine (host.py, the same kernel compiled for the
CPU cores; cpu.py, numpy); this module gives it one batch at a time (`_Run.batch`)
and the memory a realisation needs. Full trajectories go into one preallocated
(members, times, outputs) array (a memory-mapped file, kept, when they do not fit
in half the free memory or --trajectory-dir is given): each batch writes its rows,
the GPU engine straight from the device in double precision. With `summary`, a
pilot of the first --pilot realisations (part of the ensemble) with full output
sets the shift and the histogram bins (sbmlgpu.ensemble_summary,
OVER_REACHED_SAMPLES), and the rest only accumulates statistics: on the GPU
shifted sums with atomics, on the CPU folded on the host by the runner.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

from sbmlgpu.backend import Program
from sbmlgpu.tasks import TimeCourse
from sbmlgpu.codegen.cost import count_block
from sbmlgpu.ensemble_summary import OVER_REACHED_SAMPLES, EnsembleStats
from sbmlgpu.errors import OptionError, UnsupportedModelError
from sbmlgpu.features import network_features
from sbmlgpu.results import TimeCourseResult
from sbmlgpu.schedule.ensemble import (BatchMemory, EnsembleJob, MemberBatch, MemberResults,
                                       Pilot, default_scheduler, run_ensemble)
from sbmlgpu.schedule.spill import Spill
from sbmlgpu.schedule.worker import host_free_memory

from . import host, tuning
from .codegen import Variant, kernel_source, source_name
from .cpu import NumpyEngine
from .expressions import Expressions, prepare
from .model import SsaModel, check_rising
from .options import SsaOptions

WHY_MESSAGES = {
    1: "a propensity became negative (its kinetic law is not a valid propensity at these "
       "counts, e.g. a reversible rate law written as one reaction)",
    2: "a propensity became NaN or infinite (check the kinetic laws and parameter values)",
    3: "max-firings was reached before the end time: raise --max-firings or shorten the run",
    4: f"events kept triggering each other at one instant (more than "
       f"{tuning.MAX_EVENT_ROUNDS} firings): check the event triggers and assignments",
    5: "a distrib draw had arguments outside its distribution's domain (e.g. sd <= 0, "
       "lower bound >= upper bound), or a truncation range too improbable to hit",
}
PILOT_SEED = 0x55A_0_D1CE  # the presimulation's own stream: its order never depends on the run
_MAX_MESSAGES = 20


class SsaProgram(Program):
    def __init__(self, model: SsaModel, options: SsaOptions, device=None):
        self.model, self.options, self.device = model, options, device
        ns, nr = model.n_states, model.n_reactions
        real_bytes = 8 if options.precision == "double" else 4
        if device is None:
            if options.cpu_engine == "compiled" and not host.available():
                raise OptionError("cpu-engine", "compiled needs a C++ compiler ($CXX, g++, "
                                                "c++ or clang++), and none was found")
            use_host = options.cpu_engine == "compiled" or (options.cpu_engine == "auto"
                                                            and host.available())
            self.engine_kind = "compiled" if use_host else "numpy"
        else:
            self.engine_kind = "gpu"
        shared = None
        if device is not None:
            props = device.properties
            shared = props.shared_memory_per_block_optin or props.shared_memory_per_block
        layout = options.layout if options.layout != "auto" else \
            tuning.choose_layout(ns, nr, real_bytes, shared)
        method = options.method if options.method != "auto" else \
            tuning.choose_method(nr, self.engine_kind, layout)
        update = options.update if options.update != "auto" else \
            tuning.choose_update(layout, method, self.engine_kind)
        self.variant = Variant(layout, update, method, options.precision)
        self.order = self._reaction_order() if method == "optimized" else None
        default = prepare(model, (), model.default_outputs(), self.order)
        if default.draws and self.engine_kind == "numpy":
            raise UnsupportedModelError(
                {"distrib draw on the numpy CPU engine (its samplers are the kernel's, "
                 "distrib.cuh: use the compiled engine, which needs a C++ compiler, or a "
                 "GPU)": network_features(model.network).get("distrib draws", ())},
                who="backend 'ssa'")
        text = kernel_source(default, self.variant)
        self.sources = {source_name(default, self.variant, text): text}
        self._engines: dict[tuple, Any] = {}
        self._lock = threading.Lock()

    # -- compile-time pieces -------------------------------------------------------
    def _reaction_order(self) -> tuple[int, ...] | None:
        """Reactions by descending firing count in a short presimulation (the optimized
        direct method of Cao, Li and Petzold 2004); None when the nominal model cannot
        run (a value the file lacks), which leaves the file's order."""
        m = self.model
        if m.n_reactions < 2:
            return None
        try:
            exprs = prepare(m, (), ())
        except UnsupportedModelError:
            return None
        if exprs.draws:  # the numpy twin does not draw (see __init__): the file's order
            return None
        n = tuning.PILOT_REALISATIONS
        pilot = NumpyEngine(exprs, Variant("register", "full", "direct")).run(
            PILOT_SEED, 0, n, np.zeros((0, n)), np.array([0.0, 1e300]),
            max_firings=tuning.PILOT_FIRINGS, record=False, count_reactions=True)
        counts = pilot.reaction_counts
        return tuple(sorted(range(m.n_reactions), key=lambda j: (-int(counts[j]), j)))

    def _engine(self, exprs: Expressions):
        key = (exprs.varied, exprs.outputs)
        with self._lock:
            if key in self._engines:
                return self._engines[key]
            source = kernel_source(exprs, self.variant)
            name = source_name(exprs, self.variant, source)
            self.sources.setdefault(name, source)
            if self.engine_kind == "gpu":
                from .gpu import GpuEngine

                flops = count_block(exprs.propensity_block).flops() + 2 * exprs.n_reactions + 30
                engine = GpuEngine(source, self.variant, exprs.n_states, exprs.n_reactions,
                                   len(exprs.outputs), len(exprs.varied),
                                   self.options.block_size, flops, name=name)
            elif self.engine_kind == "compiled":
                engine = host.HostEngine(source, self.options.precision, len(exprs.outputs),
                                         self.options.cpu_threads, name=name)
            else:
                engine = NumpyEngine(exprs, self.variant)
            self._engines[key] = engine
            return engine

    # -- running ---------------------------------------------------------------------
    def run(self, task: TimeCourse, scheduler=None, profiler=None) -> TimeCourseResult:
        seed = task.seed
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) \
                or not 0 <= int(seed) < 2**64:
            raise OptionError("seed", f"{seed!r}: need an integer from 0 to 2^64 - 1")
        outputs = tuple(task.outputs or self.model.default_outputs())
        for o in outputs:
            self.model.output_expression(o)
        n = int(task.ensemble_size)
        varied = tuple(task.parameters) if task.parameters else ()
        ptab = (np.stack([np.asarray(task.parameters[v], float).reshape(-1) for v in varied])
                if varied else np.zeros((0, n)))
        check_rising(self.model, varied, ptab)
        exprs = prepare(self.model, varied, outputs, self.order)
        engine = self._engine(exprs)
        return _Run(self, engine, task, scheduler, profiler, int(seed), n, ptab,
                    outputs).result()


class _Run:
    """One `run()`: the ensemble through sbmlgpu.schedule.ensemble, then the result."""

    def __init__(self, program: SsaProgram, engine, task: TimeCourse, scheduler, profiler,
                 seed: int, n: int, ptab: np.ndarray, outputs: tuple[str, ...]):
        self.program, self.engine, self.task = program, engine, task
        self.scheduler = default_scheduler(scheduler, program.device, task.progress)
        self.profiler = profiler
        self.seed, self.n, self.ptab, self.outputs = seed, n, ptab, outputs
        self.times = np.asarray(task.times, float)
        self.max_firings = program.options.max_firings
        self.started = time.perf_counter()

    # -- one batch ---------------------------------------------------------------------
    def batch(self, device, batch: MemberBatch) -> MemberResults:
        """One batch: trajectories (the GPU engine writes them into `batch.rows` when
        it can), or on the GPU with a summary target the batch's shifted sums."""
        pt = batch.take(self.ptab)
        target, stats = batch.summary, None
        if self.program.engine_kind == "gpu":
            device = device if device is not None else self.program.device
            out, sums, ms = self.engine.run(device, self.seed, batch.start, batch.size, pt,
                                            self.times, self.max_firings, self.profiler,
                                            target, batch.rows)
            if sums is not None:
                stats = EnsembleStats.of_shifted_sums(target.shift, *sums, grid=target.grid)
        else:
            began = time.perf_counter()
            out = self.engine.run(self.seed, batch.start, batch.size, pt, self.times,
                                  self.max_firings)
            ms = (time.perf_counter() - began) * 1e3
        return MemberResults(out.status, out.data if stats is None else None, stats,
                             {"why": out.why, "firings": out.firings}, ms)

    def memory(self, trajectories: bool, bundled: bool = False) -> BatchMemory:
        K, O = len(self.times), len(self.outputs)
        if self.program.engine_kind == "gpu":
            per_item = self.engine.bytes_per_item(K, trajectories)
        else:  # host: the engine's output, its transposed copy, the stitched result
            per_item = (3 * K * O * 8 if trajectories else 2 * K * O * 8) + 64
        bins = self.program.options.histogram_bins
        fixed = K * 8 + (0 if trajectories else K * O * 8 * (6 + bins + 2))
        return BatchMemory(per_item, fixed, 32 if self.program.engine_kind == "gpu" else 1)

    # -- the two kinds of result ---------------------------------------------------------
    def result(self) -> TimeCourseResult:
        options = self.program.options
        summary = bool(self.task.summary)
        folder = options.trajectory_dir
        # full trajectories go to a kept file in --trajectory-dir, or in the temporary
        # folder when they do not fit in half the free host memory
        spill = Spill(-1 if folder is not None else host_free_memory() // 2, folder,
                      keep=True, prefix="sbmlgpu-ssa-", option="trajectory-dir")
        job = EnsembleJob(
            self.n, (len(self.times), len(self.outputs)), self.batch, self.memory,
            summary=OVER_REACHED_SAMPLES if summary else None, bins=options.histogram_bins,
            pilot=Pilot.first(min(self.n, options.pilot)) if summary else None,
            spill=spill, progress=self.task.progress, desc="realisations")
        outcome = run_ensemble(job, self.scheduler, self.profiler)
        status = outcome.status
        why = outcome.extras.get("why", np.zeros(0, np.int32)).astype(np.int32)
        firings = outcome.extras.get("firings", np.zeros(0, np.uint64)).astype(np.uint64)
        meta = self._metadata(firings, outcome.kernel_ms)
        messages = self._messages(status, why)
        if not summary or not outcome.root:
            if outcome.spill_path is not None:
                meta["trajectory_file"] = outcome.spill_path
            return TimeCourseResult(times=self.times, ids=self.outputs, data=outcome.data,
                                    status=status, metadata=meta, messages=messages)
        meta["summary"] = {
            "pilot": len(outcome.pilot.status), "shift": "pilot mean",
            "statistics": "over the samples each member reached (a failed member "
                          "contributes the samples before its failure)",
            "quantiles": ("interpolated within histogram bins (accurate to one bin width; "
                          "clamped to the binned range)") if options.histogram_bins
            else "none (no histogram)"}
        if outcome.stats.hist is not None:
            meta["histograms"] = _histograms(outcome.stats, len(self.times), self.outputs)
        return TimeCourseResult(times=self.times, ids=self.outputs, data=None, status=status,
                                summary=outcome.summary, metadata=meta, messages=messages)

    # -- helpers -------------------------------------------------------------------------
    def _messages(self, status: np.ndarray, why: np.ndarray) -> dict[int, str]:
        failed = np.flatnonzero(status != 0)
        return {int(i): WHY_MESSAGES.get(int(why[i]), "failed") for i in failed[:_MAX_MESSAGES]}

    def _metadata(self, firings: np.ndarray, kernel_ms: float) -> dict:
        p = self.program
        total = int(firings.sum()) if firings.size else 0
        seconds = kernel_ms / 1e3
        wall = time.perf_counter() - self.started
        meta = {
            "backend": "ssa", "engine": p.engine_kind, "method": p.variant.method,
            "layout": p.variant.layout, "update": p.variant.update,
            "precision": p.variant.precision if p.engine_kind != "numpy" else "double",
            "rate_species": p.model.rate_species, "realisations": self.n,
            "firings": total, "compute_seconds": seconds, "wall_seconds": wall,
            "firings_per_second": total / seconds if seconds > 0 else None,
            "realisations_per_second": self.n / seconds if seconds > 0 else None,
            "rng": "Philox4x32-10 keyed by (seed, realisation index); one counter block "
                   "per firing attempt",
        }
        if p.order is not None:
            meta["reaction_order"] = [p.model.reaction_ids[j] for j in p.order]
        if p.engine_kind == "gpu":
            meta["block_size"] = self.engine.shape(p.device).block if p.device is not None \
                else None
        if p.engine_kind == "compiled":
            meta["cpu_threads"] = self.engine.threads
        if p.engine_kind == "numpy" and p.options.precision == "float":
            meta["note"] = "the numpy engine computes in double precision"
        return meta


def _histograms(stats: EnsembleStats, n_times: int, outputs: tuple[str, ...]) -> dict:
    """The summary's histograms for the result's metadata, per (time, output)."""
    shape = (n_times, len(outputs))
    grid = stats.grid
    return {"outputs": list(outputs), "lo": grid.lo.reshape(shape).tolist(),
            "width": grid.width.reshape(shape).tolist(),
            "counts": stats.hist.reshape(shape + (grid.bins + 2,)).tolist(),
            "layout": "counts[time][output][0: below lo, 1..bins, bins+1: at or above "
                      "lo + bins * width]"}
