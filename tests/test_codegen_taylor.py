"""Interval Taylor coefficients generated from sympy (sbmlgpu.codegen.taylor), built for
the host with the real interval arithmetic and checked against sympy's exact
coefficients (repeated Lie derivatives, evaluated to 50 digits)."""

from __future__ import annotations

import ctypes
import math
from functools import lru_cache

import numpy as np
import pytest
import sympy as sp

from sbmlgpu.codegen.compile_check import nvcc_available, nvcc_compile
from sbmlgpu.codegen.taylor import (Dag, TaylorError, interval_literal, interval_values,
                                    taylor_function)
from sbmlgpu.codegen.templates import render
from sbmlgpu.runtime import host

ORDER = 7
x1, x2, a, b, t = sp.symbols("x1 x2 a b t", real=True)


def build(rhs, name="tay_test"):
    """A host library computing K coefficients of rhs over interval inputs."""
    f = taylor_function(name, rhs, [x1, x2], {a: "c[0]", b: "c[1]"}, t, ["x1", "x2"])
    text = "\n".join([
        render("sbmlgpu.codegen", "common.cuh", precision="double"),
        render("sbmlgpu.codegen", "interval.cuh"),
        f"#define SBMLGPU_TAYLOR_ORDER {ORDER}",
        render("sbmlgpu.codegen", "taylor.cuh"), f.text,
        'extern "C" void run(int K, double *x, const double *c, double t_lo, double t_hi) {',
        "    ival X[(SBMLGPU_TAYLOR_ORDER + 1) * 2], C[2];",
        "    for (int i = 0; i < 2; ++i) { X[i] = iv_make(x[2*i], x[2*i+1]);",
        "                                  C[i] = iv_make(c[2*i], c[2*i+1]); }",
        f"    {name}(K, X, C, iv_make(t_lo, t_hi));",
        "    for (int i = 0; i < 2 * (K + 1); ++i) { x[2*i] = X[i].lo; x[2*i+1] = X[i].hi; }",
        "}"])
    library = host.load(text, f"{name}_{abs(hash(text)) % 10**12}.cu", ("-ffp-contract=off",))
    library.run.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_double,
                            ctypes.c_double]

    def coefficients(x_box, c_box, t_box, K=ORDER):
        x = np.zeros((K + 1) * 4)
        x[:4] = np.ravel(x_box)
        c = np.ascontiguousarray(np.ravel(c_box), dtype=np.float64)
        library.run(K, x.ctypes.data_as(ctypes.c_void_p), c.ctypes.data_as(ctypes.c_void_p),
                    *t_box)
        return x.reshape(K + 1, 2, 2)  # [k, state, lo/hi]
    return coefficients


@lru_cache(maxsize=None)
def lie_derivatives(rhs: tuple, K: int) -> tuple:
    """(L_f^k x_i)/k!, k = 0..K, symbolically (the independent oracle: no recurrence)."""
    f = dict(zip((x1, x2), rhs))

    def lie(g):
        return sum(sp.diff(g, v) * fv for v, fv in f.items()) + sp.diff(g, t)
    out = []
    for g in (x1, x2):
        row = []
        for k in range(K + 1):
            row.append(g / math.factorial(k))
            g = lie(g)
        out.append(tuple(row))
    return tuple(out)


def exact(rhs, point: dict, K: int):
    """Taylor coefficients x_k at `point`, to 50 digits: out[k, i]."""
    series = lie_derivatives(tuple(rhs), K)
    out = np.zeros((K + 1, 2), dtype=object)
    for i in range(2):
        for k in range(K + 1):
            out[k, i] = sp.N(series[i][k].subs(point), 50)
    return out


#: the coefficients each case checks: the symbolic oracle's cost grows fast with k
DEPTH = {"polynomial": ORDER, "elementary": 4, "powers": 5}
RHS = {
    "polynomial": [a * x1 - b * x1 * x2, -x2 + sp.Rational(1, 50) * x1 * x2],
    "elementary": [x1 * (a - b * x2) + sp.exp(-x2 / 10) * sp.sin(t),
                   -x2 * (1 - x1 / 3) / (1 + x1 ** 2) + sp.sqrt(x1) * x2 ** sp.Rational(3, 2)
                   + sp.cos(x1) + sp.log(x2) * sp.pi],
    "powers": [x1 ** 3 - x2 ** -2 + a ** x1, x1 ** sp.Float(0.7) * b - 2 ** t],
}


@pytest.mark.parametrize("case", sorted(RHS))
def test_point_coefficients_enclose_the_exact_ones_tightly(case):
    rhs = RHS[case]
    run = build(rhs, f"tay_{case}")
    values = {x1: sp.Rational(13, 10), x2: sp.Rational(7, 10), a: 1, b: sp.Rational(2, 5),
              t: sp.Rational(3, 10)}
    box = [[float(values[x1])] * 2, [float(values[x2])] * 2]
    # the inputs are the doubles nearest 1.3, 0.7, ...: the exact value is taken there
    doubles = {k: sp.Rational(float(v)) for k, v in values.items()}
    got = run(box, [[float(values[a])] * 2, [float(values[b])] * 2],
              (float(values[t]), float(values[t])))
    want = exact(rhs, doubles, DEPTH[case])
    for k in range(DEPTH[case] + 1):
        for i in range(2):
            lo, hi = got[k, i]
            assert sp.Rational(lo) <= want[k, i] <= sp.Rational(hi), (case, k, i, lo, hi)
            assert hi - lo <= 1e-11 * max(1.0, abs(float(want[k, i]))), (case, k, i, lo, hi)


def test_box_coefficients_enclose_the_coefficients_of_every_point_inside():
    rhs = RHS["elementary"]
    run = build(rhs, "tay_elementary")
    x_box = [[1.2, 1.4], [0.6, 0.8]]
    c_box = [[0.9, 1.1], [0.35, 0.45]]
    t_box = (0.25, 0.35)
    got = run(x_box, c_box, t_box)
    rng = np.random.default_rng(3)
    for _ in range(6):
        point = {x1: rng.uniform(*x_box[0]), x2: rng.uniform(*x_box[1]),
                 a: rng.uniform(*c_box[0]), b: rng.uniform(*c_box[1]), t: rng.uniform(*t_box)}
        want = exact(rhs, {k: sp.Rational(v) for k, v in point.items()}, DEPTH["elementary"])
        for k in range(DEPTH["elementary"] + 1):
            for i in range(2):
                assert got[k, i, 0] <= want[k, i] <= got[k, i, 1]
    assert np.all(np.isfinite(got)) and np.all(got[..., 0] <= got[..., 1])


def test_a_wrong_recurrence_would_be_caught():
    """The checks above can fail: a coefficient moved by one ulp-scale amount is no
    longer tight around the exact value for at least one k."""
    rhs = RHS["elementary"]
    run = build(rhs, "tay_elementary")
    values = {x1: 1.3, x2: 0.7, a: 1.0, b: 0.4, t: 0.3}
    got = run([[1.3] * 2, [0.7] * 2], [[1.0] * 2, [0.4] * 2], (0.3, 0.3))
    want = exact(rhs, {k: sp.Rational(v) for k, v in values.items()}, DEPTH["elementary"])
    shifted = got + 1e-9
    assert any(not (sp.Rational(shifted[k, i, 0]) <= want[k, i] <= sp.Rational(shifted[k, i, 1]))
               for k in range(DEPTH["elementary"] + 1) for i in range(2))


@pytest.mark.parametrize("expr, construct", [
    (sp.Piecewise((x1, x1 > 1), (x2, True)), "piecewise"),
    (sp.Abs(x1), "abs()"),
    (sp.Max(x1, x2), "max()"),
    (sp.floor(x1), "floor()"),
    (sp.Function("g")(x1), "the function g()"),
])
def test_non_smooth_constructs_are_refused_by_name(expr, construct):
    with pytest.raises(TaylorError, match=construct.split()[0].rstrip("()")):
        taylor_function("f", [expr, x2], [x1, x2], {}, t, where="rate")


def test_literals_enclose_their_numbers():
    assert interval_literal(sp.Float(0.1)) == "iv_point(0.1)"  # the double is the value
    assert interval_literal(sp.Integer(3)) == "iv_point(3.0)"
    assert interval_literal(sp.Rational(1, 3)) == "iv_div(iv_point(1.0), iv_point(3.0))"
    text = interval_literal(sp.pi)
    lo, hi = (float(v) for v in text[len("iv_make("):-1].split(","))
    assert lo < math.pi < hi or (lo <= sp.pi.evalf(40) <= hi)
    assert sp.Rational(lo) < sp.pi < sp.Rational(hi)


def test_constant_subexpressions_are_computed_once_before_the_loop():
    f = taylor_function("f", [x1 * sp.exp(a * b), x2], [x1, x2], {a: "c[0]", b: "c[1]"}, t)
    loop = f.text.split("for (int k = 0")[1]
    assert "iv_exp" in f.text.split("for (int k = 0")[0] and "iv_exp" not in loop
    assert f.series_nodes == 1  # x1 * const


def test_interval_values_evaluate_outputs():
    text = interval_values("out", [x1 / (a + 1), sp.exp(x2)], {x1: "x[0]", x2: "x[1]",
                                                                a: "c[0]", t: "t"},
                           ["y1", "y2"])
    assert "y[0] = k" in text and "/* y2 */" in text


def test_dag_shares_repeated_subexpressions():
    dag = Dag({x1: "x[(j)*2 + 0]"}, {a: "c[0]"}, t)
    first = dag.build(sp.exp(a * x1) + x1 * sp.exp(a * x1))
    ops = [n.op for n in dag.nodes]
    assert ops.count("exp") == 1 and first >= 0


@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not installed")
def test_the_recurrences_compile_for_the_gpu():
    f = taylor_function("tay_gpu", RHS["elementary"], [x1, x2], {a: "c[0]", b: "c[1]"}, t)
    text = "\n".join([render("sbmlgpu.codegen", "common.cuh", precision="double"),
                      render("sbmlgpu.codegen", "interval.cuh"),
                      f"#define SBMLGPU_TAYLOR_ORDER {ORDER}",
                      render("sbmlgpu.codegen", "taylor.cuh"), f.text,
                      'extern "C" __global__ void k(ival *x, const ival *c) '
                      '{ tay_gpu(4, x, c, iv_point(0.0)); }'])
    assert nvcc_compile(text, "sm_90", name="taylor_gpu.cu")


def test_literal_numbers_fold_exactly_and_are_enclosed(tmp_path):
    """sympy folds literal numbers as it builds an expression; imported as exact
    rationals they fold exactly (0.1 * 3 is 3 times the double 0.1, not the rounded
    0.30000000000000004), and the interval literal encloses the folded value."""
    from fractions import Fraction

    from sbmlgpu.sbml.load import load
    from sbmlgpu.views.ode import ode_system
    from tests.sbml_strings import math_apply, model, parameter, reaction, species

    law = math_apply("times", "<cn>0.1</cn><cn>3</cn><ci>k</ci><ci>A</ci>")
    path = tmp_path / "fold.xml"
    path.write_text(model(species("A", 10.0), parameter("k", 1.0),
                          reaction("r", ["A"], [], law)), encoding="utf-8")
    rate = ode_system(load(path)).rhs[0]
    coefficient = rate.as_coeff_Mul()[0]
    exact = -3 * Fraction(0.1)
    assert Fraction(int(coefficient.p), int(coefficient.q)) == exact
    assert Fraction(float(exact)) != exact  # the folded value is no double...
    text = interval_literal(coefficient)
    assert text.startswith("iv_make(")  # ... so it is enclosed by its two neighbours
    lo, hi = (Fraction(float(v)) for v in text[len("iv_make("):-1].split(","))
    assert lo < exact < hi
