"""The Python printers (sbmlgpu.codegen.numpy_printer), checked against the C they
mirror: the same expressions printed as C (test_codegen_printer's program, g++ with
no FMA contraction) and as Python must give the same bits, because they are the same
operations in the same order; only library functions (numpy's own exp, log, ...)
may differ from libm in the last bits."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import sympy as sp

from sbmlgpu.codegen.numpy_printer import (NumpyPrinter, ScalarPrinter, array_namespace,
                                           define, safe_scalar_namespace, scalar_namespace)
from sbmlgpu.codegen.printer import CodegenError

from .test_codegen_printer import EXPRESSIONS, POINTS, _program, _run, needs_gcc, x, y, z

# Where the scalar path differs from the C code: the scalar namespaces keep the CPU
# reference's floored Mod, a - b*floor(a/b) (numpy_printer's docstring), and
# Python's math.gamma is its own Lanczos approximation, not libm's tgamma.
SCALAR_DIFFERS = {i for i, e in enumerate(EXPRESSIONS) if e.has(sp.Mod, sp.factorial)}
_CALL = re.compile(r"\b([a-z][a-z0-9_]*)\(")
_NOT_LIBRARY = {"where", "logical_and", "logical_or", "logical_not", "sign", "mod", "fmin",
                "fmax", "floor", "ceil", "fabs", "sqrt"}  # exact in numpy as in C


def _scalar_values(point) -> list[float]:
    """Each expression through ScalarPrinter: math first, numpy scalars if math raises."""
    printer = ScalarPrinter({x: "x", y: "y", z: "z"})
    out = []
    for e in EXPRESSIONS:
        body = [f"return {printer.print_value(e)}"]
        _, fast = define("f", "x, y, z", body, scalar_namespace())
        _, safe = define("f", "x, y, z", body, safe_scalar_namespace())
        try:
            out.append(float(fast(*point)))
        except (ZeroDivisionError, ValueError, OverflowError):
            with np.errstate(all="ignore"):
                out.append(float(safe(*(np.float64(v) for v in point))))
    return out


def _array_values() -> np.ndarray:
    """Each expression through NumpyPrinter, all points at once: (points, expressions)."""
    printer = NumpyPrinter({x: "x", y: "y", z: "z"})
    columns = np.array(POINTS, dtype=float).T
    out = []
    for e in EXPRESSIONS:
        _, f = define("f", "x, y, z", [f"return {printer.print_value(e)}"], array_namespace())
        with np.errstate(all="ignore"):
            out.append(np.broadcast_to(np.asarray(f(*columns), dtype=float), (len(POINTS),)))
    return np.stack(out, axis=1)


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


@pytest.fixture(scope="module")
def c_values(tmp_path_factory):
    return _run(_program(EXPRESSIONS, "double"), tmp_path_factory.mktemp("c"), POINTS)


@needs_gcc
def test_scalar_printer_gives_the_bits_of_the_c_code(c_values):
    bad, compared = [], 0
    for i, point in enumerate(POINTS):
        for j, value in enumerate(_scalar_values(point)):
            if j in SCALAR_DIFFERS:
                assert value == pytest.approx(c_values[i, j], rel=1e-13, abs=1e-300)
                continue
            compared += 1
            if not _same(value, c_values[i, j]):
                bad.append(f"{EXPRESSIONS[j]} at {point}: Python {value!r}, C {c_values[i, j]!r}")
    assert not bad, "\n".join(bad)
    assert compared > 0.9 * len(EXPRESSIONS) * len(POINTS)


@needs_gcc
def test_numpy_printer_gives_the_bits_of_the_c_code_but_for_library_functions(c_values):
    values = _array_values()
    printer = NumpyPrinter({x: "x", y: "y", z: "z"})
    bad, exact = [], 0
    for j, e in enumerate(EXPRESSIONS):
        library = set(_CALL.findall(printer.print_value(e))) - _NOT_LIBRARY
        for i, point in enumerate(POINTS):
            py, c = values[i, j], c_values[i, j]
            if not library:
                exact += 1
                if not _same(py, c):
                    bad.append(f"{e} at {point}: numpy {py!r}, C {c!r} (pure arithmetic)")
            elif not (_same(py, c) or abs(py - c) <= 4 * np.spacing(abs(c))):
                bad.append(f"{e} at {point}: numpy {py!r}, C {c!r} (more than 4 ulp)")
    assert not bad, "\n".join(bad)
    assert exact > 0.4 * len(EXPRESSIONS) * len(POINTS)


def test_spellings_of_conditions_and_logic():
    cond = sp.And(x > 1, sp.Or(y < 2, sp.Not(sp.And(z > 0, x < 3))))
    numpy_text = NumpyPrinter({x: "x", y: "y", z: "z"}).doprint(cond)
    scalar_text = ScalarPrinter({x: "x", y: "y", z: "z"}).doprint(cond)
    assert numpy_text == ("logical_and((x > 1.0), logical_or((y < 2.0), "
                          "(logical_not(logical_and((z > 0.0), (x < 3.0))))))")
    assert scalar_text == "((x > 1.0) and ((y < 2.0) or (not ((z > 0.0) and (x < 3.0)))))"
    piecewise = sp.Piecewise((x, x > 1), (y, True))
    assert NumpyPrinter({x: "x", y: "y"}).doprint(piecewise) == "where((x > 1.0), x, y)"
    assert ScalarPrinter({x: "x", y: "y"}).doprint(piecewise) == "(x if (x > 1.0) else y)"
    assert NumpyPrinter().doprint(sp.nan) == "nan" and NumpyPrinter().doprint(-sp.oo) == "-inf"
    assert NumpyPrinter().doprint(sp.true) == "True"
    assert NumpyPrinter({x: "x"}).doprint(x ** 2) == "(x*x)"  # as the kernel: no pow


def test_scalar_conditions_are_lazy_as_in_c():
    # 1/x is never evaluated where x == 0: the fast (math) path does not raise there
    e = sp.Piecewise((1 / x, x > 0), (sp.sqrt(x - 1), x > 2), (sp.Integer(7), True))
    _, f = define("f", "x", [f"return {ScalarPrinter({x: 'x'}).doprint(e)}"],
                  scalar_namespace())
    assert f(0.0) == 7.0 and f(4.0) == 0.25
    _, g = define("g", "x", [f"return {NumpyPrinter({x: 'x'}).doprint(e)}"], array_namespace())
    with np.errstate(all="ignore"):
        assert list(g(np.array([0.0, 4.0]))) == [7.0, 0.25]


def test_refusals_name_the_python_generator_and_the_element():
    with pytest.raises(CodegenError, match="numpy code generator") as info:
        NumpyPrinter({x: "x"}).doprint(sp.erf(x), where="reaction R1")
    assert (info.value.construct, info.value.where) == ("function erf()", ("reaction R1",))
    with pytest.raises(CodegenError, match="symbol 'k'"):
        ScalarPrinter({x: "x"}).doprint(x + sp.Symbol("k"))


def test_define_runs_in_a_copy_of_the_namespace():
    namespace = array_namespace()
    source, f = define("twice", "v", ["w = 2.0*v", "return w"], namespace)
    assert source == "def twice(v):\n    w = 2.0*v\n    return w\n" and f(3.0) == 6.0
    f.__globals__["extra"] = 1  # what a caller binds later stays with that function
    assert "extra" not in namespace
