"""C-safe names: injective, reversible, never a C/C++/CUDA/math/macro name."""

from __future__ import annotations

import random
import re
import subprocess

import pytest
import sympy as sp

from sbmlgpu import ir
from sbmlgpu.codegen import names
from sbmlgpu.codegen.compile_check import nvcc_path
from sbmlgpu.codegen.names import RESERVED_PREFIXES, demangle, mangle, temp_name

TRICKY = ["int", "exp", "time", "threadIdx", "blockIdx", "warpSize", "e", "pi", "E", "M_PI",
          "NAN", "INFINITY", "_", "__", "___", "__x", "_x", "x_", "a_b", "a__b", "a___b",
          "ab_", "a_", "s_", "s__", "cse_0", "real_t", "t", "x", "p", "@time", "amount@S1",
          "amount_40_S1", "_40_", "a@b", "a_40_b", "é", "x y", "0", "9lives", "__syncthreads",
          "__global__", "double", "float", "return", "sizeof", "main", "printf", "log",
          "pow", "sin", "fmax", "tgamma", "gamma", "true", "false", "NULL", "errno",
          "S1", "s1", "S_1", "s_1", "s_x", "s__x", "\u2603", "ab" * 200]

# Names no model symbol may print as. Not exhaustive on purpose: the guarantee is
# structural (every model name starts with s_); this list makes it concrete.
C_AND_CUDA = """auto break case char const continue default do double else enum extern
float for goto if inline int long register restrict return short signed sizeof static
struct switch typedef union unsigned void volatile while bool true false class
namespace template typename this new delete operator private public protected virtual
friend using try catch throw nullptr constexpr decltype static_assert thread_local
alignas alignof noexcept explicit mutable export
threadIdx blockIdx blockDim gridDim warpSize __syncthreads __global__ __device__
__host__ __shared__ __constant__ __restrict__ __forceinline__ atomicAdd
exp exp2 expm1 log log2 log10 log1p pow sqrt cbrt sin cos tan asin acos atan atan2
sinh cosh tanh asinh acosh atanh fabs floor ceil fmod fmin fmax tgamma lgamma erf
erfc hypot round trunc rint copysign e pi E PI
INFINITY NAN HUGE_VAL M_PI M_E M_LN2 NULL EOF errno real_t main printf
x p t y n i j k idx tid""".split()


@pytest.mark.parametrize("name", TRICKY)
def test_mangled_names_are_c_identifiers_and_round_trip(name):
    c = mangle(name)
    assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", c), c
    assert c.startswith(names.SYMBOL_PREFIX)
    assert c not in C_AND_CUDA
    assert demangle(c) == name


def test_mangling_is_injective_on_tricky_and_random_ids():
    rng = random.Random(7)
    alphabet = "ab_@x0"
    pool = set(TRICKY)
    for _ in range(20000):
        pool.add("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 7))))
    mangled = {}
    for n in pool:
        c = mangle(n)
        assert c not in mangled, f"{n!r} and {mangled.get(c)!r} both give {c}"
        mangled[c] = n
    assert len(mangled) == len(pool)


def test_underscore_escaping_distinguishes_runs():
    assert mangle("a_b") != mangle("a__b") != mangle("a___b")
    assert mangle("a_b") == "s_a__b"
    # a literal that looks like an escape is not confused with the escaped character
    assert mangle("amount@S1") != mangle("amount_40_S1")
    assert demangle(mangle("amount_40_S1")) == "amount_40_S1"


def test_special_symbols_and_temporaries_do_not_collide():
    assert mangle(ir.TIME.name) != mangle("time")
    assert mangle("@time") == "s__40_time"
    temps = {temp_name(i) for i in range(100)}
    assert not temps & {mangle(n) for n in TRICKY}
    assert all(not t.startswith(names.SYMBOL_PREFIX) for t in temps)
    assert names.is_reserved(mangle("x")) and names.is_reserved(temp_name(3))
    assert not names.is_reserved("real_t") and not names.is_reserved("sbmlgpu_mod")


def test_symbol_name_and_bad_input():
    assert names.symbol_name(sp.Symbol("k1")) == names.symbol_name("k1") == "s_k1"
    with pytest.raises(ValueError):
        mangle("")
    for bad in ["x", "s_", "s__4G_", "s__41"]:
        with pytest.raises(ValueError):
            demangle(bad)


@pytest.mark.skipif(nvcc_path() is None, reason="nvcc not installed")
def test_no_header_macro_uses_our_prefixes(tmp_path):
    """Macros are the one thing a prefix cannot dodge: check the headers a kernel sees."""
    from sbmlgpu.codegen.templates import render

    src = tmp_path / "k.cu"
    src.write_text("#include <cuda_runtime.h>\n#include <math.h>\n"
                   + render("sbmlgpu.codegen", "common.cuh", precision="double"))
    done = subprocess.run([nvcc_path(), "-E", "-Xcompiler", "-dM", "-arch=sm_90", str(src)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    macros = re.findall(r"^#define\s+([A-Za-z_][A-Za-z0-9_]*)", done.stdout, re.M)
    assert len(macros) > 500  # really saw the CUDA and C headers
    assert [m for m in macros if m.startswith(RESERVED_PREFIXES)] == []
