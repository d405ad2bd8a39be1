"""sympy -> Python text: the CUDA printer's arithmetic, in its order, for numpy or floats.

Every Python path that evaluates model math (the SSA numpy engine, the ODE numpy
engine and stiffness check, the CPU reference) prints it with one of these two
subclasses of CudaPrinter. They walk the same sympy trees with the same methods,
so `a*b*c`, `(x*x)` for x**2, `x/3.0` and every parenthesis come out as the same
operations in the same order as in the generated kernel, and IEEE double
arithmetic gives the same bits (Python and numpy never contract a*b + c into an
FMA; nvcc may). Only the spellings differ:

- NumpyPrinter, for arrays (one value per ensemble member): a condition is
  `where(c, a, b)` and logic is `logical_and(...)`, `logical_or(...)`,
  `logical_not(...)`; both branches are evaluated (element-wise, no exceptions).
- ScalarPrinter, for Python floats: `(a if c else b)`, `and`, `or`, `not`, lazy
  like C's `?:`, `&&`, `||`, so an untaken branch is never evaluated.

Names in the text are bare (`exp`, `pow`, `fabs`, `fmin`, `tgamma`, `where`, `nan`,
`inf`, and `sign(x)`, `mod(a, b)`): they are resolved in the namespace the text
is executed in. `array_namespace()` (numpy, for NumpyPrinter), and for
ScalarPrinter `scalar_namespace()` (the `math` module: fast, and raises where IEEE
arithmetic gives inf or NaN) and `safe_scalar_namespace()` (numpy scalars: IEEE
inf and NaN), for callers that try the fast one first. `define(...)` executes a
generated function in a namespace.

Where Python deliberately differs from the kernel: `sign(NaN)` is NaN (the
kernel's ternary gives 0); `mod` is numpy's/Python's floored remainder, as the
kernel's `sbmlgpu_mod` (the scalar namespaces keep the CPU reference's
`a - b*floor(a/b)`); library functions (exp, log, pow) may differ from CUDA's
libdevice in the last bit.
"""

from __future__ import annotations

import math
from typing import Callable, Mapping, Sequence

import numpy as np

from .printer import CudaPrinter

# C math function (as CudaPrinter spells it in double precision) -> numpy function
_NUMPY = {
    "exp": np.exp, "log": np.log, "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh,
    "cosh": np.cosh, "tanh": np.tanh, "asinh": np.arcsinh, "acosh": np.arccosh,
    "atanh": np.arctanh, "floor": np.floor, "ceil": np.ceil, "fabs": np.abs,
    "sqrt": np.sqrt, "pow": np.power,
}


class NumpyPrinter(CudaPrinter):
    """Python text over numpy arrays of what CudaPrinter prints as C (double only).
    Constructed like CudaPrinter (symbols, precision, unmapped), so that code that
    re-creates a printer with more symbols (cse.py) keeps its class."""

    generator = "the numpy code generator"
    TRUE, FALSE = "True", "False"

    def __init__(self, symbols=None, precision: str = "double", unmapped: str = "raise"):
        super().__init__(symbols, "double", unmapped)

    def literal(self, value: float) -> str:
        value = float(value)
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)

    def _print_sign(self, expr):
        return f"sign({self._print(expr.args[0])})"

    def _print_Mod(self, expr):
        a, b = expr.args
        return f"mod({self._print(a)}, {self._print(b)})"

    def _print_Draw(self, expr):
        """A distrib draw calls `_draw(sbml name, parameters..., lower, upper)`, which
        the code that runs the function binds in its namespace (the CPU reference:
        a numpy Generator per member); unbound, the call is a NameError, never a
        number."""
        args = ", ".join([repr(expr.sbml_name), *(self._print(a) for a in expr.args[1:])])
        return f"_draw({args})"

    CONDITIONAL = "where({condition}, {a}, {b})"

    def _all(self, truths: list[str]) -> str:
        return _nest("logical_and", truths)

    def _any(self, truths: list[str]) -> str:
        return _nest("logical_or", truths)

    def _negate(self, truth: str) -> str:
        return f"logical_not({truth})"


class ScalarPrinter(NumpyPrinter):
    """Python text over floats: conditions and logic are Python's own, lazy."""

    CONDITIONAL = "({a} if {condition} else {b})"
    AND, OR, NOT = " and ", " or ", "not "
    _all, _any, _negate = CudaPrinter._all, CudaPrinter._any, CudaPrinter._negate


def _nest(function: str, truths: list[str]) -> str:
    out = truths[-1]
    for truth in reversed(truths[:-1]):
        out = f"{function}({truth}, {out})"
    return out


# -- namespaces ------------------------------------------------------------------------
def _gamma(x):
    from scipy.special import gamma  # scipy only when a model uses factorial()

    return gamma(x)


def array_namespace() -> dict:
    """The names NumpyPrinter's text uses, as numpy functions on arrays."""
    ns = {name: f for name, f in _NUMPY.items()}
    ns.update(fmin=np.fmin, fmax=np.fmax, tgamma=_gamma, sign=np.sign, mod=np.mod,
              where=np.where, logical_and=np.logical_and, logical_or=np.logical_or,
              logical_not=np.logical_not, nan=np.nan, inf=np.inf)
    return ns


def scalar_namespace() -> dict:
    """The names ScalarPrinter's text uses, from the `math` module: fast on floats,
    and raising (ZeroDivisionError, ValueError, OverflowError) where IEEE arithmetic
    would give inf or NaN; run `safe_scalar_namespace()`'s version then."""
    ns = {name: getattr(math, name) for name in (
        "exp", "log", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh",
        "asinh", "acosh", "atanh", "floor", "ceil", "fabs", "sqrt", "pow", "nan", "inf")}
    ns["tgamma"] = math.gamma
    ns["sign"] = lambda v: (v > 0) - (v < 0) if v == v else math.nan
    ns["mod"] = lambda a, b: a - b * math.floor(a / b)
    ns["fmin"] = min
    ns["fmax"] = max
    return ns


def safe_scalar_namespace() -> dict:
    """The same names as numpy functions on numpy float64 scalars: IEEE inf and NaN
    instead of exceptions, and NaN from fmin/fmax of a NaN."""
    ns = array_namespace()
    ns["tgamma"] = lambda v: _gamma(np.float64(v))
    ns["mod"] = lambda a, b: np.float64(a) - np.float64(b) * np.floor(
        np.float64(a) / np.float64(b))
    ns["fmin"] = np.minimum
    ns["fmax"] = np.maximum
    return ns


def define(name: str, args: str, body: Sequence[str], namespace: Mapping,
           filename: str = "<sbmlgpu generated>") -> tuple[str, Callable]:
    """Execute `def name(args):` with the statements `body` (one a line, without
    indentation) in a copy of `namespace`; returns (source, function)."""
    lines = [f"    {line}" for line in body] or ["    pass"]
    source = f"def {name}({args}):\n" + "\n".join(lines) + "\n"
    scope = dict(namespace)
    exec(compile(source, filename, "exec"), scope)  # noqa: S102 - our own generated text
    return source, scope[name]

