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
    n = jacobian.shape[0]
    return {(i, j) for i in range(n) for j in range(n) if jacobian[i, j] != 0}


def lu_code(p: SparsePlan, indent: str = "    ") -> str:
    """C statements factorising A (the stored entries) in place; `d[k]` gets the
    inverse of pivot k; sets `ok` false on a zero or non-finite pivot."""
    lines = []
    for k, lower, upper in zip(p.order, p.below, p.right):
        kk = p.index[(k, k)]
        lines.append(f"{indent}d[{k}] = ODE_R(1) / A[{kk}];")
        lines.append(f"{indent}ok = ok && ode_finite(d[{k}]) && A[{kk}] != ODE_R(0);")
        for r in lower:
            rk = p.index[(r, k)]
            lines.append(f"{indent}A[{rk}] *= d[{k}];")
            for c in upper:
                lines.append(f"{indent}A[{p.index[(r, c)]}] -= A[{rk}] * A[{p.index[(k, c)]}];")
    return "\n".join(lines)


def solve_code(p: SparsePlan, indent: str = "    ") -> str:
    """C statements solving (LU) x = b in place in b (L unit lower, in pivot order)."""
    lines = []
    for k, lower in zip(p.order, p.below):
        for r in lower:
            lines.append(f"{indent}b[{r}] -= A[{p.index[(r, k)]}] * b[{k}];")
    for k, upper in reversed(list(zip(p.order, p.right))):
        terms = "".join(f" - A[{p.index[(k, c)]}] * b[{c}]" for c in upper)
        lines.append(f"{indent}b[{k}] = (b[{k}]{terms}) * d[{k}];")
    return "\n".join(lines)
