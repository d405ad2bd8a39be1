"""Staging pinned ahead of a download (runtime.layout.stage_ahead, PinnedPool.prefill)
and page-locked memory from the driver library without the GIL
(runtime.driver_host_memory), without a GPU: plain memory and stand-ins for the
driver's functions. On a GPU: tests/test_pinned_gpu.py."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import signal
import threading
import time

import numpy as np
import pytest

from sbmlgpu.errors import DeviceError
from sbmlgpu.runtime.driver_host_memory import PORTABLE, DriverHostMemory
from sbmlgpu.runtime.layout import stage_ahead
from sbmlgpu.runtime.pinned import MIN_BLOCK, PinnedPool

from .fakes import FakeDevice
from .ode_helpers import load, needs_compiler


# --- PinnedPool.prefill ------------------------------------------------------------------------

def test_prefill_keeps_the_blocks_that_the_takes_then_find():
    made = []
    pool = PinnedPool(lambda n: made.append(n) or np.zeros(n, np.uint8))
    assert pool.prefill(3 * MIN_BLOCK, 2) == 2
    assert made == [4 * MIN_BLOCK] * 2 and pool.cached_bytes == 8 * MIN_BLOCK
    assert pool.prefill(3 * MIN_BLOCK, 2) == 0  # kept already: nothing more pinned
    a, b = pool.take(4 * MIN_BLOCK), pool.take(3 * MIN_BLOCK + 1)
    assert a is not b and pool.hits == 2 and len(made) == 2
    pool.give_back(a)
    pool.give_back(b)
    assert pool.prefill(MIN_BLOCK, 1) == 1 and made[-1] == MIN_BLOCK  # another class


def test_a_take_waits_for_the_block_being_prefilled_rather_than_pinning_another():
    release, started = threading.Event(), threading.Event()
    made = []

    def slow(n):  # pinning takes a while
        made.append(n)
        started.set()
        assert release.wait(10)
        return np.zeros(n, np.uint8)

    pool = PinnedPool(slow)
    filler = threading.Thread(target=pool.prefill, args=(MIN_BLOCK, 1))
    filler.start()
    assert started.wait(10)
    got = []
    taker = threading.Thread(target=lambda: got.append(pool.take(MIN_BLOCK)))
    taker.start()
    taker.join(0.2)
    assert taker.is_alive() and not got, "the take did not wait for the block in progress"
    release.set()
    filler.join(10)
    taker.join(10)
    assert len(got) == 1 and made == [MIN_BLOCK] and pool.hits == 1 and pool.misses == 1


def test_a_prefill_that_cannot_pin_leaves_the_take_to_say_so():
    def refuse(n):
        raise DeviceError(f"cannot page-lock {n} bytes of host memory")

    pool = PinnedPool(refuse)
    assert pool.prefill(MIN_BLOCK, 2) == 0
    errors = []

    def take():
        try:
            pool.take(MIN_BLOCK)
        except DeviceError as exc:
            errors.append(exc)

    taker = threading.Thread(target=take, daemon=True)
    taker.start()
    taker.join(10)  # no wait for blocks that never come
    assert not taker.is_alive(), "the take waits for blocks that never come"
    assert len(errors) == 1 and f"cannot page-lock {MIN_BLOCK} bytes" in str(errors[0])


def test_a_prefill_counts_the_blocks_another_is_pinning():
    release = threading.Event()
    made = []

    def slow(n):
        made.append(n)
        assert release.wait(10)
        return np.zeros(n, np.uint8)

    pool = PinnedPool(slow)
    first = threading.Thread(target=pool.prefill, args=(MIN_BLOCK, 2))
    first.start()
    while not made:
        threading.Event().wait(0.01)
    assert pool.prefill(MIN_BLOCK, 2) == 0  # two on their way already
    release.set()
    first.join(10)
    assert len(made) == 2 and len(pool._free[MIN_BLOCK]) == 2


def test_blocks_on_their_way_in_another_class_count_against_the_room():
    pool = PinnedPool(lambda n: np.zeros(n, np.uint8), max_cached_bytes=3 * MIN_BLOCK)
    pool._pending[2 * MIN_BLOCK] = 1  # as if another thread were pinning one
    assert pool.prefill(MIN_BLOCK, 3) == 1  # room for one more block of 64 KiB


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_waits_for_no_prefill_of_its_parent():
    release, started = threading.Event(), threading.Event()

    def slow(n):
        started.set()
        release.wait(10)
        return np.zeros(n, np.uint8)

    pool = PinnedPool(slow)
    filler = threading.Thread(target=pool.prefill, args=(MIN_BLOCK, 2))
    filler.start()
    assert started.wait(10)
    pid = os.fork()  # while the parent's thread pins: the child has no such thread
    if pid == 0:
        code = 3
        try:
            pool._allocate = lambda n: np.zeros(n, np.uint8)
            code = 0 if pool.take(MIN_BLOCK).nbytes == MIN_BLOCK else 4
        finally:
            os._exit(code)
    release.set()
    filler.join(10)
    for _ in range(100):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the child waited for blocks its parent's thread was pinning")
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_prefill_pins_no_more_than_the_pool_keeps():
    made = []
    pool = PinnedPool(lambda n: made.append(n) or np.zeros(n, np.uint8),
                      max_cached_bytes=3 * MIN_BLOCK)
    assert pool.prefill(2 * MIN_BLOCK, 3) == 1 and pool.cached_bytes == 2 * MIN_BLOCK
    assert pool.prefill(MIN_BLOCK, 3) == 1 and pool.cached_bytes == 3 * MIN_BLOCK
    assert pool.prefill(MIN_BLOCK, 3) == 0 and len(made) == 2  # full: nothing pinned
    assert pool.take(MIN_BLOCK) is not None and pool.hits == 1


# --- stage_ahead -------------------------------------------------------------------------------

class PinningDevice(FakeDevice):
    """A fake device whose staging pool counts as page-locked (pins_host_memory)."""

    def __init__(self):
        super().__init__()
        self.pinned = []  # (bytes, thread) of each allocation
        self.activations = []  # the threads that activated it, in order

    def allocate_pinned(self, nbytes):
        self.pinned.append((int(nbytes), threading.get_ident()))
        return np.zeros(int(nbytes), np.uint8)

    @contextlib.contextmanager
    def activate(self):
        self.activations.append(threading.get_ident())
        with super().activate():
            yield self


@pytest.fixture
def small_stage_ahead(monkeypatch):
    """stage_ahead for downloads from MIN_BLOCK (its 4 MiB floor, scaled down)."""
    from sbmlgpu.runtime import layout

    monkeypatch.setattr(layout, "STAGE_AHEAD_MIN", MIN_BLOCK)


def test_stage_ahead_pins_two_chunks_of_the_downloads_class_on_a_thread(small_stage_ahead):
    device = PinningDevice()
    me = threading.get_ident()
    future = stage_ahead(device, 10 * MIN_BLOCK, chunk_bytes=2 * MIN_BLOCK)
    assert future is not None and future.result(10) == 2
    assert [n for n, _ in device.pinned] == [2 * MIN_BLOCK] * 2
    assert all(thread != me for _, thread in device.pinned), "pinned in the caller's thread"
    # the device's context is made in the caller's thread, not the pool's (PyCUDA
    # cleans an object up outside an activation only in its context's thread)
    assert device.activations[:1] == [me]
    # a download smaller than a chunk copies in one chunk of its own size class
    assert stage_ahead(device, 3 * MIN_BLOCK, chunk_bytes=8 * MIN_BLOCK).result(10) == 2
    assert [n for n, _ in device.pinned[2:]] == [4 * MIN_BLOCK] * 2
    # kept already: nothing more
    assert stage_ahead(device, 10 * MIN_BLOCK, chunk_bytes=2 * MIN_BLOCK).result(10) == 0


def test_stage_ahead_leaves_small_downloads_and_plain_memory_alone():
    from sbmlgpu.runtime.layout import STAGE_AHEAD_MIN

    device = PinningDevice()
    assert stage_ahead(device, STAGE_AHEAD_MIN - 1) is None
    assert stage_ahead(FakeDevice(), 10 * STAGE_AHEAD_MIN) is None
    assert device.pinned == []


def test_a_staged_download_takes_the_blocks_pinned_ahead(driver, small_stage_ahead):
    from sbmlgpu.runtime import download_staged

    device = driver.devices()[0]
    chunk = 2 * MIN_BLOCK
    data = np.arange(5 * chunk // 8, dtype=np.float64)
    buffer = device.to_device(data)
    assert stage_ahead(device, data.nbytes, chunk_bytes=chunk).result(10) == 2
    pool = device.pinned_pool()
    misses = pool.misses
    out = np.empty_like(data)
    download_staged(device, buffer, out, chunk_bytes=chunk)
    assert np.array_equal(out, data)
    assert pool.hits == 2 and pool.misses == misses, "the download pinned its own stages"


# --- the ode backend asks for it ---------------------------------------------------------------

@pytest.mark.parametrize("summary,precision", [(False, "double"), (False, "float"),
                                               (True, "double")])
def test_a_gpu_time_course_stages_its_download_ahead_and_the_cpu_path_does_not(
        summary, precision, monkeypatch):
    needs_compiler()
    from sbmlgpu.plugins.ode import program as program_module
    from sbmlgpu.plugins.ode.backend import OdeBackend
    from sbmlgpu.plugins.ode.options import OdeOptions
    from sbmlgpu.schedule import Scheduler
    from sbmlgpu.tasks import TimeCourse

    from .test_ode_engine_fake import compile_for_host

    asked = []
    monkeypatch.setattr(program_module, "stage_ahead",
                        lambda device, nbytes: asked.append((device, nbytes)))
    net = load("seir_epidemic")
    rng = np.random.default_rng(5)
    params = {"beta": rng.uniform(0.1, 1.0, 200), "gamma": rng.uniform(0.05, 0.5, 200)}
    times = np.linspace(0, 160, 9)
    task = TimeCourse(times=times, parameters=params, summary=summary, progress=False)
    device = FakeDevice(compile=compile_for_host)
    options = OdeOptions(method="dopri5", pilot_size=64, precision=precision).validate()
    program = OdeBackend().compile(net, options, device)
    result = program.run(task, Scheduler(devices=[device], progress=False))
    outputs = len(result.ids)
    # one launch's time courses (the fake GPU holds all 200 members at once) in the
    # kernel's precision; a summary downloads none
    size = 4 if precision == "float" else 8
    assert asked == ([] if summary else [(device, 200 * len(times) * outputs * size)])
    asked.clear()
    # a scheduler that caps its launches: the bytes of one capped launch
    program.run(task, Scheduler(devices=[device], max_batch_items=64, progress=False))
    assert asked == ([] if summary else [(device, 64 * len(times) * outputs * size)])
    asked.clear()
    # two GPUs share the batches: which downloads what is the scheduler's, none staged
    program.run(task, Scheduler(devices=[device, FakeDevice(1, compile=compile_for_host)],
                                progress=False))
    assert asked == []
    OdeBackend().compile(net, options, None).run(TimeCourse(
        times=times, parameters=params, progress=False))
    assert asked == []


# --- page-locked memory through the driver library ---------------------------------------------

class FakeDriverLibrary:
    """cuMemHostAlloc / cuMemFreeHost / cuGetErrorString over ordinary memory, called
    as ctypes calls them."""

    def __init__(self, fail: int = 0, current=None):
        self.fail = fail
        self.current = current  # whether a context is current (default: _activate's)
        self.live: dict[int, ctypes.Array] = {}
        self.freed: list[int] = []
        self.flags: list[int] = []
        self.context_current = False

    def cuMemHostAlloc(self, pointer, nbytes, flags):  # noqa: N802 - the driver's name
        current = self.current() if self.current is not None else self.context_current
        assert current, "cuMemHostAlloc needs a current context"
        if self.fail:
            return self.fail
        memory = ctypes.create_string_buffer(int(nbytes))
        address = ctypes.addressof(memory)
        self.live[address] = memory
        self.flags.append(int(flags))
        pointer._obj.value = address  # ctypes.byref(c_void_p)
        return 0

    def cuMemFreeHost(self, address):  # noqa: N802
        self.freed.append(int(address))
        self.live.pop(int(address))
        return 0

    def cuMemHostGetFlags(self, flags, address):  # noqa: N802
        if address.value not in self.live:
            return 1  # CUDA_ERROR_INVALID_VALUE: not the driver's page-locked memory
        flags._obj.value = self.flags[list(self.live).index(address.value)]
        return 0

    def cuGetErrorString(self, code, text):  # noqa: N802
        text._obj.value = b"out of memory"
        return 0


def _activate(lib):
    @contextlib.contextmanager
    def activate():
        lib.context_current = True
        try:
            yield
        finally:
            lib.context_current = False
    return activate


def test_driver_memory_is_portable_writable_and_freed_with_its_last_view():
    lib = FakeDriverLibrary()
    memory = DriverHostMemory(lib)
    block = memory.allocate(3 * MIN_BLOCK, _activate(lib), "GPU 0")
    assert block.dtype == np.uint8 and block.shape == (3 * MIN_BLOCK,) and block.flags.writeable
    assert lib.flags == [PORTABLE] and not lib.context_current
    address = block.ctypes.data
    assert address in lib.live
    assert memory.flags(block, _activate(lib)) == PORTABLE
    assert memory.flags(np.zeros(16, np.uint8), _activate(lib)) is None
    stage = block[:100]  # a download's stage: a view
    stage[:] = 7
    del block
    gc.collect()
    assert lib.freed == [] and bytes(lib.live[address][:100]) == b"\x07" * 100
    del stage
    gc.collect()
    assert lib.freed == [address] and not lib.live


def test_driver_memory_that_cannot_be_pinned_is_a_device_error_naming_the_device():
    lib = FakeDriverLibrary(fail=2)
    with pytest.raises(DeviceError, match=r"GPU 0: cannot page-lock 4096 bytes of host "
                                          r"memory: cuMemHostAlloc failed: out of memory"):
        DriverHostMemory(lib).allocate(4096, _activate(lib), "GPU 0")
    with pytest.raises(DeviceError, match="cannot page-lock 0 bytes"):
        DriverHostMemory(lib).allocate(0, _activate(lib), "GPU 0")


def test_the_pycuda_driver_pins_through_the_driver_library_when_given_it(driver):
    from sbmlgpu.runtime import pycuda_driver

    cuda = driver.devices()[0].cuda
    lib = FakeDriverLibrary(current=lambda: bool(cuda.stack()))  # PyCUDA's context stack
    given = pycuda_driver.PyCudaDriver(cuda, DriverHostMemory(lib))
    device = given.devices()[0]
    block = device.pinned_pool().take(1000)
    assert block.nbytes == MIN_BLOCK and lib.flags == [PORTABLE] and len(lib.live) == 1
    device.pinned_pool().give_back(block)
    # without it (a test's stand-in, or a library that did not load): PyCUDA's own
    plain = driver.devices()[0].pinned_pool().take(1000)
    assert plain.base.flags == driver.devices()[0].cuda.host_alloc_flags.PORTABLE


def test_a_dropped_device_is_collected_and_its_driver_memory_freed(driver):
    import weakref

    from sbmlgpu.runtime import pycuda_driver

    cuda = driver.devices()[0].cuda
    lib = FakeDriverLibrary(current=lambda: bool(cuda.stack()))
    given = pycuda_driver.PyCudaDriver(cuda, DriverHostMemory(lib))
    device = given.devices()[0]
    pool = device.pinned_pool()
    pool.give_back(pool.take(1000))  # a block kept in the pool
    gone = weakref.ref(device)
    del given, device, pool
    gc.collect()
    assert gone() is None, "the memory's finalizer keeps the device (and its pool) alive"
    assert len(lib.freed) == 1 and not lib.live


STUB = r"""
#include <stdlib.h>
#include <string.h>
static int frees = 0;
int cuMemHostAlloc(void **p, size_t n, unsigned int flags) {
    if (n > ((size_t)1 << 40)) return 2;
    *p = malloc(n); memset(*p, 0, n); return flags == 1 ? 0 : 1; }
int cuMemFreeHost(void *p) { free(p); frees += 1; return 0; }
int cuMemHostGetFlags(unsigned int *flags, void *p) { *flags = 3; return p ? 0 : 1; }
int cuGetErrorString(int code, const char **text) {
    *text = code == 2 ? "out of memory" : "unknown"; return 0; }
int frees_so_far(void) { return frees; }
"""


def test_the_driver_library_is_called_through_ctypes_as_declared(tmp_path):
    """A stub of the four driver functions, compiled and loaded as load() loads
    libcuda: the argument and result types declared there carry the calls."""
    import shutil
    import subprocess

    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler to build the stub driver library")
    (tmp_path / "stub.c").write_text(STUB)
    library = tmp_path / "libstubcuda.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(library), str(tmp_path / "stub.c")],
                   check=True)
    memory = DriverHostMemory.load(str(library))
    assert memory is not None
    activate = contextlib.nullcontext
    block = memory.allocate(5 * MIN_BLOCK, activate, "GPU 0")
    assert block.nbytes == 5 * MIN_BLOCK and not block.any()
    block[-1] = 9
    assert memory.flags(block, activate) == 3
    del block
    gc.collect()
    assert memory.lib.frees_so_far() == 1
    with pytest.raises(DeviceError, match="cuMemHostAlloc failed: out of memory"):
        memory.allocate(1 << 41, activate, "GPU 0")
    # a machine without a GPU driver: None, not an error
    assert DriverHostMemory.load(str(tmp_path / "missing.so")) is None
