"""Host (C++) builds of generated kernels (sbmlgpu.runtime.host): the compiler, the
cache and its keys, typed errors, loading, and the OpenMP-after-fork guard."""

from __future__ import annotations

import ctypes
import multiprocessing
import subprocess

import pytest

from sbmlgpu.errors import DeviceError
from sbmlgpu.runtime import HostCompileError as exported_error
from sbmlgpu.runtime import host
from sbmlgpu.runtime.host import HostCompileError

needs_cxx = pytest.mark.skipif(host.find_compiler() is None, reason="no C++ compiler")
SOURCE = 'extern "C" double twice(double x) { return 2.0 * x; }\n'


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SBMLGPU_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(host.EXTRA_FLAGS_ENV, raising=False)
    return tmp_path / "cache" / "host"


def _forbid_processes(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError(f"a cache hit started a process: {args[0] if args else kwargs}")

    monkeypatch.setattr(subprocess, "run", forbidden)
    monkeypatch.setattr(subprocess, "Popen", forbidden)


@needs_cxx
def test_a_build_is_cached_and_a_hit_runs_no_compiler(cache, monkeypatch):
    first = host.build(SOURCE, "twice.cu")
    assert first.parent == cache and first.suffix == ".so"
    assert [p.name for p in cache.iterdir()] == [first.name]  # no temporary left behind
    _forbid_processes(monkeypatch)
    assert host.build(SOURCE, "twice.cu") == first
    with pytest.raises(AssertionError, match="started a process"):
        host.build(SOURCE + "// another source\n", "twice.cu")


@needs_cxx
def test_the_backends_flags_and_the_environment_change_the_key(cache, monkeypatch):
    plain = host.build(SOURCE, "twice.cu")
    no_contraction = host.build(SOURCE, "twice.cu", ("-ffp-contract=off",))
    monkeypatch.setenv(host.EXTRA_FLAGS_ENV, "-O3  -DSBMLGPU_TEST_FLAG")
    assert host.extra_flags() == ("-O3", "-DSBMLGPU_TEST_FLAG")
    extra = host.build(SOURCE, "twice.cu")
    assert len({plain, no_contraction, extra}) == 3
    assert host.build_flags(host.require_compiler(), ("-ffp-contract=off",))[-2:] == \
        ("-O3", "-DSBMLGPU_TEST_FLAG")


@needs_cxx
def test_a_loaded_library_runs_and_is_loaded_once_per_set_of_flags(cache, monkeypatch):
    library = host.load(SOURCE, "twice.cu")
    library.twice.restype = ctypes.c_double
    library.twice.argtypes = [ctypes.c_double]
    assert library.twice(21.0) == 42.0
    assert host.load(SOURCE, "twice.cu") is library
    monkeypatch.setenv(host.EXTRA_FLAGS_ENV, "-DSBMLGPU_OTHER_BUILD")
    assert host.load(SOURCE, "twice.cu") is not library


@needs_cxx
def test_a_compile_error_is_typed_and_names_the_source_and_its_line(cache):
    bad = SOURCE + 'extern "C" double broken(double x) { return x +; }\n'
    with pytest.raises(HostCompileError) as info:
        host.build(bad, "ssa_model_direct_double_0123.cu")
    error = info.value
    assert isinstance(error, DeviceError) and exported_error is HostCompileError
    assert "ssa_model_direct_double_0123.cu" in str(error)
    assert "    2 | extern \"C\" double broken" in str(error)  # the quoted source line
    assert not cache.exists() or not list(cache.iterdir())  # nothing cached


@needs_cxx
def test_a_compiler_past_its_time_limit_is_a_compile_error(cache):
    with pytest.raises(HostCompileError, match="stopped after"):
        host.build(SOURCE + "// slow\n", "slow.cu", timeout=1e-6)


def test_no_compiler_is_a_device_error_that_says_what_to_do(cache, monkeypatch, tmp_path):
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert host.find_compiler() is None
    with pytest.raises(DeviceError, match=r"no C\+\+ compiler.*\$CXX.*--cpu-engine numpy"):
        host.load(SOURCE, "twice.cu")


def test_cxx_names_the_compiler(monkeypatch, tmp_path):
    fake = tmp_path / "my-cxx"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CXX", str(fake))
    assert host.find_compiler() == str(fake)


def _child_may_run_parallel(queue):
    queue.put(host.may_run_parallel())


def test_a_child_forked_after_openmp_started_runs_serially():
    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork on this platform")
    assert host.may_run_parallel()  # this process is (now) the one that runs threads
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child_may_run_parallel, args=(queue,))
    child.start()
    child.join(60)
    assert queue.get(timeout=10) is False



def test_a_compile_past_its_time_limit_kills_the_compilers_children(tmp_path):
    """The driver's children (cc1plus) die with it: a stand-in 'compiler' that starts a
    long child and waits is stopped, and so is its child."""
    import os
    import subprocess
    import time

    pid_file = tmp_path / "child.pid"
    script = tmp_path / "fake-cxx"
    script.write_text(f"#!/bin/sh\nsleep 60 &\necho $! > {pid_file}\nwait\n")
    script.chmod(0o755)
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        host.run_compiler([str(script)], timeout=1.0)
    assert time.monotonic() - started < 30
    child = int(pid_file.read_text())
    time.sleep(0.2)
    alive = True
    try:
        os.kill(child, 0)
        state = open(f"/proc/{child}/stat").read().split()[2] if os.path.exists(f"/proc/{child}/stat") else "X"
        alive = state not in ("Z", "X")
    except ProcessLookupError:
        alive = False
    assert not alive, "the compiler's child outlived the time limit"
