"""sympy expressions -> Python functions, compiled once per model.

One source text, two namespaces. The *fast* namespace uses the `math` module on
Python floats; `math` raises where IEEE arithmetic would give inf or NaN (1/0,
log(0), exp(1000), a negative base to a fractional power). Then the call is
repeated in the *safe* namespace, where the same names are numpy functions on
numpy float64 scalars, which give inf/NaN as SBML (and the test suite) expect.
The fast path is the common one and costs nothing extra.

Generated functions take `(t, x, p)` (time, state vector, parameter vector) and
some take `b`, the truth values of a trigger's relational atoms. Symbols are
renamed to plain identifiers before printing (SBML ids never reach the source).
delay(e, d) becomes `_delay(k, t - d, t, x)`; the caller supplies `_delay`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import scipy.special
import sympy as sp
from sympy.printing.pycode import PythonCodePrinter

from ..errors import UnsupportedModelError


class DelayCall(sp.Function):
    """Placeholder for delay(e, d) number k: DelayCall(k, t - d)."""

    nargs = 2


class _Printer(PythonCodePrinter):
    """Python printer with bare function names (resolved in our namespaces),
    round-trip floats, NaN for a piecewise without otherwise, and `pow` for
    fractional powers (Python's ** gives a complex number for a negative base)."""

    def __init__(self):
        super().__init__({"fully_qualified_modules": False, "standard": "python3"})

    def _module_format(self, fqn, register=True):
        return fqn.split(".")[-1]

    def _print_Float(self, e):
        return repr(float(e))

    def _print_Integer(self, e):
        return str(int(e))

    def _print_Rational(self, e):
        return f"({int(e.p)}/{int(e.q)})"

    def _print_Half(self, e):
        return "0.5"

    def _print_NaN(self, e):
        return "nan"

    def _print_ComplexInfinity(self, e):
        return "nan"

    def _print_Infinity(self, e):
        return "inf"

    def _print_NegativeInfinity(self, e):
        return "(-inf)"

    def _print_Exp1(self, e):
        return "e"

    def _print_Pi(self, e):
        return "pi"

    def _print_BooleanTrue(self, e):
        return "True"

    def _print_BooleanFalse(self, e):
        return "False"

    def _print_Pow(self, e, rational=False):
        base, exp = e.args
        if exp.is_Integer:
            n = int(exp)
            b = self.parenthesize(base, 100)  # always parenthesised
            if n == -1:
                return f"(1.0/{b})"
            if n < 0:
                return f"(1.0/({b})**{-n})"
            return f"({b})**{n}"
        if exp == sp.Rational(1, 2):
            return f"sqrt({self._print(base)})"
        if exp == sp.Rational(-1, 2):
            return f"(1.0/sqrt({self._print(base)}))"
        return f"pow({self._print(base)}, {self._print(exp)})"

    def _print_Piecewise(self, e):
        parts = []
        for value, cond in e.args:
            if cond is sp.true or cond == True:  # noqa: E712
                parts.append(f"({self._print(value)})")
                break
            parts.append(f"({self._print(value)}) if ({self._print(cond)}) else ")
        else:
            parts.append("nan")
        return "(" + "".join(parts) + ")"

    def _print_factorial(self, e):
        return f"factorial({self._print(e.args[0])})"

    def _print_DelayCall(self, e):
        k, tau = e.args
        return f"_delay({int(k)}, {self._print(tau)}, t, x)"

    def _print_sign(self, e):
        a = self._print(e.args[0])
        return f"sign({a})"

    def _print_Mod(self, e):
        a, b = (self.parenthesize(x, 100) for x in e.args)
        return f"fmod_floor({a}, {b})"

    def _print_not_supported(self, e):
        raise UnsupportedModelError({f"{type(e).__name__} in math ({e})": ()},
                                    who="the CPU reference")

    def _print_Derivative(self, e):
        raise UnsupportedModelError({"unresolved derivative in math": ()},
                                    who="the CPU reference")


def _fast_namespace() -> dict:
    ns = {name: getattr(math, name) for name in (
        "exp", "log", "log10", "log2", "sqrt", "sin", "cos", "tan", "asin", "acos", "atan",
        "atan2", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "floor", "ceil",
        "copysign", "gamma", "pi", "e", "inf", "nan", "fabs", "hypot", "erf", "erfc")}
    ns["pow"] = math.pow
    ns["factorial"] = lambda v: math.gamma(v + 1.0)
    ns["sign"] = lambda v: (v > 0) - (v < 0) if v == v else math.nan
    ns["fmod_floor"] = lambda a, b: a - b * math.floor(a / b)
    ns["abs"] = abs
    ns["min"] = min
    ns["max"] = max
    ns["array"] = np.array
    ns["zeros"] = np.zeros
    return ns


def _safe_namespace() -> dict:
    ns = {name: getattr(np, name) for name in (
        "exp", "log", "log10", "log2", "sqrt", "sin", "cos", "tan", "floor", "ceil",
        "copysign", "sinh", "cosh", "tanh", "pi", "e", "inf", "nan", "fabs", "hypot")}
    ns.update(asin=np.arcsin, acos=np.arccos, atan=np.arctan, atan2=np.arctan2,
              asinh=np.arcsinh, acosh=np.arccosh, atanh=np.arctanh,
              gamma=scipy.special.gamma, erf=scipy.special.erf, erfc=scipy.special.erfc)
    ns["pow"] = np.power
    ns["factorial"] = lambda v: scipy.special.gamma(np.float64(v) + 1.0)
    ns["sign"] = np.sign
    ns["fmod_floor"] = lambda a, b: np.float64(a) - np.float64(b) * np.floor(
        np.float64(a) / np.float64(b))
    ns["abs"] = np.abs
    # Python's min/max return the first argument on NaN; SBML tools give NaN
    ns["min"] = lambda *a: np.min(np.asarray(a, dtype=float))
    ns["max"] = lambda *a: np.max(np.asarray(a, dtype=float))
    ns["array"] = np.array
    ns["zeros"] = np.zeros
    return ns


_ARITH_ERRORS = (ZeroDivisionError, ValueError, OverflowError, TypeError)


@dataclass
class CompiledFunction:
    """A generated function with the fast/safe pair and its source (for debugging)."""

    source: str
    fast: Callable
    safe: Callable

    def __call__(self, *args):
        try:
            return self.fast(*args)
        except _ARITH_ERRORS:
            with np.errstate(all="ignore"):
                return self.safe(*(_as_np(a) for a in args))


def _as_np(a):
    if isinstance(a, float):
        return np.float64(a)
    if isinstance(a, np.ndarray):
        return a.astype(float, copy=False)
    return a


class SymbolNames:
    """Maps the view's symbols to the names used in generated code."""

    def __init__(self, t: sp.Symbol, x: Sequence[sp.Symbol], p: Sequence[sp.Symbol]):
        self.t = t
        self.x_index = {s: i for i, s in enumerate(x)}
        self.p_index = {s: i for i, s in enumerate(p)}
        self._clean = {t: sp.Symbol("t")}
        for s, i in self.x_index.items():
            self._clean[s] = sp.Symbol(f"x_{i}")
        for s, i in self.p_index.items():
            self._clean[s] = sp.Symbol(f"p_{i}")

    def clean(self, expr: sp.Basic, where: str, extra: dict | None = None) -> sp.Basic:
        mapping = dict(self._clean)
        if extra:
            mapping.update(extra)
        out = expr.xreplace(mapping) if isinstance(expr, sp.Basic) else sp.sympify(expr)
        allowed = set(mapping.values())
        stray = [s for s in out.free_symbols if s not in allowed]
        if stray:
            names_ = ", ".join(sorted(map(str, stray)))
            raise UnsupportedModelError({f"math refers to {names_}, which has no value": (where,)},
                                        who="the CPU reference")
        return out


def generate(name: str, exprs: Sequence[sp.Basic], names: SymbolNames, *, where: str,
             shape: str = "vector", n_rows: int = 0, n_cols: int = 0,
             entries: Sequence[tuple[int, int]] = (), with_b: int | None = None,
             use_cse: bool = True) -> CompiledFunction:
    """Compile `exprs` to `name(t, x, p[, b])`.

    shape: 'vector' returns a float array; 'list' a Python list (for booleans or
    mixed values); 'scalar' the single value; 'matrix' an (n_rows, n_cols) array
    with `exprs[k]` at `entries[k]`."""
    extra = {sp.Symbol(f"b_{i}"): sp.Symbol(f"b_{i}") for i in range(with_b or 0)}
    cleaned = [names.clean(e, where, extra) for e in exprs]
    printer = _Printer()
    body: list[str] = []
    if use_cse and cleaned and any(not (e.is_Atom) for e in cleaned):
        try:
            replacements, reduced = sp.cse(cleaned, symbols=sp.numbered_symbols("_c"),
                                           optimizations=None, order="none")
        except Exception:  # cse is an optimisation; never let it break compilation
            replacements, reduced = [], cleaned
    else:
        replacements, reduced = [], cleaned
    used = set()
    for e in [*reduced, *(v for _, v in replacements)]:
        used |= {s.name for s in e.free_symbols}
    args = "t, x, p, b" if with_b is not None else "t, x, p"
    # The fast variant reads the arrays as Python floats (faster arithmetic, and
    # math's exceptions on 1/0 and friends send the call to the safe variant);
    # the safe one keeps numpy scalars, whose arithmetic gives IEEE inf and NaN.
    unpack_fast, unpack_safe = [], []
    uses_x = any(s.startswith("x_") for s in used)
    uses_p = any(s.startswith("p_") for s in used)
    if uses_x:
        unpack_fast.append("    _xl = x.tolist()")
    if uses_p:
        unpack_fast.append("    _pl = p.tolist()")
    for s in sorted(used):
        if s.startswith("x_"):
            unpack_fast.append(f"    {s} = _xl[{s[2:]}]")
            unpack_safe.append(f"    {s} = x[{s[2:]}]")
        elif s.startswith("p_"):
            unpack_fast.append(f"    {s} = _pl[{s[2:]}]")
            unpack_safe.append(f"    {s} = p[{s[2:]}]")
        elif s.startswith("b_"):
            unpack_fast.append(f"    {s} = b[{s[2:]}]")
            unpack_safe.append(f"    {s} = b[{s[2:]}]")
    for sym_, value in replacements:
        body.append(f"    {sym_.name} = {printer.doprint(value)}")
    printed = [printer.doprint(e) for e in reduced]
    tail = []
    if shape == "scalar":
        tail.append(f"    return {printed[0] if printed else 'None'}")
    elif shape == "list":
        tail.append("    return [" + ", ".join(printed) + "]")
    elif shape == "vector":
        tail.append("    return array([" + ", ".join(printed) + "], dtype=float)")
    elif shape == "matrix":
        tail.append(f"    _J = zeros(({n_rows}, {n_cols}))")
        for (i, j), v in zip(entries, printed):
            tail.append(f"    _J[{i}, {j}] = {v}")
        tail.append("    return _J")
    else:  # pragma: no cover - programming error
        raise ValueError(shape)
    head = f"def {name}({args}):"
    fast_source = "\n".join([head, *unpack_fast, *body, *tail]) + "\n"
    safe_source = "\n".join([head, *unpack_safe, *body, *tail]) + "\n"
    return CompiledFunction(fast_source, _exec(fast_source, name, _fast_namespace()),
                            _exec(safe_source, name, _safe_namespace()))


def _exec(source: str, name: str, namespace: dict) -> Callable:
    code = compile(source, f"<sbmlgpu.reference {name}>", "exec")
    exec(code, namespace)  # noqa: S102 - our own generated source
    return namespace[name]


def bind_delay(functions: Sequence[CompiledFunction], delay: Callable) -> None:
    """Give generated functions the `_delay` they call (both namespaces)."""
    for f in functions:
        f.fast.__globals__["_delay"] = delay
        f.safe.__globals__["_delay"] = delay
