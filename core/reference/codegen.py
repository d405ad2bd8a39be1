"""sympy expressions -> Python functions, compiled once per model.

The text comes from core's ScalarPrinter (sbmlgpu.codegen.numpy_printer): the CUDA
printer's arithmetic in the kernel's order, with Python's lazy conditionals. One
source text, two namespaces. The *fast* namespace uses the `math` module on
Python floats; `math` raises where IEEE arithmetic would give inf or NaN (1/0,
log(0), exp(1000), a negative base to a fractional power). Then the call is
repeated in the *safe* namespace, where the same names are numpy functions on
numpy float64 scalars, which give inf/NaN as SBML (and the test suite) expect.
The fast path is the common one and costs nothing extra.

Generated functions take `(t, x, p)` (time, state vector, parameter vector) and
some take `b`, the truth values of a trigger's relational atoms. Symbols are
renamed to plain identifiers before printing (SBML ids never reach the source).
delay(e, d) becomes `_delay(k, t - d, t, x)`; the caller supplies `_delay`. A distrib
draw becomes `_draw(name, args...)`; the caller supplies `_draw` (draws.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import sympy as sp

from ..codegen.numpy_printer import (ScalarPrinter, define, safe_scalar_namespace,
                                     scalar_namespace)
from ..errors import UnsupportedModelError


class DelayCall(sp.Function):
    """Placeholder for delay(e, d) number k: DelayCall(k, t - d)."""

    nargs = 2


class _Printer(ScalarPrinter):
    """ScalarPrinter that prints delay() calls for the time loop's history and knows
    that the symbols b_<i> are truth values (a trigger's atoms), used as they are."""

    generator = "the CPU reference"

    def _truth(self, expr) -> str:
        if isinstance(expr, sp.Symbol) and expr.name.startswith("b_"):
            return self._print(expr)
        return super()._truth(expr)

    def _print_DelayCall(self, e):
        k, tau = e.args
        return f"_delay({int(k)}, {self._print(tau)}, t, x)"


def _fast_namespace() -> dict:
    return {**scalar_namespace(), "array": np.array, "zeros": np.zeros}


def _safe_namespace() -> dict:
    return {**safe_scalar_namespace(), "array": np.array, "zeros": np.zeros}


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
        self._allowed = set(self._clean.values())

    def clean(self, expr: sp.Basic, where: str, extra: dict | None = None) -> sp.Basic:
        # copied only where there are extras: a copy per expression made compiling a
        # model of 10,000 species quadratic in its size
        mapping = {**self._clean, **extra} if extra else self._clean
        out = expr.xreplace(mapping) if isinstance(expr, sp.Basic) else sp.sympify(expr)
        stray = [s for s in out.free_symbols
                 if s not in self._allowed and not (extra and s in extra.values())]
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
    body: list[str] = []
    if use_cse and cleaned and any(not (e.is_Atom) for e in cleaned):
        try:
            replacements, reduced = sp.cse(cleaned, symbols=sp.numbered_symbols("_c"),
                                           optimizations=None, order="none")
        except Exception:  # cse is an optimisation; never let it break compilation
            replacements, reduced = [], cleaned
    else:
        replacements, reduced = [], cleaned
    symbols = {sym_: sym_.name for sym_, _ in replacements}
    for e in [*reduced, *(v for _, v in replacements)]:
        symbols.update((s, s.name) for s in e.free_symbols)
    used = set(symbols.values())
    printer = _Printer(symbols)
    args = "t, x, p, b" if with_b is not None else "t, x, p"
    # The fast variant reads the arrays as Python floats (faster arithmetic, and
    # math's exceptions on 1/0 and friends send the call to the safe variant);
    # the safe one keeps numpy scalars, whose arithmetic gives IEEE inf and NaN.
    unpack_fast, unpack_safe = [], []
    uses_x = any(s.startswith("x_") for s in used)
    uses_p = any(s.startswith("p_") for s in used)
    if uses_x:
        unpack_fast.append("_xl = x.tolist()")
    if uses_p:
        unpack_fast.append("_pl = p.tolist()")
    for s in sorted(used):
        if s.startswith("x_"):
            unpack_fast.append(f"{s} = _xl[{s[2:]}]")
            unpack_safe.append(f"{s} = x[{s[2:]}]")
        elif s.startswith("p_"):
            unpack_fast.append(f"{s} = _pl[{s[2:]}]")
            unpack_safe.append(f"{s} = p[{s[2:]}]")
        elif s.startswith("b_"):
            unpack_fast.append(f"{s} = b[{s[2:]}]")
            unpack_safe.append(f"{s} = b[{s[2:]}]")
    for sym_, value in replacements:
        body.append(f"{sym_.name} = {printer.doprint(value, where=where)}")
    printed = [printer.doprint(e, where=where) for e in reduced]
    tail = []
    if shape == "scalar":
        tail.append(f"return {printed[0] if printed else 'None'}")
    elif shape == "list":
        tail.append("return [" + ", ".join(printed) + "]")
    elif shape == "vector":
        tail.append("return array([" + ", ".join(printed) + "], dtype=float)")
    elif shape == "matrix":
        tail.append(f"_J = zeros(({n_rows}, {n_cols}))")
        for (i, j), v in zip(entries, printed):
            tail.append(f"_J[{i}, {j}] = {v}")
        tail.append("return _J")
    else:  # pragma: no cover - programming error
        raise ValueError(shape)
    filename = f"<sbmlgpu.reference {name}>"
    fast_source, fast = define(name, args, [*unpack_fast, *body, *tail], _fast_namespace(),
                               filename)
    _, safe = define(name, args, [*unpack_safe, *body, *tail], _safe_namespace(), filename)
    return CompiledFunction(fast_source, fast, safe)


def bind_delay(functions: Sequence[CompiledFunction], delay: Callable) -> None:
    """Give generated functions the `_delay` they call (both namespaces)."""
    _bind(functions, "_delay", delay)


def bind_draws(functions: Sequence[CompiledFunction], draw: Callable) -> None:
    """Give generated functions the `_draw` their distrib draws call (draws.py)."""
    _bind(functions, "_draw", draw)


def _bind(functions: Sequence[CompiledFunction], name: str, value: Callable) -> None:
    for f in functions:
        f.fast.__globals__[name] = value
        f.safe.__globals__[name] = value
