"""The compiled host engine: the generated kernel source compiled as C++ for the CPU.

kernels/ssa.cu is written so that, without nvcc, `ssa_realisation` is plain host
code and `ssa_host_trajectories` runs realisations on every core with OpenMP. This
engine compiles that text with the system C++ compiler (g++ by default, or $CXX)
into a shared library through sbmlgpu.runtime.host (the compiler, OpenMP, the
cache beside the cubins, $SBMLGPU_EXTRA_CXXFLAGS) and calls it through ctypes: this
module holds only the signatures and the run wrapper.

Why: it is the very code the GPU runs (so CI, which has no GPU, executes and
checks it), and it is one to two orders of magnitude faster than the numpy engine,
which makes 10,000-run DSMTS cases a matter of seconds on a laptop.
"""

from __future__ import annotations

import ctypes

import numpy as np

from sbmlgpu.runtime import host

from .cpu import EngineOutput

#: The SSA kernel's own flag: no FMA contraction, so that the arithmetic is numpy's
#: (twin.py) and realisations are bit-identical to the numpy engine's.
FLAGS = ("-ffp-contract=off",)


def available() -> bool:
    """Whether a C++ compiler is there ($CXX, g++, c++, clang++)."""
    return host.find_compiler() is not None


def load_library(source: str, name: str = "ssa.cu") -> ctypes.CDLL:
    """The host build of `source` (core's cache; once per process and flags), with the
    ctypes signatures of its entry points."""
    library = host.load(source, name, FLAGS)
    library.ssa_host_trajectories.restype = ctypes.c_int
    library.ssa_host_trajectories.argtypes = [
        ctypes.c_ulonglong, ctypes.c_ulonglong, ctypes.c_long, ctypes.c_void_p,
        ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
        ctypes.c_void_p, ctypes.c_ulonglong, ctypes.c_int]
    library.ssa_host_threads.restype = ctypes.c_int
    library.ssa_host_threads.argtypes = [ctypes.c_int]
    return library


class HostEngine:
    """Runs batches through the compiled library; `threads` 0 means every core."""

    def __init__(self, source: str, precision: str, n_outputs: int, threads: int = 0,
                 name: str = "ssa.cu"):
        self.library = load_library(source, name)
        self.dtype = np.float64 if precision == "double" else np.float32
        self.n_outputs = n_outputs
        self.requested_threads = int(threads)
        self._threads: int | None = None

    @property
    def threads(self) -> int:
        """Threads the next run uses (1 in a child forked after OpenMP started)."""
        if not host.may_run_parallel():
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
