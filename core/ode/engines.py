"""Where a batch of members of an ODE kernel with the trajectory sink runs: the GPU
(PyCUDA runtime) or the host (the same kernel built as a shared library).

Both take the same inputs (a column-major parameter table of the batch, the output
times, the launch settings) and give the same `BatchOutput`: per-member status and
step counts, and the time courses (members, times, outputs). Given the histogram grid
of a `--summary`, the GPU engine instead reduces the batch where the data are
(templates/summary.cu; summary.py reads its output as partial
sbmlgpu.ensemble_summary.EnsembleStats), so that time courses never cross the bus;
the host engine's time courses are folded on the host by the ensemble runner.

The kernels write (times, outputs, members), coalesced (sinks.TrajectorySink); the
GPU engine turns that into (members, times, outputs) on the device
(sbmlgpu.runtime.layout) and copies it straight into the caller's `destination`
where one is given, so that no pass over the time courses on the host remains.

The launch arguments are those of templates/entry.cuh with the trajectory sink and
the limits (templates/limits.cuh: a kernel that sets `limits`, as the ode backend's
kernels/ode.cu does), and for a model with delay() the launch's history ring
(templates/delay.cuh: `source.history_buffer_reals(b)` reals for b members,
allocated with the other buffers and never read back).
Where the source's entry point refills (`source.refills`, templates/entry.cuh), the GPU
engine launches as many threads as the GPU holds at once (`resident_grid`), each taking
the next member from a queue (an 8-byte counter zeroed before the launch, passed last)
when its own ends.
HostEngine is given the loaded host library by the backend (its host build and
ctypes signature live with the backend's CPU path).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..ensemble_summary import BinGrid, EnsembleStats
from ..profile import phase
from ..runtime.layout import member_major
from ..runtime.prefault import Prefault
from ..runtime.resident import DeviceColumns
from . import summary

if TYPE_CHECKING:  # pragma: no cover - codegen imports sympy; a cached kernel runs without it
    from .kernel_source import KernelSource

PACKAGE = "sbmlgpu.ode"

STATUS_BYTES = 1
STEPS_BYTES = 4
MEMBER_ID_BYTES = 8
HISTOGRAM_BLOCK_ITEMS = 8192  # members per block of the histogram kernel


@dataclass
class BatchOutput:
    status: np.ndarray  # (b,) int8, sbmlgpu.results.Status codes
    steps: np.ndarray  # (b,) int32, attempted steps
    out: np.ndarray | None  # (b, times, outputs) (maybe a strided view), or None with stats
    stats: EnsembleStats | None = None
    kernel_ms: float = 0.0
    #: per-member numbers of a reduction on the device (`reduce`), launch order
    reduced: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass(frozen=True)
class LaunchConfig:
    rtol: float
    atol: float
    h0: float
    max_step: float
    dt: float
    max_steps: int
    seed: int
    block_size: int
    # the limits of templates/limits.cuh (0: none), for kernels that take them
    max_interval_steps: int = 0
    time_limit_ns: int = 0
    #: the table row of each member's count of output times (TimeCourse.member_ends;
    #: templates/limits.cuh), -1: every member to the last time
    times_row: int = -1
    # --scaled-atol: compiled into a kernel (codegen's scaled_atol); read by the engines
    # that are not kernels (the CPU path's numpy engine and reference)
    scaled_atol: bool = True
    #: --max-lanes: a refill launch's lanes at most (0: as many as the GPU holds)
    max_lanes: int = 0

    def as_dict(self) -> dict:
        return {"rtol": self.rtol, "atol": self.atol, "h0": self.h0,
                "max_step": self.max_step, "dt": self.dt, "max_steps": self.max_steps,
                "seed": self.seed, "max_interval_steps": self.max_interval_steps,
                "time_limit_ns": self.time_limit_ns, "times_row": self.times_row}


def bytes_per_member(n_params: int, n_times: int, n_outputs: int, itemsize: int,
                     bundled: bool, time_courses: bool = True, history_reals: int = 0) -> int:
    """Device memory one member needs: its table column, its outputs (twice when the
    time courses are returned: the member-major copy), status, steps (and its
    original index when bundled), and its delay() history ring (`history_reals`)."""
    copies = 2 if time_courses else 1
    return ((n_params + copies * n_times * n_outputs + history_reals) * itemsize
            + STATUS_BYTES + STEPS_BYTES + (MEMBER_ID_BYTES if bundled else 0))


def resident_grid(b: int, block: int, properties, max_lanes: int = 0) -> int:
    """Blocks of a refill launch of `b` members: those the GPU can hold at once by its
    threads per SM (fewer where the members need fewer, or --max-lanes asks for fewer
    lanes: whole blocks, at least one). Registers may hold fewer; the blocks past them
    start when the queue is empty and end at once."""
    per_sm = max(int(properties.max_threads_per_sm) // int(block), 1)
    blocks = min(-(-int(b) // int(block)), per_sm * max(int(properties.sm_count), 1))
    if max_lanes > 0:
        blocks = min(blocks, int(max_lanes) // int(block))
    return max(blocks, 1)


#: what an SM allots registers in (a warp's registers, every architecture sbmlgpu
#: builds for) and the most blocks it holds (sm_90; sm_80 holds 32 too)
REGISTERS_PER_WARP_UNIT, MAX_BLOCKS_PER_SM = 256, 32


def resident_threads(attributes, block: int, properties) -> int:
    """Threads of a kernel that run at once on the GPU: blocks per SM as its threads,
    its registers (allotted per warp in units of 256) and its static shared memory
    allow (the occupancy calculator's rule), times the SMs. A refill launch's lanes."""
    block = max(int(block), 1)
    warps = -(-block // 32)
    per_warp = -(-max(int(attributes.registers), 1) * 32 // REGISTERS_PER_WARP_UNIT) \
        * REGISTERS_PER_WARP_UNIT
    blocks = min(int(properties.max_threads_per_sm) // block,
                 int(properties.registers_per_sm) // (per_warp * warps), MAX_BLOCKS_PER_SM)
    if attributes.shared_bytes:
        blocks = min(blocks, int(properties.shared_memory_per_sm) // int(attributes.shared_bytes))
    return max(blocks, 1) * block * max(int(properties.sm_count), 1)


class GpuEngine:
    """Compiles the kernel once per device; runs batches there."""

    name = "gpu"
    #: with members and first_member m, a launch of members m..m+b-1 writes them in
    #: member order (sinks.TrajectorySink); LAUNCH_ORDER keeps launch order
    writes_member_order = True

    def __init__(self, source: KernelSource, fast_math: bool):
        self.source = source
        self.dtype = np.float64 if source.precision == "double" else np.float32
        self.real = self.dtype
        self.options = ("--use_fast_math",) if fast_math else ()
        #: launches take members from a queue (the refill entry point)
        self.refills = source.refills
        self._kernels: dict[int, object] = {}
        self._summary: dict[int, object] = {}
        self._lock = threading.Lock()

    def resident_lanes(self, device, block: int, max_lanes: int = 0) -> int:
        """Members the kernel integrates at once on `device` (compiled there first):
        a refill launch's lanes (at most --max-lanes' whole blocks where it is set)."""
        lanes = resident_threads(self.kernel(device).attributes, block, device.properties)
        if max_lanes > 0:
            lanes = min(lanes, max(int(max_lanes) // int(block), 1) * int(block))
        return lanes

    def kernel(self, device):
        with self._lock:
            if device.index not in self._kernels:
                module = device.compile(self.source.text, options=self.options,
                                        name=self.source.name)
                self._kernels[device.index] = module.function(self.source.kernel)
            return self._kernels[device.index]

    def summary_kernels(self, device):
        with self._lock:
            if device.index not in self._summary:
                from ..codegen.templates import render  # jinja2: only for this kernel

                text = render(PACKAGE, "summary.cu", precision=self.source.precision)
                module = device.compile(text, name=f"ode_summary_{self.source.precision}.cu")
                self._summary[device.index] = (module.function("sbmlgpu_ode_moments"),
                                               module.function("sbmlgpu_ode_histogram"))
            return self._summary[device.index]

    def run(self, device, table: np.ndarray, times: np.ndarray, n_outputs: int,
            config: LaunchConfig, members: np.ndarray | None = None, first_member: int = 0,
            histogram: BinGrid | None = None, profiler=None,
            destination: np.ndarray | None = None, reduce=None) -> BatchOutput:
        """`destination`: where the time courses go, (b, times, outputs) C-contiguous
        of the engine's dtype (else a new array). `histogram`: reduce the batch to its
        statistics, binned over this grid, instead (`--summary`). `reduce`: a
        per-member reduction run on the time courses where they lie instead
        (`reduce.launch(...)` -> {name: (b,) array}, e.g.
        sbmlgpu.petab.reduction.ObjectiveReduction, whose optional `release()` the
        backend calls once its run ends); out is then (b, times, 0).
        `table`: the (varied, b) host array, or DeviceColumns already on `device`
        (sbmlgpu.runtime.resident), which this call frees."""
        b = int(table.shape[1])
        real = self.real
        size = np.dtype(real).itemsize
        buffers = []

        def keep(buffer):
            buffers.append(buffer)
            return buffer

        on_device = isinstance(table, DeviceColumns)
        if on_device:
            keep(table.buffer)  # ours from here, whatever fails below
        touch = None
        try:
            if on_device and np.dtype(table.dtype) != np.dtype(real):
                raise ValueError(f"a {np.dtype(table.dtype)} table for a {np.dtype(real)} kernel")
            kernel = self.kernel(device)
            if histogram is None and reduce is None:
                if destination is None:  # a new array (member_major would make the same)
                    destination = np.empty((b, len(times), n_outputs), real)
                # its pages are faulted in on threads while the kernel runs (prefault.py)
                touch = Prefault(destination)
            with phase(profiler, "allocate and upload", category="transfer", device=device):
                if on_device:
                    table_buf = table.buffer
                else:
                    table_buf = keep(device.to_device(np.ascontiguousarray(table, dtype=real))
                                     if table.size else device.alloc(size))
                times_buf = keep(device.to_device(np.asarray(  # + fixed parameters
                    self.source.launch_times(times), dtype=real)))
                out_buf = keep(device.alloc(len(times) * n_outputs * b * size))
                status_buf = keep(device.alloc(b * STATUS_BYTES))
                steps_buf = keep(device.alloc(b * STEPS_BYTES))
                members_arg = (keep(device.to_device(np.asarray(members, dtype=np.uint64)))
                               if members is not None else np.uintp(0))
                # delay(): the members' history nodes (written before they are read)
                history = ([keep(device.alloc(self.source.history_buffer_reals(b) * size))]
                           if self.source.history_reals else [])
                # the refill kernel's queue: the next launch index to take
                queue = [keep(device.to_device(np.zeros(1, np.uint64)))] if self.refills else []
            block = config.block_size
            grid = (resident_grid(b, block, device.properties, config.max_lanes)
                    if self.refills else (b + block - 1) // block)
            args = [np.int64(b), table_buf, times_buf, np.int32(len(times)), out_buf,
                    status_buf, steps_buf, real(config.rtol), real(config.atol),
                    real(config.h0), real(config.max_step), real(config.dt),
                    np.int64(config.max_steps), np.uint64(config.seed & (2**64 - 1)),
                    members_arg, np.uint64(first_member),
                    np.int64(config.max_interval_steps), np.int64(config.time_limit_ns),
                    np.int64(config.times_row),
                    *history, *queue]
            start = profiler.clock() if profiler is not None else None
            timing = kernel.launch((grid,), (block,), args)
            status = device.from_device(status_buf, (b,), np.int8)
            steps = device.from_device(steps_buf, (b,), np.int32)
            if profiler is not None:
                total_steps = float(steps.astype(np.int64).sum())
                flops = (total_steps * self.source.flops_per_step
                         + b * len(times) * self.source.flops_per_output)
                moved = table.size * size + b * len(times) * n_outputs * size + b * 5
                profiler.record_launch(kernel, timing, device, flops=flops, bytes=moved,
                                       precision=self.source.precision, start_s=start,
                                       members=b, steps=total_steps,
                                       method=self.source.method)
            if reduce is not None:
                with phase(profiler, "reduce members", device=device):
                    reduced = reduce.launch(device, out_buf, status_buf, members_arg,
                                            first_member, b, n_outputs, self.source.precision,
                                            keep, profiler)
                return BatchOutput(status, steps, np.zeros((b, len(times), 0), real), None,
                                   timing.ms, reduced)
            if histogram is None:
                if touch is not None:  # before the download writes the rows
                    with phase(profiler if touch.started else None, "fault in result pages",
                               category="transfer", device=device):
                        touch.join()
                out = member_major(device, out_buf, b, (len(times), n_outputs), real,
                                   profiler=profiler, destination=destination)
                return BatchOutput(status, steps, out, None, timing.ms)
            with phase(profiler, "statistics", device=device):
                stats = self._reduce(device, out_buf, status_buf, b, len(times) * n_outputs,
                                     histogram, keep, profiler)
            return BatchOutput(status, steps, None, stats, timing.ms)
        finally:
            if touch is not None:
                touch.join()  # no touch may outlive the call (the caller owns the rows)
            for buffer in buffers:
                buffer.free()

    def _reduce(self, device, out_buf, status_buf, b, cols, grid, keep, profiler):
        if cols == 0 or b == 0:
            return EnsembleStats.empty(cols, grid)
        bins = grid.bins
        moments, histogram = self.summary_kernels(device)
        size = np.dtype(self.real).itemsize
        stats_buf = keep(device.alloc(cols * 6 * 8))
        timing = moments.launch((cols,), (256,), [np.int64(b), np.int32(cols), out_buf,
                                                  status_buf, stats_buf])
        if profiler is not None:
            profiler.record_launch(moments, timing, device, flops=4.0 * b * cols,
                                   bytes=2.0 * b * cols * size + 2 * b, precision="double")
        ranges_buf = keep(device.to_device(np.ascontiguousarray(grid.ranges, dtype=np.float64)))
        hist_buf = keep(device.to_device(np.zeros(cols * bins, dtype=np.uint32)))
        per_block = max(HISTOGRAM_BLOCK_ITEMS, -(-b // 65535))  # gridDim.y <= 65535
        chunks = (b + per_block - 1) // per_block
        timing = histogram.launch((cols, chunks), (256,),
                                  [np.int64(b), np.int32(cols), out_buf, status_buf, ranges_buf,
                                   np.int32(bins), np.int64(per_block), hist_buf],
                                  shared_bytes=4 * bins)
        if profiler is not None:
            profiler.record_launch(histogram, timing, device, flops=5.0 * b * cols,
                                   bytes=1.0 * b * cols * size + b, precision="double")
        stats = device.from_device(stats_buf, (cols, 6), np.float64)
        hist = device.from_device(hist_buf, (cols, bins), np.uint32)
        return summary.from_device(stats, hist, grid)


class HostEngine:
    """The same kernel compiled for the host, OpenMP over members. `kernel`: the loaded
    library of `source`; `kernel.run(table, times, n_outputs, settings, members,
    first_member)` returns (out (times, outputs, n), status, steps) and
    `kernel.dtype` is its real type."""

    name = "native"
    writes_member_order = True  # the same kernel text: as GpuEngine

    def __init__(self, source: KernelSource, kernel):
        self.source = source
        self.kernel = kernel
        self.dtype = self.kernel.dtype

    def run(self, device, table: np.ndarray, times: np.ndarray, n_outputs: int,
            config: LaunchConfig, members: np.ndarray | None = None, first_member: int = 0,
            profiler=None, destination: np.ndarray | None = None) -> BatchOutput:
        """(b, times, outputs) time courses as a view of the kernel's output; the
        caller's copy into the result transposes."""
        settings = config.as_dict()
        settings["n"] = table.shape[1]
        out, status, steps = self.kernel.run(table, times, n_outputs, settings, members,
                                             first_member)
        return BatchOutput(status, steps, out.transpose(2, 0, 1))  # np.moveaxis(out, -1, 0)
