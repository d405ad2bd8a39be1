"""Common subexpression elimination: expressions in, C statements out.

    block = eliminate([rhs_1, rhs_2, ...])
    lines, outputs = block.render(printer)
    # lines:   ["const real_t cse_0 = k1*S1;", ...]
    # outputs: ["cse_0 - k2*S2", ...]       (assign them where the kernel wants)

Temporaries are sympy Dummies, so they never equal a model symbol (a model may
have a parameter called `cse_0`; it prints as `s_cse__0`), and their C names
`cse_<n>` cannot collide with mangled names (`s_...`, see names.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import sympy as sp

from .names import temp_name
from .printer import CudaPrinter, is_boolean


@dataclass(frozen=True)
class CseBlock:
    """`temporaries` in evaluation order (each may use earlier ones), then `outputs`,
    all in terms of model symbols and temporaries."""

    temporaries: tuple[tuple[sp.Dummy, sp.Basic], ...]
    outputs: tuple[sp.Basic, ...]

    @property
    def names(self) -> dict[sp.Dummy, str]:
        """Temporary symbol -> its C name."""
        return {sym: temp_name(i) for i, (sym, _) in enumerate(self.temporaries)}

    def render(self, printer: CudaPrinter, where: str | None = None) -> tuple[list[str], list[str]]:
        """(declarations of the temporaries, C text of each output). Real
        temporaries are `const real_t` (the kernel's precision, typedef'd in
        common.cuh), boolean ones `const bool`; outputs are printed as values (a
        boolean output becomes 1 or 0)."""
        names = self.names  # once: a property builds the whole table on every use
        local = type(printer)({**printer.symbols, **names}, printer.precision,
                            printer.unmapped)
        lines = []
        for sym, expr in self.temporaries:
            ctype = "bool" if is_boolean(expr) else "real_t"
            lines.append(f"const {ctype} {names[sym]} = {local.doprint(expr, where=where)};")
        outputs = [local.print_value(e, where=where) for e in self.outputs]
        return lines, outputs


def eliminate(exprs: Iterable[sp.Basic], *, optimizations=None) -> CseBlock:
    """Run sympy.cse over `exprs` (a list: the outputs keep its order)."""
    exprs = [sp.sympify(e) for e in exprs]
    if not exprs:
        return CseBlock((), ())
    temporaries, reduced = sp.cse(exprs, symbols=sp.numbered_symbols("cse", cls=sp.Dummy),
                                  optimizations=optimizations, list=True)
    return CseBlock(tuple(temporaries), tuple(reduced))


def generate(exprs: Sequence[sp.Basic], printer: CudaPrinter,
             where: str | None = None) -> tuple[list[str], list[str]]:
    """`eliminate(exprs).render(printer)` in one call."""
    return eliminate(exprs).render(printer, where=where)


def needed_temporaries(block: CseBlock, wanted: Sequence[int]) -> list[int]:
    """Indices of the temporaries that outputs `wanted` need, in evaluation order."""
    temps = {sym: k for k, (sym, _) in enumerate(block.temporaries)}
    need: set[int] = set()
    stack = [block.outputs[i] for i in wanted]
    while stack:
        expr = stack.pop()
        for s in sp.sympify(expr).free_symbols:
            k = temps.get(s)
            if k is not None and k not in need:
                need.add(k)
                stack.append(block.temporaries[k][1])
    return sorted(need)


def c_declaration(printer: CudaPrinter, name: str, expr: sp.Basic) -> str:
    """`const real_t cse_0 = ...;` (bool for a truth value; real_t is the kernel's
    precision, common.cuh)."""
    ctype = "bool" if is_boolean(expr) else "real_t"
    return f"const {ctype} {name} = {printer.doprint(expr)};"


def render_block(block: CseBlock, printer: CudaPrinter, wanted: Sequence[int] | None = None,
                 prefix: str = "", declare=c_declaration) -> tuple[list[str], list[str]]:
    """(declarations, text of each wanted output) for a subset of `block`'s outputs
    (all when None), only with the temporaries those need. `prefix` renames the
    temporaries (several blocks in one scope); `declare(printer, name, expr)` writes
    one declaration (C by default; the numpy twin passes its own)."""
    wanted = list(range(len(block.outputs))) if wanted is None else list(wanted)
    names = {sym: prefix + temp_name(k) for k, (sym, _) in enumerate(block.temporaries)}
    local = type(printer)({**printer.symbols, **names}, printer.precision, printer.unmapped)
    lines = [declare(local, names[block.temporaries[k][0]], block.temporaries[k][1])
             for k in needed_temporaries(block, wanted)]
    return lines, [local.print_value(block.outputs[i]) for i in wanted]


def python_assignment(printer: CudaPrinter, name: str, expr: sp.Basic) -> str:
    """`cse_0 = ...`: render_block's declaration for Python text (the numpy printers)."""
    return f"{name} = {printer.doprint(expr)}"
