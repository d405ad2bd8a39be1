"""Templates (loader, strictness, dumps), nvcc compile checks, and the Philox generator
(known-answer vectors; the CUDA header compiled as host code against numpy)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from sbmlgpu.codegen import philox
from sbmlgpu.codegen.compile_check import CompileError, nvcc_available, nvcc_compile, nvcc_path
from sbmlgpu.codegen.names import RESERVED_PREFIXES
from sbmlgpu.codegen.templates import TemplateError, dump_sources, render
from sbmlgpu.errors import DeviceError, OptionError

needs_nvcc = pytest.mark.skipif(not nvcc_available(), reason="nvcc not installed")
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not installed")

# Random123 tests/kat_vectors, "philox4x32 10" lines: counter[4] key[2] -> output[4].
KAT = [
    ([0, 0, 0, 0], [0, 0], [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]),
    ([0xFFFFFFFF] * 4, [0xFFFFFFFF] * 2, [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]),
    ([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344], [0xA4093822, 0x299F31D0],
     [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]),
]


# -- templates -------------------------------------------------------------------------

def test_common_header_renders_per_precision_and_checks_it():
    assert "typedef double real_t;" in render("sbmlgpu.codegen", "common.cuh", precision="double")
    assert "typedef float real_t;" in render("sbmlgpu.codegen", "common.cuh", precision="float")
    with pytest.raises(TemplateError, match="precision must be"):
        render("sbmlgpu.codegen", "common.cuh", precision="half")
    with pytest.raises(TemplateError, match="precision"):  # StrictUndefined
        render("sbmlgpu.codegen", "common.cuh")
    with pytest.raises(TemplateError, match="no template"):
        render("sbmlgpu.codegen", "nonexistent.cu")


def test_shared_header_leaves_our_prefixes_to_model_names():
    text = render("sbmlgpu.codegen", "common.cuh", precision="double")
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    identifiers = set(re.findall(r"\b[A-Za-z_][A-Za-z0-9_]*\b", text))
    assert not [i for i in identifiers if i.startswith(RESERVED_PREFIXES)]


def test_plugin_templates_load_by_package_name(tmp_path, monkeypatch):
    pkg = tmp_path / "fakeplugin"
    (pkg / "kernels").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "kernels" / "step.cu").write_text(
        '{% include "common.cuh" %}\n'
        '{% include "fakeplugin:part.cuh" %}\n'
        'extern "C" __global__ void step(real_t* y) { y[0] = {{ rhs }}; }\n')
    (pkg / "kernels" / "part.cuh").write_text("/* part of {{ name }} */\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("fakeplugin", None)
    text = render("fakeplugin", "step.cu", precision="float", rhs="2.0f*y[0]", name="step")
    assert "typedef float real_t;" in text and "/* part of step */" in text
    assert "y[0] = 2.0f*y[0];" in text
    with pytest.raises(TemplateError, match="rhs"):
        render("fakeplugin", "step.cu", precision="float", name="step")
    with pytest.raises(TemplateError, match="no package"):
        render("no_such_package_xyz", "step.cu")
    with pytest.raises(TemplateError, match="no template"):
        render("fakeplugin", "../__init__.py")


def test_dump_sources(tmp_path):
    target = tmp_path / "keep" / "sub"
    written = dump_sources({"rhs.cu": "// a\n", "ssa.cu": "// b\n"}, target)
    assert sorted(p.name for p in written) == ["rhs.cu", "ssa.cu"]
    assert (target / "rhs.cu").read_text() == "// a\n"
    for bad in ["../evil.cu", "a/b.cu", ""]:
        with pytest.raises(OptionError, match="keep-source"):
            dump_sources({bad: "x"}, target)
    (tmp_path / "file").write_text("")
    with pytest.raises(OptionError, match="cannot create"):
        dump_sources({"a.cu": "x"}, tmp_path / "file" / "dir")


# -- nvcc --------------------------------------------------------------------------------

@needs_nvcc
@pytest.mark.parametrize("precision", ["double", "float"])
@pytest.mark.parametrize("template,kernel", [("transpose.cu", b"sbmlgpu_member_major"),
                                             ("gather.cu", b"sbmlgpu_gather_columns")])
def test_core_kernels_compile_for_sm_90(template, kernel, precision):
    source = render("sbmlgpu.codegen", template, precision=precision)
    assert kernel in nvcc_compile(source, arch="sm_90", name=f"{template}_{precision}")


@needs_nvcc
@pytest.mark.parametrize("precision", ["double", "float"])
def test_selftest_kernels_compile_for_sm_90(precision):
    source = render("sbmlgpu.codegen", "selftest.cu", precision=precision,
                    expressions=["exp(x) + y*z" if precision == "double" else "expf(x) + y*z"])
    cubin = nvcc_compile(source, arch="sm_90", name=f"selftest_{precision}")
    assert cubin[:4] == b"\x7fELF"
    for kernel in (b"sbmlgpu_rng_selftest", b"sbmlgpu_axpy", b"sbmlgpu_expressions"):
        assert kernel in cubin


@needs_nvcc
def test_compile_errors_quote_nvcc_and_the_source_line():
    source = 'extern "C" __global__ void k(double* y)\n{\n    y[0] = undefined_thing + 1.0;\n}\n'
    with pytest.raises(CompileError) as info:
        nvcc_compile(source, arch="sm_90", name="broken")
    err = info.value
    assert isinstance(err, DeviceError)
    assert "undefined_thing" in err.log and "sm_90" in str(err)
    assert "    3 |     y[0] = undefined_thing + 1.0;" in str(err)


def test_bad_arch_and_missing_nvcc(monkeypatch):
    with pytest.raises(DeviceError, match="architecture"):
        nvcc_compile("", arch="compute_90")
    import sbmlgpu.codegen.compile_check as cc

    monkeypatch.setattr(cc, "nvcc_path", lambda: None)
    assert not cc.nvcc_available()
    with pytest.raises(DeviceError, match="nvcc not found"):
        cc.nvcc_compile("", arch="sm_90")


# -- Philox --------------------------------------------------------------------------------

@pytest.mark.parametrize("counter, key, expected", KAT)
def test_numpy_philox_known_answers(counter, key, expected):
    assert philox.philox4x32(counter, key).tolist() == expected


def test_numpy_philox_broadcasts_and_streams_are_keyed_by_item():
    counters = np.array([k[0] for k in KAT], dtype=np.uint32)
    keys = np.array([k[1] for k in KAT], dtype=np.uint32)
    assert philox.philox4x32(counters, keys).tolist() == [k[2] for k in KAT]
    words = philox.stream_words(seed=42, item=[0, 1, 2], n_blocks=3)
    # an item's stream does not depend on which other items are drawn with it
    assert (philox.stream_words(42, [2], 3)[0] == words[2]).all()
    assert len({tuple(w) for w in words}) == 3
    u = philox.uniforms(7, np.arange(2000), 50)
    assert 0 < u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.005
    uf = philox.uniforms(7, np.arange(2000), 50, "float")
    assert uf.dtype == np.float32 and 0 < uf.min() and uf.max() < 1
    # extreme words stay inside (0, 1) in both precisions
    assert philox.u01_double(0xFFFFFFFF, 0xFFFFFFFF) < 1 and philox.u01_double(0, 0) > 0
    assert philox.u01_float(0xFFFFFFFF) < 1 and philox.u01_float(0) > 0


def _philox_host_program(precision: str) -> str:
    return render("sbmlgpu.codegen", "common.cuh", precision=precision) + r"""
#include <stdio.h>
int main(void) {
    unsigned c0, c1, c2, c3, k0, k1;
    while (scanf("%x %x %x %x %x %x", &c0, &c1, &c2, &c3, &k0, &k1) == 6) {
        sbmlgpu_u32x4 c = {c0, c1, c2, c3};
        sbmlgpu_u32x4 r = sbmlgpu_philox4x32_10(c, k0, k1);
        printf("W %08x %08x %08x %08x\n", r.x, r.y, r.z, r.w);
    }
    for (unsigned long long item = 0; item < 5; ++item) {
        sbmlgpu_rng_t rng;
        sbmlgpu_rng_init(&rng, 0x123456789abcdefULL, item, 0);
        for (int j = 0; j < 7; ++j) printf("U %a\n", (double)sbmlgpu_rng_uniform(&rng));
    }
    return 0;
}
"""


def _check_host_philox(compiler: list[str], precision: str, tmp_path):
    src = tmp_path / "philox.cu"
    src.write_text(_philox_host_program(precision))
    exe = tmp_path / "philox"
    build = subprocess.run(compiler + ["-o", str(exe), str(src)], capture_output=True, text=True,
                           timeout=300)
    assert build.returncode == 0, build.stderr[:3000]
    rng = np.random.default_rng(1)
    cases = [(c, k) for c, k, _ in KAT] + [
        (list(rng.integers(0, 2**32, 4)), list(rng.integers(0, 2**32, 2))) for _ in range(200)]
    stdin = "".join(" ".join(f"{v:x}" for v in c + k) + "\n" for c, k in cases)
    out = subprocess.run([str(exe)], input=stdin, capture_output=True, text=True, timeout=60,
                         check=True).stdout.split("\n")
    words = [[int(v, 16) for v in line.split()[1:]] for line in out if line.startswith("W ")]
    expected = philox.philox4x32(np.array([c for c, _ in cases]), np.array([k for _, k in cases]))
    assert words == expected.tolist()
    assert words[:3] == [k[2] for k in KAT]
    uniforms = [float.fromhex(line.split()[1]) for line in out if line.startswith("U ")]
    ref = philox.uniforms(0x123456789ABCDEF, np.arange(5), 7, precision)
    assert np.array_equal(np.array(uniforms).reshape(5, 7), ref.astype(float))


@needs_gxx
@pytest.mark.parametrize("precision", ["double", "float"])
def test_cuda_philox_as_gxx_host_code_matches_numpy(precision, tmp_path):
    _check_host_philox(["g++", "-x", "c++", "-O2"], precision, tmp_path)


@needs_nvcc
def test_cuda_philox_as_nvcc_host_code_matches_numpy(tmp_path):
    # nvcc compiles the __host__ __device__ functions for the host too: no GPU needed
    _check_host_philox([nvcc_path(), "-O2"], "double", tmp_path)


def test_status_codes_reach_the_kernels_from_python():
    from sbmlgpu.results import Status

    late = Status.define("late_status_for_template_test", "defined after the first render")
    text = render("sbmlgpu.codegen", "common.cuh", precision="double")
    for status in Status:
        assert f"#define SBMLGPU_STATUS_{status.name.upper()} {int(status)}\n" in text
    assert f"SBMLGPU_STATUS_LATE_STATUS_FOR_TEMPLATE_TEST {int(late)}" in text
    # no kernel template states a status number of its own
    from pathlib import Path

    import sbmlgpu
    import sbmlgpu.plugins

    roots = [Path(sbmlgpu.__file__).parent, Path(sbmlgpu.plugins.__file__).parent]
    for path in [p for r in roots for p in r.rglob("*.cu*")]:
        own = re.findall(r"#define \w*(?:_OK|_FAILED|_NON_FINITE|_MAX_STEPS) \d", path.read_text())
        assert not own, f"{path} defines status codes itself: {own}"
