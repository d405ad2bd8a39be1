"""A large ode kernel built by nvcc as several translation units in parallel
(sbmlgpu.runtime.parallel_build): the generator marks the model's functions and the
parts of a large sparse Jacobian as units; they compile alone and link into one cubin;
the parts give the host build the numbers of one Jacobian function; the cubin cache
keys a split build apart; a split that fails falls back to one whole compile."""

from __future__ import annotations

import numpy as np
import pytest

from sbmlgpu.codegen.compile_check import nvcc_available
from sbmlgpu.ode import codegen
from sbmlgpu.plugins.ode.program import kernel_source
from sbmlgpu.runtime import parallel_build

from .ode_helpers import needs_compiler
from .test_ode_compile import kernel_model, ring

needs_nvcc = pytest.mark.skipif(not nvcc_available(), reason="nvcc not found")
LARGE = codegen.INLINE_MODEL_MAX + 8  # called (not inlined) model functions: units


@pytest.fixture(autouse=True)
def two_jobs(monkeypatch):
    """Two nvcc processes at once, whatever the machine (one core builds whole)."""
    monkeypatch.setenv(parallel_build.JOBS_ENV, "2")


@pytest.fixture(scope="module")
def large_model():
    return kernel_model(ring(LARGE))


def _parted_source(model, monkeypatch, entries: int, method: str = "rodas4"):
    monkeypatch.setattr(codegen, "JACOBIAN_PART_ENTRIES", entries)
    return kernel_source(model, method)


def test_a_large_models_functions_and_jacobian_parts_are_units(large_model, monkeypatch):
    source = _parted_source(large_model, monkeypatch, 40)
    units = parallel_build.split(source.text)
    names = [u.name for u in units]
    parts = [n for n in names if n.startswith("model_m_sparse_")]
    assert names[:4] == ["main", "model_x0", "model_rhs", "model_outputs"] and len(parts) >= 3
    main = units[0].text
    # main keeps every marked function as a declaration only, and calls the parts
    for name in names[1:]:
        assert f"{name}(" in main and f"/* {name}: compiled in a unit of its own */" in main
    assert "sbmlgpu:unit" not in main and "model_m_sparse_0(t, x, p, A, ft);" in main
    for unit in units[1:]:  # each unit ends with its own function's body
        assert unit.text.rstrip().endswith("/* sbmlgpu:end */")
        assert unit.text.count("sbmlgpu:unit") == 1
    # each entry of the Jacobian is assigned in exactly one part
    assigned = [line.split("=")[0].strip() for u in units if u.name in parts
                for line in u.text.split("sbmlgpu:unit")[1].splitlines()
                if line.strip().startswith(("A[", "ft["))]
    assert len(assigned) == len(set(assigned)) > 3 * 40 - 40


def test_small_models_mark_no_units():
    source = kernel_source(kernel_model(ring(10)), "rodas4")
    assert not parallel_build.builds_in_units(source.text)
    assert parallel_build.split(source.text) is None


def test_jacobian_parts_give_the_host_build_the_numbers_of_one_function(large_model,
                                                                        monkeypatch):
    needs_compiler()
    from sbmlgpu.plugins.ode.native import host_kernel

    table = np.array([[0.2, 0.5, 1.5]])
    times = np.linspace(0.0, 5.0, 6)
    config = {"rtol": 1e-8, "atol": 1e-10, "h0": 0.0, "max_step": 0.0, "dt": 0.0,
              "max_steps": 100000, "seed": 0}
    runs = []
    for entries in (40, 10**9):  # in parts; one function
        source = _parted_source(large_model, monkeypatch, entries)
        assert ("model_m_sparse_0(" in source.text) == (entries == 40)
        runs.append(host_kernel(source).run(table, times, len(large_model.outputs), config))
    assert np.all(runs[0][1] == 0)
    for parted, whole in zip(*runs):
        np.testing.assert_array_equal(parted, whole)  # bit for bit


@needs_nvcc
@pytest.mark.parametrize("method", ["rodas4", "dopri5"])
def test_units_compile_alone_and_link_into_one_cubin(large_model, monkeypatch, method):
    source = _parted_source(large_model, monkeypatch, 60, method)
    report = parallel_build.BuildReport()
    cubin = parallel_build.compile_source(source.text, "sm_90", name=source.name,
                                          max_jobs=2, report=report)
    assert cubin.startswith(b"\x7fELF") and report.fell_back is None
    assert [name for name, _ in report.units] == \
        [u.name for u in parallel_build.split(source.text)]
    assert source.kernel.encode() in cubin  # the entry point survives the link


@needs_nvcc
def test_a_split_that_does_not_compile_falls_back_to_one_compile(caplog):
    # the marked function uses a static helper defined after it: fine in one file,
    # undefined in its unit
    text = ("static __device__ double helper(double v);\n"
            "/* sbmlgpu:unit twice */\n"
            "__device__ __noinline__ double twice(double v)\n{\n    return helper(v);\n}\n"
            "/* sbmlgpu:end */\n"
            "static __device__ double helper(double v) { return 2.0 * v; }\n"
            'extern "C" __global__ void k(double* y) { y[0] = twice(y[0]); }\n')
    report = parallel_build.BuildReport()
    cubin = parallel_build.compile_source(text, "sm_90", name="fallback.cu", report=report)
    assert cubin.startswith(b"\x7fELF") and b"k" in cubin
    assert report.fell_back and "twice" in report.fell_back
    assert "compiling it whole" in caplog.text


def test_the_cubin_cache_keys_a_split_build_apart(tmp_path, monkeypatch, large_model):
    from sbmlgpu.runtime import cache as cache_module

    monkeypatch.setattr(cache_module.CompileCache, "compiler_version", lambda self: "nvcc X")
    cache = cache_module.CompileCache(tmp_path)
    text = kernel_source(large_model, "dopri5").text
    assert parallel_build.builds_in_units(text)
    before = cache.key(text, "sm_90")
    monkeypatch.setattr(parallel_build, "BUILD", parallel_build.BUILD + " changed")
    assert cache.key(text, "sm_90") != before  # the build scheme is in the key
    small = kernel_source(kernel_model(ring(10)), "dopri5").text
    key = cache.key(small, "sm_90")
    monkeypatch.setattr(parallel_build, "BUILD", "other")
    assert cache.key(small, "sm_90") == key  # unsplit sources keep their keys


def test_the_cubin_cache_builds_through_the_parallel_build(tmp_path, monkeypatch):
    from sbmlgpu.runtime import cache as cache_module

    calls = []

    def fake(source, arch, options=(), name="kernel", report=None):
        calls.append((arch, tuple(options), name))
        return b"\x7fELF fake"

    monkeypatch.setattr(cache_module.CompileCache, "compiler_version", lambda self: "nvcc X")
    monkeypatch.setattr(parallel_build, "compile_source", fake)
    cache = cache_module.CompileCache(tmp_path)
    assert cache.compile("/* text */", "sm_90", ("-O3",), name="k.cu") == b"\x7fELF fake"
    assert cache.compile("/* text */", "sm_90", ("-O3",), name="k.cu") == b"\x7fELF fake"
    assert calls == [("sm_90", ("-O3",), "k.cu")] and cache.hits == 1


def test_jobs_follow_the_environment(monkeypatch):
    monkeypatch.setenv(parallel_build.JOBS_ENV, "3")
    assert parallel_build.jobs() == 3
    monkeypatch.setenv(parallel_build.JOBS_ENV, "none")
    assert parallel_build.jobs() >= 1


def test_one_core_builds_whole(monkeypatch, large_model):
    text = kernel_source(large_model, "dopri5").text
    assert parallel_build.builds_in_units(text)
    monkeypatch.setenv(parallel_build.JOBS_ENV, "1")
    assert not parallel_build.builds_in_units(text)


def test_units_can_be_switched_off(monkeypatch, large_model, tmp_path):
    from sbmlgpu.runtime import cache as cache_module

    monkeypatch.setattr(cache_module.CompileCache, "compiler_version", lambda self: "nvcc X")
    cache = cache_module.CompileCache(tmp_path)
    text = kernel_source(large_model, "dopri5").text
    split_key = cache.key(text, "sm_90")
    monkeypatch.setenv(parallel_build.UNITS_ENV, "0")
    assert not parallel_build.builds_in_units(text)
    assert cache.key(text, "sm_90") != split_key  # a whole compile is another binary


def test_units_of_a_kernel_in_large_blocks_get_a_register_cap():
    """A unit compiled apart does not see the kernel's __launch_bounds__: above 256
    threads per block the units are capped so that a block fits; at 256 or fewer
    nothing changes (the default builds are the same as before)."""
    from sbmlgpu.runtime.parallel_build import Unit, _register_cap

    def units(bound):
        return [Unit("rhs", "__device__ void model_rhs() {}"),
                Unit("kernel", f"extern \"C\" __global__ void __launch_bounds__({bound}) k() {{}}")]

    assert _register_cap(units(128)) == [] and _register_cap(units(256)) == []
    assert _register_cap(units(512)) == ["-maxrregcount=128"]
    assert _register_cap(units(1024)) == ["-maxrregcount=64"]
    # blocks per SM count too, and threads are held in groups of 4 warps: 224 threads x
    # 3 blocks is what nvlink refused uncapped ("max regcount of 80 calls ... 254")
    assert _register_cap(units("224, 3")) == ["-maxrregcount=80"]
    assert _register_cap(units("128, 2")) == [] and _register_cap(units("256, 2")) == [
        "-maxrregcount=128"]
    # what ptxas -v gave the entry itself for these bounds (review of 26a7552): the
    # blocks' warps together, rounded up to a multiple of 4
    for bounds, cap in [("32, 16", 128), ("64, 10", 96), ("160, 4", 96), ("96, 8", 80),
                        ("160, 3", 128), ("288, 3", 72)]:
        assert _register_cap(units(bounds)) == [f"-maxrregcount={cap}"], bounds
    assert _register_cap(units("64, 3")) == []


def test_only_an_nvcc_that_said_why_refuses_a_units_build(tmp_path):
    """A refusal (exit status > 0 with a diagnostic) is kept by the cache's marker; a
    timeout or a silent failure is not (it may pass next time)."""
    from sbmlgpu.codegen.compile_check import CompileError

    with pytest.raises(parallel_build.Refused):
        parallel_build._run(["sh", "-c", "echo 'error: no' >&2; exit 2"], tmp_path, "k",
                            "sm_90", "")
    with pytest.raises(CompileError) as silent:
        parallel_build._run(["sh", "-c", "exit 1"], tmp_path, "k", "sm_90", "")
    assert not isinstance(silent.value, parallel_build.Refused)


@needs_nvcc
def test_units_of_a_kernel_with_blocks_per_sm_link():
    """The heterogeneous DBN kernel's shape: an entry with __launch_bounds__(224, 3)
    calling a marked function that wants many registers links when built in units."""
    body = " + ".join(f"x[{i}] * x[{(i * 7) % 64}]" for i in range(64))
    text = ("/* sbmlgpu:unit heavy */\n"
            "__device__ __noinline__ double heavy(const double* x)\n{\n"
            f"    double a[64];\n    for (int i = 0; i < 64; ++i) a[i] = x[i] * x[63 - i];\n"
            f"    return {body.replace('x[', 'a[')};\n}}\n"
            "/* sbmlgpu:end */\n"
            'extern "C" __global__ void __launch_bounds__(224, 3) k(double* y)\n'
            "{ y[threadIdx.x] = heavy(y); }\n")
    report = parallel_build.BuildReport()
    cubin = parallel_build.compile_source(text, "sm_90", name="bounds.cu", report=report)
    assert cubin.startswith(b"\x7fELF") and report.fell_back is None


def test_a_units_build_that_fell_back_is_cached_as_a_whole_build(tmp_path, monkeypatch):
    """The cubin of a fallback is a whole compile's: cached under the whole build's key,
    so the units' key never holds it (and a later run tries the units again)."""
    from sbmlgpu.runtime import cache as cache_module

    def fell_back(source, arch, options=(), name="kernel", report=None):
        report.fell_back = "a unit failed"
        return b"\x7fELF whole"

    monkeypatch.setattr(cache_module.CompileCache, "compiler_version", lambda self: "nvcc X")
    monkeypatch.setattr(parallel_build, "builds_in_units", lambda source: True)
    monkeypatch.setattr(parallel_build, "compile_source", fell_back)
    cache = cache_module.CompileCache(tmp_path)
    cache.compile("/* text */", "sm_90", name="k.cu")
    units_key = cache.key("/* text */", "sm_90")
    whole_key = cache.key("/* text */", "sm_90", whole=True)
    assert units_key != whole_key
    assert not cache.path(units_key).exists()
    assert cache.path(whole_key).read_bytes() == b"\x7fELF whole"


def test_a_refused_units_build_is_not_tried_again(tmp_path, monkeypatch):
    """nvcc refusing the units (it would again) leaves a marker: the next runs load the
    whole build instead of compiling twice each time; a transient failure does not."""
    from sbmlgpu.runtime import cache as cache_module

    calls = []

    def refused(source, arch, options=(), name="kernel", report=None):
        calls.append(source)
        report.fell_back = "nvlink refused"
        report.refused = source.startswith("/* refused")
        return b"\x7fELF whole"

    monkeypatch.setattr(cache_module.CompileCache, "compiler_version", lambda self: "nvcc X")
    monkeypatch.setattr(parallel_build, "builds_in_units", lambda source: True)
    monkeypatch.setattr(parallel_build, "compile_source", refused)
    cache = cache_module.CompileCache(tmp_path)
    for _ in range(2):
        assert cache.compile("/* refused */", "sm_90", name="k.cu") == b"\x7fELF whole"
        cache.compile("/* transient */", "sm_90", name="t.cu")
    assert calls.count("/* refused */") == 1 and cache.hits == 1
    assert calls.count("/* transient */") == 2
    # a marker of another build scheme is stale: the units are tried again
    monkeypatch.setattr(parallel_build, "BUILD", parallel_build.BUILD + " fixed")
    cache.compile("/* refused */", "sm_90", name="k.cu")
    assert calls.count("/* refused */") == 2
