"""The compiled host engine: the generated kernel source compiled as C++ for the CPU.

kernels/ssa.cu is written so that, without nvcc, `ssa_realisation` is plain host
code and `ssa_host_trajectories` runs realisations on every core with OpenMP. This
engine compiles that text with the system C++ compiler (g++ by default, or $CXX)
into a shared library, caches it beside the cubins, and calls it through ctypes.

Why: it is the very code the GPU runs (so CI, which has no GPU, executes and
checks it), and it is one to two orders of magnitude faster than the numpy engine,
which makes 10,000-run DSMTS cases a matter of seconds on a laptop.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from functools import lru_cache
from pathlib import Path

import numpy as np

from sbmlgpu.errors import DeviceError
from sbmlgpu.runtime.cache import default_directory

from .cpu import EngineOutput

#: Flags: optimise, no FMA contraction (so the arithmetic is numpy's, see twin.py),
#: OpenMP for the cores.
CXX_FLAGS = ("-x", "c++", "-std=c++14", "-O2", "-ffp-contract=off", "-fopenmp", "-shared",
             "-fPIC")
COMPILE_TIMEOUT_S = 600


class HostCompileError(DeviceError):
    """The C++ compiler rejected a generated kernel (a bug in the SSA backend)."""


def compiler() -> str | None:
    """$CXX, else g++, c++ or clang++ from PATH; None if there is none."""
    for name in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def available() -> bool:
    return compiler() is not None


@lru_cache(maxsize=4)
def _compiler_version(path: str) -> str:
    done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    return done.stdout.strip()


_load_lock = threading.Lock()
_loaded: dict[str, ctypes.CDLL] = {}
# The process that started OpenMP threads. libgomp cannot start threads again in a
# child forked after that (the child would hang), so forked children run serially.
_threads_started_in: list[int] = []


def _may_run_parallel() -> bool:
    pid = os.getpid()
    if not _threads_started_in:
        _threads_started_in.append(pid)
    return _threads_started_in[0] == pid


def load_library(source: str) -> ctypes.CDLL:
    """Compile `source` (through the on-disk cache) and load it."""
    cxx = compiler()
    if cxx is None:
        raise DeviceError("no C++ compiler found ($CXX, g++, c++, clang++) for the compiled "
                          "CPU engine; use --cpu-engine numpy")
    key = hashlib.sha256("\0".join([source, _compiler_version(cxx), *CXX_FLAGS])
                         .encode()).hexdigest()
    with _load_lock:
        if key in _loaded:
            return _loaded[key]
        path = default_directory() / "host" / f"{key}.so"
        if not path.is_file():
            _compile(cxx, source, path)
        library = ctypes.CDLL(str(path))
        library.ssa_host_trajectories.restype = ctypes.c_int
        library.ssa_host_trajectories.argtypes = [
            ctypes.c_ulonglong, ctypes.c_ulonglong, ctypes.c_long, ctypes.c_void_p,
            ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
            ctypes.c_void_p, ctypes.c_ulonglong, ctypes.c_int]
        library.ssa_host_threads.restype = ctypes.c_int
        library.ssa_host_threads.argtypes = [ctypes.c_int]
        _loaded[key] = library
        return library


def _compile(cxx: str, source: str, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="sbmlgpu-host-") as scratch:
        src = Path(scratch) / "ssa.cpp"
        out = Path(scratch) / "ssa.so"
        src.write_text(source, encoding="utf-8")
        try:
            done = subprocess.run([cxx, *CXX_FLAGS, "-o", str(out), str(src)],
                                  capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise HostCompileError(f"{cxx} ran longer than {COMPILE_TIMEOUT_S} s") from None
        if done.returncode != 0 or not out.is_file():
            raise HostCompileError(f"{cxx} could not compile the SSA kernel as host code:\n"
                                   f"{(done.stdout + done.stderr).strip()[:6000]}")
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".so")
        os.close(fd)
        shutil.copyfile(out, tmp)
        os.replace(tmp, path)


class HostEngine:
    """Runs batches through the compiled library; `threads` 0 means every core."""

    def __init__(self, source: str, precision: str, n_outputs: int, threads: int = 0):
        self.library = load_library(source)
        self.dtype = np.float64 if precision == "double" else np.float32
        self.n_outputs = n_outputs
        self.requested_threads = int(threads)
        self._threads: int | None = None

    @property
    def threads(self) -> int:
        """Threads the next run uses (1 in a child forked after OpenMP started)."""
        if not _may_run_parallel():
            return 1
        if self._threads is None:
            self._threads = self.library.ssa_host_threads(self.requested_threads)
        return self._threads

    def run(self, seed: int, first_item: int, n: int, ptab: np.ndarray, times: np.ndarray,
            max_firings: int = 0) -> EngineOutput:
        times = np.ascontiguousarray(times, dtype=np.float64)
        K, O = len(times), self.n_outputs
        ptab = np.ascontiguousarray(ptab, dtype=self.dtype).reshape(-1, n) if n else \
            np.zeros((0, 0), self.dtype)
        out = np.empty((K, O, n), self.dtype)
        status = np.zeros(n, np.int32)
        why = np.zeros(n, np.int32)
        firings = np.zeros(n, np.uint64)
        if n:
            parallel = int(self.threads > 1)
            self.library.ssa_host_trajectories(
                seed, first_item, n, _ptr(ptab), _ptr(times), K, _ptr(out), _ptr(status),
                _ptr(why), _ptr(firings), int(max_firings), parallel)
        data = np.ascontiguousarray(out.transpose(2, 0, 1), dtype=np.float64)
        return EngineOutput(data, status.astype(np.int8), why, firings)


def _ptr(array: np.ndarray):
    return array.ctypes.data_as(ctypes.c_void_p)
