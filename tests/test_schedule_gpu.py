"""The scheduler on real GPUs: forced out-of-memory retry, several GPUs, MPI ranks.

Run on the GPU machine: `pytest -m gpu tests/test_schedule_gpu.py`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sbmlgpu.runtime.base import OutOfDeviceMemory
from sbmlgpu.schedule import Scheduler

from .gpu_scripts.fill_items import fill_work

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def devices(gpu_devices):
    return gpu_devices


def test_forced_out_of_memory_retry_on_a_real_device(devices):
    device = devices[0]
    huge_per_item = 1 << 30  # allocate 1 GiB per item: a batch of 1024 cannot fit
    tried = []

    def work(dev, start, stop):
        tried.append(stop - start)
        with dev.activate():
            scratch = dev.alloc(huge_per_item * (stop - start))  # OutOfDeviceMemory when too big
            scratch.free()
        return fill_work(dev, start, stop)

    # the planner is told 8 bytes per item, so it plans one batch of everything,
    # and only the real allocation shows that it does not fit
    scheduler = Scheduler(devices=[device], progress=False)
    out = scheduler.map_batches(work, 1024, bytes_per_item=8)
    assert np.array_equal(out, 2.0 * np.arange(1024) + 1.0)
    assert tried[0] == 1024 and min(tried) < 1024  # it failed, halved, and finished
    with device.activate():
        with pytest.raises(OutOfDeviceMemory):
            device.alloc(1 << 50)


def test_batches_spread_over_all_gpus_in_item_order(devices):
    if len(devices) < 2:
        pytest.skip(f"needs 2 GPUs, found {len(devices)}")
    scheduler = Scheduler(devices=devices, max_batch_items=50_000, progress=False)
    n = 1_000_000
    out = scheduler.map_batches(fill_work, n, bytes_per_item=8)
    assert np.array_equal(out, 2.0 * np.arange(n) + 1.0)
    used = {index for index, batches in scheduler.batches_by_device().items() if batches}
    assert len(used) == len(devices), scheduler.batches_by_device()


@pytest.mark.parametrize("mode", ["static", "dynamic"])
def test_mpi_run_with_two_ranks(devices, tmp_path, mode):
    pytest.importorskip("mpi4py")
    launcher = shutil.which("mpirun") or shutil.which("mpiexec")
    if launcher is None:
        pytest.skip("no mpirun/mpiexec on this machine")
    script = Path(__file__).parent / "gpu_scripts" / "fill_items.py"
    out = tmp_path / "mpi.json"
    cmd = [launcher, "-n", "2"]
    version = subprocess.run([launcher, "--version"], capture_output=True, text=True).stdout
    if "Open MPI" in version or "OpenRTE" in version:
        cmd += ["--allow-run-as-root", "--oversubscribe"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run(cmd + [sys.executable, str(script), str(out), mode], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    assert report["ok"] and report["ranks"] == 2
    if mode == "static":  # each rank gets its block; in dynamic mode a rank that
        # starts late may find the queue already drained, which is the point of it
        assert all(n > 0 for n in report["batches_by_rank"]), report


#: the run_queue test's kernel (new CUDA text: compiled on the CPU by test_schedule_queue.py)
WIDTHS_SOURCE = r"""
/* width[i] = hi - lo of interval i, given as (lo, hi) pairs */
extern "C" __global__ void sbmlgpu_widths(int n, const double* bounds, double* width)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) width[i] = bounds[2 * i + 1] - bounds[2 * i];
}
"""


def bisect_on_gpu(device, intervals, eps=1 / 64):
    """A branch-and-bound step on the GPU: the widths come from a kernel on a stream,
    back through pinned staging; wider than eps -> split in two."""
    from sbmlgpu.runtime import download_staged

    kernel = device.compile(WIDTHS_SOURCE, name="widths").function("sbmlgpu_widths")
    n = len(intervals)
    stream = device.stream()
    bounds = device.alloc(16 * n)
    width = device.alloc(8 * n)
    stream.upload(bounds, np.asarray(intervals, dtype=np.float64))
    kernel.launch_async(((n + 127) // 128,), (128,), [np.int32(n), bounds, width],
                        stream=stream)
    widths = download_staged(device, width, np.empty(n), stream=stream)
    children = [[(lo, (lo + hi) / 2), ((lo + hi) / 2, hi)] if w > eps else []
                for (lo, hi), w in zip(intervals, widths)]
    return list(widths), children


def test_run_queue_on_every_gpu_matches_the_host(devices):
    starts = [(float(i), float(i) + 1.0) for i in range(8)]
    on_gpus = Scheduler(devices=devices, max_batch_items=64, progress=False).run_queue(
        bisect_on_gpu, starts, ordered=True)
    assert len(on_gpus) == 8 * 127
    for done in on_gpus:
        lo, hi = done.item
        assert done.result == hi - lo

    def bisect_on_host(device, intervals):
        assert device is None
        widths = [hi - lo for lo, hi in intervals]
        return widths, [[(lo, (lo + hi) / 2), ((lo + hi) / 2, hi)] if w > 1 / 64 else []
                        for (lo, hi), w in zip(intervals, widths)]

    on_host = Scheduler(progress=False).run_queue(bisect_on_host, starts, ordered=True)
    assert [(d.id, d.item, d.result) for d in on_gpus] == \
        [(d.id, d.item, d.result) for d in on_host]
