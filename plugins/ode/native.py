"""The generated kernel compiled for the host: the CPU path, and the integrators' test bench.

ode.cu is written as `__host__ __device__` code; with -DSBMLGPU_HOST_ENTRY a plain
C++ compiler (g++) builds it into a shared library whose C function
`sbmlgpu_ode_host` runs every member (OpenMP threads when available). The numbers
are those of the very code the GPU runs, so tests on a machine without a GPU
check the GPU's integrators against the CPU reference, and the CPU path of the
backend is the same method, not an imitation of it.

Building, caching and loading are core's (sbmlgpu.runtime.host: the compiler, the
OpenMP probe, $SBMLGPU_EXTRA_CXXFLAGS, the cache in $SBMLGPU_CACHE_DIR/host); this
module adds the ODE kernel's flags and the ctypes signature of its entry point.
$SBMLGPU_EXTRA_CXXFLAGS="-mfma -ffp-contract=fast" rounds like nvcc, which
contracts a*b + c into FMAs by default, so GPU rounding can be checked on the host
(tests/test_ode_fma.py).
"""

from __future__ import annotations

import ctypes

import numpy as np

from sbmlgpu.errors import DeviceError
from sbmlgpu.runtime import host
from sbmlgpu.runtime.host import EXTRA_FLAGS_ENV, HostCompileError  # noqa: F401 (re-exported)

from sbmlgpu.ode.kernel_source import KernelSource

#: The ODE kernel's own flags: its host entry point, and no warnings (the generated
#: code has unused parameters and variables by design).
FLAGS = ("-DSBMLGPU_HOST_ENTRY", "-w")
#: $CXX, else g++, c++ or clang++; None without one (the numpy engine then).
host_compiler = host.find_compiler


class HostKernel:
    """`run(...)`: the generated integrator over members on the host."""

    def __init__(self, source: KernelSource, library: ctypes.CDLL):
        self.source = source
        self.dtype = np.float64 if source.precision == "double" else np.float32
        real = ctypes.c_double if source.precision == "double" else ctypes.c_float
        self._lib = library
        f = self._lib.sbmlgpu_ode_host
        pointer = ctypes.c_void_p
        argtypes = [ctypes.c_longlong, pointer, pointer, ctypes.c_int, pointer, pointer,
                      pointer, real, real, real, real, real, ctypes.c_longlong,
                      ctypes.c_ulonglong, pointer, ctypes.c_ulonglong,
                      ctypes.c_longlong, ctypes.c_longlong,  # the limits (limits.cuh)
                      ctypes.c_longlong]  # the member-times row (limits.cuh)
        if source.history_reals:  # delay(): the members' ring of history nodes (delay.cuh)
            argtypes.append(pointer)
        # set once, whole: ctypes reads the converters at assignment (an argument appended
        # to f.argtypes later has none, and an int address would pass as a C int)
        f.argtypes = argtypes
        f.restype = ctypes.c_int
        self._run = f
        # the refill kernel's schedule (lanes in turns on one thread), where generated
        self._refill = getattr(self._lib, "sbmlgpu_ode_refill_host", None)
        if self._refill is not None:
            self._refill.argtypes = argtypes + [pointer, ctypes.c_longlong]
            self._refill.restype = ctypes.c_int
        # a member call's stop request (limits.cuh's ode_host_stop), per calling thread
        self._stop_on = self._lib.sbmlgpu_ode_host_stop_on
        self._stop_on.argtypes = [pointer]
        self._stop_on.restype = None
        size = self._lib.sbmlgpu_ode_host_real_size()
        if size != np.dtype(self.dtype).itemsize:
            raise DeviceError(f"{source.name}: real_t has {size} bytes on the host build, "
                              f"expected {np.dtype(self.dtype).itemsize}")

    def run(self, table: np.ndarray, times: np.ndarray, n_outputs: int, config: dict,
            members: np.ndarray | None = None, first_member: int = 0,
            history: np.ndarray | None = None, lanes: int = 0,
            stop: np.ndarray | None = None):
        """table: (varied, n) parameter columns. Returns (out (times, outputs, n),
        status (n,) int8, steps (n,) int32). `history`: a delay() kernel's ring for
        the n members (source.history_buffer_reals(n) reals of the real type, laid
        out as templates/delay.cuh says; default: a new one), which the caller may
        read afterwards. `lanes` > 0: the GPU refill kernel's schedule instead, that
        many lanes taking members from a queue a step per turn on one thread (the
        results must be the same; for tests of the lanes without a GPU). `stop`: an
        int32 array of one element that another thread may set nonzero to stop the
        run's members (status time_limit, checked every few steps); for a run of one
        member, whose call stays on the calling thread."""
        table = np.ascontiguousarray(table, dtype=self.dtype)
        n = table.shape[1] if table.ndim == 2 and table.shape[0] else int(config["n"])
        times = np.ascontiguousarray(times, dtype=self.dtype)
        # the output times, then the fixed parameters the kernel reads at launch
        launch_times = np.ascontiguousarray(self.source.launch_times(times), dtype=self.dtype)
        out = np.empty((len(times), n_outputs, n), dtype=self.dtype)
        status = np.empty(n, dtype=np.int8)
        steps = np.empty(n, dtype=np.int32)
        if members is not None:
            members = np.ascontiguousarray(members, dtype=np.uint64)
        # delay(): n members' history nodes, laid out as on the GPU (written before read)
        ring = None
        if self.source.history_reals and n:
            ring = history if history is not None else \
                np.empty(self.source.history_buffer_reals(n), dtype=self.dtype)
            if ring.dtype != self.dtype or not ring.flags.c_contiguous \
                    or ring.size < self.source.history_buffer_reals(n):
                raise DeviceError(f"{self.source.name}: the history ring for {n} members "
                                  f"needs {self.source.history_buffer_reals(n)} contiguous "
                                  f"{np.dtype(self.dtype).name}, got {ring.size} "
                                  f"{ring.dtype.name}")
        ring_arg = (_ptr(ring),) if ring is not None else ()  # `ring` lives past the call
        queue = ()
        run = self._run
        if lanes:
            if self._refill is None:
                raise DeviceError(f"{self.source.name} has no refill entry point")
            if int(lanes) < 1:
                raise ValueError(f"lanes must be at least 1, not {lanes}")
            run, queue = self._refill, (_ptr(next_member := np.zeros(1, np.uint64)), int(lanes))
        if stop is not None:
            if stop.dtype != np.int32 or stop.size != 1 or n != 1 or lanes:
                raise ValueError("stop is an int32 array of one element, for one member")
            self._stop_on(_ptr(stop))
        try:
            failed = run(n, _ptr(table) if table.size else None, _ptr(launch_times), len(times),
                         _ptr(out), _ptr(status), _ptr(steps), config["rtol"], config["atol"],
                         config["h0"], config["max_step"], config["dt"],
                         int(config["max_steps"]), int(config["seed"]) & (2**64 - 1),
                         None if members is None else _ptr(members), int(first_member),
                         int(config.get("max_interval_steps", 0)),
                         int(config.get("time_limit_ns", 0)),
                         int(config.get("times_row", -1)), *ring_arg, *queue) if n else 0
        finally:
            if stop is not None:
                self._stop_on(None)
        if failed:  # only the lanes' schedule can fail: its memory
            raise DeviceError(f"{self.source.name}: the lanes' memory could not be had")
        return out, status, steps


def _ptr(array: np.ndarray) -> int:
    """The address of `array`'s data (the argtypes say c_void_p; an int converts at
    the call, ~20x cheaper than ctypes.cast: a one-member run pays it four times). The
    caller keeps the array alive for the call."""
    return array.ctypes.data


def host_kernel(source: KernelSource) -> HostKernel:
    """The host build of `source`, loaded (built and loaded once per process and set
    of flags: a plain and an FMA build of one source do not mix)."""
    return HostKernel(source, host.load(source.text, source.name, FLAGS))


def host_library(source: KernelSource):
    """The path of the host build of `source` (built on a cache miss): what the model
    cache records so that a later process loads it without probing the compiler."""
    return host.build(source.text, source.name, FLAGS)
