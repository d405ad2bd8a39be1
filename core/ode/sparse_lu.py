"""Straight-line sparse LU of M = I/(gamma h) - J for rodas4 on larger models.

A dense LU in every thread costs NX^3/3 operations and NX^2 words of local memory
per attempt (a 98-state model: 313,000 FMAs and 77 KB per thread). Reaction
networks' Jacobians are sparse, and their sparsity pattern is known when the kernel
is generated, so, as KPP does for the Rosenbrock solvers of atmospheric chemistry
(Damian, Sandu et al., "The kinetic preprocessor KPP", Comput. Chem. Eng. 2002;
Sandu et al., Atmos. Environ. 1997), the elimination is planned symbolically: a
symmetric ordering chosen greedily by the Markowitz count (r - 1)(c - 1) of each
remaining diagonal pivot, the fill-in it causes, and then straight-line code over
the non-zeros only, with every index a constant.

No pivoting at run time: the diagonal pivots are those of M = I/(gamma h) - J, which
dominates for small h; a zero or non-finite pivot makes the step fail, and rodas4
retries with a quarter of the step (M then closer to I/(gamma h)). Small systems
(<= codegen.LU_STATIC_MAX states) keep the dense LU with partial pivoting.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp


@dataclass(frozen=True)
class SparsePlan:
    n: int
    order: tuple[int, ...]  # pivot order (original state indices)
    entries: tuple[tuple[int, int], ...]  # (row, col) of every stored entry, fill included
    index: dict  # (row, col) -> position in the stored array
    below: tuple[tuple[int, ...], ...]  # for pivot step s: rows eliminated (L part)
    right: tuple[tuple[int, ...], ...]  # for pivot step s: columns updated (U part)

    @property
    def nnz(self) -> int:
        return len(self.entries)

    def flops(self) -> tuple[float, float]:
        """FLOPs of one factorisation and of one solve (FMA = 2, division = 4)."""
        lu = sum(4 + len(b) + 2 * len(b) * len(r) for b, r in zip(self.below, self.right))
        solve = sum(2 * len(b) + 2 * len(r) + 1 for b, r in zip(self.below, self.right))
        return float(lu), float(solve)


def plan(pattern: set[tuple[int, int]], n: int) -> SparsePlan:
    """Markowitz ordering (diagonal pivots) and fill-in of `pattern` (diagonal added)."""
    rows = {i: {i} for i in range(n)}
    cols = {j: {j} for j in range(n)}
    for i, j in pattern:
        rows[i].add(j)
        cols[j].add(i)
    remaining = set(range(n))
    order, below, right = [], [], []
    while remaining:
        def cost(k):
            r = len(rows[k] & remaining) - 1
            c = len(cols[k] & remaining) - 1
            return (r * c, r + c, k)

        k = min(remaining, key=cost)
        remaining.discard(k)
        lower = sorted(r for r in cols[k] if r in remaining)
        upper = sorted(c for c in rows[k] if c in remaining)
        for r in lower:
            for c in upper:
                if c not in rows[r]:  # fill-in
                    rows[r].add(c)
                    cols[c].add(r)
        order.append(k)
        below.append(tuple(lower))
        right.append(tuple(upper))
    entries = tuple(sorted((i, j) for i in range(n) for j in rows[i]))
    index = {e: p for p, e in enumerate(entries)}
    return SparsePlan(n, tuple(order), entries, index, tuple(below), tuple(right))


def jacobian_pattern(jacobian: sp.Matrix) -> set[tuple[int, int]]:
    """(row, column) of the non-zero entries (from the stored ones: a large model's
    matrix is mostly zeros)."""
    return {k for k, e in jacobian.todok().items() if e != 0}


def lu_statements(p: SparsePlan) -> list[str]:
    """C statements factorising A (the stored entries) in place; `d[k]` gets the
    inverse of pivot k; sets `ok` false on a zero or non-finite pivot. Every statement
    reads and writes A, d and ok only, so the list may be cut anywhere (codegen puts
    large factorisations into several functions)."""
    lines = []
    for k, lower, upper in zip(p.order, p.below, p.right):
        kk = p.index[(k, k)]
        lines.append(f"d[{k}] = ODE_R(1) / A[{kk}];")
        lines.append(f"ok = ok && ode_finite(d[{k}]) && A[{kk}] != ODE_R(0);")
        for r in lower:
            rk = p.index[(r, k)]
            lines.append(f"A[{rk}] *= d[{k}];")
            for c in upper:
                lines.append(f"A[{p.index[(r, c)]}] -= A[{rk}] * A[{p.index[(k, c)]}];")
    return lines


def lu_code(p: SparsePlan, indent: str = "    ") -> str:
    """lu_statements as one block of C."""
    return "\n".join(indent + line for line in lu_statements(p))


def solve_statements(p: SparsePlan) -> list[str]:
    """C statements solving (LU) x = b in place in b (L unit lower, in pivot order);
    each reads A, d and b only, so the list may be cut anywhere."""
    lines = []
    for k, lower in zip(p.order, p.below):
        for r in lower:
            lines.append(f"b[{r}] -= A[{p.index[(r, k)]}] * b[{k}];")
    for k, upper in reversed(list(zip(p.order, p.right))):
        terms = "".join(f" - A[{p.index[(k, c)]}] * b[{c}]" for c in upper)
        lines.append(f"b[{k}] = (b[{k}]{terms}) * d[{k}];")
    return lines


def solve_code(p: SparsePlan, indent: str = "    ") -> str:
    """solve_statements as one block of C."""
    return "\n".join(indent + line for line in solve_statements(p))


#: above this many statements of factorisation, the LU runs as loops over index
#: tables instead of straight-line code: nvcc spends ~2.5 ms per straight-line
#: statement (cicc and ptxas alike, however the code is cut into functions), so a
#: 500-state model's 30,000 statements took minutes; the loops compile in a second
#: and do the same operations in the same order (the same numbers).
STRAIGHT_LINE_MAX = 2000


def statement_count(p: SparsePlan) -> int:
    """Statements of lu_statements(p), without building them."""
    return sum(2 + len(b) * (1 + len(r)) for b, r in zip(p.below, p.right))


@dataclass(frozen=True)
class LuTables:
    """The plan as index tables for loops (templates/rodas4.cuh, `lu_tables`), step s
    of the elimination being pivot `pivot[s]` at stored position `pivot_entry[s]`:

    - `lower_count[s]` rows below it; their (row, pivot) positions are the next
      entries of `lower_entry` and their rows the next of `lower_row`;
    - `upper_count[s]` columns right of it: (pivot, column) positions in
      `upper_entry`, columns in `upper_col`;
    - for each lower row in turn, for each upper column, the (row, column) position
      to update: `update_entry`.
    The loops visit them in exactly the order of lu_statements and solve_statements."""

    pivot: tuple[int, ...]
    pivot_entry: tuple[int, ...]
    lower_count: tuple[int, ...]
    upper_count: tuple[int, ...]
    lower_entry: tuple[int, ...]
    lower_row: tuple[int, ...]
    upper_entry: tuple[int, ...]
    upper_col: tuple[int, ...]
    update_entry: tuple[int, ...]

    def arrays(self) -> dict[str, tuple[int, ...]]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def tables(p: SparsePlan) -> LuTables:
    lower_entry, lower_row, upper_entry, upper_col, update_entry = [], [], [], [], []
    for k, lower, upper in zip(p.order, p.below, p.right):
        lower_entry += [p.index[(r, k)] for r in lower]
        lower_row += list(lower)
        upper_entry += [p.index[(k, c)] for c in upper]
        upper_col += list(upper)
        update_entry += [p.index[(r, c)] for r in lower for c in upper]
    return LuTables(
        pivot=tuple(p.order), pivot_entry=tuple(p.index[(k, k)] for k in p.order),
        lower_count=tuple(len(b) for b in p.below), upper_count=tuple(len(r) for r in p.right),
        lower_entry=tuple(lower_entry), lower_row=tuple(lower_row),
        upper_entry=tuple(upper_entry), upper_col=tuple(upper_col),
        update_entry=tuple(update_entry))
