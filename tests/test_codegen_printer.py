"""The printer, checked numerically: print sympy expressions as C, compile them with
g++ (host C++, with common.cuh), run at several points, compare with sympy's own
exact evaluation. Also: float precision, what it refuses, and nvcc -arch=sm_90."""

from __future__ import annotations

import math
import shutil
import subprocess

import numpy as np
import pytest
import sympy as sp

from sbmlgpu import ir
from sbmlgpu.codegen.compile_check import nvcc_available, nvcc_compile
from sbmlgpu.codegen.printer import CodegenError, CudaPrinter, print_expr
from sbmlgpu.codegen.templates import render
from sbmlgpu.errors import InternalError, OptionError, UnsupportedModelError

x, y, z = sp.symbols("x y z")
# x in (0, 1), y in (1, 3), z of either sign and never 0: every function below is
# real at every point, and none sits on a jump of floor, ceiling or Mod (there
# the double rounding of 3*z or 5*x, not the printer, would decide). x = 0.5
# exactly at one point (sign(x - 1/2) = 0).
POINTS = [(0.3, 1.7, -1.25), (0.75, 2.5, 0.5), (0.5, 1.1, 1.9),
          (0.123456789, 2.9, -0.3), (0.93, 1.5, 0.7071067811865476)]
pw = sp.Piecewise

EXPRESSIONS = [
    # arithmetic, rationals (never integer division), powers
    x + y - z, x * y / z, -x - y, x - 2.5, sp.Rational(1, 2) * x, sp.Rational(3, 2) * y,
    y / 3, sp.Rational(1, 3) + x, x ** sp.Rational(3, 2), 1 / (x * y),
    x ** 2, x ** 3, y ** 4, x ** 5, y ** -1, y ** -2, z ** -3, y ** -5,
    sp.sqrt(x), 1 / sp.sqrt(y), x ** 0.5, y ** -0.5, x ** 2.5, y ** sp.Float(2.0),
    (x + y) ** 2, (x * y) ** 3, -(x ** 2), (-z) ** 3, (x - y) ** -2, 2 ** x, x ** y,
    sp.exp(x) ** 2, sp.root(y, 3), x * y ** 2 / (z ** 2 + 1) ** 3,
    # floats: full precision, big and small
    sp.Float("0.1") + x, sp.Float("1.5e300") * x, sp.Float("2.5e-300") * y,
    sp.Float("6.02214179e23") * x, sp.Float("1.2345678901234567") * y,
    sp.Float("0.1", 30) * y, sp.Integer(10) ** 20 * x,
    # constants
    sp.pi * x, sp.E * y, sp.exp(1) + x, sp.EulerGamma * z, sp.GoldenRatio + x,
    # exponentials, logarithms
    sp.exp(x), sp.exp(-x * y), sp.log(y), sp.log(x, 2), sp.log(y, 10), sp.log(y, x),
    sp.log(x, 2, evaluate=False), sp.log(y, 10, evaluate=False),
    # trigonometry and its inverses, reciprocals and their inverses
    sp.sin(z), sp.cos(z), sp.tan(z), sp.asin(x), sp.acos(x), sp.atan(z),
    sp.sec(z), sp.csc(y), sp.cot(y), sp.asec(y), sp.acsc(y), sp.acot(z), sp.acot(-y),
    # hyperbolic, inverse hyperbolic, reciprocal forms
    sp.sinh(z), sp.cosh(z), sp.tanh(z), sp.asinh(z), sp.acosh(y), sp.atanh(x),
    sp.sech(z), sp.csch(y), sp.coth(y), sp.asech(x), sp.acsch(y), sp.acoth(y),
    # piecewise-linear and integer functions
    sp.Abs(z), sp.floor(3 * z), sp.ceiling(3 * z), sp.sign(z), sp.sign(x - sp.Rational(1, 2)),
    sp.Min(x, y, z), sp.Max(x, y, z, 1), sp.Min(x, 2 * z), sp.Max(z, -z),
    sp.factorial(y), sp.factorial(sp.floor(3 * y)),
    sp.Mod(7 * z, y), sp.Mod(-5 * x, y), sp.Mod(5 * x, -y), sp.Mod(-5 * x, -y),
    # piecewise: with and without a true fallback (NAN where no piece applies)
    pw((x, x > 0.5), (y, z < 0), (z, True)), pw((x, z > 0)), x + pw((y, z >= 0), (-y, True)) * x,
    pw((1, sp.And(x > 0.2, y < 2)), (0, True)), pw((x ** 2, sp.Eq(x, 0.5)), (y, sp.Ne(z, 0.5))),
    pw((sp.oo, x > 0.5), (-sp.oo, z > 0), (sp.nan, True)),
    # booleans as numbers
    x > 0.5, y <= 2, sp.Eq(x, 0.5), sp.Ne(x, 0.5), z < 0, x >= sp.Rational(1, 2),
    sp.And(x > 0.2, y < 2), sp.Or(x > 0.8, z < 0), sp.Not(z < 0),
    sp.Xor(x > 0.5, y > 2, z > 0), sp.Implies(z > 0, x > 0.5), sp.Equivalent(x > 0.5, z > 0),
    sp.true, sp.false, sp.ITE(z > 0, x > 0.5, y > 2),
    # typical kinetics
    3 * x * y / (sp.Rational(1, 10) + y), x ** 2 / (y ** 2 + x ** 2) - z / (1 + sp.exp(-z)),
]


def _reference(expr, point) -> float:
    exact = {s: sp.Rational(v) for s, v in zip((x, y, z), point)}  # the doubles, exactly
    value = sp.sympify(expr).subs(exact)
    if value is sp.true:
        return 1.0
    if value is sp.false:
        return 0.0
    if value in (sp.nan, sp.zoo):
        return math.nan
    return float(sp.N(value, 40))


def _program(exprs, precision: str) -> str:
    printer = CudaPrinter({x: "x", y: "y", z: "z"}, precision=precision)
    lines = [render("sbmlgpu.codegen", "common.cuh", precision=precision),
             "#include <stdio.h>", "int main(void) {", "    double xd, yd, zd;",
             '    while (scanf("%la %la %la", &xd, &yd, &zd) == 3) {',
             "        const real_t x = (real_t)xd, y = (real_t)yd, z = (real_t)zd;"]
    for e in exprs:
        lines.append(f'        printf("%a\\n", (double)({printer.print_value(e)}));')
    lines += ["    }", "    return 0;", "}"]
    return "\n".join(lines)


def _run(source: str, tmp_path, points) -> np.ndarray:
    exe = tmp_path / "expressions"
    src = tmp_path / "expressions.cpp"
    src.write_text(source)
    # -ffp-contract=off: no FMA contraction, so the host arithmetic is IEEE's
    build = subprocess.run(["g++", "-O2", "-ffp-contract=off", "-o", str(exe), str(src), "-lm"],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[:4000]
    stdin = "".join(" ".join(float(v).hex() for v in p) + "\n" for p in points)
    done = subprocess.run([str(exe)], input=stdin, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    values = [float.fromhex(v) for v in done.stdout.split()]
    return np.array(values).reshape(len(points), -1)


def _agree(c: float, ref: float, rel: float, floor: float) -> bool:
    if math.isnan(ref) or math.isnan(c):
        return math.isnan(ref) and math.isnan(c)
    if math.isinf(ref) or math.isinf(c):
        return c == ref
    return abs(c - ref) <= rel * abs(ref) + floor


needs_gcc = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not installed")


@needs_gcc
def test_double_precision_matches_sympy(tmp_path):
    values = _run(_program(EXPRESSIONS, "double"), tmp_path, POINTS)
    bad = []
    for i, point in enumerate(POINTS):
        for j, e in enumerate(EXPRESSIONS):
            ref = _reference(e, point)
            if not _agree(values[i, j], ref, 1e-12, 1e-300):
                bad.append(f"{e} at {point}: C {values[i, j]!r}, sympy {ref!r}")
    assert not bad, "\n".join(bad)
    # the checks are not vacuous: NAN and 0/1 booleans really occur
    assert np.isnan(values).any() and ((values == 0) | (values == 1)).any()


@needs_gcc
def test_float_precision_agrees_to_1e5(tmp_path):
    points32 = [tuple(float(np.float32(v)) for v in p) for p in POINTS]
    refs = [[_reference(e, p) for e in EXPRESSIONS] for p in points32]
    values = _run(_program(EXPRESSIONS, "float"), tmp_path, points32)
    bad, compared = [], 0
    for i, point in enumerate(points32):
        for j, e in enumerate(EXPRESSIONS):
            ref = refs[i][j]
            if not math.isnan(ref) and not (1e-30 < abs(ref) < 1e30) and ref != 0:
                continue  # outside float's range: that is float's limit, not the printer's
            compared += 1
            if not _agree(values[i, j], ref, 1e-5, 1e-6):
                bad.append(f"{e} at {point}: C {values[i, j]!r}, sympy {ref!r}")
    assert not bad, "\n".join(bad)
    assert compared > 0.9 * len(EXPRESSIONS) * len(POINTS)


def test_float_source_has_no_double_math():
    printer = CudaPrinter({x: "x", y: "y", z: "z"}, precision="float")
    text = "\n".join(printer.print_value(e) for e in EXPRESSIONS)
    import re
    # every floating literal carries the f suffix; every math call is the float one
    literals = re.findall(r"(?<![\w.])(\d+\.\d*(?:e[+-]?\d+)?|\d+e[+-]?\d+)(f?)", text)
    assert literals and all(suffix == "f" for _, suffix in literals)
    calls = set(re.findall(r"\b([a-z][a-z0-9_]*)\(", text))
    allowed_double_named = {"sbmlgpu_modf"}
    assert all(c.endswith("f") or c in allowed_double_named for c in calls), calls


def test_printing_details():
    p = CudaPrinter({x: "x[0]", ir.TIME: "t"})
    assert p.doprint(sp.Rational(1, 2)) == "0.5"
    assert p.doprint(x / 2) == "x[0]/2.0"  # floating division
    assert p.doprint(sp.Float("0.1")) == "0.1"
    assert p.doprint(sp.Float(1) / 3) == repr(1 / 3)  # 17 significant digits at most
    assert p.doprint(x ** 2) == "(x[0]*x[0])"
    assert p.doprint(x ** -1) == "(1.0/x[0])"
    assert p.doprint(x ** 0.5) == "sqrt(x[0])"
    assert p.doprint(ir.TIME * x) in ("t*x[0]", "x[0]*t")  # the csymbol prints as t
    assert p.doprint(sp.zoo) == "NAN" and p.doprint(sp.oo) == "INFINITY"
    assert p.doprint(-sp.oo) == "-INFINITY" and p.doprint(sp.nan) == "NAN"
    assert p.doprint(pw((x, y > 0))) == "((s_y > 0.0) ? x[0] : NAN)"
    assert p.doprint(y) == "s_y"  # unmapped: the mangled local name
    assert CudaPrinter(precision="float").doprint(sp.Rational(1, 3)) == "0.33333334f"
    assert p.print_value(x > 1) == "((x[0] > 1.0) ? 1.0 : 0.0)"
    assert p.print_condition(y) == "(s_y != 0.0)"


@pytest.mark.parametrize("expr, name", [
    (ir.RateOf(x), "rateOf()"), (ir.Delay(x, y), "delay()"),
    (sp.Function("f")(x), "function f()"), (sp.Function("exp")(x), "function exp()"),
    (sp.erf(x), "function erf()"), (sp.Integral(x, y), "Integral"),
    (sp.Derivative(sp.Function("g")(x), x), "Derivative"), (sp.I * x, "ImaginaryUnit"),
    (sp.re(x), "function re()"), (x + ir.RateOf(y) * 2, "rateOf()"),
])
def test_unsupported_constructs_raise_codegen_error(expr, name):
    with pytest.raises(CodegenError) as info:
        print_expr(expr, where="reaction R1")
    # a printer gap is a bug to report, never a refusal of the model
    assert isinstance(info.value, InternalError)
    assert not isinstance(info.value, UnsupportedModelError)
    assert (info.value.construct, info.value.where) == (name, ("reaction R1",))
    assert name in str(info.value) and "R1" in str(info.value) and "bug" in str(info.value)


def test_unmapped_symbols_can_be_refused_and_options_are_checked():
    with pytest.raises(CodegenError, match="symbol 'k'"):
        CudaPrinter({x: "x"}, unmapped="raise").doprint(x + sp.Symbol("k"))
    with pytest.raises(OptionError, match="precision"):
        CudaPrinter(precision="half")
    # dummies with the same name stay different variables
    a, b = sp.Dummy("q"), sp.Dummy("q")
    assert len(set(CudaPrinter().doprint(a + b).split(" + "))) == 2


@pytest.mark.skipif(not nvcc_available(), reason="nvcc not installed")
@pytest.mark.parametrize("precision", ["double", "float"])
def test_every_expression_compiles_as_device_code(precision):
    printer = CudaPrinter({x: "x", y: "y", z: "z"}, precision=precision)
    body = "\n".join(f"    out[{i}] = {printer.print_value(e)};" for i, e in enumerate(EXPRESSIONS))
    source = (render("sbmlgpu.codegen", "common.cuh", precision=precision)
              + 'extern "C" __global__ void expressions(const real_t* in, real_t* out) {\n'
              + "    const real_t x = in[0], y = in[1], z = in[2];\n" + body + "\n}\n")
    assert nvcc_compile(source, arch="sm_90", name=f"expressions_{precision}")[:4] == b"\x7fELF"
