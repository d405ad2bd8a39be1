"""The GPU path of the SSA backend (gpu.py, the GPU branches of backend.py) on a fake
device, so that CI without a GPU exercises its Python side: buffers, argument order,
launch shapes, batches, the pilot and the on-GPU summary.

The fake device "compiles" the CUDA source as host C++ (the same text; host.py) and
its kernels call the host entry point; the summary kernel applies the device sink's
arithmetic (shifted sums, counts, the bin rule) to the host trajectories, and core's
transpose (sbmlgpu_member_major) is done in numpy. What it
cannot check -- PyCUDA itself, atomics, shared memory -- test_ssa_gpu.py checks on
the GPU machine."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from sbmlgpu.tasks import TimeCourse
from sbmlgpu.runtime.base import KernelAttributes
from sbmlgpu.plugins.ssa import host
from sbmlgpu.plugins.ssa.backend import SsaBackend
from sbmlgpu.plugins.ssa.options import SsaOptions
from sbmlgpu.profile import Profiler
from sbmlgpu.schedule import Scheduler

from .fakes import FakeDevice, FakeKernel, FakeModule, properties, real_type
from .test_ssa_model import small_dimerisation

pytestmark = pytest.mark.skipif(not host.available(), reason="no C++ compiler")


class SsaKernel(FakeKernel):
    """ssa_trajectories and ssa_summary: the host build of the same source, called
    with the GPU kernel's arguments; the summary's reduction in numpy."""

    def __init__(self, library, name: str, real, log: list):
        super().__init__(name, log=log, attributes=KernelAttributes(48, 0, 0, 1024))
        self.library, self.real = library, real

    def run(self, grid, block, args, shared_bytes):
        seed, first, n, ptab, times, K = args[:6]
        assert isinstance(seed, np.uint64) and isinstance(first, np.uint64)
        assert isinstance(n, np.int32) and isinstance(K, np.int32)
        assert grid[0] * block[0] >= n
        n, K = int(n), int(K)
        status, why, firings, max_firings, scratch = args[-5:]
        assert isinstance(max_firings, np.uint64)
        real = np.dtype(self.real).itemsize
        times_h = times.view(np.float64, K)
        if self.name == "ssa_trajectories":
            out = args[6]
            assert out.nbytes == K * (out.nbytes // (K * n * real)) * n * real
            O = out.nbytes // (K * n * real)
            target = out.view(self.real, K * O * n)
        else:
            shift, s1, s2, count, lo, inv_width, bins, hist = args[6:14]
            O = s1.nbytes // (8 * K)
            target = np.empty(K * O * n, self.real)
        self.library.ssa_host_trajectories(
            int(seed), int(first), n, _ptr(ptab.view(self.real)), _ptr(times_h), K,
            _ptr(target), _ptr(status.view(np.int32, n)), _ptr(why.view(np.int32, n)),
            _ptr(firings.view(np.uint64, n)), int(max_firings), 0)
        if self.name == "ssa_summary":
            values = target.reshape(K, O, n).astype(float)
            finite = np.isfinite(values)
            d = np.where(finite, values - shift.view(np.float64, K * O).reshape(K, O, 1), 0.0)
            s1.view(np.float64, K * O)[:] += d.sum(axis=-1).ravel()
            s2.view(np.float64, K * O)[:] += (d * d).sum(axis=-1).ravel()
            count.view(np.uint64, K * O)[:] += finite.sum(axis=-1).ravel().astype(np.uint64)
            bins = int(bins)
            if bins:
                pos = (values - lo.view(np.float64, K * O).reshape(K, O, 1)) * \
                    inv_width.view(np.float64, K * O).reshape(K, O, 1)
                b = np.where(pos < 0, 0, np.where(pos >= bins, bins + 1, 1 + np.floor(
                    np.where(finite, pos, 0)))).astype(int)
                h = hist.view(np.uint64, K * O * (bins + 2)).reshape(K, O, bins + 2)
                for k in range(K):
                    for o in range(O):
                        h[k, o] += np.bincount(b[k, o][finite[k, o]],
                                               minlength=bins + 2).astype(np.uint64)


def compile_ssa(device, source):
    """The CUDA source as host C++ (the same text; host.py)."""
    library = host.load_library(source)
    return FakeModule(["ssa_trajectories", "ssa_summary"],
                      lambda name: SsaKernel(library, name, real_type(source), device.launches))


class EmulatedDevice(FakeDevice):
    """`shared`: the device's opt-in shared memory per block."""

    def __init__(self, index: int = 0, shared: int = 227 * 1024, **kw):
        super().__init__(index, properties=properties(shared_memory_per_block_optin=shared),
                         compile=compile_ssa, **kw)


def _ptr(array):
    return array.ctypes.data_as(ctypes.c_void_p)


def _run(device, request, scheduler=None, **options):
    program = SsaBackend().compile(small_dimerisation(), SsaOptions(**options), device)
    scheduler = scheduler or Scheduler(devices=[device], progress=False)
    return program.run(request, scheduler, Profiler())


def _cpu(request, **options):
    program = SsaBackend().compile(small_dimerisation(), SsaOptions(cpu_engine="compiled",
                                                                    **options), None)
    return program.run(request, None, None)


@pytest.mark.parametrize("layout", ["register", "fat", "thin"])
def test_gpu_path_returns_the_cpu_realisations(layout):
    device = EmulatedDevice()
    request = TimeCourse(times=np.linspace(0, 10, 11), n=300, seed=3, progress=False)
    gpu = _run(device, request, layout=layout)
    assert gpu.metadata["engine"] == "gpu" and gpu.metadata["layout"] == layout
    assert np.array_equal(gpu.data, _cpu(request, layout=layout).data)
    name, grid, block, shared = device.launches[0]
    assert name == "ssa_trajectories" and grid[0] * block[0] >= 300
    assert (shared > 0) == (layout == "fat")


def test_gpu_path_batches_and_several_devices_change_nothing():
    request = TimeCourse(times=np.linspace(0, 10, 6), n=500, seed=9, progress=False)
    one = _run(EmulatedDevice(), request)
    devices = [EmulatedDevice(0), EmulatedDevice(1)]
    split = Scheduler(devices=devices, max_batch_items=96, progress=False)
    two = _run(devices[0], request, split)
    assert len(split.last_batches) >= 5
    assert {r.device_index for r in split.last_batches} <= {0, 1}
    assert np.array_equal(one.data, two.data)


def test_gpu_summary_uses_a_pilot_then_the_summary_kernel():
    device = EmulatedDevice()
    times = np.linspace(0, 10, 6)
    full = _run(device, TimeCourse(times=times, n=700, seed=4, progress=False))
    device.launches.clear()
    summ = _run(device, TimeCourse(times=times, n=700, seed=4, summary=True, progress=False),
                pilot=100)
    kinds = [entry[0] for entry in device.launches]
    assert kinds[0] == "ssa_trajectories" and "ssa_summary" in kinds
    assert summ.metadata["summary"]["pilot"] == 100
    np.testing.assert_allclose(summ.summary.mean, full.data.mean(axis=0), rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(summ.summary.sd, full.data.std(axis=0, ddof=1), rtol=1e-9,
                               atol=1e-9)
    assert np.all(np.asarray(summ.metadata["histograms"]["counts"]).sum(axis=-1) == 700)


def test_an_allocation_the_device_refuses_halves_the_batch_and_changes_nothing():
    device = EmulatedDevice(alloc_limit=20_000)  # far less than a batch of 300 members needs
    request = TimeCourse(times=np.linspace(0, 10, 11), n=300, seed=3, progress=False)
    scheduler = Scheduler(devices=[device], progress=False)
    gpu = _run(device, request, scheduler)
    refused = scheduler.last_batches[0].out_of_memory_sizes
    assert refused and all(r.size < min(refused) for r in scheduler.last_batches)
    assert sum(r.size for r in scheduler.last_batches) == 300
    assert np.array_equal(gpu.data, _cpu(request).data)


def test_fat_layout_shrinks_its_block_to_the_shared_memory():
    device = EmulatedDevice(shared=40 * 7 * 8)  # room for 40 threads of 7 doubles
    request = TimeCourse(times=np.linspace(0, 1, 3), n=50, seed=1, progress=False)
    _run(device, request, layout="fat")
    _, _, block, shared = device.launches[0]
    assert block[0] == 32 and shared == 32 * 7 * 8
    from sbmlgpu.errors import DeviceError

    with pytest.raises(DeviceError, match="layout thin"):
        _run(EmulatedDevice(shared=100), request, layout="fat")


def test_profiler_gets_the_firings_of_each_launch():
    device = EmulatedDevice()
    program = SsaBackend().compile(small_dimerisation(), SsaOptions(), device)
    profiler = Profiler()
    result = program.run(TimeCourse(times=np.linspace(0, 10, 3), n=64, seed=1, progress=False),
                         Scheduler(devices=[device], progress=False), profiler)
    record, transpose = profiler.records
    assert record.meta["firings"] == result.metadata["firings"] > 0
    assert record.flops > 0 and record.kernel == "ssa_trajectories"
    assert transpose.kernel == "sbmlgpu_member_major"


@pytest.mark.parametrize("precision", ["double", "float"])
def test_trajectories_go_from_the_device_into_the_rows_of_the_result(precision):
    """Double: each batch's download fills its rows of the result itself; float: a
    float32 block that the caller converts. Either way the CPU's numbers."""
    devices = [EmulatedDevice(0), EmulatedDevice(1)]
    request = TimeCourse(times=np.linspace(0, 10, 5), n=200, seed=7, progress=False)
    split = Scheduler(devices=devices, max_batch_items=64, progress=False)
    gpu = _run(devices[0], request, split, precision=precision)
    assert gpu.data.dtype == np.float64 and gpu.data.shape[:2] == (200, 5)
    assert np.array_equal(gpu.data, _cpu(request, precision=precision).data, equal_nan=True)
    blocks = [out for d in devices for out in d.downloads if out.ndim == 3]
    assert sum(len(out) for out in blocks) == 200 and len(blocks) >= 4
    assert all(np.shares_memory(out, gpu.data) == (precision == "double") for out in blocks)
    assert all(out.dtype == (np.float64 if precision == "double" else np.float32)
               for out in blocks)


def test_trajectories_spilled_to_a_file_equal_those_in_memory(tmp_path):
    request = TimeCourse(times=np.linspace(0, 10, 4), n=150, seed=5, progress=False)
    split = Scheduler(devices=[EmulatedDevice()], max_batch_items=64, progress=False)
    spilled = _run(split.devices[0], request, split, trajectory_dir=str(tmp_path))
    path = spilled.metadata["trajectory_file"]
    assert path.startswith(str(tmp_path))
    in_memory = _run(EmulatedDevice(), request).data
    assert np.array_equal(np.asarray(spilled.data), in_memory)
    assert np.array_equal(np.load(path), in_memory)
    assert all(isinstance(out, np.memmap) for out in split.devices[0].downloads
               if out.ndim == 3)  # rows of the file itself


def test_bytes_per_item_counts_the_transpose_scratch():
    from sbmlgpu.plugins.ssa.codegen import Variant
    from sbmlgpu.plugins.ssa.gpu import GpuEngine

    for precision, size in (("double", 8), ("float", 4)):
        engine = GpuEngine("", Variant("register", "full", "direct", precision), 3, 4, 2, 1,
                           0, 1.0)
        # the kernel's (times, outputs, n) output and member_major's scratch
        assert engine.bytes_per_item(10, True) - engine.bytes_per_item(10, False) == \
            2 * 10 * 2 * size
