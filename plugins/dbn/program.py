"""`DbnProgram.run`: a DbnApproximation task from samples to DbnResult.

1. The DBN's variables: the ODE's state variables, then the sampled ids that are
   not initial values of a state (parameter nodes, constant over time, each its own
   only parent). Parents from the rate equations (structure.py).
2. Samples: `--sample` as `sbmlgpu run` draws them (Philox keyed by seed and id);
   the sampled ids become the kernel's table columns.
3. Ranges: where `--range` does not give one, a first pass of the same integration
   (the range sink) finds each variable's min and max over all slices of all
   finite trajectories. Where every value of the run fits (VALUES_MEMORY_SHARE of
   the free device memory, or of the host's on the CPU path), the range pass keeps
   them, and step 4 bins and counts those (the replay entry points) instead of
   integrating a second time: the same values, so the same counts, at the cost of
   one integration.
4. Counts: the counting pass bins every variable at every slice and adds each
   transition to the dense CPTs on the device; variables with too many parents
   are counted on the host from bin records. Members that fail (non-finite, or
   stopped) are run again with weight -1, which removes exactly what they added
   (a replay skips them: their status is known): failed trajectories are counted
   and reported, never binned.
5. The result: counts, counted marginals, and the DBN's own marginals by factored
   frontier inference (sbmlgpu.results.dbn_inference).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from sbmlgpu.backend import Program
from sbmlgpu.ensemble import sample_table
from sbmlgpu.errors import DeviceError, OptionError, SimulationError
from sbmlgpu.ir import Network
from sbmlgpu.ode.engines import LaunchConfig
from sbmlgpu.ode.model import KernelModel
from sbmlgpu.profile import phase
from sbmlgpu.runtime.host_memory import available_memory
from sbmlgpu.results import DbnResult, Status
from sbmlgpu.results.dbn import SparseCounts
from sbmlgpu.schedule import static_block
from sbmlgpu.schedule.dispatch import Stopped, on_each_device
from sbmlgpu.schedule.progress import Progress
from sbmlgpu.tasks import DbnApproximation
from sbmlgpu.views.ode import OdeSystem

from .counting import SparseCounter, counted_marginals, dense_counts
from . import heterogeneous
from .engines import WEIGHT_REMOVE, GpuEngine, HostEngine, Values
from .kernels import dbn_kernels
from .options import DbnOptions
from .sinks import keys_to_values
from .structure import DbnStructure

log = logging.getLogger("sbmlgpu.dbn")
COUNT_LIMIT = 2**32 - 1  # the device counts are unsigned 32-bit
#: the share of free device memory one batch may take (the count buffer aside)
BATCH_MEMORY_SHARE = 0.25
HOST_RECORD_BYTES = 1 << 30  # bin records per batch on the host path
#: the share of free memory (device, or host on the CPU path) that the kept values of
#: a one-integration run may take (the count buffer aside); larger runs integrate twice
VALUES_MEMORY_SHARE = 0.5
START_TIME = 0.0  # the time of slice 0: SBML models start at 0


class DbnProgram(Program):
    def __init__(self, network: Network, ode: OdeSystem, options: DbnOptions, device=None):
        self.network = network
        self.ode = ode
        self.options = options
        self.device = device
        self._sources: dict[str, str] = {}
        self.last_run: dict[str, Any] = {}

    @property
    def sources(self) -> dict[str, str]:
        """The kernels of the runs so far; before the first, those of a DBN without
        samples (5 bins, one slice), so that --keep-source has something to keep."""
        if not self._sources:
            structure = DbnStructure.of(self.ode, (), 5, 1, self.options.max_dense_rows)
            model = KernelModel(self.ode, (), structure.variables)
            self._sources.update(dbn_kernels(model, structure, self.options.precision,
                                             self.options.block_size).sources)
        return dict(self._sources)

    # -- run ------------------------------------------------------------------------
    def run(self, task: DbnApproximation, scheduler=None, profiler=None) -> DbnResult:
        started = time.perf_counter()
        o = self.options
        n = int(task.ensemble)
        if n > COUNT_LIMIT:
            raise OptionError("ensemble", f"{n} trajectories: the CPT counts are 32-bit, at "
                                          f"most {COUNT_LIMIT}")
        varied = tuple(task.sample)
        parameter_nodes = tuple(sid for sid in varied if sid not in self.ode.state_ids)
        structure = DbnStructure.of(self.ode, parameter_nodes, int(task.bins),
                                    int(task.slices), o.max_dense_rows)
        _check_ranges(task, structure)
        devices = self._devices(scheduler, n)
        _check_memory(structure, n, len(varied), devices)
        real = np.float64 if o.precision == "double" else np.float32
        with phase(profiler, "sample"):
            # in the kernel's real type: what the engines upload, without a copy
            table = sample_table(dict(task.sample), varied, n, int(task.seed), real) \
                if varied else np.zeros((0, n), real)
        model = KernelModel(self.ode, varied, structure.variables)
        with phase(profiler, "generate kernels"):
            kernels = dbn_kernels(model, structure, o.precision, o.block_size)
            het = heterogeneous.plan(model, structure, kernels.counts, kernels.sink, o,
                                     self.device, int(task.steps))
        self._sources.update(kernels.sources)
        if het is not None:
            self._sources[het.source.name] = het.source.text
            if het.values_source is not None:
                self._sources[het.values_source.name] = het.values_source.text
        times = START_TIME + float(task.slice_time) * np.arange(task.slices + 1,
                                                                dtype=np.float64)
        dt = float(task.slice_time) / int(task.steps)
        config = LaunchConfig(rtol=0.0, atol=0.0, h0=dt, max_step=dt, dt=dt,
                              max_steps=2 * int(task.slices) * (int(task.steps) + 1) + 16,
                              seed=int(task.seed), block_size=o.block_size)
        given = {sid: tuple(map(float, r)) for sid, r in dict(task.ranges).items()}
        find_ranges = any(v not in given for v in structure.variables)
        fast_math = o.fast_math and o.precision == "float"
        shares = [_Share(device, GpuEngine(kernels, device, het, fast_math=fast_math)
                         if device is not None else HostEngine(kernels), part)
                  for device, part in zip(devices, _split(n, len(devices)))]
        engine = shares[0].engine
        progress = bool(getattr(task, "progress", True))
        try:
            def prepare(share: _Share, stop) -> None:
                self._prepare(share, times, structure, len(varied), kernels.sink.records,
                              find_ranges)

            with phase(profiler, "compile"):  # the kernels this run launches, per device:
                # the first device builds them, the others find them in nvcc's cache
                self._on_shares(shares[:1], prepare)
                if len(shares) > 1:
                    self._on_shares(shares[1:], prepare)
            found, range_ms, range_seconds = None, 0.0, 0.0
            if find_ranges:
                found, range_ms, range_seconds = self._range_pass(
                    shares, table, times, config, len(structure.variables), dt, progress,
                    profiler)
            ranges, origin = _ranges(structure, given, found)
            edges = np.stack([np.linspace(lo, hi, structure.bins + 1) for lo, hi in ranges])

            t0 = time.perf_counter()
            status, steps, buffer, counter, count_ms = self._count_passes(
                shares, table, times, config, structure, ranges, progress, profiler)
            count_seconds = time.perf_counter() - t0
        finally:
            self._on_shares(shares, lambda share, stop: share.free_values())
        ok = status == int(Status.ok)
        n_ok = int(ok.sum())
        if n_ok == 0:
            raise self._all_failed(n, status, dt)
        with phase(profiler, "assemble"):
            counts: dict[str, Any] = dense_counts(buffer, structure)
            sparse = counter.finish() if counter is not None else {}
            for v, (configs, tables) in sparse.items():
                counts[v] = SparseCounts(tuple(configs), tuple(tables))
            counted = counted_marginals(structure, {v: counts[v] for v in structure.dense},
                                        sparse, n_ok)
        result = DbnResult(structure.variables, times, edges, structure.parents, counts,
                           counted)
        with phase(profiler, "inference"):
            result.infer()
        result.metadata = {
            "engine": engine.name, "precision": o.precision, "kernel": "homogeneous",
            **(het.metadata() if het is not None else {}),
            "method": "rk4", "step": dt, "steps_per_slice": int(task.steps),
            "trajectories": n, "counted_trajectories": n_ok, "failed_trajectories": n - n_ok,
            "failed_status": _status_summary(status[~ok]),
            "failed_members": np.flatnonzero(~ok)[:100].tolist(),
            "parameter_nodes": list(parameter_nodes),
            "dense_variables": list(structure.dense), "sparse_variables": list(structure.sparse),
            "range_origin": origin, "ranges": ranges.tolist(),
            "batch": max(share.batch for share in shares),
            "integrations": 2 if find_ranges and not all(share.kept for share in shares)
                            else 1,
            "devices": len(shares),
            "trajectories_per_device": [share.size for share in shares],
            "fast_math": bool(fast_math and shares[0].device is not None),
            "range_pass_seconds": range_seconds, "count_pass_seconds": count_seconds,
            "range_kernel_ms": range_ms, "count_kernel_ms": count_ms,
            "rk4_steps": int(steps[ok].sum()), "all_rk4_steps": int(steps.sum()),
            "flops_per_step": kernels.counts.flops_per_step,
            "trajectories_per_second": n / max(range_seconds + count_seconds, 1e-12),
            "run_seconds": time.perf_counter() - started,
        }
        self.last_run = dict(result.metadata)
        return result

    def _devices(self, scheduler, n: int) -> list:
        """The devices a run splits its trajectories over: the scheduler's devices on
        this host when the program runs on the GPU (the program's own first), at most
        one per trajectory; [None] on the CPU path."""
        if self.device is None:
            return [None]
        if scheduler is not None and scheduler.size > 1:
            return [self.device]  # MPI ranks: not used by this backend (docs/dbn.md)
        devices = [self.device]
        for device in (scheduler.local_devices if scheduler is not None else ()):
            if device is not None and all(device is not d for d in devices):
                devices.append(device)
        return devices[:max(1, n)]

    @staticmethod
    def _on_shares(shares: list["_Share"], work) -> list:
        """work(share, stop) for every share, on its device's thread
        (dispatch.on_each_device: `stop` is set when another share failed)."""
        by_device = {id(share.device): share for share in shares}
        return on_each_device([share.device for share in shares],
                              lambda device, stop: work(by_device[id(device)], stop))

    def _prepare(self, share: "_Share", times: np.ndarray, structure: DbnStructure,
                 n_varied: int, records: bool, find_ranges: bool) -> None:
        """On the share's device: its kept values where they fit (one integration),
        its kernels compiled, and its batches, sized after the values took their
        share of the free memory."""
        if find_ranges:
            share.values = self._keep_values(share.engine, share.device, share.size,
                                             len(times), structure, n_varied)
        share.kept = share.values is not None
        share.engine.compile(find_ranges=find_ranges, kept=share.kept)
        share.batch = self._batch_size(share.device, share.size, n_varied, structure, records)
        share.batches = [slice(a, min(a + share.batch, share.stop))
                         for a in range(share.start, share.stop, share.batch)] \
            or [slice(share.start, share.start)]

    def _range_pass(self, shares: list["_Share"], table: np.ndarray, times: np.ndarray,
                    config: LaunchConfig, n_variables: int, dt: float, progress: bool,
                    profiler):
        """(found (variables, 2) min and max, kernel ms, seconds): step 3 on every
        share, each keeping its values where it has room; the extrema of the shares
        merged (min and max: the same whatever the split)."""
        t0 = time.perf_counter()
        n = table.shape[1]

        def work(share: "_Share", stop):
            keys, kernel_ms = None, 0.0
            for part in share.batches:
                _check_stop(stop)
                p = share.engine.range_pass(
                    table[:, part], times, config, profiler,
                    (share.values, part.start - share.start)
                    if share.values is not None else None)
                keys = p.keys.copy() if keys is None else _merge_keys(keys, p.keys)
                share.status[part.start - share.start:part.stop - share.start] = p.status
                share.steps[part.start - share.start:part.stop - share.start] = p.steps
                kernel_ms += p.kernel_ms
                bar.advance(part.stop - part.start)
            return keys, kernel_ms

        with Progress(n, enabled=progress, desc="ranges") as bar, \
                phase(profiler, "range pass"):
            found = self._on_shares(shares, work)
        status = np.concatenate([share.status for share in shares])
        if n and not np.any(status == int(Status.ok)):
            raise self._all_failed(n, status, dt)
        keys = None
        for share_keys, _ in found:
            if share_keys is not None:
                keys = share_keys if keys is None else _merge_keys(keys, share_keys)
        return (keys_to_values(keys), max(ms for _, ms in found),
                time.perf_counter() - t0)

    def _keep_values(self, engine, device, n: int, n_times: int, structure: DbnStructure,
                     n_varied: int):
        """Values for `n` members on `device` where they fit, else None (two
        integrations). On the host, what _check_memory counts for the run and a batch
        of bin records are taken out of the available memory first."""
        real = 8 if self.options.precision == "double" else 4
        need = n * n_times * len(structure.variables) * real
        counts = 4 * structure.count_elements
        if device is not None:
            have = device.free_memory()
        else:
            have = available_memory() - _host_bytes(structure, n, n_varied) \
                - (HOST_RECORD_BYTES if structure.sparse else 0)
        if need + counts > VALUES_MEMORY_SHARE * have:
            return None
        try:
            values = engine.start_values(n, n_times)
        except (MemoryError, DeviceError) as exc:
            log.info("the values of %d members do not fit (%s): integrating twice", n, exc)
            return None
        return values

    def _count_passes(self, shares: list["_Share"], table: np.ndarray, times: np.ndarray,
                      config: LaunchConfig, structure: DbnStructure, ranges: np.ndarray,
                      progress: bool, profiler):
        """(status, steps, the dense count buffer, the sparse counter or None, kernel
        ms): step 4 on every share, from its kept values where it has them, else by
        integrating again; the shares' counts summed (integers: the same whatever the
        split, the sparse ones merged as batches are)."""
        n = table.shape[1]

        def work(share: "_Share", stop):
            share.engine.start_counts(structure.count_elements)
            try:
                if share.values is not None:
                    return self._replay_pass(share, structure, ranges, len(times), config,
                                             profiler, bar, stop)
                return self._count_pass(share, table, times, config, structure, ranges,
                                        profiler, bar, stop)
            except BaseException:
                share.engine.discard_counts()  # (GBs on a large DBN)
                raise

        replay = all(share.kept for share in shares)
        with Progress(n, enabled=progress, desc="counts" if replay else "trajectories") \
                as bar, phase(profiler, "count pass (replay)" if replay else "count pass"):
            passes = self._on_shares(shares, work)
        buffer = passes[0][0]
        if len(passes) > 1:  # at most n <= COUNT_LIMIT per cell, but not per device
            buffer = buffer.astype(np.int64)
            for other, _, _ in passes[1:]:
                buffer += other
        counters = [counter for _, counter, _ in passes]
        counter = SparseCounter.merged(counters) if structure.sparse else None
        status = np.concatenate([share.status for share in shares])
        steps = np.concatenate([share.steps for share in shares])
        return status, steps, buffer, counter, max(ms for _, _, ms in passes)

    def _replay_pass(self, share: "_Share", structure: DbnStructure, ranges: np.ndarray,
                     n_times: int, config: LaunchConfig, profiler, bar, stop):
        """One share's counts from the values its range pass kept: (dense buffer,
        sparse counter or None, kernel ms)."""
        counter = SparseCounter(structure) if structure.sparse else None
        kernel_ms = 0.0
        for part in share.batches:
            _check_stop(stop)
            first = part.start - share.start
            p = share.engine.replay_pass(share.values, first,
                                         share.status[first:part.stop - share.start],
                                         n_times, ranges, config.block_size, profiler)
            kernel_ms += p.kernel_ms
            if counter is not None:
                counter.add(p.records, p.status == int(Status.ok))
            bar.advance(part.stop - part.start)
        return share.engine.finish_counts(), counter, kernel_ms

    def _count_pass(self, share: "_Share", table: np.ndarray, times: np.ndarray,
                    config: LaunchConfig, structure: DbnStructure, ranges: np.ndarray,
                    profiler, bar, stop):
        """One share's counts by integrating its members again: (dense buffer, sparse
        counter or None, kernel ms). A batch's failed members run again with weight
        -1."""
        counter = SparseCounter(structure) if structure.sparse else None
        kernel_ms = 0.0
        for part in share.batches:
            _check_stop(stop)
            sub = table[:, part]
            p = share.engine.count_pass(sub, times, config, ranges, profiler=profiler)
            here = slice(part.start - share.start, part.stop - share.start)
            share.status[here], share.steps[here] = p.status, p.steps
            kernel_ms += p.kernel_ms
            ok = p.status == int(Status.ok)
            if counter is not None:
                counter.add(p.records, ok)
            failed = np.flatnonzero(~ok)
            if len(failed) and structure.dense:
                back = share.engine.count_pass(sub[:, failed], times, config, ranges,
                                               weight=WEIGHT_REMOVE, profiler=profiler)
                kernel_ms += back.kernel_ms
            bar.advance(part.stop - part.start)
        return share.engine.finish_counts(), counter, kernel_ms

    def _all_failed(self, n: int, status: np.ndarray, dt: float) -> SimulationError:
        return SimulationError(
            f"all {n} trajectories of model {self.network.id!r} failed "
            f"({', '.join(f'{k}: {v}' for k, v in _status_summary(status).items())}); "
            f"fixed-step RK4 with step {dt:g} is unstable for a stiff model: use more "
            f"--steps per slice")

    def _batch_size(self, device, n: int, n_varied: int, structure: DbnStructure,
                    records: bool) -> int:
        if self.options.batch:
            return max(1, min(n, self.options.batch))
        record = (structure.slices + 1) * len(structure.variables) if records else 0
        real = 8 if self.options.precision == "double" else 4
        per_member = n_varied * real + 5 + record
        if device is not None:
            budget = int(device.free_memory() * BATCH_MEMORY_SHARE)
        else:
            budget = HOST_RECORD_BYTES if records else 1 << 62
        return int(max(1, min(n, budget // max(per_member, 1))))


class _Share:
    """The trajectories [start, stop) that one device (None: the host) runs, its
    engine, and what its passes keep: its values (None: it integrates twice), its
    batches, and its members' status and steps."""

    def __init__(self, device, engine, part: slice):
        self.device, self.engine = device, engine
        self.start, self.stop = part.start, part.stop
        self.values: Values | None = None
        self.kept = False  # whether it kept its values (they are freed at the end)
        self.batch = 0
        self.batches: list[slice] = []
        self.status = np.empty(self.size, np.int8)
        self.steps = np.empty(self.size, np.int64)

    @property
    def size(self) -> int:
        return self.stop - self.start

    def free_values(self) -> None:
        if self.values is not None:
            self.values.free()
            self.values = None


def _check_stop(stop) -> None:
    """Between launches: stop when another share failed (dispatch.on_each_device)."""
    if stop.is_set():
        raise Stopped()


def _split(n: int, parts: int) -> list[slice]:
    """[0, n) in `parts` contiguous shares whose sizes differ by at most one
    (static_block's): a fixed RK4 step gives every trajectory the same work, so equal
    shares balance."""
    return [slice(*static_block(n, k, parts)) for k in range(parts)]


def _check_ranges(task: DbnApproximation, structure: DbnStructure) -> None:
    for sid in dict(task.ranges):
        if sid not in structure.variables:
            raise OptionError("range", f"{sid!r} is not a variable of the DBN (its variables: "
                                       f"{', '.join(structure.variables[:15])}"
                                       f"{' ...' if len(structure.variables) > 15 else ''}; "
                                       f"a parameter becomes one when it is sampled)")


def _check_memory(structure: DbnStructure, n: int, n_varied: int, devices) -> None:
    """OptionError before anything is sampled or allocated when the run cannot fit:
    the dense CPTs where the kernel counts them (on every device, or on the host), and
    on the host the sampled table, per-member status and steps, the counts' copies
    (uint32 from the kernel, int64 per variable) and the marginals."""
    dense = 4 * structure.count_elements
    for device in devices:
        if device is None:
            continue
        have = int(device.free_memory() * 0.8)
        if dense > have:
            raise _too_large(structure, "bins", "the dense CPTs", dense, have,
                             f"on GPU {device.index}" if len(devices) > 1 else "on the GPU")
    members = n * (16 * n_varied + 9)
    host = _host_bytes(structure, n, n_varied)
    if len(devices) > 1:  # the other devices' count buffers and their int64 sum
        host += (4 * (len(devices) - 1) + 8) * structure.count_elements
    have = int(available_memory() * 0.8)
    if host > have:  # named after the larger part: the trajectories or the tables
        raise _too_large(structure, "ensemble" if 2 * members > host else "bins",
                         f"{n} sampled trajectories and their counts", host, have,
                         "on the host")


def _host_bytes(structure: DbnStructure, n: int, n_varied: int) -> int:
    """What a run holds on the host besides kept values and bin records: the sampled
    table, per-member status and steps, the counts' copies (uint32 from the kernel,
    int64 per variable) and the marginals."""
    return (n * (16 * n_varied + 9) + 12 * structure.count_elements
            + 16 * (structure.slices + 1) * len(structure.variables) * structure.bins)


def _too_large(structure: DbnStructure, option: str, what: str, need: int, have: int,
               where: str) -> OptionError:
    largest = max(structure.dense, key=structure.rows, default=None)
    detail = (f" ({largest!r} alone has {structure.rows(largest)} parent configurations "
              f"per transition)" if largest is not None else "")
    return OptionError(option, f"{what} need {need / 2**30:.2f} GiB{detail}, more than the "
                               f"{have / 2**30:.2f} GiB available {where}; use fewer "
                               f"trajectories (--ensemble), bins or slices, or a smaller "
                               f"--max-dense-rows (larger tables are then counted sparsely "
                               f"on the host)")


def _merge_keys(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = a.copy()
    out[0::2] = np.minimum(a[0::2], b[0::2])
    out[1::2] = np.maximum(a[1::2], b[1::2])
    return out


def _ranges(structure: DbnStructure, given: dict, found) -> tuple[np.ndarray, dict]:
    """(variables, 2) [lo, hi) per variable and where each came from."""
    ranges = np.empty((len(structure.variables), 2))
    origin = {}
    for j, v in enumerate(structure.variables):
        if v in given:
            ranges[j] = given[v]
            origin[v] = "given"
            continue
        lo, hi = (float(x) for x in found[j])
        if not (np.isfinite(lo) and np.isfinite(hi)):
            raise SimulationError(f"no trajectory kept {v!r} finite: no range to bin it "
                                  f"over (give one with --range {v}=LOW:HIGH)")
        if hi <= lo:  # never changes: all its mass in the first bin
            hi = lo + max(abs(lo), 1.0)
            origin[v] = "constant (widened)"
        else:
            origin[v] = "min..max"
        ranges[j] = (lo, hi)
    return ranges, origin


def _status_summary(status: np.ndarray) -> dict[str, int]:
    names, counts = np.unique(np.asarray(status), return_counts=True)
    return {Status(int(c)).name: int(k) for c, k in zip(names, counts)}
