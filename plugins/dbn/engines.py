"""Where the DBN kernels run: the GPU (PyCUDA, through sbmlgpu.runtime) or the host
(the same kernel text built by g++ with OpenMP: the CPU path).

Both engines keep the dense CPT counts where the kernel writes them for the whole
run (`start_counts` ... `finish_counts`): batches of members add into them, and a
failed member's counts are taken back out by running it again with weight -1
(the same code on the same inputs adds exactly what it added before). Each pass
returns per-member status and steps, and the bin records when the sink writes
them (variables counted on the host). Given a heterogeneous kernel (heterogeneous.py),
the GPU engine counts with it in place of the homogeneous count kernel, the weight -1
pass included.
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


@dataclass
class Pass:
    status: np.ndarray  # (b,) int8
    steps: np.ndarray  # (b,) int32
    kernel_ms: float
    records: np.ndarray | None = None  # (b, times, variables) bins, or None
    keys: np.ndarray | None = None  # range pass: the extrema keys


def _settings(config: LaunchConfig):
    return (config.rtol, config.atol, config.h0, config.max_step, config.dt,
            int(config.max_steps), int(config.seed) & (2**64 - 1))


class GpuEngine:
    name = "gpu"

    def __init__(self, kernels: DbnKernels, device, heterogeneous=None):
        self.kernels = kernels
        self.device = device
        #: heterogeneous.HeterogeneousKernel: counts with it instead of kernels.counts
        self.heterogeneous = heterogeneous
        self.real = np.float64 if kernels.counts.precision == "double" else np.float32
        self._functions = {}
        self._counts = None

    def _function(self, source: KernelSource):
        if source.name not in self._functions:
            module = self.device.compile(source.text, name=source.name)
            self._functions[source.name] = module.function(source.kernel)
        return self._functions[source.name]

    def compile(self) -> None:
        self._function(self.kernels.ranges)
        self._function(self.kernels.counts)
        if self.heterogeneous is not None:
            self._function(self.heterogeneous.source)

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

    def range_pass(self, table, times, config, profiler=None) -> Pass:
        n_vars = len(self.kernels.sink.structure.variables)
        keys_buf = self.device.to_device(range_keys_start(n_vars))
        try:
            status, steps, ms = self._launch(self.kernels.ranges, table, times, [keys_buf],
                                             config, profiler)
            keys = self.device.from_device(keys_buf, (2 * n_vars,), np.uint64)
        finally:
            keys_buf.free()
        return Pass(status, steps, ms, keys=keys)

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


class HostEngine:
    """The kernels built for the host (OpenMP over members)."""

    name = "native"

    def __init__(self, kernels: DbnKernels):
        self.kernels = kernels
        self.real = np.float64 if kernels.counts.precision == "double" else np.float32
        self._libraries = {}
        self._counts = None

    def _entry(self, source: KernelSource, sink_argtypes):
        if source.name not in self._libraries:
            library = host.load(source.text, source.name, HOST_FLAGS)
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
            self._libraries[source.name] = entry
        return self._libraries[source.name]

    def compile(self) -> None:
        pointer = ctypes.c_void_p
        self._entry(self.kernels.ranges, [pointer])
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

    def range_pass(self, table, times, config, profiler=None) -> Pass:
        n_vars = len(self.kernels.sink.structure.variables)
        keys = range_keys_start(n_vars)
        entry = self._entry(self.kernels.ranges, [ctypes.c_void_p])
        status, steps = self._run(entry, table, times, [_ptr(keys)], config)
        return Pass(status, steps, 0.0, keys=keys)

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


def _ptr(array: np.ndarray):
    return array.ctypes.data_as(ctypes.c_void_p)
