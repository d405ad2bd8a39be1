"""Operation counts of generated expressions, and a weighted FLOP estimate.

The profiler divides `OpCount.flops()` (times the number of evaluations) by the
measured kernel time to report achieved GFLOP/s. The counts follow what
printer.py emits: x**3 is two multiplications, x**-1 a division, x**0.5 a sqrt,
a/b*c one division and one multiplication, a sign change nothing (it folds into
a subtraction or an FMA operand).

Weights (`WEIGHTS`) follow the long-standing Livermore Loops convention (McMahon,
"The Livermore Fortran Kernels", LLNL UCRL-53745, 1986): add, subtract, multiply
and compare count 1; divide and square root 4; exp, log, sin and the other
intrinsic functions 8. On NVIDIA GPUs this is also about right in instructions:
double division and sqrt are a reciprocal estimate plus Newton steps (~4-8
FMAs), and libdevice's exp/log/trig are a range reduction plus a polynomial of
~8-12 FMAs (CUDA C++ Programming Guide, "Arithmetic Instructions" and
"Mathematical Functions"). pow counts as exp(y*log x): 8 + 8 + 1 = 17. fabs,
floor, ceil, fmin and fmax are single instructions: 1. Logic (&&, ||, !) and
selects (?:) are integer work: 0. A Piecewise counts every branch (the compiler
usually evaluates both sides of a select), so it is an upper bound.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable

import sympy as sp
from sympy.logic.boolalg import BooleanFunction

from .cse import CseBlock
from .printer import _INVERSE_RECIPROCAL, _RECIPROCAL, _UNARY, POW_INLINE_MAX

_CHEAP = {"fabs", "floor", "ceil", "fmin", "fmax"}
WEIGHTS = {"add": 1, "mul": 1, "div": 4, "sqrt": 4, "compare": 1, "logic": 0, "select": 0,
           "cheap": 1, "intrinsic": 8, "pow": 17}


@dataclass
class OpCount:
    add: int = 0
    mul: int = 0
    div: int = 0
    sqrt: int = 0
    compare: int = 0
    logic: int = 0
    select: int = 0
    functions: Counter = field(default_factory=Counter)  # C function name -> calls

    def __add__(self, other: "OpCount") -> "OpCount":
        return OpCount(self.add + other.add, self.mul + other.mul, self.div + other.div,
                       self.sqrt + other.sqrt, self.compare + other.compare,
                       self.logic + other.logic, self.select + other.select,
                       self.functions + other.functions)

    def flops(self, weights: dict[str, float] = WEIGHTS) -> float:
        """The weighted FLOP estimate (see the module docstring)."""
        total = sum(weights[k] * getattr(self, k)
                    for k in ("add", "mul", "div", "sqrt", "compare", "logic", "select"))
        for name, calls in self.functions.items():
            kind = "pow" if name == "pow" else "cheap" if name in _CHEAP else "intrinsic"
            total += weights[kind] * calls
        return float(total)

    def as_dict(self) -> dict:
        return {"add": self.add, "mul": self.mul, "div": self.div, "sqrt": self.sqrt,
                "compare": self.compare, "logic": self.logic, "select": self.select,
                "functions": dict(self.functions), "flops": self.flops()}


def count_ops(expr: sp.Basic) -> OpCount:
    """Operations to evaluate `expr` as printer.py prints it."""
    c = OpCount()
    _walk(sp.sympify(expr), c)
    return c


def count_block(block: CseBlock) -> OpCount:
    """Operations of a CSE block: each temporary once, then the outputs."""
    return count_many([e for _, e in block.temporaries] + list(block.outputs))


def count_many(exprs: Iterable[sp.Basic]) -> OpCount:
    total = OpCount()
    for e in exprs:
        total = total + count_ops(e)
    return total


def _walk(e, c: OpCount) -> None:  # noqa: C901 -- one branch per construct, as in printer.py
    if e.is_Atom or not e.args:
        return
    name = type(e).__name__
    if e.is_Add:
        c.add += len(e.args) - 1
    elif e.is_Mul:
        _mul(e, c)
        return
    elif e.is_Pow:
        _pow(e.base, e.exp, c)
        return
    elif isinstance(e, sp.Piecewise):
        c.select += len(e.args) - (1 if e.args[-1].cond is sp.true else 0)
        for value, cond in e.args:
            _walk(value, c)
            _walk(cond, c)
        return
    elif isinstance(e, sp.core.relational.Relational):
        c.compare += 1
    elif isinstance(e, BooleanFunction):
        c.logic += max(len(e.args) - 1, 1)
    elif isinstance(e, (sp.Min, sp.Max)):
        c.functions["fmax" if isinstance(e, sp.Max) else "fmin"] += len(e.args) - 1
    elif name == "Mod":
        c.functions["fmod"] += 1
        c.add += 1
        c.compare += 2
    elif name == "sign":
        c.compare += 2
        c.select += 2
    elif name == "factorial":
        c.functions["tgamma"] += 1
        c.add += 1
    elif name == "log":  # log(x), or log(x, b) = log(x)/log(b) when built unevaluated
        c.functions["log"] += len(e.args)
        c.div += len(e.args) - 1
    elif name in _UNARY:
        c.functions[_UNARY[name]] += 1
    elif name in _RECIPROCAL:
        c.functions[_RECIPROCAL[name]] += 1
        c.div += 1
    elif name in _INVERSE_RECIPROCAL:
        c.functions[_INVERSE_RECIPROCAL[name]] += 1
        c.div += 1
    for a in e.args:
        _walk(a, c)


def _mul(e: sp.Mul, c: OpCount) -> None:
    coeff, rest = e.as_coeff_Mul()
    coeff = abs(coeff) if coeff.is_extended_real else coeff
    numerator = 0 if coeff == 1 else (1 if not coeff.is_Rational or coeff.p != 1 else 0)
    denominator = 1 if coeff.is_Rational and coeff.q != 1 else 0
    for f in sp.Mul.make_args(rest):
        if f.is_Pow and f.exp.is_Number and f.exp.is_extended_negative and f.exp.is_finite:
            denominator += 1
            _pow(f.base, -f.exp, c)
        else:
            numerator += 1
            _walk(f, c)
    c.mul += max(numerator - 1, 0) + max(denominator - 1, 0)
    c.div += 1 if denominator else 0


def _pow(base, exponent, c: OpCount) -> None:
    _walk(base, c)
    if base is sp.S.Exp1:
        c.functions["exp"] += 1
        _walk(exponent, c)
        return
    if exponent.is_Number and exponent.is_finite:
        value = float(exponent)
        if value.is_integer() and abs(value) <= POW_INLINE_MAX:
            c.mul += max(abs(int(value)) - 1, 0)
            c.div += 1 if value < 0 else 0
            return
        if abs(value) == 0.5:
            c.sqrt += 1
            c.div += 1 if value < 0 else 0
            return
    c.functions["pow"] += 1
    _walk(exponent, c)
