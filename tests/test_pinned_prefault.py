"""Faulting in a result's pages while the kernel runs, and copies on threads
(core/runtime/prefault.py), as the GPU engine uses them: the touch never lands on a
downloaded value, a memory-mapped result is never touched, the copies are exact."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

from sbmlgpu.ode.engines import GpuEngine, LaunchConfig
from sbmlgpu.ode.kernel_source import KernelSource
from sbmlgpu.profile import Profiler
from sbmlgpu.runtime import prefault
from sbmlgpu.runtime.prefault import PAGE, Prefault, parallel_copy

from .fakes import FakeDevice, FakeKernel, FakeModule

KERNEL = "sbmlgpu_ode_fake"


@pytest.fixture
def small(monkeypatch):
    """Prefault and parallel copies for small arrays too, on several threads."""
    monkeypatch.setattr(prefault, "MIN_BYTES", 0)
    monkeypatch.setattr(prefault, "MIN_PIECE", 1)
    monkeypatch.setattr(prefault, "threads", lambda: 4)


def test_one_byte_per_page_is_written_and_join_waits(small):
    array = np.full(10 * PAGE + 123, 7, np.uint8)
    Prefault(array).join()
    assert (array[::PAGE] == 0).all()
    touched = np.zeros(array.size, bool)
    touched[::PAGE] = True
    assert (array[~touched] == 7).all()


def test_memory_mapped_and_small_arrays_are_left_alone(small, tmp_path, monkeypatch):
    mapped = np.lib.format.open_memmap(tmp_path / "r.npy", mode="w+", dtype=np.uint8,
                                       shape=(4 * PAGE,))
    mapped[...] = 7
    assert not Prefault(mapped).started
    assert (mapped == 7).all()
    monkeypatch.setattr(prefault, "MIN_BYTES", 8 * PAGE)
    assert not Prefault(np.zeros(4 * PAGE, np.uint8)).started


def test_parallel_copy_is_exact(small):
    source = np.random.default_rng(0).integers(0, 255, 100_003, dtype=np.uint8)
    target = np.zeros_like(source)
    parallel_copy(target, source)
    assert np.array_equal(target, source)


class Writes(FakeKernel):
    """A trajectory kernel: out[(k * cols + j) * n + i] = 1000 * (k * cols + j) + i + 1/3
    (no zero byte: a stray touch would change it), every member ok after one step."""

    def run(self, grid, block, args, shared_bytes):
        n, _, _, n_times, out, status, steps = args[:7]
        n = int(n)
        cols = out.nbytes // 8 // n
        out.view(np.float64)[:] = (1000.0 * np.arange(cols)[:, None]
                                   + np.arange(n)[None, :] + 1 / 3).ravel()
        status.view(np.int8)[:] = 0
        steps.view(np.int32)[:] = 1


def test_the_engine_downloads_after_every_touch_is_done(small, monkeypatch):
    touches_done = []

    def slow_touch(flat):  # a touch still running when the kernel has finished
        time.sleep(0.2)
        flat[::PAGE] = 0
        touches_done.append(threading.get_ident())

    monkeypatch.setattr(prefault, "_touch", slow_touch)
    device = FakeDevice(compile=lambda dev, src: FakeModule(
        [KERNEL], lambda name: Writes(name, log=dev.launches)))
    source = KernelSource("fake.cu", "fake", KERNEL, "rk4", "double", 0.0, 0.0, 0.0, "none")
    engine = GpuEngine(source, fast_math=False)
    members, times, outputs = 700, 9, 3  # 151 KB: pages beyond the first to touch
    destination = np.full((members, times, outputs), -1.0)
    config = LaunchConfig(rtol=1e-6, atol=1e-9, h0=0.0, max_step=0.0, dt=0.0,
                          max_steps=10, seed=0, block_size=128)
    profiler = Profiler()
    out = engine.run(device, np.zeros((0, members)), np.arange(float(times)), outputs,
                     config, destination=destination, profiler=profiler)
    assert out.out is destination and touches_done
    assert [s.name for s in profiler.spans].count("fault in result pages") == 1
    cols = times * outputs
    expected = (1000.0 * np.arange(cols)[None, :] + np.arange(members)[:, None] + 1 / 3)
    assert np.array_equal(destination.reshape(members, cols), expected)


def test_without_rows_to_fill_a_new_array_is_faulted_in(small, monkeypatch):
    import sbmlgpu.ode.engines as engines

    made = []
    monkeypatch.setattr(engines, "Prefault", lambda array: made.append(array) or Prefault(array))
    device = FakeDevice(compile=lambda dev, src: FakeModule(
        [KERNEL], lambda name: Writes(name, log=dev.launches)))
    source = KernelSource("fake.cu", "fake", KERNEL, "rk4", "double", 0.0, 0.0, 0.0, "none")
    config = LaunchConfig(rtol=1e-6, atol=1e-9, h0=0.0, max_step=0.0, dt=0.0,
                          max_steps=10, seed=0, block_size=128)
    out = GpuEngine(source, fast_math=False).run(device, np.zeros((0, 10)), np.arange(3.0),
                                                 2, config)
    assert len(made) == 1 and out.out is made[0] and out.out.shape == (10, 3, 2)
    assert np.array_equal(out.out.reshape(10, 6), 1000.0 * np.arange(6)[None, :]
                          + np.arange(10)[:, None] + 1 / 3)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_gets_its_own_host_memory_threads():
    """A child forked after the pool ran inherits it without its threads; the pool
    must be made again there, or the child's scan waits forever."""
    from sbmlgpu.results.finite import non_finite_counts

    data = np.ones((4000, 51, 25))  # several blocks: the scan goes to the pool
    data[3, 2, 1] = np.nan
    ok = np.ones(4000, bool)
    assert non_finite_counts(data, ok).tolist()[1] == 1
    pid = os.fork()
    if pid == 0:  # the child: answer within 20 s or be stopped by the alarm
        signal.alarm(20)
        counts = non_finite_counts(data, ok)
        os._exit(0 if counts[1] == 1 and counts.sum() == 1 else 3)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
