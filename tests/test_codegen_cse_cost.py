"""CSE (statements compile and give the same numbers) and the operation-count model."""

from __future__ import annotations

import random
import re
import shutil
import subprocess

import pytest
import sympy as sp

from sbmlgpu.codegen.cost import WEIGHTS, OpCount, count_block, count_many, count_ops
from sbmlgpu.codegen.cse import eliminate, generate
from sbmlgpu.codegen.printer import CudaPrinter
from sbmlgpu.codegen.templates import render

x, y = sp.symbols("x y")
k1, k2 = sp.symbols("k1 k2")
clash = sp.Symbol("cse_0")  # a model parameter named like a temporary


def _system():
    common = k1 * x * y / (clash + x)
    return [common - k2 * y, -common + sp.exp(common) * x, x * common ** 2,
            sp.Piecewise((common, x > y), (0, True)), sp.And(x > y, common > 1)]


def _evaluate_c(lines, outputs, symbols, values, tmp_path):
    body = "\n".join(f"    {line}" for line in lines)
    prints = "\n".join(f'    printf("%a\\n", (double)({o}));' for o in outputs)
    decls = "\n".join(f"    const real_t {c} = {v!r};" for c, v in zip(symbols, values))
    src = (render("sbmlgpu.codegen", "common.cuh", precision="double")
           + "#include <stdio.h>\nint main(void) {\n" + decls + "\n" + body + "\n" + prints
           + "\n    return 0;\n}\n")
    (tmp_path / "cse.cpp").write_text(src)
    build = subprocess.run(["g++", "-O1", "-o", str(tmp_path / "cse"), str(tmp_path / "cse.cpp"),
                            "-lm"], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[:3000] + "\n" + src
    out = subprocess.run([str(tmp_path / "cse")], capture_output=True, text=True, check=True)
    return [float.fromhex(v) for v in out.stdout.split()]


def test_cse_finds_shared_work_and_names_it_safely():
    block = eliminate(_system())
    assert len(block.temporaries) >= 1 and len(block.outputs) == 5
    lines, outputs = block.render(CudaPrinter({x: "x", y: "y", k1: "p[0]", k2: "p[1]"}))
    assert all(re.match(r"const (real_t|bool) cse_\d+ = .+;$", line) for line in lines)
    text = "\n".join(lines + outputs)
    assert "s_cse__0" in text  # the model's `cse_0`, distinct from the temporary cse_0
    assert any(line.startswith("const bool") for line in lines) or "&&" in outputs[4]


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not installed")
@pytest.mark.parametrize("precision", ["double", "float"])
def test_cse_statements_compute_the_same_values(tmp_path, precision):
    exprs = _system()
    names = {x: "x", y: "y", k1: "k1", k2: "k2", clash: "c0"}
    values = {x: 0.7, y: 0.4, k1: 2.5, k2: 0.3, clash: 0.125}
    printer = CudaPrinter(names, precision=precision)
    lines, outputs = generate(exprs, printer)
    got = _evaluate_c(lines, outputs, list(names.values()), list(values.values()), tmp_path)
    for e, g in zip(exprs, got):
        ref = e.subs(values)
        ref = 1.0 if ref is sp.true else 0.0 if ref is sp.false else float(ref)
        assert g == pytest.approx(ref, rel=1e-12 if precision == "double" else 1e-5), e


def test_cse_of_nothing_and_where_in_errors():
    assert generate([], CudaPrinter()) == ([], [])
    from sbmlgpu import ir
    from sbmlgpu.codegen.printer import CodegenError

    with pytest.raises(CodegenError, match="rateOf.*reaction R2"):
        generate([ir.RateOf(x) + x * y, x * y], CudaPrinter(), where="reaction R2")


# -- cost model ------------------------------------------------------------------------

@pytest.mark.parametrize("expr, expected", [
    (x + y + k1, dict(add=2)),
    (x * y * k1, dict(mul=2)),
    (x / y, dict(div=1)),
    (x / (y * k1), dict(div=1, mul=1)),
    (x ** 3, dict(mul=2)),
    (x ** -2, dict(mul=1, div=1)),
    (sp.sqrt(x), dict(sqrt=1)),
    (1 / sp.sqrt(x), dict(sqrt=1, div=1)),
    (-x, dict()),
    (x - y, dict(add=1)),
    (sp.Rational(1, 3) * x, dict(div=1)),
    (sp.Rational(2, 3) * x, dict(mul=1, div=1)),
    (sp.Piecewise((x, x > y), (y, True)), dict(select=1, compare=1)),
    (sp.And(x > 1, y > 1), dict(compare=2, logic=1)),
])
def test_counts_of_simple_expressions(expr, expected):
    c = count_ops(expr)
    for field in ("add", "mul", "div", "sqrt", "compare", "logic", "select"):
        assert getattr(c, field) == expected.get(field, 0), (expr, field, c)


def test_function_weights_follow_the_documented_convention():
    assert count_ops(sp.exp(x)).flops() == WEIGHTS["intrinsic"] == 8
    assert count_ops(x ** y).flops() == WEIGHTS["pow"] == 17
    assert count_ops(x / y).flops() == WEIGHTS["div"] == 4
    assert count_ops(sp.sec(x)).functions["cos"] == 1 and count_ops(sp.sec(x)).div == 1
    assert count_ops(sp.Max(x, y, k1)).functions["fmax"] == 2
    assert count_ops(sp.Abs(x)).flops() == 1
    # k1*x/(k2 + x): one add, one mul, one div = 1 + 1 + 4
    assert count_ops(k1 * x / (k2 + x)).flops() == 6
    total = count_ops(x + y) + count_ops(sp.log(x))
    assert total.add == 1 and total.functions["log"] == 1 and total.as_dict()["flops"] == 9


def test_counts_match_the_printed_operators():
    """On rational functions the count is exactly the operators the printer writes."""
    rng = random.Random(3)
    syms = [x, y, k1, k2]
    printer = CudaPrinter({s: s.name for s in syms})

    def random_expr(depth):
        if depth == 0:
            return rng.choice(syms + [sp.Integer(rng.randint(2, 5)), sp.Rational(1, 3)])
        a, b = random_expr(depth - 1), random_expr(depth - 1)
        # powers of symbols only: the printer writes (a + b)**2 as (a + b)*(a + b),
        # whose one addition the compiler evaluates once (and the model counts once)
        power = rng.choice(syms) ** rng.choice([2, 3, -1, -2])
        return rng.choice([a + b, a * b, a / b, a - b, power * a])

    checked = 0
    for _ in range(300):
        e = random_expr(3)
        if e.is_Atom:
            continue
        text = printer.doprint(e)
        c = count_ops(e)
        assert c.mul == text.count("*"), (e, text)
        assert c.div == text.count("/"), (e, text)
        assert c.add == text.count(" + ") + text.count(" - "), (e, text)
        checked += 1
    assert checked > 200


@pytest.mark.parametrize("f", [
    sp.exp, sp.log, sp.sin, sp.cos, sp.tan, sp.asin, sp.acos, sp.atan, sp.sec, sp.csc,
    sp.cot, sp.asec, sp.acsc, sp.acot, sp.sinh, sp.cosh, sp.tanh, sp.asinh, sp.acosh,
    sp.atanh, sp.sech, sp.csch, sp.coth, sp.asech, sp.acsch, sp.acoth, sp.factorial,
    sp.gamma, lambda a: sp.Mod(a, y), lambda a: sp.log(a, y)])
def test_every_printable_intrinsic_is_counted(f):
    assert count_ops(f(x)).flops() >= WEIGHTS["intrinsic"], f(x)


def test_block_counts_each_temporary_once():
    exprs = _system()
    block = eliminate(exprs)
    assert count_block(block).flops() < count_many(exprs).flops()
    assert isinstance(count_block(block), OpCount)
