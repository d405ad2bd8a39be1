"""The GPU engine: compile the generated kernel per device, launch it per batch.

One thread per realisation; realisation `first_item + i` is keyed into Philox by its
global index, so a batch split (scheduler, several GPUs, MPI ranks) changes nothing
in any trajectory. Launch shapes: `block` threads per block from the options or
tuning.DEFAULT_BLOCK; the fat layout shrinks the block until its shared memory fits
the device (at least tuning.MIN_BLOCK threads, else a DeviceError that suggests
--layout thin).

Trajectories: the kernel writes out[(k * O + j) * n + i] (time k, output j,
realisation i; coalesced); sbmlgpu.runtime.layout.member_major turns that into
(realisations, times, outputs) on the device and copies it back in one block,
straight into the caller's `destination` rows when the engine computes in double.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from sbmlgpu.errors import DeviceError
from sbmlgpu.runtime.layout import member_major

from . import tuning
from .codegen import Variant
from .cpu import EngineOutput


@dataclass(frozen=True)
class LaunchShape:
    block: int
    shared_bytes: int  # dynamic, per block

    def grid(self, n: int) -> int:
        return max(1, -(-n // self.block))


def launch_shape(variant: Variant, per_thread_shared: int, requested_block: int,
                 device) -> LaunchShape:
    block = requested_block or tuning.DEFAULT_BLOCK[variant.layout]
    if variant.layout != "fat":
        return LaunchShape(block, 0)
    limit = device.properties.shared_memory_per_block_optin or \
        device.properties.shared_memory_per_block
    while block > tuning.MIN_BLOCK and block * per_thread_shared > limit:
        block -= 32
    if block * per_thread_shared > limit:
        raise DeviceError(
            f"the fat layout needs {per_thread_shared} bytes of shared memory per thread; "
            f"{device} allows {limit} per block, not enough for {tuning.MIN_BLOCK} threads: "
            f"use --layout thin")
    return LaunchShape(block, block * per_thread_shared)


class GpuEngine:
    def __init__(self, source: str, variant: Variant, n_states: int, n_reactions: int,
                 n_outputs: int, n_varied: int, block_size: int, flops_per_firing: float,
                 name: str = "ssa.cu"):
        self.source = source
        self.name = name  # the source's name (codegen.source_name): in compiler messages
        self.variant = variant
        self.n_states, self.n_reactions = n_states, n_reactions
        self.n_outputs, self.n_varied = n_outputs, n_varied
        self.block_size = block_size
        self.flops_per_firing = flops_per_firing
        self.real = np.float64 if variant.precision == "double" else np.float32
        self._modules: dict[int, object] = {}
        self._lock = threading.Lock()

    # -- per device ------------------------------------------------------------------
    def module(self, device):
        with self._lock:
            if device.index not in self._modules:
                self._modules[device.index] = device.compile(
                    self.source, options=("-O3",), name=self.name.removesuffix(".cu"))
            return self._modules[device.index]

    def shape(self, device) -> LaunchShape:
        per_thread = (self.n_states + self.n_reactions) * np.dtype(self.real).itemsize
        return launch_shape(self.variant, per_thread if self.variant.layout == "fat" else 0,
                            self.block_size, device)

    def bytes_per_item(self, n_times: int, trajectories: bool) -> int:
        real = np.dtype(self.real).itemsize
        scratch = (self.n_states + self.n_reactions) * real if self.variant.layout == "thin" else 0
        # trajectories: the kernel's output and member_major's scratch of the same size
        out = 2 * n_times * self.n_outputs * real if trajectories else 0
        return out + 4 + 4 + 8 + self.n_varied * real + scratch

    # -- launches ----------------------------------------------------------------------
    def run(self, device, seed: int, first_item: int, n: int, ptab: np.ndarray,
            times: np.ndarray, max_firings: int, profiler=None, summary=None,
            destination: np.ndarray | None = None):
        """Trajectories (summary None) or on-GPU statistics (summary: the
        sbmlgpu.schedule.ensemble.SummaryTarget whose shift and bins to use). Returns
        (EngineOutput, sums or None, kernel ms); sums are S1, S2 (K, O) float64,
        the counts (K, O) uint64 and the histograms (K, O, bins + 2) uint64 or None.

        Trajectories are (n, K, O) of the engine's real type: `destination` itself
        when it is a C-contiguous (n, K, O) array of that type (rows of the caller's
        float64 result), else a new array (float precision: the caller converts)."""
        shape = self.shape(device)
        grid = shape.grid(n)
        K, O = len(times), self.n_outputs
        buffers = []

        def put(array):
            buffers.append(device.to_device(np.ascontiguousarray(array)))
            return buffers[-1]

        def alloc(nbytes):
            buffers.append(device.alloc(int(nbytes)))
            return buffers[-1]

        try:
            with device.activate():
                ptab_b = put(np.asarray(ptab, self.real).reshape(self.n_varied, n))
                times_b = put(np.asarray(times, np.float64))
                status_b, why_b = alloc(4 * n), alloc(4 * n)
                firings_b = alloc(8 * n)
                real = np.dtype(self.real).itemsize
                scratch_b = alloc((self.n_states + self.n_reactions) * real * grid * shape.block
                                  if self.variant.layout == "thin" else 0)
                head = [np.uint64(seed), np.uint64(first_item), np.int32(n), ptab_b, times_b,
                        np.int32(K)]
                tail = [status_b, why_b, firings_b, np.uint64(max_firings), scratch_b]
                if summary is None:
                    out_b = alloc(K * O * n * real)
                    kernel = self.module(device).function("ssa_trajectories")
                    args = head + [out_b] + tail
                else:
                    bin_grid = summary.grid
                    bins = bin_grid.bins if bin_grid is not None else 0
                    lo = bin_grid.lo if bin_grid is not None else np.zeros(K * O)
                    inv_width = bin_grid.scale if bin_grid is not None else np.ones(K * O)
                    sums = [put(np.zeros((K, O))), put(np.zeros((K, O))),
                            put(np.zeros((K, O), np.uint64)),
                            put(np.zeros((K, O, bins + 2) if bins else 1, np.uint64))]
                    kernel = self.module(device).function("ssa_summary")
                    args = head + [put(np.asarray(summary.shift, np.float64).reshape(K, O)),
                                   sums[0], sums[1], sums[2],
                                   put(np.asarray(lo, np.float64).reshape(K, O)),
                                   put(np.asarray(inv_width, np.float64).reshape(K, O)),
                                   np.int32(bins), sums[3]] + tail
                started = profiler.clock() if profiler is not None else None
                timing = kernel.launch((grid,), (shape.block,), args,
                                       shared_bytes=shape.shared_bytes)
                status = device.from_device(status_b, (n,), np.int32)
                why = device.from_device(why_b, (n,), np.int32)
                firings = device.from_device(firings_b, (n,), np.uint64)
                if profiler is not None:
                    total = float(firings.sum())
                    profiler.record_launch(
                        kernel, timing, device, flops=self.flops_per_firing * total,
                        bytes=self._bytes(n, K, total, summary is None),
                        precision=self.variant.precision, start_s=started, firings=total,
                        realisations=n, layout=self.variant.layout,
                        method=self.variant.method)
                data, sums_host = None, None
                if summary is None:
                    data = member_major(device, out_b, n, (K, O), self.real,
                                        profiler=profiler, destination=destination)
                else:
                    sums_host = (device.from_device(sums[0], (K, O), np.float64),
                                 device.from_device(sums[1], (K, O), np.float64),
                                 device.from_device(sums[2], (K, O), np.uint64),
                                 device.from_device(sums[3], (K, O, bins + 2), np.uint64)
                                 if bins else None)
        finally:
            for b in buffers:
                b.free()
        return (EngineOutput(data, status.astype(np.int8), why, firings, None), sums_host,
                timing.ms)

    def _bytes(self, n: int, K: int, firings: float, trajectories: bool) -> float:
        """Bytes the kernel must move: outputs, per-member results, and for the thin
        layout the state and propensity traffic of each firing (about one read and
        one write of every value touched; an estimate, not a counter)."""
        real = np.dtype(self.real).itemsize
        moved = n * (16 + self.n_varied * real)
        if trajectories:
            moved += n * K * self.n_outputs * real
        if self.variant.layout == "thin":
            moved += firings * 2 * real * (self.n_reactions + 2)
        return float(moved)
