"""A real GPU workload for scheduler tests: each item i gets 2*i + 1 from a kernel.

Run directly (also under mpirun) to check a multi-rank run:
    mpirun -n 2 python tests/gpu_scripts/fill_items.py OUT.json [dynamic|static]
Rank 0 writes {"ok": bool, "ranks": n, "items": n, "batches_by_rank": ...}.
"""

from __future__ import annotations

import json
import sys

import numpy as np

SOURCE = r"""
extern "C" __global__ void fill(double* out, long long start, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0 * (double)(start + i) + 1.0;
}
"""


def fill_work(device, start: int, stop: int) -> np.ndarray:
    n = stop - start
    with device.activate():
        kernel = device.compile(SOURCE, name="fill").function("fill")
        out = device.alloc(8 * n)
        kernel.launch(((n + 255) // 256, 1, 1), (256, 1, 1), [out, np.int64(start), np.int32(n)])
        host = device.from_device(out, (n,), np.float64)
        out.free()
    return host


def main(path: str, mode: str = "dynamic", n_items: int = 1_000_003) -> int:
    from sbmlgpu.runtime import get_devices
    from sbmlgpu.schedule import Scheduler

    scheduler = Scheduler(devices=get_devices(), mpi=True, mpi_mode=mode,
                          max_batch_items=100_000, progress=False)
    result = scheduler.map_batches(fill_work, n_items, bytes_per_item=8)
    if scheduler.is_root:  # the root holds every rank's batch records
        by_rank = [sum(1 for b in scheduler.last_batches if b.rank == r)
                   for r in range(scheduler.size)]
        expected = 2.0 * np.arange(n_items) + 1.0
        ok = result is not None and np.array_equal(result, expected)
        with open(path, "w") as f:
            json.dump({"ok": bool(ok), "ranks": scheduler.size, "items": n_items,
                       "batches_by_rank": by_rank}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
