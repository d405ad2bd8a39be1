"""Algebraic rules that can be solved explicitly become assignment rules.

An algebraic rule 0 = g(...) determines a variable that nothing else determines
(not constant, no assignment or rate rule, not a species that reactions change).
When the rules can be solved for those variables with a unique closed form (the
common case: a conservation law such as S1 + S2 - T = 0), the model becomes an
ODE system with assignment rules, which every backend can run. Rules that cannot
be solved that way stay algebraic, and the views refuse them by name.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import sympy as sp

from .. import ir


def undetermined(net: ir.Network) -> set[str]:
    """Ids whose value only an algebraic rule can fix."""
    determined = {r.variable for r in net.assignment_rules} | {r.variable for r in net.rate_rules}
    determined |= set(net.event_assigned)
    determined |= {
        sr.species for r in net.reactions for sr in (*r.reactants, *r.products)
        if not net.species_by_id[sr.species].boundary_condition
    }
    out = set()
    for c in net.compartments:
        if not c.constant:
            out.add(c.id)
    for s in net.species:
        if not s.constant:
            out.add(s.id)
    for p in net.parameters:
        if not p.constant:
            out.add(p.id)
    for sid, sr in net.species_reference_by_id.items():
        if not sr.constant:
            out.add(sid)
    return out - determined


def _unique_solution(equations, unknowns):
    try:
        solutions = sp.solve(equations, unknowns, dict=True)
    except (NotImplementedError, TypeError, ValueError):
        return None
    if len(solutions) != 1 or set(solutions[0]) != set(unknowns):
        return None
    sol = solutions[0]
    if any(v.has(sp.nan, sp.zoo) for v in sol.values()):
        return None
    return sol


def solve_algebraic_rules(net: ir.Network) -> ir.Network:
    if not net.algebraic_rules:
        return net
    free = undetermined(net)
    equations = [r.math for r in net.algebraic_rules]
    in_rules = sorted({s.name for e in equations for s in e.free_symbols if s.name in free})
    k = len(equations)
    if len(in_rules) < k or len(in_rules) > k + 4:
        return net
    solution = None
    # With more candidates than rules, SBML requires one consistent choice; we take
    # the first choice (in id order) that solves to a unique closed form.
    for chosen in itertools.combinations(in_rules, k):
        syms = [ir.sym(v) for v in chosen]
        solution = _unique_solution(equations, syms)
        if solution is not None:
            break
    if solution is None:
        return net
    new_rules = tuple(ir.AssignmentRule(s.name, sp.sympify(v)) for s, v in solution.items())
    notes = tuple(f"algebraic rule solved for {r.variable}: {r.variable} = {r.math}" for r in new_rules)
    return replace(net, assignment_rules=net.assignment_rules + new_rules, algebraic_rules=(),
                   notes=net.notes + notes)
