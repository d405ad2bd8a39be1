"""The numpy twin of the generated kernel's math.

core's NumpyPrinter (sbmlgpu.codegen.numpy_printer) is the CUDA printer with numpy
spellings: it walks the same sympy trees in the same order, so `a*b*c`, `(x*x)` and
`x/y` come out as the same operations in the same order as in the CUDA text, and
IEEE double arithmetic gives the same bits (numpy never contracts into FMAs; nvcc
may, see README: identical realisations on CPU and GPU). Library functions (log,
exp, pow) may differ in the last bit between numpy and CUDA's libdevice.

`TwinFunctions(exprs)` turns the prepared expressions into Python functions over
arrays: states X (states, members), varied parameters P (varied, members).
"""

from __future__ import annotations

from sbmlgpu.codegen.cse import python_assignment
from sbmlgpu.codegen.numpy_printer import NumpyPrinter, array_namespace, define
from sbmlgpu.ir import TIME

from .expressions import Expressions, render_block


def _printer(exprs: Expressions, time_name: str = "t") -> NumpyPrinter:
    symbols = {x: f"X[{i}]" for i, x in enumerate(exprs.x)}
    symbols.update({p: f"P[{k}]" for k, p in enumerate(exprs.varied_symbols)})
    symbols[TIME] = time_name
    return NumpyPrinter(symbols)


class TwinFunctions:
    """The generated functions; each writes rows of `out` (broadcasting scalars).

    propensities(X, P, out)        out: (reactions, members)
    x0(P, t, out)                  out: (states, members)
    outputs(X, P, t, out)          out: (outputs, members)
    trigger_<e>(X, P, t) -> bool array (or scalar)
    threshold_<e>(X, P) -> T of a time-threshold event (None for the others)
    assign_<e>(X, P, t) -> list of new values, in assignment order
    """

    def __init__(self, exprs: Expressions):
        printer = _printer(exprs)
        namespace = array_namespace()
        sources = []

        def function(name: str, args: str, body: list[str]):
            text, f = define(name, args, body, namespace, "<ssa numpy twin>")
            sources.append(text)
            return f

        def block(cse, prefix: str) -> tuple[list[str], list[str]]:
            return render_block(cse, printer, prefix=prefix, declare=python_assignment)

        lines, values = block(exprs.propensity_block, "a_")
        self.propensities = function("propensities", "X, P, out",
                                     lines + [f"out[{j}] = {v}" for j, v in enumerate(values)])
        lines, values = block(exprs.x0_block, "x0_")
        self.x0 = function("x0", "P, t, out",
                           lines + [f"out[{i}] = {v}" for i, v in enumerate(values)])
        lines, values = block(exprs.output_block, "o_")
        self.outputs = function("outputs", "X, P, t, out",
                                lines + [f"out[{o}] = {v}" for o, v in enumerate(values)])
        self.triggers, self.assignments, self.thresholds = [], [], []
        for e_index, e in enumerate(exprs.events):
            where = f"event {e.id}"
            trigger = (f"(t >= {printer.doprint(e.time_threshold, where=where)})"
                       if e.time_threshold is not None
                       else printer.print_condition(e.trigger, where=where))
            self.triggers.append(function(f"trigger_{e_index}", "X, P, t", [f"return {trigger}"]))
            lines, values = block(e.block, f"e{e_index}_")
            self.assignments.append(function(f"assign_{e_index}", "X, P, t",
                                             lines + [f"return [{', '.join(values)}]"]))
            self.thresholds.append(None if e.time_threshold is None else function(
                f"threshold_{e_index}", "X, P",
                [f"return {printer.doprint(e.time_threshold, where=where)}"]))
        self.source = "\n".join(sources)
