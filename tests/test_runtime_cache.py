"""The on-disk cubin cache: hits, misses, keys, atomic files, no nvcc on a hit."""

from __future__ import annotations

import subprocess

import pytest

from sbmlgpu.codegen import compile_check
from sbmlgpu.codegen.compile_check import CompileError, nvcc_available
from sbmlgpu.runtime import cache as cache_module
from sbmlgpu.runtime.cache import CompileCache, default_cache, default_directory

needs_nvcc = pytest.mark.skipif(not nvcc_available(), reason="nvcc not installed")
KERNEL = 'extern "C" __global__ void k(double* y) { y[threadIdx.x] *= 2.0; }\n'


class FakeCompiler:
    def __init__(self):
        self.calls = []

    def __call__(self, source, arch, options=(), name="kernel"):
        self.calls.append((source, arch, tuple(options)))
        return b"\x7fELF" + f"{arch}|{options}|{source}".encode()


@pytest.fixture
def fake(tmp_path, monkeypatch):
    monkeypatch.setattr(CompileCache, "compiler_version", lambda self: "nvcc 99.9 (test)")
    compiler = FakeCompiler()
    return CompileCache(tmp_path / "cache", compiler=compiler), compiler


def test_miss_then_hit(fake):
    cache, compiler = fake
    first = cache.compile(KERNEL, "sm_90", ["-O3"])
    second = cache.compile(KERNEL, "sm_90", ["-O3"])
    assert first == second and len(compiler.calls) == 1
    assert (cache.misses, cache.hits) == (1, 1)
    # a new cache object on the same folder (a new process) hits too
    again = CompileCache(cache.directory, compiler=compiler)
    assert again.compile(KERNEL, "sm_90", ["-O3"]) == first and len(compiler.calls) == 1


def test_key_depends_on_source_options_arch_and_nvcc(fake, monkeypatch):
    cache, _ = fake
    base = cache.key(KERNEL, "sm_90", ["-O3"])
    assert base == cache.key(KERNEL, "sm_90", ("-O3",))
    others = {cache.key(KERNEL + " ", "sm_90", ["-O3"]), cache.key(KERNEL, "sm_80", ["-O3"]),
              cache.key(KERNEL, "sm_90", ["-O2"]), cache.key(KERNEL, "sm_90", ["-O3", "-G"]),
              cache.key(KERNEL, "sm_90", [])}
    assert base not in others and len(others) == 5
    monkeypatch.setattr(CompileCache, "compiler_version", lambda self: "nvcc 100.0 (test)")
    assert cache.key(KERNEL, "sm_90", ["-O3"]) != base


def test_each_variant_compiles_once(fake):
    cache, compiler = fake
    for _ in range(2):
        for arch in ("sm_90", "sm_80"):
            for opts in ((), ("-O2",)):
                cache.compile(KERNEL, arch, opts)
    assert len(compiler.calls) == 4 and cache.hits == 4


def test_files_are_whole_and_damage_is_repaired(fake):
    cache, compiler = fake
    data = cache.compile(KERNEL, "sm_90")
    path = cache.path(cache.key(KERNEL, "sm_90"))
    assert path.read_bytes() == data
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".tmp-")]
    path.write_bytes(b"garbage")  # e.g. a disk that filled up long ago
    assert cache.compile(KERNEL, "sm_90") == data and len(compiler.calls) == 2
    assert path.read_bytes() == data


def test_failures_are_not_cached(fake):
    cache, compiler = fake
    def failing(source, arch, options=(), name="kernel"):
        compiler.calls.append(source)
        raise CompileError(name, arch, "k.cu(1): error: nope", source)
    cache._compiler = failing
    for _ in range(2):
        with pytest.raises(CompileError):
            cache.compile(KERNEL, "sm_90")
    assert len(compiler.calls) == 2 and not list(cache.directory.glob("cubin/*.cubin"))


def test_unwritable_cache_still_compiles(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(CompileCache, "compiler_version", lambda self: "v")
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    cache = CompileCache(blocker / "cache", compiler=FakeCompiler())
    assert cache.compile(KERNEL, "sm_90").startswith(b"\x7fELF")
    assert "not writable" in caplog.text


def test_cache_directory_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("SBMLGPU_CACHE_DIR", str(tmp_path / "here"))
    assert default_directory() == tmp_path / "here"
    assert default_cache().directory == tmp_path / "here"
    monkeypatch.delenv("SBMLGPU_CACHE_DIR")
    assert default_directory().parts[-2:] == (".cache", "sbmlgpu")


@needs_nvcc
def test_real_nvcc_hit_runs_no_process(tmp_path, monkeypatch):
    cache = CompileCache(tmp_path / "cache")
    cubin = cache.compile(KERNEL, "sm_90", ["-O3"], name="k")
    assert cubin[:4] == b"\x7fELF" and cache.misses == 1

    # A fresh process: nothing memoised in memory, and no subprocess may start.
    compile_check._version_of.cache_clear()

    def forbidden(*args, **kwargs):
        raise AssertionError(f"a cache hit started a process: {args[0] if args else kwargs}")

    monkeypatch.setattr(subprocess, "run", forbidden)
    monkeypatch.setattr(subprocess, "Popen", forbidden)
    fresh = CompileCache(tmp_path / "cache")
    assert fresh.compile(KERNEL, "sm_90", ["-O3"], name="k") == cubin
    assert (fresh.hits, fresh.misses) == (1, 0)
    # and a different option is a miss, which does need nvcc
    with pytest.raises(AssertionError, match="started a process"):
        fresh.compile(KERNEL, "sm_90", ["-O2"], name="k")


@needs_nvcc
def test_version_note_tracks_nvcc(tmp_path):
    cache = CompileCache(tmp_path / "cache")
    version = cache.compiler_version()
    assert "Cuda compilation tools" in version
    notes = list((tmp_path / "cache" / "nvcc-version").iterdir())
    assert len(notes) == 1 and notes[0].read_text() == version
    assert cache_module.compile_check.nvcc_version() == version
