"""Streams, asynchronous launches, pinned staging, mapped memory and CuPy on a real GPU
(`pytest -m gpu` on the GPU machine; skipped elsewhere). The CUDA below is compiled
with nvcc in a CPU test too (test_runtime_async.py), so that it is known to build.

Run with -s to see the copy rates (pageable vs staged) that the staging test measures."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from sbmlgpu.profile import Profiler

from .test_runtime_gpu import _selftest, device  # noqa: F401 (fixture)

pytestmark = pytest.mark.gpu

#: kernels of these tests (new CUDA text: compiled on the CPU by test_runtime_async.py)
SOURCE = r"""
/* Spins for `cycles` SM clock cycles: a kernel that takes long enough to tell an
   asynchronous launch (returns at once) from a synchronous one. */
extern "C" __global__ void sbmlgpu_spin(long long cycles, unsigned long long* spent)
{
    long long start = clock64();
    while (clock64() - start < cycles) { }
    if (blockIdx.x == 0 && threadIdx.x == 0) spent[0] = (unsigned long long)(clock64() - start);
}

/* A persistent kernel's handshake with the host through mapped memory.
   signal[0] (host -> kernel): 0 keep waiting, anything else: stop.
   progress[0] (kernel -> host): 1 once running; progress[1]: polls made; progress[2]:
   the signal it saw. It gives up after max_polls, so that a write that never
   arrives fails the test instead of hanging the GPU. */
extern "C" __global__ void sbmlgpu_poll_signal(const volatile int* signal,
                                               volatile unsigned long long* progress,
                                               long long max_polls)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    progress[0] = 1ull;
    __threadfence_system();
    long long polls = 0;
    while (signal[0] == 0 && polls < max_polls) {
        ++polls;
        __nanosleep(1000);
    }
    progress[1] = (unsigned long long)polls;
    progress[2] = (unsigned long long)signal[0];
    __threadfence_system();
}

/* out[i] = 2 i, and one count per finished block into a mapped counter (a progress
   count the host can read while the kernel runs). */
extern "C" __global__ void sbmlgpu_count_blocks(int n, double* out, unsigned long long* blocks_done)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0 * (double)i;
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence_system();
        atomicAdd(blocks_done, 1ull);
    }
}
"""


@pytest.fixture(scope="module")
def kernels(device):
    module = device.compile(SOURCE, name="runtime_async_test")
    return {name: module.function(name)
            for name in ("sbmlgpu_spin", "sbmlgpu_poll_signal", "sbmlgpu_count_blocks")}


def _axpy(device):
    return _selftest(device).function("sbmlgpu_axpy")


def _cycles(device, ms: float) -> int:
    return int(device.properties.clock_khz * ms)  # kHz x ms = cycles


def test_async_launch_returns_at_once_and_is_timed_at_synchronisation(device, kernels):
    spin = kernels["sbmlgpu_spin"]
    spent = device.alloc(8)
    spin.launch((1,), (32,), [np.int64(1), spent])  # loads the kernel (lazy loading)
    stream = device.stream()
    profiler = Profiler()
    before = profiler.clock()
    started = time.perf_counter()
    pending = spin.launch_async((1,), (32,), [np.int64(_cycles(device, 50)), spent],
                                stream=stream)
    returned_after = time.perf_counter() - started
    profiler.record_pending(spin, pending, device)
    assert returned_after < 0.025, f"launch_async took {returned_after:.3f} s: it waited"
    assert not pending.done() and profiler.records == []
    stream.synchronize()
    (record,) = profiler.records
    timing = pending.timing()
    assert timing.ms >= 25 and record.ms == timing.ms  # about 50 ms at the nominal clock
    assert before - 0.005 <= record.start_s <= profiler.clock() - timing.ms / 1e3 + 0.005
    assert device.from_device(spent, (1,), np.uint64)[0] >= _cycles(device, 50)


def test_kernels_on_two_streams_overlap(device, kernels):
    spin = kernels["sbmlgpu_spin"]
    spent = device.alloc(16)
    cycles = np.int64(_cycles(device, 100))
    single = spin.launch((1,), (32,), [cycles, spent]).ms
    a, b = device.stream(), device.stream()
    started = time.perf_counter()
    one = spin.launch_async((1,), (32,), [cycles, spent], stream=a)
    two = spin.launch_async((1,), (32,), [cycles, spent], stream=b)
    a.synchronize()
    b.synchronize()
    wall_ms = (time.perf_counter() - started) * 1e3
    assert one.timing().ms > 0.5 * single and two.timing().ms > 0.5 * single
    assert wall_ms < 1.6 * single, f"two {single:.0f} ms kernels took {wall_ms:.0f} ms"


def test_streams_copy_launch_and_hand_over_through_events(device):
    axpy = _axpy(device)
    n = 1 << 20
    x, y = np.arange(n, dtype=np.float64), np.ones(n)
    dx, dy = device.alloc(x.nbytes), device.alloc(y.nbytes)
    compute, copy = device.stream(), device.stream()
    pool = device.pinned_pool()
    with pool.borrow(n, np.float64) as staged_x, pool.borrow(n, np.float64) as result:
        staged_x[:] = x
        compute.upload(dx, staged_x)
        compute.upload(dy, y)  # pageable: still correct
        pending = axpy.launch_async(((n + 255) // 256,), (256,),
                                    [np.int32(n), np.float64(3.0), dx, dy], stream=compute)
        copy.wait(compute.record())
        copy.download(dy, result)
        copy.synchronize()
        np.testing.assert_array_equal(result, 3.0 * x + 1.0)
        assert pending.timing().ms > 0
        half = np.empty(n // 2)
        copy.download(dy, half, offset=x.nbytes // 2)  # the second half only
        copy.synchronize()
        np.testing.assert_array_equal(half, 3.0 * x[n // 2:] + 1.0)


def test_pinned_pool_blocks_are_page_locked_and_reused(device):
    import pycuda.driver as cuda

    from sbmlgpu.runtime.driver_host_memory import PORTABLE

    pool = device.pinned_pool()
    block = pool.take(3 << 20)
    try:
        memory = device._host_memory
        if memory is None:  # PyCUDA's own pagelocked_empty
            assert isinstance(block.base, cuda.PagelockedHostAllocation)
        else:  # cuMemHostAlloc through ctypes (runtime/driver_host_memory.py)
            # PORTABLE as asked (the driver adds DEVICEMAP under unified addressing:
            # flags 3 on the H200)
            assert (memory.flags(block, device.activate) or 0) & PORTABLE
    finally:
        pool.give_back(block)
    hits = pool.hits
    again = pool.take(3 << 20)
    assert again is block and pool.hits == hits + 1
    pool.give_back(again)


def test_staged_download_into_result_rows_equals_the_direct_copy(device, capsys):
    from sbmlgpu.runtime import download_staged

    rows, cols = 1 << 16, 512  # 256 MiB of float64
    data = np.random.default_rng(0).normal(size=(rows, cols))
    buf = device.to_device(data)
    result = np.full((rows + 2, cols), np.nan)
    download_staged(device, buf, result[1:-1])  # warm: pins the stages once
    result[1:-1] = np.nan
    started = time.perf_counter()
    download_staged(device, buf, result[1:-1])
    staged_s = time.perf_counter() - started
    np.testing.assert_array_equal(result[1:-1], data)
    assert np.isnan(result[0]).all() and np.isnan(result[-1]).all()
    fresh = np.empty_like(data)
    started = time.perf_counter()
    device.download(buf, fresh)
    direct_s = time.perf_counter() - started
    np.testing.assert_array_equal(fresh, data)
    assert device.pinned_pool().in_use_bytes == 0
    with capsys.disabled():
        print(f"\n256 MiB to the host: pageable {data.nbytes / direct_s / 1e9:.1f} GB/s, "
              f"staged through pinned chunks {data.nbytes / staged_s / 1e9:.1f} GB/s")
    buf.free()


def test_a_persistent_kernel_sees_a_flag_the_host_sets_while_it_runs(device, kernels):
    signal = device.map_host(1, np.int32)
    progress = device.map_host(3, np.uint64)
    stream = device.stream()
    max_polls = 10_000_000
    pending = kernels["sbmlgpu_poll_signal"].launch_async(
        (1,), (32,), [signal, progress, np.int64(max_polls)], stream=stream)
    deadline = time.perf_counter() + 10
    while progress.host[0] != 1 and time.perf_counter() < deadline:
        time.sleep(0.001)
    assert progress.host[0] == 1, "the kernel's 'running' write never reached the host"
    assert not stream.query(), "the kernel stopped before the host set its flag"
    signal.host[0] = 7
    stream.synchronize()
    assert progress.host[2] == 7 and progress.host[1] < max_polls
    assert pending.timing().ms > 0
    signal.free()
    progress.free()


def test_a_mapped_counter_counts_blocks_done(device, kernels):
    n, block = 1 << 20, 256
    counter = device.map_host(1, np.uint64)
    out = device.alloc(8 * n)
    stream = device.stream()
    kernels["sbmlgpu_count_blocks"].launch_async(((n + block - 1) // block,), (block,),
                                                 [np.int32(n), out, counter], stream=stream)
    stream.synchronize()
    assert counter.host[0] == (n + block - 1) // block
    np.testing.assert_array_equal(device.from_device(out, (n,), np.float64),
                                  2.0 * np.arange(n))


def test_threads_drive_their_own_streams_on_one_device(device):
    axpy = _axpy(device)

    def work(seed):
        n = 50_000
        dx, dy = device.to_device(np.full(n, float(seed))), device.to_device(np.zeros(n))
        stream = device.stream()
        for _ in range(10):
            axpy.launch_async(((n + 127) // 128,), (128,),
                              [np.int32(n), np.float64(1.0), dx, dy], stream=stream)
        out = np.empty(n)
        stream.download(dy, out)
        stream.synchronize()
        return bool(np.all(out == 10.0 * seed))

    with ThreadPoolExecutor(4) as threads:  # an exception in a thread is raised here
        assert all(threads.map(work, range(4)))


# --- CuPy ------------------------------------------------------------------------------

def test_buffers_and_cupy_arrays_share_memory_both_ways(device):
    cupy = pytest.importorskip("cupy")
    from sbmlgpu.runtime import as_cupy, cupy_stream, from_cupy

    axpy = _axpy(device)
    data = np.arange(1000, dtype=np.float64)
    buf = device.to_device(data)
    view = as_cupy(buf, (10, 100), np.float64)
    with cupy.cuda.Device(device.index):
        assert float(view.sum()) == data.sum()
        view[0, :] = -1.0  # CuPy writes into our buffer
    assert np.all(device.from_device(buf, (1000,), np.float64)[:100] == -1.0)
    tail = as_cupy(buf, 100, np.float64, offset=900 * 8)
    assert float(tail[0]) == 900.0
    with cupy.cuda.Device(device.index):
        y = cupy.ones(1000, dtype=cupy.float64)
    ours = from_cupy(y, device)
    axpy.launch((4,), (256,), [np.int32(1000), np.float64(2.0), buf, ours])
    with cupy.cuda.Device(device.index):
        expected = 2.0 * np.concatenate([-np.ones(100), data[100:]]) + 1.0
        np.testing.assert_array_equal(cupy.asnumpy(y), expected)
        stream = device.stream()
        with cupy_stream(stream):
            z = view * 2  # CuPy work ordered on our stream
        stream.synchronize()
        assert float(z[0, 0]) == -2.0
