"""The dbn backend over several GPUs, on fake devices whose kernels are the generated
kernels' host builds (the same text, the same entry points' arguments): each device
runs an equal share of the trajectories with its own engine, count buffer and kept
values, and the counts are those of one device and of the CPU path, bit for bit,
whatever the split. The same on real GPUs: tests/test_dbn_gpu.py."""

from __future__ import annotations

import ctypes
import threading

import numpy as np
import pytest

import sbmlgpu
from sbmlgpu import runtime
from sbmlgpu.errors import DeviceError
from sbmlgpu.plugins.dbn import program as dbn_program
from sbmlgpu.plugins.dbn.engines import HOST_FLAGS
from sbmlgpu.runtime import host

from .dbn_recount import dense
from sbmlgpu.runtime.base import Module

from .fakes import FakeDevice, FakeDriver, FakeKernel, HostBuffer
from .shared_data import ROOT
from .test_dbn_backend import BLOW_UP, LV_SAMPLES

LV = ROOT / "sbml_models" / "lotka_volterra.xml"

def _c_argument(value):
    """A GPU kernel argument as the host entry point takes it."""
    if isinstance(value, HostBuffer):
        return ctypes.c_void_p(value.ptr)
    if isinstance(value, np.uintp):
        return ctypes.c_void_p(int(value) or None)
    for numpy_type, c_type in ((np.int64, ctypes.c_longlong), (np.int32, ctypes.c_int),
                               (np.uint64, ctypes.c_ulonglong), (np.uint32, ctypes.c_uint),
                               (np.float64, ctypes.c_double), (np.float32, ctypes.c_float)):
        if isinstance(value, numpy_type):
            return c_type(value.item())
    raise TypeError(f"a kernel argument of type {type(value).__name__}")


class HostBuilt(FakeKernel):
    """A generated kernel run by its host entry point (`<entry>_host`, OpenMP over the
    members), with the GPU launch's arguments; `fail` raises instead."""

    def __init__(self, name: str, library, log: list, fail: bool = False):
        super().__init__(name, log=log)
        host_name = name + "_host"
        if not hasattr(library, host_name):  # an integrating kernel: <entry>_<method>
            host_name = name.rsplit("_", 1)[0] + "_host"
        # a function object of its own (library[...] is not cached): the CPU path sets
        # argtypes on the cached one, and these arguments are typed one by one
        self.entry = library[host_name]
        self.entry.restype = ctypes.c_int
        self.fail = fail

    def run(self, grid, block, args, shared_bytes) -> None:
        if self.fail:
            raise DeviceError("the kernel failed (a test's fault)")
        self.entry(*[_c_argument(a) for a in args])


class HostBuiltModule(Module):
    def __init__(self, library, device: FakeDevice, fail):
        self.library, self.device, self.fail = library, device, fail

    def function(self, name: str) -> HostBuilt:
        return HostBuilt(name, self.library, self.device.launches, self.fail(name))


def fake_gpus(count: int, fail_on: int | None = None, fail_kernel: str = "",
              free: list[int] | None = None) -> list[FakeDevice]:
    """`count` fake GPUs running the host builds; the kernels of GPU `fail_on` whose
    names contain `fail_kernel` fail; `free`: each GPU's free memory."""
    def build(device, source):
        return HostBuiltModule(host.load(source, "dbn_fake_gpu", HOST_FLAGS), device,
                               lambda name: device.index == fail_on and fail_kernel in name)

    return [FakeDevice(i, compile=build, **({"free": free[i]} if free else {}))
            for i in range(count)]


def lv(device, n=1500, **kw):
    settings = dict(ensemble=n, sample=LV_SAMPLES, slices=8, slice_time=0.5, steps=20,
                    seed=0)
    settings.update(kw)
    return sbmlgpu.dbn(LV, device=device, progress=False, **settings)


@pytest.fixture
def gpus(monkeypatch):
    def install(count: int, **kw) -> list[FakeDevice]:
        devices = fake_gpus(count, **kw)
        monkeypatch.setattr(runtime, "get_driver", lambda: FakeDriver(devices))
        return devices
    return install


@pytest.fixture(scope="module")
def on_the_cpu():
    return lv("cpu")


def _same_counts(a, b):
    assert a.variables == b.variables
    np.testing.assert_array_equal(a.edges, b.edges)
    for v in a.variables:
        np.testing.assert_array_equal(dense(a, v), dense(b, v), err_msg=v)
    np.testing.assert_array_equal(a.counted, b.counted)


@pytest.mark.parametrize("count", [1, 2, 3])
def test_every_split_counts_what_the_cpu_path_counts(gpus, on_the_cpu, count):
    devices = gpus(count)
    r = lv(list(range(count)))
    _same_counts(r, on_the_cpu)
    assert r.metadata["devices"] == count and r.metadata["integrations"] == 1
    shares = r.metadata["trajectories_per_device"]
    assert sum(shares) == 1500 and max(shares) - min(shares) <= 1
    for device in devices:  # each device ran its share, on a thread of its own
        assert any(name.endswith("_replay") for name, *_ in device.launches), device
    if count > 1:
        main = threading.get_ident()
        assert all(d.activating_threads - {main} for d in devices)


def test_two_integrations_and_sparse_counts_split_alike(gpus, on_the_cpu, monkeypatch):
    gpus(2)
    sparse = lv([0, 1], options={"max_dense_rows": 5, "batch": 300})
    assert sparse.metadata["sparse_variables"] == ["x1", "x2"]
    _same_counts(sparse, on_the_cpu)
    monkeypatch.setattr(dbn_program, "VALUES_MEMORY_SHARE", 0.0)  # nothing kept
    twice = lv([0, 1], options={"batch": 256})
    assert twice.metadata["integrations"] == 2
    _same_counts(twice, on_the_cpu)


@pytest.mark.parametrize("given_ranges", [True, False])
def test_failed_trajectories_on_any_device_are_reported_and_never_counted(
        gpus, tmp_path, given_ranges):
    """X = 1/(1 - k t): k > 1 blows up before t = 1. With ranges given, failed members
    are integrated again with weight -1 on their device; without, the replay of the
    kept values skips them."""
    path = tmp_path / "blow_up.xml"
    path.write_text(BLOW_UP)
    settings = dict(ensemble=400, sample={"k": "uniform:0.2:2"}, slices=4,
                    slice_time=0.25, steps=50, progress=False)
    if given_ranges:
        settings["ranges"] = {"X": (0.0, 6.0)}
    cpu = sbmlgpu.dbn(path, device="cpu", **settings)
    gpus(2)
    split = sbmlgpu.dbn(path, device=[0, 1], **settings)
    failed = cpu.metadata["failed_trajectories"]
    assert 50 < failed < 350
    assert split.metadata["failed_trajectories"] == failed
    assert split.metadata["failed_members"] == cpu.metadata["failed_members"]
    assert split.metadata["failed_status"] == cpu.metadata["failed_status"]
    _same_counts(split, cpu)


def test_more_devices_than_trajectories_uses_one_per_trajectory(gpus):
    gpus(3)
    r = lv([0, 1, 2], n=2, ranges={"x1": (0, 40), "x2": (0, 40), "p2": (0.01, 0.03)})
    assert r.metadata["devices"] == 2 and r.metadata["trajectories_per_device"] == [1, 1]


def test_a_share_that_cannot_keep_its_values_integrates_twice_alone(gpus, on_the_cpu):
    """GPU 1 has too little memory for its share's values: it integrates again while
    GPU 0 replays what it kept; the counts are the same."""
    devices = gpus(2, free=[1 << 30, 200_000])
    r = lv([0, 1])
    assert r.metadata["integrations"] == 2
    _same_counts(r, on_the_cpu)
    names = [[name for name, *_ in d.launches] for d in devices]
    assert any(n.endswith("_replay") for n in names[0])
    assert not any(n.endswith("_replay") for n in names[1])


@pytest.mark.parametrize("kernel", ["", "_replay"])
def test_a_failure_on_one_device_is_raised_naming_it_and_frees_the_counts(
        gpus, monkeypatch, kernel):
    """Every kernel of GPU 1 fails (the range pass), or only its replay (the count
    buffers are allocated): the error names GPU 1, and no count buffer is left."""
    from sbmlgpu.plugins.dbn.engines import GpuEngine

    live = set()
    start, finish, discard = (GpuEngine.start_counts, GpuEngine.finish_counts,
                              GpuEngine.discard_counts)

    def started(self, elements):
        start(self, elements)
        live.add(id(self))

    def finished(self):
        live.discard(id(self))
        return finish(self)

    def discarded(self):
        live.discard(id(self))
        discard(self)

    monkeypatch.setattr(GpuEngine, "start_counts", started)
    monkeypatch.setattr(GpuEngine, "finish_counts", finished)
    monkeypatch.setattr(GpuEngine, "discard_counts", discarded)
    gpus(2, fail_on=1, fail_kernel=kernel)
    with pytest.raises(DeviceError, match=r"device 1 \(Fake H200\): the kernel failed"):
        lv([0, 1])
    assert not live


def test_one_gpu_errors_are_not_renamed(gpus):
    """One GPU: the error as it was raised, without a device prefix."""
    gpus(1, fail_on=0)
    with pytest.raises(DeviceError, match=r"^the kernel failed"):
        lv([0])
