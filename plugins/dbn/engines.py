"""Where the DBN kernels run: the GPU (PyCUDA, through sbmlgpu.runtime) or the host
(the same kernel text built by g++ with OpenMP: the CPU path).

Both engines keep the dense CPT counts where the kernel writes them for the whole
run (`start_counts` ... `finish_counts`): batches of members add into them, and a
failed member's counts are taken back out by running it again with weight -1
(the same code on the same inputs adds exactly what it added before). Each pass
returns per-member status and steps, and the bin records when the sink writes
them (variables counted on the host). Where the range pass keeps every value
(`Values`), `replay_pass` counts from them instead (failed members skipped). Given a
heterogeneous kernel (heterogeneous.py), the GPU engine counts with it in place of the
homogeneous count kernel, the weight -1 pass included; where values are kept, its
values variant integrates the range pass and the homogeneous replay counts.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from sbmlgpu.errors import DeviceError
from sbmlgpu.ode.codegen import KernelSource
from sbmlgpu.ode.engines import LaunchConfig
from sbmlgpu.runtime import host

from .kernels import DbnKernels
from .sinks import range_keys_start

#: the host build's flags: its entry points, no warnings (unused parameters by design)
HOST_FLAGS = ("-DSBMLGPU_HOST_ENTRY", "-w")
WEIGHT_ADD = 1
WEIGHT_REMOVE = 0xFFFFFFFF  # -1 modulo 2**32
REPLAY_ENTRY = "sbmlgpu_dbn_cpt_replay"  # kernels/replay.cuh, in the count kernel's text
RANGE_REPLAY_ENTRY = "sbmlgpu_dbn_range_replay"  # the same, in the range kernel's text
#: the range sink's arguments on the host: extrema keys, values (or null), stride
RANGE_ARGTYPES = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong]


@dataclass
class Pass:
    status: np.ndarray  # (b,) int8
    steps: np.ndarray  # (b,) int32
    kernel_ms: float
    records: np.ndarray | None = None  # (b, times, variables) bins, or None
    keys: np.ndarray | None = None  # range pass: the extrema keys


@dataclass
class Values:
    """Every value of every member at every slice, kept by the range pass for the
    replay pass: values[(k * variables + j) * stride + i], stride = the run's members
    (a device buffer on the GPU, an array on the host)."""

    buffer: object
    stride: int
    itemsize: int
    nbytes: int

    def pointer(self, first: int) -> int:
        """The address of member `first`'s first value."""
        base = self.buffer.ctypes.data if isinstance(self.buffer, np.ndarray) \
            else self.buffer.ptr
        return int(base) + int(first) * self.itemsize

    def free(self) -> None:
        if hasattr(self.buffer, "free"):
            self.buffer.free()
        self.buffer = None


def _settings(config: LaunchConfig):
    return (config.rtol, config.atol, config.h0, config.max_step, config.dt,
            int(config.max_steps), int(config.seed) & (2**64 - 1))


class GpuEngine:
    name = "gpu"

    def __init__(self, kernels: DbnKernels, device, heterogeneous=None,
                 fast_math: bool = False):
        self.kernels = kernels
        self.device = device
        #: heterogeneous.HeterogeneousKernel: counts with it instead of kernels.counts
        self.heterogeneous = heterogeneous
        self.real = np.float64 if kernels.counts.precision == "double" else np.float32
        #: nvcc's flags for every kernel of the run (the heterogeneous one included, so
        #: that both count kernels compute the same trajectories)
        self.options = ("--use_fast_math",) if fast_math else ()
        self._modules = {}
        self._counts = None

    def _function(self, source: KernelSource, entry: str | None = None):
        if source.name not in self._modules:
            self._modules[source.name] = self.device.compile(source.text, name=source.name,
                                                             options=self.options)
        return self._modules[source.name].function(entry or source.kernel)

    def compile(self, find_ranges: bool = True, kept: bool = False) -> None:
        """Compile what a run launches (`find_ranges`: it has a range pass; `kept`: its
        values are kept and replayed); anything else compiles when first launched.
        With a heterogeneous kernel: its values variant where values are kept, its
        counting kernel otherwise (each is a large build on a large model)."""
        het = self.heterogeneous
        if find_ranges:
            self._function(self.kernels.ranges)
        if het is None or kept:
            self._function(self.kernels.counts)
        if het is not None:
            self._function(het.values_source if kept else het.source)

    def _launch(self, source, table, times, sink_args, config, profiler, shape=None):
        """`shape`: (blocks, threads, shared bytes) of a launch; None: one thread per
        member in blocks of config.block_size."""
        device, real = self.device, self.real
        b = int(table.shape[1])
        buffers = []
        try:
            table_buf = device.to_device(np.ascontiguousarray(table, dtype=real)) \
                if table.size else device.alloc(8)
            buffers.append(table_buf)
            times_buf = device.to_device(np.asarray(times, dtype=real))
            buffers.append(times_buf)
            status_buf = device.alloc(max(b, 1))
            steps_buf = device.alloc(4 * max(b, 1))
            buffers += [status_buf, steps_buf]
            rtol, atol, h0, max_step, dt, max_steps, seed = _settings(config)
            args = [np.int64(b), table_buf, times_buf, np.int32(len(times)), *sink_args,
                    status_buf, steps_buf, real(rtol), real(atol), real(h0), real(max_step),
                    real(dt), np.int64(max_steps), np.uint64(seed), np.uintp(0), np.uint64(0)]
            block = config.block_size
            grid, block, shared = shape or ((b + block - 1) // block, block, 0)
            function = self._function(source)
            start = profiler.clock() if profiler is not None else None
            timing = function.launch((grid,), (block,), args, shared)
            status = device.from_device(status_buf, (b,), np.int8)
            steps = device.from_device(steps_buf, (b,), np.int32)
            if profiler is not None:
                profiler.record_launch(function, timing, device,
                                       flops=float(steps.astype(np.int64).sum())
                                       * source.flops_per_step,
                                       bytes=float(table.size * np.dtype(real).itemsize),
                                       precision=source.precision, start_s=start, members=b,
                                       method="rk4")
            return status, steps, timing.ms
        finally:
            for buffer in buffers:
                buffer.free()

    def range_pass(self, table, times, config, profiler=None, values=None) -> Pass:
        """`values`: (Values, the launch's first member) to keep every value there
        for replay_pass, or None. With a heterogeneous kernel and values kept, its
        values variant integrates and the range kernel's replay finds the extrema."""
        if self.heterogeneous is not None and values is not None:
            return self._heterogeneous_range_pass(table, times, config, profiler, *values)
        n_vars = len(self.kernels.sink.structure.variables)
        keys_buf = self.device.to_device(range_keys_start(n_vars))
        where, stride = (values[0].pointer(values[1]), values[0].stride) if values \
            else (0, 0)
        try:
            status, steps, ms = self._launch(self.kernels.ranges, table, times,
                                             [keys_buf, np.uintp(where), np.int64(stride)],
                                             config, profiler)
            keys = self.device.from_device(keys_buf, (2 * n_vars,), np.uint64)
        finally:
            keys_buf.free()
        return Pass(status, steps, ms, keys=keys)

    def _heterogeneous_range_pass(self, table, times, config, profiler, values: "Values",
                                  first: int) -> Pass:
        het, device, real = self.heterogeneous, self.device, self.real
        source = het.values_source
        b, n_vars = int(table.shape[1]), len(self.kernels.sink.structure.variables)
        buffers = []
        try:
            def keep(buffer):  # freed below even when a later allocation fails
                buffers.append(buffer)
                return buffer

            table_buf = keep(device.to_device(np.ascontiguousarray(table, dtype=real))
                             if table.size else device.alloc(8))
            times_buf = keep(device.to_device(np.asarray(times, dtype=real)))
            status_buf = keep(device.alloc(max(b, 1)))
            steps_buf = keep(device.alloc(4 * max(b, 1)))
            keys_buf = keep(device.to_device(range_keys_start(n_vars)))
            function = self._function(source)
            start = profiler.clock() if profiler is not None else None
            timing = function.launch(
                (het.launch_shape(b)[0],), (het.launch_shape(b)[1],),
                [np.int64(b), table_buf, times_buf, np.int32(len(times)),
                 np.uintp(values.pointer(first)), np.int64(values.stride), status_buf,
                 steps_buf, real(config.dt), np.int64(config.max_steps)],
                het.launch_shape(b)[2])
            status = device.from_device(status_buf, (b,), np.int8)
            steps = device.from_device(steps_buf, (b,), np.int32)
            if profiler is not None:
                profiler.record_launch(function, timing, device,
                                       flops=float(steps.astype(np.int64).sum())
                                       * source.flops_per_step,
                                       bytes=float(table.size * np.dtype(real).itemsize),
                                       precision=source.precision, start_s=start, members=b,
                                       method="rk4")
            extrema = self._function(self.kernels.ranges, RANGE_REPLAY_ENTRY)
            block = config.block_size
            replay = extrema.launch(((b + block - 1) // block,), (block,),
                                    [np.int64(b), np.uintp(values.pointer(first)),
                                     np.int64(values.stride), np.int32(len(times)), status_buf,
                                     keys_buf, np.uintp(0), np.int64(0)], 0)
            keys = device.from_device(keys_buf, (2 * n_vars,), np.uint64)
        finally:
            for buffer in buffers:
                buffer.free()
        return Pass(status, steps, timing.ms + replay.ms, keys=keys)

    def start_values(self, members: int, n_times: int) -> "Values":
        n_vars = len(self.kernels.sink.structure.variables)
        itemsize = np.dtype(self.real).itemsize
        nbytes = members * n_times * n_vars * itemsize
        return Values(self.device.alloc(max(nbytes, 1)), members, itemsize, nbytes)

    def replay_pass(self, values: "Values", first: int, status: np.ndarray, n_times: int,
                    ranges, block_size: int, profiler=None) -> Pass:
        """The counts of members first..first+b-1 from the values their range pass
        kept (members whose status is not OK are skipped), and their bin records."""
        sink = self.kernels.sink
        b, n_vars = int(len(status)), len(sink.structure.variables)
        shape = (b, n_times, n_vars)
        buffers = []
        try:
            buffers.append(self.device.to_device(np.ascontiguousarray(ranges,
                                                                      dtype=np.float64)))
            buffers.append(self.device.to_device(np.ascontiguousarray(status, dtype=np.int8)))
            if sink.records:
                buffers.append(self.device.alloc(max(int(np.prod(shape))
                                                     * sink.dtype.itemsize, 1)))
            function = self._function(self.kernels.counts, REPLAY_ENTRY)
            start = profiler.clock() if profiler is not None else None
            args = [np.int64(b), np.uintp(values.pointer(first)), np.int64(values.stride),
                    np.int32(n_times), buffers[1], self._counts,
                    buffers[2] if sink.records else np.uintp(0), buffers[0],
                    np.uint32(WEIGHT_ADD)]
            timing = function.launch(((b + block_size - 1) // block_size,), (block_size,),
                                     args, 0)
            records = (self.device.from_device(buffers[2], shape, sink.dtype)
                       if sink.records else None)
            if profiler is not None:
                profiler.record_launch(function, timing, self.device, flops=0.0,
                                       bytes=float(b * n_times * n_vars * values.itemsize),
                                       precision=self.kernels.counts.precision,
                                       start_s=start, members=b, method="replay")
        finally:
            for buffer in buffers:
                buffer.free()
        return Pass(np.asarray(status, np.int8), np.zeros(b, np.int32), timing.ms,
                    records=records)

    def start_counts(self, elements: int) -> None:
        self._counts = self.device.to_device(np.zeros(max(int(elements), 1), np.uint32))
        self._elements = int(elements)

    def count_pass(self, table, times, config, ranges, weight=WEIGHT_ADD,
                   profiler=None) -> Pass:
        sink = self.kernels.sink
        b, n_vars = int(table.shape[1]), len(sink.structure.variables)
        ranges_buf = self.device.to_device(np.ascontiguousarray(ranges, dtype=np.float64))
        shape = (b, len(times), n_vars)
        records_buf = self.device.alloc(max(int(np.prod(shape)) * sink.dtype.itemsize, 1)) \
            if sink.records else None
        het = self.heterogeneous
        try:
            status, steps, ms = self._launch(
                het.source if het is not None else self.kernels.counts, table, times,
                [self._counts, records_buf if records_buf is not None else np.uintp(0),
                 ranges_buf, np.uint32(weight)], config, profiler,
                het.launch_shape(b) if het is not None else None)
            records = (self.device.from_device(records_buf, shape, sink.dtype)
                       if records_buf is not None else None)
        finally:
            ranges_buf.free()
            if records_buf is not None:
                records_buf.free()
        return Pass(status, steps, ms, records=records)

    def finish_counts(self) -> np.ndarray:
        counts = self.device.from_device(self._counts, (max(self._elements, 1),), np.uint32)
        self._counts.free()
        self._counts = None
        return counts[:self._elements]

    def discard_counts(self) -> None:
        """Free the count buffer of a run that failed (finish_counts frees it otherwise)."""
        if self._counts is not None:
            self._counts.free()
            self._counts = None


class HostEngine:
    """The kernels built for the host (OpenMP over members)."""

    name = "native"

    def __init__(self, kernels: DbnKernels):
        self.kernels = kernels
        self.real = np.float64 if kernels.counts.precision == "double" else np.float32
        self._libraries = {}
        self._entries = {}
        self._counts = None

    def _library(self, source: KernelSource):
        if source.name not in self._libraries:
            self._libraries[source.name] = host.load(source.text, source.name, HOST_FLAGS)
        return self._libraries[source.name]

    def _entry(self, source: KernelSource, sink_argtypes):
        if source.name not in self._entries:
            library = self._library(source)
            entry = getattr(library, source.kernel.rsplit("_", 1)[0] + "_host")
            real = ctypes.c_double if self.real == np.float64 else ctypes.c_float
            pointer = ctypes.c_void_p
            entry.argtypes = [ctypes.c_longlong, pointer, pointer, ctypes.c_int,
                              *sink_argtypes, pointer, pointer, real, real, real, real, real,
                              ctypes.c_longlong, ctypes.c_ulonglong, pointer,
                              ctypes.c_ulonglong]
            entry.restype = ctypes.c_int
            size = getattr(library, source.kernel.rsplit("_", 1)[0] + "_host_real_size")()
            if size != np.dtype(self.real).itemsize:
                raise DeviceError(f"{source.name}: real_t has {size} bytes on the host "
                                  f"build, expected {np.dtype(self.real).itemsize}")
            self._entries[source.name] = entry
        return self._entries[source.name]

    def compile(self, find_ranges: bool = True, kept: bool = False) -> None:
        pointer = ctypes.c_void_p
        self._entry(self.kernels.ranges, RANGE_ARGTYPES)
        self._entry(self.kernels.counts, [pointer, pointer, pointer, ctypes.c_uint])

    def _run(self, entry, table, times, sink_args, config) -> tuple[np.ndarray, np.ndarray]:
        table = np.ascontiguousarray(table, dtype=self.real)
        times = np.ascontiguousarray(times, dtype=self.real)
        b = int(table.shape[1])
        status = np.empty(b, np.int8)
        steps = np.empty(b, np.int32)
        if b:
            entry(b, _ptr(table) if table.size else None, _ptr(times), len(times), *sink_args,
                  _ptr(status), _ptr(steps), *_settings(config), None, 0)
        return status, steps

    def range_pass(self, table, times, config, profiler=None, values=None) -> Pass:
        n_vars = len(self.kernels.sink.structure.variables)
        keys = range_keys_start(n_vars)
        entry = self._entry(self.kernels.ranges, RANGE_ARGTYPES)
        where, stride = (values[0].pointer(values[1]), values[0].stride) if values \
            else (None, 0)
        status, steps = self._run(entry, table, times, [_ptr(keys), where, stride], config)
        return Pass(status, steps, 0.0, keys=keys)

    def start_values(self, members: int, n_times: int) -> Values:
        n_vars = len(self.kernels.sink.structure.variables)
        array = np.empty(max(members * n_times * n_vars, 1), self.real)
        return Values(array, members, array.itemsize, array.nbytes)

    def replay_pass(self, values: Values, first: int, status: np.ndarray, n_times: int,
                    ranges, block_size: int = 0, profiler=None) -> Pass:
        sink = self.kernels.sink
        b, n_vars = int(len(status)), len(sink.structure.variables)
        status = np.ascontiguousarray(status, dtype=np.int8)
        ranges = np.ascontiguousarray(ranges, dtype=np.float64)
        records = np.empty((b, n_times, n_vars), sink.dtype) if sink.records else None
        entry = self._replay_entry()
        if b:
            entry(b, values.pointer(first), values.stride, n_times, _ptr(status),
                  _ptr(self._counts), _ptr(records) if records is not None else None,
                  _ptr(ranges), WEIGHT_ADD)
        return Pass(status, np.zeros(b, np.int32), 0.0, records=records)

    def _replay_entry(self):
        source = self.kernels.counts
        if REPLAY_ENTRY not in self._entries:
            entry = getattr(self._library(source), REPLAY_ENTRY + "_host")
            pointer = ctypes.c_void_p
            entry.argtypes = [ctypes.c_longlong, pointer, ctypes.c_longlong, ctypes.c_int,
                              pointer, pointer, pointer, pointer, ctypes.c_uint]
            entry.restype = ctypes.c_int
            self._entries[REPLAY_ENTRY] = entry
        return self._entries[REPLAY_ENTRY]

    def start_counts(self, elements: int) -> None:
        self._counts = np.zeros(max(int(elements), 1), np.uint32)
        self._elements = int(elements)

    def count_pass(self, table, times, config, ranges, weight=WEIGHT_ADD,
                   profiler=None) -> Pass:
        sink = self.kernels.sink
        b, n_vars = int(table.shape[1]), len(sink.structure.variables)
        ranges = np.ascontiguousarray(ranges, dtype=np.float64)
        records = np.empty((b, len(times), n_vars), sink.dtype) if sink.records else None
        pointer = ctypes.c_void_p
        entry = self._entry(self.kernels.counts, [pointer, pointer, pointer, ctypes.c_uint])
        status, steps = self._run(entry, table, times,
                                  [_ptr(self._counts), _ptr(records) if records is not None
                                   else None, _ptr(ranges), weight], config)
        return Pass(status, steps, 0.0, records=records)

    def finish_counts(self) -> np.ndarray:
        counts, self._counts = self._counts, None
        return counts[:self._elements]

    def discard_counts(self) -> None:
        self._counts = None


def _ptr(array: np.ndarray):
    return array.ctypes.data_as(ctypes.c_void_p)
