"""The `ssa` Program: the automatic choices, the kernels, and the runs of ensembles.

SsaProgram (made by backend.py's compile()): the automatic choices (tuning.py:
method, layout, update), the reaction order for the optimized method (a short
presimulation), and the default kernel source (nominal parameters, default
outputs) for --keep-source; kept sources are named after the model
(codegen.source_name).

run(): the request's varied parameters and outputs fix the generated text (varied
parameters come from a table, the others are literals); then batches of
realisations go through the scheduler to the GPU engine (gpu.py) or a CPU engine
(host.py, the same kernel compiled for the CPU cores; cpu.py, numpy). Full
trajectories go into one preallocated (members, times, outputs) array (a
memory-mapped file when they do not fit in memory): each batch writes its rows, the
GPU engine straight from the device in double precision; with `summary`, a pilot
batch with full output sets the shift and histogram bins and the rest only
accumulates statistics (stats.py), on the GPU with atomics.
"""

from __future__ import annotations

import tempfile
import threading
import time
from typing import Any

import numpy as np

from sbmlgpu.backend import Program, RunRequest
from sbmlgpu.codegen.cost import count_block
from sbmlgpu.errors import OptionError, UnsupportedModelError
from sbmlgpu.results import TimeCourseResult

from . import host, tuning
from .codegen import Variant, kernel_source, source_name
from .cpu import EngineOutput, NumpyEngine
from .expressions import Expressions, prepare
from .model import SsaModel
from .options import SsaOptions
from .stats import SummaryAccumulator

WHY_MESSAGES = {
    1: "a propensity became negative (its kinetic law is not a valid propensity at these "
       "counts, e.g. a reversible rate law written as one reaction)",
    2: "a propensity became NaN or infinite (check the kinetic laws and parameter values)",
    3: "max-firings was reached before the end time: raise --max-firings or shorten the run",
    4: f"events kept triggering each other at one instant (more than "
       f"{tuning.MAX_EVENT_ROUNDS} rounds)",
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
    def run(self, request: RunRequest, scheduler=None, profiler=None) -> TimeCourseResult:
        seed = request.seed
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) \
                or not 0 <= int(seed) < 2**64:
            raise OptionError("seed", f"{seed!r}: need an integer from 0 to 2^64 - 1")
        outputs = tuple(request.outputs or self.model.default_outputs())
        for o in outputs:
            self.model.output_expression(o)
        n = int(request.ensemble_size)
        varied = tuple(request.parameters) if request.parameters else ()
        ptab = (np.stack([np.asarray(request.parameters[v], float).reshape(-1) for v in varied])
                if varied else np.zeros((0, n)))
        exprs = prepare(self.model, varied, outputs, self.order)
        engine = self._engine(exprs)
        run = _Run(self, engine, request, scheduler, profiler, int(seed), n, ptab, outputs)
        return run.summary() if request.summary else run.trajectories()


class _Run:
    """One `run()`: batches through the scheduler, then the TimeCourseResult."""

    def __init__(self, program: SsaProgram, engine, request: RunRequest, scheduler, profiler,
                 seed: int, n: int, ptab: np.ndarray, outputs: tuple[str, ...]):
        self.program, self.engine, self.request = program, engine, request
        self.scheduler, self.profiler = scheduler, profiler
        self.seed, self.n, self.ptab, self.outputs = seed, n, ptab, outputs
        self.times = np.asarray(request.times, float)
        self.max_firings = program.options.max_firings
        self.kernel_ms = 0.0
        self.lock = threading.Lock()
        self.started = time.perf_counter()

    # -- one batch ---------------------------------------------------------------------
    def batch(self, device, start: int, stop: int, summary=None, destination=None):
        """One batch's EngineOutput; the GPU engine writes its trajectories into
        `destination` (rows start:stop of the result) when it can."""
        size = stop - start
        pt = self.ptab[:, start:stop]
        if self.program.engine_kind == "gpu":
            device = device if device is not None else self.program.device
            out, sums, ms = self.engine.run(device, self.seed, start, size, pt, self.times,
                                            self.max_firings, self.profiler, summary,
                                            destination)
        else:
            began = time.perf_counter()
            out = self.engine.run(self.seed, start, size, pt, self.times, self.max_firings)
            sums, ms = None, (time.perf_counter() - began) * 1e3
        with self.lock:
            self.kernel_ms += ms
            if summary is not None:
                if sums is not None:
                    summary.add_sums(*sums)
                else:
                    summary.add_data(out.data)
                out = EngineOutput(None, out.status, out.why, out.firings)
        return out

    def map(self, first: int, stop: int, work, bytes_per_item: float, fixed_bytes: float = 0):
        """[(start, EngineOutput)] for items first..stop-1, in order."""
        if stop <= first:
            return []
        if self.scheduler is None:
            return [(first, work(self.program.device, first, stop))]
        align = 32 if self.program.engine_kind == "gpu" else 1
        pieces = self.scheduler.map_batches(
            lambda device, a, b: work(device, first + a, first + b), stop - first,
            bytes_per_item, fixed_bytes=fixed_bytes, align=align, combine="batches",
            progress=self.request.progress, desc="realisations")
        return [(first + batch.start, out) for batch, out in (pieces or [])]

    def item_bytes(self, trajectories: bool) -> float:
        K, O = len(self.times), len(self.outputs)
        if self.program.engine_kind == "gpu":
            return self.engine.bytes_per_item(K, trajectories)
        # host: the engine's output, its transposed copy, the stitched result
        return (3 * K * O * 8 if trajectories else 2 * K * O * 8) + 64

    # -- the two kinds of result ---------------------------------------------------------
    def fill(self, stop: int, data: np.ndarray | None):
        """Members 0..stop-1 with full trajectories, written into rows of `data`
        (float64, (>= stop, times, outputs)): [(start, EngineOutput without data)].

        Each batch writes its own rows (the GPU engine in double precision straight
        from the device; otherwise one copy, converting float). Under MPI the
        batches' data travel to rank 0, which places them; `data` None (another
        rank) keeps nothing."""
        K = len(self.times)
        distributed = getattr(self.scheduler, "size", 1) > 1

        def work(device, start, stop):
            rows = data[start:stop] if data is not None and not distributed else None
            out = self.batch(device, start, stop, destination=rows)
            if rows is None:
                return out
            if out.data is not rows:
                rows[...] = out.data
            return EngineOutput(None, out.status, out.why, out.firings)

        pieces = self.map(0, stop, work, self.item_bytes(True), fixed_bytes=K * 8)
        for start, piece in pieces:
            if piece.data is not None and data is not None:
                data[start:start + len(piece.data)] = piece.data
        return [(start, EngineOutput(None, p.status, p.why, p.firings)) for start, p in pieces]

    def trajectories(self) -> TimeCourseResult:
        K, O = len(self.times), len(self.outputs)
        other_rank = getattr(self.scheduler, "is_root", True) is False
        spill = None if other_rank else self._spill_file(self.n * K * O * 8)
        data = spill if spill is not None else \
            np.empty((0 if other_rank else self.n, K, O), dtype=np.float64)
        pieces = self.fill(self.n, None if other_rank else data)
        status, why, firings = self._stitch_members(pieces)
        meta = self._metadata(firings)
        if spill is not None:
            meta["trajectory_file"] = str(spill.filename)
        return TimeCourseResult(times=self.times, ids=self.outputs, data=data, status=status,
                      metadata=meta, messages=self._messages(status, why))

    def summary(self) -> TimeCourseResult:
        if getattr(self.scheduler, "size", 1) > 1:
            # the pilot and the sums would stay on each rank (the other ranks have no
            # pilot data to set the shift and bins from)
            raise OptionError("summary", "the ssa backend's --summary does not gather the "
                                         "statistics of MPI ranks: run without MPI")
        K, O = len(self.times), len(self.outputs)
        bins = self.program.options.histogram_bins
        acc = SummaryAccumulator(K, O, bins)
        pilot_n = min(self.n, self.program.options.pilot)
        pilot_data = np.empty((pilot_n, K, O), dtype=np.float64)
        pilot = self.fill(pilot_n, pilot_data)
        acc.set_reference(pilot_data)
        acc.add_data(pilot_data)
        fixed = K * 8 + K * O * 8 * (6 + bins + 2)
        rest = self.map(pilot_n, self.n, lambda d, a, b: self.batch(d, a, b, acc),
                        self.item_bytes(False), fixed_bytes=fixed)
        status, why, firings = self._stitch_members(pilot + rest)
        ok = int((status == 0).sum())
        summary = acc.summary(ok, self.n - ok)
        meta = self._metadata(firings)
        meta["summary"] = {
            "pilot": pilot_n, "shift": "pilot mean",
            "statistics": "over the samples each member reached (a failed member "
                          "contributes the samples before its failure)",
            "quantiles": ("interpolated within histogram bins (accurate to one bin width; "
                          "clamped to the binned range)") if bins else "none (no histogram)"}
        histograms = acc.histograms()
        if histograms is not None:
            meta["histograms"] = histograms.as_metadata(self.outputs)
        return TimeCourseResult(times=self.times, ids=self.outputs, data=None, status=status,
                      summary=summary, metadata=meta, messages=self._messages(status, why))

    # -- helpers -------------------------------------------------------------------------
    def _spill_file(self, total_bytes: int):
        from sbmlgpu.schedule.worker import host_free_memory

        directory = self.program.options.trajectory_dir
        if directory is None and total_bytes <= host_free_memory() // 2:
            return None
        handle = tempfile.NamedTemporaryFile(prefix="sbmlgpu-ssa-", suffix=".npy",
                                             dir=directory, delete=False)
        handle.close()
        return np.lib.format.open_memmap(handle.name, mode="w+", dtype=np.float64,
                                         shape=(self.n, len(self.times), len(self.outputs)))

    def _stitch_members(self, pieces):
        pieces = sorted(pieces, key=lambda piece: piece[0])
        if not pieces:
            return np.zeros(0, np.int8), np.zeros(0, np.int32), np.zeros(0, np.uint64)
        status = np.concatenate([p.status for _, p in pieces]).astype(np.int8)
        why = np.concatenate([p.why for _, p in pieces]).astype(np.int32)
        firings = np.concatenate([p.firings for _, p in pieces]).astype(np.uint64)
        if status.size != self.n:
            raise RuntimeError(f"ssa: {status.size} member results for {self.n} members")
        return status, why, firings

    def _messages(self, status: np.ndarray, why: np.ndarray) -> dict[int, str]:
        failed = np.flatnonzero(status != 0)
        return {int(i): WHY_MESSAGES.get(int(why[i]), "failed") for i in failed[:_MAX_MESSAGES]}

    def _metadata(self, firings: np.ndarray) -> dict:
        p = self.program
        total = int(firings.sum()) if firings.size else 0
        seconds = self.kernel_ms / 1e3
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
