"""numpy functions of a KernelModel's expressions (for the stiffness check and the numpy engine).

Printed by core's NumpyPrinter (sbmlgpu.codegen.numpy_printer), the CUDA printer
with numpy spellings, from the kernel's own symbol table: fixed parameters are the
kernel's literals, and every expression is the kernel's operations in the kernel's
order (x**2 is x*x; where() for piecewise), over arrays of members or over floats.
Symbols map straight to argument names (`t`, `x_0`, `p_0`), so SBML ids such as
`x@S1` never reach the source and nothing is renamed symbol by symbol.
"""

from __future__ import annotations

from sbmlgpu.codegen.numpy_printer import NumpyPrinter, array_namespace, define
from sbmlgpu.ir import TIME

from sbmlgpu.ode.model import KernelModel


def _printer(model: KernelModel) -> NumpyPrinter:
    symbols = {TIME: "t"}
    symbols.update({x: f"x_{i}" for i, x in enumerate(model.x)})
    symbols.update({p: f"p_{j}" for j, p in enumerate(model.p_symbols)})
    printer = NumpyPrinter(symbols)
    for symbol, value in model.literals.items():  # fixed parameters, as the kernel has them
        text = printer.literal(value)
        printer.symbols[symbol] = f"({text})" if text.startswith("-") else text
    return printer


def lambdify(model: KernelModel, exprs, with_states: bool = True, where: str | None = None):
    """f(t, *x, *p) (or f(t, *p) without states) -> list of the values of `exprs`."""
    printer = _printer(model)
    values = [printer.print_value(e, where=where) for e in exprs]
    names = [f"x_{i}" for i in range(model.n_states)] if with_states else []
    names += [f"p_{j}" for j in range(len(model.p_symbols))]
    _, f = define("values", ", ".join(["t", *names]), [f"return [{', '.join(values)}]"],
                  array_namespace(), "<sbmlgpu.ode numeric>")
    return f
