"""The runtime without a GPU: discovery falls back to the CPU path (logged once), and
the PyCUDA driver's own logic (contexts, errors, arguments, copies) runs against a
stand-in for pycuda.driver that behaves like its documented API (tests/fake_pycuda.py;
the `driver` fixture of conftest.py)."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading

import numpy as np
import pytest

from sbmlgpu import runtime
from sbmlgpu.errors import DeviceError
from sbmlgpu.runtime import OutOfDeviceMemory, pycuda_driver

from .fake_pycuda import make_fake_cuda


# -- discovery ----------------------------------------------------------------------------------

def test_importing_sbmlgpu_does_not_import_pycuda():
    code = ("import sys, sbmlgpu, sbmlgpu.runtime, sbmlgpu.runtime.cache, sbmlgpu.codegen.printer;"
            "print('pycuda' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_no_pycuda_means_cpu_path_logged_once(monkeypatch, caplog):
    def missing():
        raise ImportError("No module named 'pycuda'")

    monkeypatch.setattr(pycuda_driver, "import_pycuda", missing)
    monkeypatch.delenv("SBMLGPU_NO_GPU", raising=False)
    runtime.reset()
    try:
        with caplog.at_level(logging.WARNING, logger="sbmlgpu.runtime"):
            assert runtime.get_driver() is None
            assert runtime.get_driver() is None
            assert runtime.get_devices() == []
        messages = [r.getMessage() for r in caplog.records if "no GPU found" in r.getMessage()]
        assert len(messages) == 1 and "PyCUDA" in messages[0] and "CPU path" in messages[0]
        assert "pycuda" in runtime.no_gpu_reason()
        with pytest.raises(DeviceError, match="no GPU found"):
            runtime.get_devices([0])
    finally:
        runtime.reset()


def test_no_gpu_env_and_no_devices(monkeypatch):
    runtime.reset()
    try:
        monkeypatch.setenv("SBMLGPU_NO_GPU", "1")
        assert runtime.get_driver() is None and "SBMLGPU_NO_GPU" in runtime.no_gpu_reason()
        runtime.reset()
        monkeypatch.delenv("SBMLGPU_NO_GPU")
        monkeypatch.setattr(pycuda_driver, "import_pycuda", lambda: make_fake_cuda(n_devices=0))
        assert runtime.get_driver() is None and "no devices" in runtime.no_gpu_reason()
    finally:
        runtime.reset()


def test_device_selection(monkeypatch):
    runtime.reset()
    try:
        monkeypatch.delenv("SBMLGPU_NO_GPU", raising=False)
        monkeypatch.setattr(pycuda_driver, "import_pycuda", lambda: make_fake_cuda(n_devices=2))
        assert [d.index for d in runtime.get_devices()] == [0, 1]
        assert [d.index for d in runtime.get_devices([1])] == [1]
        assert [d.index for d in runtime.get_devices([1, 1, 0])] == [1, 0]
        with pytest.raises(DeviceError, match="no GPU device 2: this machine has 2"):
            runtime.get_devices([2])
    finally:
        runtime.reset()


# -- the driver against the stand-in ------------------------------------------------------------

def test_properties(driver):
    props = driver.devices()[0].properties
    assert props.name == "NVIDIA H200" and props.arch == "sm_90" and props.sm_count == 132
    assert props.max_threads_per_block == 1024 and props.warp_size == 32
    assert props.peak_bandwidth() > 1e12 and props.peak_flops("double") > 1e13


def test_contexts_are_balanced_across_threads(driver):
    device = driver.devices()[1]
    cuda = device.cuda
    errors = []

    def work():
        try:
            for _ in range(50):
                buf = device.to_device(np.arange(8.0))
                assert device.from_device(buf, (8,), np.float64)[3] == 3.0
                buf.free()
                assert cuda.stack() == []  # every push was popped on this thread
        except Exception as e:  # noqa: BLE001 -- reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and cuda.state["pushes"] > 0
    with device.activate() as active:
        assert active is device and len(cuda.stack()) == 1
    assert cuda.stack() == []


def test_alloc_copy_and_out_of_memory(driver):
    device = driver.devices()[0]
    data = np.linspace(0, 1, 100)
    buf = device.to_device(data)
    assert buf.nbytes == data.nbytes
    assert np.array_equal(device.from_device(buf, data.shape, data.dtype), data)
    device.upload(buf, data[::-1])
    assert np.array_equal(device.from_device(buf, (100,), np.float64), data[::-1])
    with pytest.raises(DeviceError, match="do not fit"):
        device.upload(buf, np.zeros(101))
    with pytest.raises(DeviceError, match="reading"):
        device.from_device(buf, (101,), np.float64)
    with pytest.raises(OutOfDeviceMemory, match="cannot allocate"):
        device.alloc(1 << 40)
    with pytest.raises(DeviceError):
        device.alloc(-1)
    assert device.alloc(0).nbytes == 0
    buf.free()
    buf.free()  # twice is harmless
    with pytest.raises(DeviceError, match="freed"):
        _ = buf.ptr
    assert device.free_memory() > 0


def test_compile_launch_and_timing(driver):
    device = driver.devices()[0]
    module = device.compile('extern "C" __global__ void sbmlgpu_axpy() {}', name="axpy")
    kernel = module.function("sbmlgpu_axpy")
    assert module.function("sbmlgpu_axpy") is kernel
    assert kernel.attributes.registers == 40 and kernel.attributes.max_threads_per_block == 768
    x, y = device.to_device(np.ones(10)), device.to_device(np.arange(10.0))
    timing = kernel.launch((1,), (32,), [np.int32(10), np.float64(2.0), x, y])
    assert timing.grid == (1, 1, 1) and timing.block == (32, 1, 1) and timing.ms == 1.25
    assert np.array_equal(device.from_device(y, (10,), np.float64), np.arange(10.0) + 2)
    with pytest.raises(DeviceError, match="no kernel 'other'"):
        module.function("other")


def test_launch_errors_are_typed(driver):
    device, other = driver.devices()
    kernel = device.compile("sbmlgpu_axpy", name="axpy").function("sbmlgpu_axpy")
    x = device.to_device(np.ones(4))
    args = [np.int32(4), np.float64(1.0), x, x]
    with pytest.raises(DeviceError, match="block of 1024 threads.*768.*40 registers"):
        kernel.launch((1,), (1024,), args)
    with pytest.raises(DeviceError, match="argument 1 is a float"):
        kernel.launch((1,), (32,), [np.int32(4), 1.0, x, x])
    with pytest.raises(DeviceError, match="argument 2 lives on GPU 1"):
        kernel.launch((1,), (32,), [np.int32(4), np.float64(1), other.to_device(np.ones(4)), x])
    with pytest.raises(DeviceError, match="grid"):
        kernel.launch((0,), (32,), args)
    with pytest.raises(OutOfDeviceMemory, match="dynamic shared memory"):
        kernel.launch((1,), (32,), args, shared_bytes=300 * 1024)
    kernel.launch((1,), (32,), args, shared_bytes=100 * 1024)  # opt-in above 48 KiB
    assert kernel._function.attrs["maxdyn"] == 100 * 1024
    device.cuda.state["fail_launch"] = True
    with pytest.raises(DeviceError, match="launch failed: too many resources"):
        kernel.launch((1,), (32,), args)
    device.cuda.state.update(fail_launch=False, fail_running=True)
    with pytest.raises(DeviceError, match="failed while running: an illegal memory access"):
        kernel.launch((1,), (32,), args)
    assert device.cuda.stack() == []
