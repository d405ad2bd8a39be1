"""The generated kernel compiled for the host: the CPU path, and the integrators' test bench.

ode.cu is written as `__host__ __device__` code; with -DSBMLGPU_HOST_ENTRY a plain
C++ compiler (g++) builds it into a shared library whose C function
`sbmlgpu_ode_host` runs every member (OpenMP threads when available). The numbers
are those of the very code the GPU runs, so tests on a machine without a GPU
check the GPU's integrators against the CPU reference, and the CPU path of the
backend is the same method, not an imitation of it.

Libraries are cached on disk by the hash of source, flags and compiler version
(in $SBMLGPU_CACHE_DIR/host, else ~/.cache/sbmlgpu/host), written atomically.

$SBMLGPU_EXTRA_CXXFLAGS adds flags, read at every build: e.g. "-mfma
-ffp-contract=fast" rounds like nvcc, which contracts a*b + c into FMAs by default
(-std=c++14 alone does not contract), so GPU rounding can be checked on the host
(tests/test_ode_fma.py).
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import threading
from functools import lru_cache
from pathlib import Path

import numpy as np

from sbmlgpu.errors import DeviceError

from sbmlgpu.ode.codegen import KernelSource

log = logging.getLogger("sbmlgpu.ode")
COMPILE_TIMEOUT_S = 900
_BASE_FLAGS = ("-O2", "-std=c++14", "-shared", "-fPIC", "-DSBMLGPU_HOST_ENTRY", "-w")
EXTRA_FLAGS_ENV = "SBMLGPU_EXTRA_CXXFLAGS"
_lock = threading.Lock()
_loaded: dict[tuple[str, tuple[str, ...]], "HostKernel"] = {}


class HostCompileError(DeviceError):
    """The host compiler rejected a generated kernel (a bug: report it)."""


def host_compiler() -> str | None:
    """A C++ compiler: $CXX, else g++, c++ or clang++ from PATH; None if none."""
    for candidate in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    return None


@lru_cache(maxsize=4)
def _compiler_version(compiler: str) -> str:
    done = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=60)
    return done.stdout.strip()


@lru_cache(maxsize=4)
def _openmp_flags(compiler: str) -> tuple[str, ...]:
    """('-fopenmp',) when the compiler can build and link an OpenMP library."""
    with tempfile.TemporaryDirectory(prefix="sbmlgpu-omp-") as scratch:
        src = Path(scratch) / "omp.cpp"
        src.write_text("#include <omp.h>\nextern \"C\" int f(void){return omp_get_max_threads();}\n")
        done = subprocess.run([compiler, "-fopenmp", "-shared", "-fPIC", str(src), "-o",
                               str(Path(scratch) / "omp.so")], capture_output=True, timeout=120)
        return ("-fopenmp",) if done.returncode == 0 else ()


def cache_directory() -> Path:
    env = os.environ.get("SBMLGPU_CACHE_DIR")
    root = Path(env).expanduser() if env else Path.home() / ".cache" / "sbmlgpu"
    return root / "host"


def extra_flags() -> tuple[str, ...]:
    """The flags of $SBMLGPU_EXTRA_CXXFLAGS (split on whitespace), read now."""
    return tuple(os.environ.get(EXTRA_FLAGS_ENV, "").split())


def build(source: KernelSource, compiler: str | None = None) -> Path:
    """The shared library of `source` (compiled on a cache miss)."""
    compiler = compiler or host_compiler()
    if compiler is None:
        raise DeviceError("no C++ compiler found for the native CPU path (set $CXX, or use "
                          "--cpu-engine numpy)")
    flags = (*_BASE_FLAGS, *_openmp_flags(compiler), *extra_flags())
    key = hashlib.sha256("\0".join([source.text, *flags, _compiler_version(compiler)])
                         .encode()).hexdigest()[:32]
    directory = cache_directory()
    library = directory / f"{key}.so"
    if library.is_file():
        return library
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="sbmlgpu-host-") as scratch:
        src = Path(scratch) / "kernel.cpp"
        src.write_text(source.text, encoding="utf-8")
        out = Path(scratch) / "kernel.so"
        command = [compiler, *flags, "-x", "c++", str(src), "-o", str(out)]
        try:
            done = subprocess.run(command, capture_output=True, text=True,
                                  timeout=COMPILE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise HostCompileError(f"{compiler} ran longer than {COMPILE_TIMEOUT_S} s on "
                                   f"{source.name}") from None
        if done.returncode != 0 or not out.is_file():
            raise HostCompileError(f"{compiler} could not compile {source.name}:\n"
                                   f"{(done.stdout + done.stderr)[:6000]}")
        fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
        os.close(fd)
        shutil.copyfile(out, tmp)
        os.replace(tmp, library)
    return library


class HostKernel:
    """`run(...)`: the generated integrator over members on the host."""

    def __init__(self, source: KernelSource, library: Path):
        self.source = source
        self.dtype = np.float64 if source.precision == "double" else np.float32
        real = ctypes.c_double if source.precision == "double" else ctypes.c_float
        self._lib = ctypes.CDLL(str(library))
        f = self._lib.sbmlgpu_ode_host
        pointer = ctypes.c_void_p
        f.argtypes = [ctypes.c_longlong, pointer, pointer, ctypes.c_int, pointer, pointer,
                      pointer, real, real, real, real, real, ctypes.c_longlong,
                      ctypes.c_ulonglong, pointer, ctypes.c_ulonglong]
        f.restype = ctypes.c_int
        self._run = f
        size = self._lib.sbmlgpu_ode_host_real_size()
        if size != np.dtype(self.dtype).itemsize:
            raise DeviceError(f"{source.name}: real_t has {size} bytes on the host build, "
                              f"expected {np.dtype(self.dtype).itemsize}")

    def run(self, table: np.ndarray, times: np.ndarray, n_outputs: int, config: dict,
            members: np.ndarray | None = None, first_member: int = 0):
        """table: (varied, n) parameter columns. Returns (out (times, outputs, n),
        status (n,) int8, steps (n,) int32)."""
        table = np.ascontiguousarray(table, dtype=self.dtype)
        n = table.shape[1] if table.ndim == 2 and table.shape[0] else int(config["n"])
        times = np.ascontiguousarray(times, dtype=self.dtype)
        out = np.empty((len(times), n_outputs, n), dtype=self.dtype)
        status = np.empty(n, dtype=np.int8)
        steps = np.empty(n, dtype=np.int32)
        if members is not None:
            members = np.ascontiguousarray(members, dtype=np.uint64)
        if n:
            self._run(n, _ptr(table) if table.size else None, _ptr(times), len(times),
                      _ptr(out), _ptr(status), _ptr(steps), config["rtol"], config["atol"],
                      config["h0"], config["max_step"], config["dt"], int(config["max_steps"]),
                      int(config["seed"]) & (2**64 - 1),
                      None if members is None else _ptr(members), int(first_member))
        return out, status, steps


def _ptr(array: np.ndarray):
    return array.ctypes.data_as(ctypes.c_void_p)


def host_kernel(source: KernelSource) -> HostKernel:
    """The loaded host library of `source` (built and loaded once per process and set
    of extra flags: a plain and an FMA build of one source do not mix)."""
    key = (source.text, extra_flags())
    with _lock:
        if key not in _loaded:
            _loaded[key] = HostKernel(source, build(source))
        return _loaded[key]
