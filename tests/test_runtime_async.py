"""Streams, asynchronous launches, pinned staging, mapped memory and CuPy interop
without a GPU: the PyCUDA driver against the stand-in of test_runtime_driver (whose
streams run only when waited for), and the defaults of base.Device on a device
that implements only the abstract methods."""

from __future__ import annotations

import sys
import threading
import types

import numpy as np
import pytest

from sbmlgpu.codegen.compile_check import nvcc_available, nvcc_compile
from sbmlgpu.errors import DeviceError
from sbmlgpu.profile import Profiler
from sbmlgpu.runtime import cupy_interop, download_staged, mapped_array, upload_staged
from sbmlgpu.runtime.pinned import MIN_BLOCK, PinnedPool, size_class
from sbmlgpu.runtime.streams import SerialStream

from .fakes import FakeKernel


def axpy_setup(device, n=10):
    kernel = device.compile("sbmlgpu_axpy", name="axpy").function("sbmlgpu_axpy")
    x, y = device.to_device(np.ones(n)), device.to_device(np.arange(float(n)))
    return kernel, [np.int32(n), np.float64(2.0), x, y], y


# --- streams and asynchronous launches (PyCUDA stand-in) ------------------------------------

def test_async_launch_runs_only_when_waited_for_and_times_from_events(driver):
    device = driver.devices()[0]
    kernel, args, y = axpy_setup(device)
    stream = device.stream()
    pending = kernel.launch_async((1,), (32,), args, stream=stream)
    out = np.full(10, -1.0)
    stream.download(y, out)
    assert not pending.done() and not stream.query()
    assert np.all(out == -1.0)  # nothing ran yet: the host was not held up
    stream.synchronize()
    assert pending.done() and stream.query()
    np.testing.assert_array_equal(out, np.arange(10.0) + 2.0)
    timing = pending.timing()
    assert timing.ms == 1.25 and timing.grid == (1, 1, 1) and timing.block == (32, 1, 1)
    assert timing.started_at is not None and device.cuda.stack() == []


def test_pending_timing_waits_for_its_kernel_alone(driver):
    device = driver.devices()[0]
    kernel, args, y = axpy_setup(device)
    stream = device.stream()
    pending = kernel.launch_async((1,), (32,), args, stream=stream)
    later = np.zeros(10)
    stream.download(y, later)
    assert pending.timing().ms == 1.25
    assert not stream.query()  # the copy after the kernel still waits
    stream.synchronize()
    np.testing.assert_array_equal(later, np.arange(10.0) + 2.0)


def test_synchronous_launch_on_a_stream_still_waits(driver):
    device = driver.devices()[0]
    kernel, args, y = axpy_setup(device)
    stream = device.stream()
    timing = kernel.launch((1,), (32,), args, stream=stream)
    assert timing.ms == 1.25 and timing.started_at is None
    np.testing.assert_array_equal(device.from_device(y, (10,), np.float64), np.arange(10.0) + 2)


def test_profiler_records_an_async_launch_when_its_stream_is_synchronised(driver):
    device = driver.devices()[0]
    kernel, args, _ = axpy_setup(device)
    profiler = Profiler()
    seen = []
    profiler.add_observer(seen.append)
    stream = device.stream()
    pending = kernel.launch_async((1,), (32,), args, stream=stream)
    profiler.record_pending(kernel, pending, device, flops=20.0, bytes=240.0)
    assert profiler.records == []
    stream.synchronize()
    (record,) = profiler.records
    assert seen == [record] and record.kernel == "sbmlgpu_axpy" and record.ms == 1.25
    assert record.flops == 20.0 and record.registers == 40
    assert record.start_s == pytest.approx(pending.timing().started_at - profiler._origin)
    # a handle already read is recorded at once
    profiler.record_pending(kernel, pending, device)
    assert len(profiler.records) == 2


def test_launches_on_a_foreign_stream_are_refused(driver):
    device, other = driver.devices()
    kernel, args, _ = axpy_setup(device)
    with pytest.raises(DeviceError, match="launch on a stream of GPU 0"):
        kernel.launch_async((1,), (32,), args, stream=other.stream())
    with pytest.raises(DeviceError, match="launch on a stream of GPU 0"):
        kernel.launch_async((1,), (32,), args, stream=SerialStream(device))


def test_a_kernel_failing_while_running_is_named_at_synchronisation(driver):
    device = driver.devices()[0]
    kernel, args, _ = axpy_setup(device)
    stream = device.stream()
    pending = kernel.launch_async((4,), (32,), args, stream=stream)
    device.cuda.state["fail_running"] = True
    with pytest.raises(DeviceError, match=r"an illegal memory access.*sbmlgpu_axpy \(grid "
                                          r"\(4, 1, 1\)"):
        stream.synchronize()
    with pytest.raises(DeviceError, match=r"kernel sbmlgpu_axpy .*: failed while running: "
                                          "an illegal memory access"):
        pending.timing()
    assert device.cuda.stack() == []


def test_launch_errors_at_enqueue_are_raised_at_once(driver):
    device = driver.devices()[0]
    kernel, args, _ = axpy_setup(device)
    device.cuda.state["fail_launch"] = True
    with pytest.raises(DeviceError, match="launch failed: too many resources"):
        kernel.launch_async((1,), (32,), args, stream=device.stream())


def test_stream_copies_at_offsets_and_their_checks(driver):
    device = driver.devices()[0]
    stream = device.stream()
    buf = device.alloc(80)
    stream.upload(buf, np.arange(10.0))
    stream.upload(buf, np.array([-1.0, -2.0]), offset=24)
    part = np.zeros(4)
    stream.download(buf, part, offset=16)
    stream.synchronize()
    np.testing.assert_array_equal(part, [2.0, -1.0, -2.0, 5.0])
    with pytest.raises(DeviceError, match="reading 88 bytes at offset 0 of a 80-byte buffer"):
        stream.download(buf, np.zeros(11))
    with pytest.raises(DeviceError, match="writing 16 bytes at offset 72"):
        stream.upload(buf, np.zeros(2), offset=72)
    with pytest.raises(DeviceError, match="C-contiguous"):
        stream.download(buf, np.zeros((4, 4))[:, 0])
    assert stream._kept == []  # released at synchronisation


def test_one_stream_waits_for_another_through_an_event(driver):
    device = driver.devices()[0]
    kernel, args, y = axpy_setup(device)
    compute, copy = device.stream(), device.stream()
    kernel.launch_async((1,), (32,), args, stream=compute)
    copy.wait(compute.record())
    out = np.zeros(10)
    copy.download(y, out)
    copy.synchronize()  # runs the compute stream up to its event first
    np.testing.assert_array_equal(out, np.arange(10.0) + 2.0)
    with pytest.raises(DeviceError, match="events of its device"):
        copy.wait(driver.devices()[1].stream().record())


def test_event_times_and_host_times(driver):
    device = driver.devices()[0]
    stream = device.stream()
    first, second = stream.record(), stream.record()
    stream.synchronize()
    assert second.elapsed_ms(first) == 1.25 and first.query()
    assert stream.host_time(second) - stream.host_time(first) == pytest.approx(1.25e-3)
    with pytest.raises(DeviceError, match="cannot be compared"):
        first.elapsed_ms(driver.devices()[1].stream().record())


# --- pinned staging -------------------------------------------------------------------------

def test_pool_hands_out_size_classes_and_reuses_them():
    made = []

    def allocate(n):
        made.append(n)
        return np.zeros(n, np.uint8)

    pool = PinnedPool(allocate, max_cached_bytes=4 * MIN_BLOCK)
    assert size_class(1) == MIN_BLOCK and size_class(MIN_BLOCK + 1) == 2 * MIN_BLOCK
    a = pool.take(1000)
    b = pool.take(MIN_BLOCK + 1)
    assert a.nbytes == MIN_BLOCK and b.nbytes == 2 * MIN_BLOCK and pool.in_use_bytes == 3 * MIN_BLOCK
    pool.give_back(a)
    pool.give_back(b)
    again = pool.take(MIN_BLOCK)  # the same class as `a`: no new allocation
    assert again is a and pool.hits == 1 and pool.misses == 2 and made == [MIN_BLOCK, 2 * MIN_BLOCK]
    big = pool.take(4 * MIN_BLOCK)
    pool.give_back(again)
    pool.give_back(big)  # beyond max_cached_bytes: dropped
    assert pool.cached_bytes == 3 * MIN_BLOCK and pool.in_use_bytes == 0
    with pool.borrow((3, 5), np.float64) as array:
        assert array.shape == (3, 5) and array.dtype == np.float64 and array.flags.c_contiguous
    assert pool.in_use_bytes == 0
    with pytest.raises(DeviceError, match="did not come from this pool"):
        pool.give_back(np.zeros(1000, np.uint8))
    pool.clear()
    assert pool.cached_bytes == 0 and pool.take(1).nbytes == MIN_BLOCK and pool.misses == 4


def test_pool_is_shared_by_threads_without_handing_a_block_out_twice():
    pool = PinnedPool(lambda n: np.zeros(n, np.uint8))
    errors = []

    def work(mark):
        try:
            for _ in range(200):
                block = pool.take(5000)
                block[:8] = mark
                assert np.all(block[:8] == mark), "another thread wrote into my block"
                pool.give_back(block)
        except AssertionError as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(m,)) for m in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and pool.in_use_bytes == 0 and pool.misses <= 4


def test_a_device_pool_is_page_locked_portable_and_one_per_device(driver):
    device, other = driver.devices()
    pool = device.pinned_pool()
    assert device.pinned_pool() is pool and other.pinned_pool() is not pool
    block = pool.take(100)
    assert block.base.flags == device.cuda.host_alloc_flags.PORTABLE
    pool.give_back(block)
    device.cuda.state["fail_pin"] = True
    with pytest.raises(DeviceError, match="cannot page-lock 131072 bytes"):
        pool.take(MIN_BLOCK + 1)


@pytest.mark.parametrize("chunk_bytes, offset", [(1 << 20, 0), (1000, 0), (1000, 8), (24, 16)])
def test_staged_download_fills_result_rows_through_pinned_chunks(driver, chunk_bytes, offset):
    device = driver.devices()[0]
    data = np.random.default_rng(0).normal(size=(50, 7))
    buf = device.alloc(data.nbytes + offset)
    device.upload(buf, np.concatenate([np.zeros(offset // 8), data.ravel()]))
    result = np.full((60, 7), np.nan)
    copies = device.cuda.state["async_copies"]
    copies.clear()
    download_staged(device, buf, result[5:55], offset=offset, chunk_bytes=chunk_bytes)
    np.testing.assert_array_equal(result[5:55], data)
    assert np.isnan(result[:5]).all() and np.isnan(result[55:]).all()
    assert len(copies) == -(-data.nbytes // min(chunk_bytes, data.nbytes))
    assert all(kind == "dtoh" and pinned for kind, pinned in copies)
    pool = device.pinned_pool()
    assert pool.in_use_bytes == 0 and pool.cached_bytes > 0


def test_staged_download_after_a_kernel_on_the_same_stream(driver):
    device = driver.devices()[0]
    kernel, args, y = axpy_setup(device, n=1000)
    stream = device.stream()
    kernel.launch_async((8,), (128,), args, stream=stream)
    out = download_staged(device, y, np.empty(1000), stream=stream, chunk_bytes=800)
    np.testing.assert_array_equal(out, np.arange(1000.0) + 2.0)


def test_staged_download_refuses_what_it_cannot_do(driver):
    device = driver.devices()[0]
    buf = device.alloc(80)
    with pytest.raises(DeviceError, match="C-contiguous"):
        download_staged(device, buf, np.zeros((5, 2))[:, 0])
    with pytest.raises(DeviceError, match="reading 80 bytes at offset 8"):
        download_staged(device, buf, np.zeros(10), offset=8)
    with pytest.raises(DeviceError, match="chunk_bytes"):
        download_staged(device, buf, np.zeros(10), chunk_bytes=0)
    assert download_staged(device, buf, np.zeros(0)).size == 0


def test_staged_download_after_a_device_failure_keeps_no_stage_for_reuse(driver):
    device = driver.devices()[0]
    buf = device.to_device(np.arange(100.0))
    device.cuda.state["fail_running"] = True
    with pytest.raises(DeviceError, match="illegal memory access"):
        download_staged(device, buf, np.zeros(100), chunk_bytes=200)
    pool = device.pinned_pool()
    assert pool.in_use_bytes == 0 and pool.cached_bytes == 0


@pytest.mark.parametrize("chunk_bytes", [1 << 20, 1000, 24, 8])
def test_staged_upload_copies_a_table_through_pinned_chunks(driver, chunk_bytes):
    device = driver.devices()[0]
    table = np.random.default_rng(1).normal(size=(7, 50))[:, ::2]  # not contiguous
    copies = device.cuda.state["async_copies"]
    copies.clear()
    buf = upload_staged(device, table, chunk_bytes=chunk_bytes)
    np.testing.assert_array_equal(device.from_device(buf, table.shape, np.float64), table)
    assert len(copies) == -(-table.nbytes // min(chunk_bytes, table.nbytes))
    assert all(kind == "htod" and pinned for kind, pinned in copies)
    pool = device.pinned_pool()
    assert pool.in_use_bytes == 0 and pool.cached_bytes > 0
    assert upload_staged(device, np.zeros((3, 0))).nbytes >= 1  # nothing to copy
    with pytest.raises(DeviceError, match="chunk_bytes"):
        upload_staged(device, table, chunk_bytes=0)


def test_staged_upload_without_page_locked_memory_copies_from_pageable_memory(driver):
    device = driver.devices()[0]
    device.cuda.state["fail_pin"] = True  # the driver refuses to page-lock
    copies = device.cuda.state["async_copies"]
    copies.clear()
    table = np.arange(30000.0).reshape(3, -1)
    buf = upload_staged(device, table, chunk_bytes=1000)
    np.testing.assert_array_equal(device.from_device(buf, table.shape, np.float64), table)
    assert copies == []  # the synchronous copy
    assert device.pinned_pool().in_use_bytes == 0


def test_staged_upload_after_a_device_failure_keeps_no_stage_and_no_buffer(driver):
    device = driver.devices()[0]
    free = device.cuda.mem_get_info()[0]
    device.cuda.state["fail_running"] = True
    with pytest.raises(DeviceError, match="illegal memory access"):
        upload_staged(device, np.arange(100.0), chunk_bytes=200)
    pool = device.pinned_pool()
    assert pool.in_use_bytes == 0 and pool.cached_bytes == 0
    assert device.cuda.mem_get_info()[0] == free  # the new buffer freed again


# --- mapped memory --------------------------------------------------------------------------

def test_mapped_memory_is_zeroed_device_mapped_and_passed_by_its_device_address(driver):
    device = driver.devices()[0]
    cuda = device.cuda
    flag = device.map_host((2,), np.int32)
    assert flag.host.tolist() == [0, 0] and flag.nbytes == 8
    assert flag.host.base.flags == cuda.host_alloc_flags.DEVICEMAP | cuda.host_alloc_flags.PORTABLE
    assert flag.ptr == flag.host.base.get_device_pointer()
    flag.host[1] = 7  # the host writes; a kernel would see it through flag.ptr
    module = device.compile("sbmlgpu_poll", name="poll")
    module.function("sbmlgpu_poll").launch_async((1,), (32,), [flag, np.int64(5)],
                                                 stream=device.stream())
    name, values, *_ = cuda.state["launches"][-1]
    assert name == "sbmlgpu_poll" and values[0] == np.uintp(flag.ptr)
    allocation = flag.host.base
    flag.free()
    assert allocation.freed and flag.host is None
    with pytest.raises(DeviceError, match="freed mapped buffer"):
        _ = flag.ptr
    with pytest.raises(DeviceError, match="holds nothing"):
        device.map_host((0,), np.int32)


def test_mapped_memory_falls_back_to_the_host_address_under_unified_addressing(driver):
    device = driver.devices()[0]
    device.cuda.state["no_device_pointer"] = True
    flag = device.map_host(1, np.int64)
    assert flag.ptr == flag.host.ctypes.data
    device._device.get_attribute = lambda which: 0 if which == "UNIFIED_ADDRESSING" else 1
    with pytest.raises(DeviceError, match="cannot map host memory"):
        device.map_host(1, np.int64)


def test_signals_on_the_host_path_are_ordinary_memory_with_an_address():
    import ctypes

    counter = mapped_array(None, (3,), np.uint64)
    assert counter.device is None and counter.nbytes == 24
    # what host-built code does with the pointer: write through it
    ctypes.c_uint64.from_address(counter.ptr + 8).value = 42
    assert counter.host.tolist() == [0, 42, 0]
    counter.free()
    with pytest.raises(DeviceError, match="freed"):
        _ = counter.ptr


# --- defaults of base.Device (no streams, no pinning, no mapping) -------------------------

class DoubleKernel(FakeKernel):
    """y = 2 y, run synchronously on a fake device."""

    def __init__(self, device):
        super().__init__("double", ms=0.5)
        self.device = device

    def run(self, grid, block, args, shared_bytes):
        (y,) = args
        values = self.device.from_device(y, (y.nbytes // 8,), np.float64)
        self.device.upload(y, 2 * values)


def test_code_written_for_streams_runs_on_a_device_without_them(fake_device):
    device = fake_device
    stream = device.stream()
    assert isinstance(stream, SerialStream)
    y = device.alloc(80)
    stream.upload(y, np.arange(10.0))
    stream.upload(y, np.array([100.0]), offset=8)
    pending = DoubleKernel(device).launch_async((1,), (32,), [y], stream=stream)
    profiler = Profiler()
    profiler.record_pending(DoubleKernel(device), pending, device)
    out = np.zeros(3)
    stream.download(y, out, offset=16)
    stream.synchronize()
    np.testing.assert_array_equal(out, [4.0, 6.0, 8.0])
    assert pending.done() and pending.timing().ms == 0.5 and len(profiler.records) == 1
    first = stream.record()
    assert stream.record().elapsed_ms(first) >= 0 and stream.host_time(first) > 0


def test_staged_download_works_with_the_default_stream_and_pool(fake_device):
    device = fake_device
    data = np.arange(3000.0).reshape(300, 10)
    buf = device.to_device(data)
    rows = np.zeros((300, 10))
    download_staged(device, buf, rows, chunk_bytes=4096)
    np.testing.assert_array_equal(rows, data)
    pool = device.pinned_pool()
    assert pool.misses == 2 and pool.in_use_bytes == 0  # two stages, reused every chunk


def test_a_device_without_mapping_says_so(fake_device):
    with pytest.raises(DeviceError, match="cannot map host memory"):
        mapped_array(fake_device, (1,), np.int32)
    assert fake_device.context_handle() is None


# --- CuPy interop (with a stand-in for cupy) --------------------------------------------

def make_fake_cupy(context=0xC0DE00, device_id=0):
    cupy = types.ModuleType("cupy")

    class UnownedMemory:
        def __init__(self, ptr, size, owner, device_id=-1):
            self.ptr, self.size, self.owner, self.device_id = ptr, size, owner, device_id

    class MemoryPointer:
        def __init__(self, mem, offset):
            self.mem, self.offset, self.ptr = mem, offset, mem.ptr + offset

    class ndarray:
        def __init__(self, shape, dtype, memptr=None):
            self.shape, self.dtype, self.data = tuple(shape), np.dtype(dtype), memptr
            self.nbytes = int(np.prod(self.shape)) * self.dtype.itemsize
            self.flags = types.SimpleNamespace(c_contiguous=True)
            self.device = types.SimpleNamespace(id=device_id)

    class ExternalStream:
        def __init__(self, ptr, device_id=-1):
            self.ptr, self.device_id = ptr, device_id

    cupy.ndarray = ndarray
    cupy.cuda = types.SimpleNamespace(
        UnownedMemory=UnownedMemory, MemoryPointer=MemoryPointer, ExternalStream=ExternalStream,
        driver=types.SimpleNamespace(ctxGetCurrent=lambda: context),
        runtime=types.SimpleNamespace(getDevice=lambda: device_id))
    return cupy


@pytest.fixture
def fake_cupy(monkeypatch):
    def install(**kwargs):
        cupy = make_fake_cupy(**kwargs)
        monkeypatch.setitem(sys.modules, "cupy", cupy)
        monkeypatch.setattr(cupy_interop, "_checked", type(cupy_interop._checked)())
        return cupy
    return install


def test_a_buffer_becomes_a_cupy_array_on_the_same_memory(driver, fake_cupy):
    fake_cupy()
    device = driver.devices()[0]
    buf = device.alloc(800)
    array = cupy_interop.as_cupy(buf, (10, 5), np.float64, offset=400)
    assert array.shape == (10, 5) and array.dtype == np.float64
    memory = array.data.mem
    assert memory.ptr == buf.ptr and memory.size == 800 and memory.owner is buf
    assert memory.device_id == 0 and array.data.ptr == buf.ptr + 400
    with pytest.raises(DeviceError, match="needs 808 bytes; the buffer has 800"):
        cupy_interop.as_cupy(buf, 101, np.float64)
    with pytest.raises(DeviceError, match="not device memory"):
        cupy_interop.as_cupy(np.zeros(3), 3, np.float64)


def test_a_cupy_array_becomes_a_kernel_argument(driver, fake_cupy):
    cupy = fake_cupy()
    device = driver.devices()[0]
    array = cupy.ndarray((4,), np.float64, memptr=types.SimpleNamespace(ptr=0xABC000))
    buffer = cupy_interop.from_cupy(array, device)
    assert buffer.ptr == 0xABC000 and buffer.nbytes == 32 and buffer.device is device
    kernel = device.compile("sbmlgpu_poll", name="poll").function("sbmlgpu_poll")
    kernel.launch_async((1,), (32,), [buffer], stream=device.stream())
    assert device.cuda.state["launches"][-1][1][0] == np.uintp(0xABC000)
    with pytest.raises(DeviceError, match="lives on device 0, not on GPU 1"):
        cupy_interop.from_cupy(array, driver.devices()[1])
    array.flags.c_contiguous = False
    with pytest.raises(DeviceError, match="C-contiguous"):
        cupy_interop.from_cupy(array, device)
    with pytest.raises(DeviceError, match="expected a cupy.ndarray"):
        cupy_interop.from_cupy(np.zeros(3), device)
    buffer.free()
    with pytest.raises(DeviceError, match="freed CuPy buffer"):
        _ = buffer.ptr


def test_cupy_in_another_context_is_refused(driver, fake_cupy):
    fake_cupy(context=0xBAD)
    device = driver.devices()[0]
    with pytest.raises(DeviceError, match="CuPy sees context 0xbad on device 0, but this "
                                          "device's work runs in context 0xc0de00"):
        cupy_interop.as_cupy(device.alloc(8), 1, np.float64)


def test_cupy_stream_wraps_our_stream(driver, fake_cupy):
    fake_cupy()
    device = driver.devices()[0]
    stream = device.stream()
    external = cupy_interop.cupy_stream(stream)
    assert external.ptr == stream.handle and external.device_id == 0
    with pytest.raises(DeviceError, match="not a CUDA stream"):
        cupy_interop.cupy_stream(SerialStream(device))


def test_missing_cupy_is_a_device_error(driver, monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    with pytest.raises(DeviceError, match="CuPy is not installed"):
        cupy_interop.as_cupy(driver.devices()[0].alloc(8), 1, np.float64)


@pytest.mark.skipif(not nvcc_available(), reason="nvcc not installed")
def test_the_gpu_tests_kernels_compile():
    from .test_runtime_async_gpu import SOURCE

    cubin = nvcc_compile(SOURCE, arch="sm_90", name="runtime_async_test")
    for name in (b"sbmlgpu_spin", b"sbmlgpu_poll_signal", b"sbmlgpu_count_blocks"):
        assert name in cubin
