"""The numpy twin of the generated kernel's math.

`NumpyPrinter` is CudaPrinter with numpy spellings: it walks the same sympy trees in
the same order, so `a*b*c`, `(x*x)` and `x/y` come out as the same operations in the
same order as in the CUDA text, and IEEE double arithmetic gives the same bits
(numpy never contracts into FMAs; nvcc may, see README: identical realisations
on CPU and GPU). Library functions (log, exp, pow) may differ in the last bit
between numpy and CUDA's libdevice.

`compile_functions(exprs)` turns the prepared expressions into Python functions
over arrays: states X (states, members), varied parameters P (varied, members).
"""

from __future__ import annotations

import math

import numpy as np
import sympy as sp

from sbmlgpu.codegen.printer import CudaPrinter, is_boolean
from sbmlgpu.ir import TIME

from .expressions import Expressions, render_block

_NUMPY_FUNCTIONS = {
    "exp": "np.exp", "log": "np.log", "sin": "np.sin", "cos": "np.cos", "tan": "np.tan",
    "asin": "np.arcsin", "acos": "np.arccos", "atan": "np.arctan", "sinh": "np.sinh",
    "cosh": "np.cosh", "tanh": "np.tanh", "asinh": "np.arcsinh", "acosh": "np.arccosh",
    "atanh": "np.arctanh", "floor": "np.floor", "ceil": "np.ceil", "fabs": "np.abs",
    "sqrt": "np.sqrt", "pow": "np.power", "fmin": "np.fmin", "fmax": "np.fmax",
    "tgamma": "_gamma",
}


class NumpyPrinter(CudaPrinter):
    """Python/numpy text of the expressions CudaPrinter prints as C (double only)."""

    def __init__(self, symbols=None, precision: str = "double", unmapped: str = "raise"):
        super().__init__(symbols, "double", unmapped)

    def literal(self, value: float) -> str:
        value = float(value)
        if math.isnan(value):
            return "np.nan"
        if math.isinf(value):
            return "np.inf" if value > 0 else "-np.inf"
        return repr(value)

    def function(self, name: str) -> str:
        return _NUMPY_FUNCTIONS[name]

    def print_value(self, expr, where=None) -> str:
        text = self.doprint(expr, where=where)
        if is_boolean(expr):
            return f"np.where({text}, 1.0, 0.0)"
        return text

    def _print_Infinity(self, expr):
        return "np.inf"

    def _print_NegativeInfinity(self, expr):
        return "-np.inf"

    def _print_NaN(self, expr):
        return "np.nan"

    def _print_ComplexInfinity(self, expr):
        return "np.nan"

    def _print_BooleanTrue(self, expr):
        return "True"

    def _print_BooleanFalse(self, expr):
        return "False"

    def _print_sign(self, expr):
        return f"np.sign({self._print(expr.args[0])})"

    def _print_Mod(self, expr):
        a, b = expr.args
        return f"np.mod({self._print(a)}, {self._print(b)})"

    def _print_Piecewise(self, expr):
        pieces = []
        for value, cond in expr.args:
            pieces.append((value, cond))
            if cond is sp.true:
                break
        out = self._print(pieces.pop()[0]) if pieces[-1][1] is sp.true else "np.nan"
        for value, cond in reversed(pieces):
            out = f"np.where({self._print(cond)}, {self._print(value)}, {out})"
        return out

    def _print_ITE(self, expr):
        c, a, b = expr.args
        return f"np.where({self._print(c)}, {self._print(a)}, {self._print(b)})"

    def _print_And(self, expr):
        return "np.logical_and.reduce([" + ", ".join(self._truth(a) for a in expr.args) + "])"

    def _print_Or(self, expr):
        return "np.logical_or.reduce([" + ", ".join(self._truth(a) for a in expr.args) + "])"

    def _print_Not(self, expr):
        return f"np.logical_not({self._truth(expr.args[0])})"

    def _print_Xor(self, expr):
        out = self._truth(expr.args[0])
        for a in expr.args[1:]:
            out = f"np.not_equal({out}, {self._truth(a)})"
        return out

    def _print_Implies(self, expr):
        a, b = expr.args
        return f"np.logical_or(np.logical_not({self._truth(a)}), {self._truth(b)})"

    def _print_Equivalent(self, expr):
        first = self._truth(expr.args[0])
        return "np.logical_and.reduce([" + ", ".join(
            f"np.equal({first}, {self._truth(a)})" for a in expr.args[1:]) + "])"

    def _print_Nand(self, expr):
        return f"np.logical_not({self._print_And(expr)})"

    def _print_Nor(self, expr):
        return f"np.logical_not({self._print_Or(expr)})"


def _printer(exprs: Expressions, time_name: str = "t") -> NumpyPrinter:
    symbols = {x: f"X[{i}]" for i, x in enumerate(exprs.x)}
    symbols.update({p: f"P[{k}]" for k, p in enumerate(exprs.varied_symbols)})
    symbols[TIME] = time_name
    return NumpyPrinter(symbols)


def _declare(printer: NumpyPrinter, name: str, expr) -> str:
    return f"{name} = {printer.doprint(expr)}"


def _function(name: str, args: str, lines: list[str], targets: list[str]) -> str:
    body = [f"    {line}" for line in lines] + [f"    {t}" for t in targets]
    return f"def {name}({args}):\n" + ("\n".join(body) or "    pass") + "\n"


class TwinFunctions:
    """The generated functions; each writes rows of `out` (broadcasting scalars).

    propensities(X, P, out)        out: (reactions, members)
    x0(P, t, out)                  out: (states, members)
    outputs(X, P, t, out)          out: (outputs, members)
    trigger_<e>(X, P, t) -> bool array (or scalar)
    assign_<e>(X, P, t) -> list of new values, in assignment order
    """

    def __init__(self, exprs: Expressions):
        printer = _printer(exprs)
        sources = []
        lines, values = render_block(exprs.propensity_block, printer, prefix="a_",
                                    declare=_declare)
        sources.append(_function("propensities", "X, P, out", lines,
                                 [f"out[{j}] = {v}" for j, v in enumerate(values)]))
        lines, values = render_block(exprs.x0_block, printer, prefix="x0_", declare=_declare)
        sources.append(_function("x0", "P, t, out", lines,
                                 [f"out[{i}] = {v}" for i, v in enumerate(values)]))
        lines, values = render_block(exprs.output_block, printer, prefix="o_", declare=_declare)
        sources.append(_function("outputs", "X, P, t, out", lines,
                                 [f"out[{o}] = {v}" for o, v in enumerate(values)]))
        self.time_thresholds = []
        for e_index, e in enumerate(exprs.events):
            trigger = (f"np.greater_equal(t, {printer.doprint(e.time_threshold)})"
                       if e.time_threshold is not None
                       else printer.print_condition(e.trigger, where=f"event {e.id}"))
            sources.append(_function(f"trigger_{e_index}", "X, P, t", [],
                                     [f"return {trigger}"]))
            lines, values = render_block(e.block, printer, prefix=f"e{e_index}_",
                                         declare=_declare)
            sources.append(_function(f"assign_{e_index}", "X, P, t", lines,
                                     [f"return [{', '.join(values)}]"]))
            if e.time_threshold is not None:
                sources.append(_function(f"threshold_{e_index}", "P", [],
                                         [f"return {printer.doprint(e.time_threshold)}"]))
        self.source = "\n".join(sources)
        namespace = {"np": np, "_gamma": _gamma}
        exec(compile(self.source, "<ssa numpy twin>", "exec"), namespace)  # noqa: S102
        self.propensities = namespace["propensities"]
        self.x0 = namespace["x0"]
        self.outputs = namespace["outputs"]
        self.triggers = [namespace[f"trigger_{k}"] for k in range(len(exprs.events))]
        self.assignments = [namespace[f"assign_{k}"] for k in range(len(exprs.events))]
        self.thresholds = [namespace.get(f"threshold_{k}") for k in range(len(exprs.events))]


def _gamma(x):
    from scipy.special import gamma

    return gamma(x)
