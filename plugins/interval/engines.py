"""Where the verdicts are computed: the GPU (one thread per box, PyCUDA through
sbmlgpu.runtime) or the host (the same kernel text built by g++ with OpenMP over
boxes: the CPU path, on every core)."""

from __future__ import annotations

import ctypes
import time
from dataclasses import dataclass

import numpy as np

from sbmlgpu.runtime import host

from .kernels import IntervalSource

#: the host build: its entry point; no FMA contraction (interval code rounds each
#: operation itself); no warnings (unused parameters by design)
#: nvcc: no FMA contraction anywhere in the kernel (the interval operations use the
#: directed-rounding intrinsics anyway; the centres and bases then round as on the host)
NVCC_OPTIONS = ("--fmad=false",)
HOST_FLAGS = ("-DSBMLGPU_HOST_ENTRY", "-ffp-contract=off", "-fno-fast-math", "-w")


@dataclass(frozen=True)
class Data:
    """The measurements as the kernel reads them: times ascending, measurements
    first[m] .. first[m+1]-1 at times[m], output[k] an index into the measured ids."""

    times: np.ndarray
    first: np.ndarray
    output: np.ndarray
    lower: np.ndarray
    upper: np.ndarray


@dataclass(frozen=True)
class Limits:
    epsilon: float  # unknowns' edges wider than this are split (0: every box is)
    wide: float  # a splittable box stops when an enclosure is this many data widths wide
    max_step: float  # 0: steps as long as the data and the a-priori enclosure allow
    tolerance: float  # the remainder's width per step, relative to 1 + |x|
    max_halvings: int
    max_steps: int
    span: int  # data times one span check covers at most (< 2: each alone)
    step_rule: int  # index into options.STEP_RULES


@dataclass
class Verdicts:
    verdict: np.ndarray  # (b,) int8
    steps: np.ndarray  # (b,) int64
    enclosures: np.ndarray  # (b,) int64: evaluated at data times inside steps
    seconds: float  # the kernel (GPU) or the host call
    record: np.ndarray | None = None  # (b, times, n, 2): see check(record=True)


class HostEngine:
    name = "native"

    def __init__(self, source: IntervalSource):
        self.source = source
        self._entry = None

    def compile(self) -> None:
        if self._entry is None:
            library = host.load(self.source.text, self.source.name, HOST_FLAGS)
            entry = getattr(library, self.source.host_entry)
            p = ctypes.c_void_p
            entry.argtypes = [ctypes.c_longlong, p, p, p, ctypes.c_int, p, p, p, p, p,
                              ctypes.c_double, ctypes.c_double,
                              ctypes.c_double, ctypes.c_double, ctypes.c_int,
                              ctypes.c_longlong, ctypes.c_int, ctypes.c_int, p, p, p, p]
            entry.restype = ctypes.c_int
            self._entry = entry

    def check(self, lower, upper, point, data: Data, limits: Limits,
              record: bool = False) -> Verdicts:
        """record: also return the box of every state at every data time (and ignore
        the data's bounds): Verdicts.record (b, times, n, 2)."""
        self.compile()
        b = len(lower)
        n = self.source.n
        boxes = np.empty((b, len(data.times), n, 2)) if record else None
        verdict = np.empty(b, np.int8)
        steps = np.empty(b, np.int64)
        enclosures = np.empty(b, np.int64)
        arrays = [np.ascontiguousarray(a, dtype=t) for a, t in (
            (lower, np.float64), (upper, np.float64), (point, np.float64),
            (data.times, np.float64), (data.first, np.int32), (data.output, np.int32),
            (data.lower, np.float64), (data.upper, np.float64))]
        ptr = [a.ctypes.data_as(ctypes.c_void_p) if a.size else None for a in arrays]
        start = time.perf_counter()
        if b:
            self._entry(b, ptr[0], ptr[1], ptr[2], len(data.times), ptr[3], ptr[4], ptr[5],
                        ptr[6], ptr[7], limits.epsilon, limits.wide,
                        limits.max_step, limits.tolerance,
                        limits.max_halvings,
                        limits.max_steps, limits.span, limits.step_rule,
                        verdict.ctypes.data_as(ctypes.c_void_p),
                        steps.ctypes.data_as(ctypes.c_void_p),
                        enclosures.ctypes.data_as(ctypes.c_void_p),
                        boxes.ctypes.data_as(ctypes.c_void_p) if record else None)
        return Verdicts(verdict, steps, enclosures, time.perf_counter() - start, boxes)


class DeviceBuild:
    """A kernel source built for a GPU, and the inputs every launch shares (the point
    values and the data), uploaded once: what both GPU engines (this file's and
    persistent.py's) need."""

    def __init__(self, source: IntervalSource, device, block_size: int):
        self.source = source
        self.device = device
        self.block_size = block_size
        self._function = None
        self._static = None

    def compile(self) -> None:
        if self._function is None:
            module = self.device.compile(self.source.text, name=self.source.name,
                                         options=NVCC_OPTIONS)
            self._function = module.function(self.source.kernel)

    def upload(self, point, data: Data) -> None:
        """The inputs every launch shares, copied once."""
        self.release()
        self._static = [self.device.to_device(np.ascontiguousarray(a, dtype=t))
                        for a, t in ((point, np.float64), (data.times, np.float64),
                                     (data.first, np.int32), (data.output, np.int32),
                                     (data.lower, np.float64), (data.upper, np.float64))]

    def release(self) -> None:
        for buffer in self._static or ():
            buffer.free()
        self._static = None


class GpuEngine(DeviceBuild):
    """One thread per box, one launch per batch (the multi-kernel scheme)."""

    name = "gpu"

    def check(self, lower, upper, point, data: Data, limits: Limits,
              record: bool = False) -> Verdicts:
        self.compile()
        if self._static is None:
            self.upload(point, data)
        b = len(lower)
        device = self.device
        buffers = []
        try:
            lo = device.to_device(np.ascontiguousarray(lower, np.float64))
            buffers.append(lo)
            hi = device.to_device(np.ascontiguousarray(upper, np.float64))
            buffers.append(hi)
            verdict_buf = device.alloc(max(b, 1))
            steps_buf = device.alloc(8 * max(b, 1))
            enclosures_buf = device.alloc(8 * max(b, 1))
            buffers += [verdict_buf, steps_buf, enclosures_buf]
            shape = (b, len(data.times), self.source.n, 2)
            record_buf = device.alloc(8 * max(int(np.prod(shape)), 1)) if record else None
            if record_buf is not None:
                buffers.append(record_buf)
            point_buf, times, first, output, low, high = self._static
            args = [np.int64(b), lo, hi, point_buf, np.int32(len(data.times)), times, first,
                    output, low, high, np.float64(limits.epsilon),
                    np.float64(limits.wide), np.float64(limits.max_step),
                    np.float64(limits.tolerance),
                    np.int32(limits.max_halvings), np.int64(limits.max_steps),
                    np.int32(limits.span), np.int32(limits.step_rule), verdict_buf,
                    steps_buf, enclosures_buf, record_buf if record_buf is not None else np.uintp(0)]
            block = self.block_size
            timing = self._function.launch(((b + block - 1) // block,), (block,), args, 0)
            verdict = device.from_device(verdict_buf, (b,), np.int8)
            steps = device.from_device(steps_buf, (b,), np.int64)
            enclosures = device.from_device(enclosures_buf, (b,), np.int64)
            boxes = device.from_device(record_buf, shape, np.float64) if record else None
            return Verdicts(verdict, steps, enclosures, timing.ms / 1e3, boxes)
        finally:
            for buffer in buffers:
                buffer.free()
