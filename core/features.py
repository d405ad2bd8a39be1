"""Which SBML features a Network uses, with the ids of the elements that use them.

`network_features(network)` is what backends' `supports()` compare against their
own lists and what `sbmlgpu info` prints. Feature names are plain words, the same
ones the backends use in UnsupportedModelError messages.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator

import sympy as sp

from .ir import TIME, Delay, Network, RateOf
from .sbml.distrib import has_draw

# Every feature name this module can report, in the order `sbmlgpu info` lists them.
FEATURES = (
    "reactions",
    "reversible reactions",
    "fast reactions",
    "reactions without rate math",
    "non-integer stoichiometry",
    "variable stoichiometry",
    "boundary species",
    "constant species",
    "hasOnlySubstanceUnits species",
    "conversion factors",
    "varying compartments",
    "non-3D compartments",
    "initial assignments",
    "assignment rules",
    "rate rules",
    "algebraic rules",
    "events",
    "events with delay",
    "event priorities",
    "non-persistent triggers",
    "trigger initialValue false",
    "event values at execution time",
    "piecewise",
    "time",
    "delay()",
    "rateOf",
    "distrib draws",
    "distrib draws in continuous math",
)


def _algebraic_rule_id(network: Network, k: int) -> str:
    rule = network.algebraic_rules[k]
    return rule.id or f"algebraicRule_{k + 1}"


def math_by_element(network: Network) -> Iterator[tuple[str, sp.Basic]]:
    """(element id, expression) for every piece of math: a reaction's rate and
    stoichiometries under the reaction id, a rule or initial assignment under its
    variable, an event's trigger, delay, priority and assignments under the event."""
    for r in network.reactions:
        if r.rate is not None:
            yield r.id, r.rate
        for sr in (*r.reactants, *r.products):
            yield r.id, sr.stoichiometry
    for a in network.initial_assignments:
        yield a.variable, a.math
    for a in network.assignment_rules:
        yield a.variable, a.math
    for a in network.rate_rules:
        yield a.variable, a.math
    for k, a in enumerate(network.algebraic_rules):
        yield _algebraic_rule_id(network, k), a.math
    for e in network.events:
        yield e.id, e.trigger
        if e.delay is not None:
            yield e.id, e.delay
        if e.priority is not None:
            yield e.id, e.priority
        for a in e.assignments:
            yield e.id, a.math


def _continuous_math(network: Network) -> Iterator[tuple[str, sp.Basic]]:
    """(element id, expression) for the math evaluated continuously or to decide
    when something happens: rates, stoichiometries, rules, triggers, delays and
    priorities -- everything but initial assignments and event assignments, the
    two places where a distrib draw is evaluated at one instant."""
    for r in network.reactions:
        if r.rate is not None:
            yield r.id, r.rate
        for sr in (*r.reactants, *r.products):
            yield r.id, sr.stoichiometry
    for a in (*network.assignment_rules, *network.rate_rules):
        yield a.variable, a.math
    for k, a in enumerate(network.algebraic_rules):
        yield _algebraic_rule_id(network, k), a.math
    for e in network.events:
        for part in (e.trigger, e.delay, e.priority):
            if part is not None:
                yield e.id, part


def draws_in_continuous_math(network: Network) -> tuple[str, ...]:
    """The elements whose continuously evaluated math draws (distrib): a draw in a
    rate or a rule would be a new number at every evaluation, which no integrator
    or jump process gives a meaning to (each in document order, once)."""
    return tuple(dict.fromkeys(where for where, e in _continuous_math(network)
                               if has_draw(e)))


#: why an integrating backend refuses what draws_evaluated_continuously lists
CONTINUOUS_DRAW = ("distrib draw evaluated continuously: in a rate, rule, trigger, delay or "
                   "priority, or the initial assignment of a value that nothing changes, which "
                   "is read wherever it is used (a new random number at every evaluation has "
                   "no meaning for an integrator; draw in an initial or event assignment of a "
                   "variable that a reaction, rule or event changes)")


def draws_evaluated_continuously(network: Network) -> tuple[str, ...]:
    """The elements whose distrib draws a simulation would evaluate continuously: in
    the math itself (draws_in_continuous_math), or brought into the rates, rules or
    triggers by the ODE view (the initial assignment of an id that nothing changes,
    which the view substitutes wherever the id is read). Draws in initial values and event
    assignments are evaluated at one instant; those are not listed. For a model the
    ODE view cannot build, only the math itself is looked at (the view's own
    refusal comes first)."""
    drawn = draws_in_continuous_math(network)
    if drawn or not _using(network, has_draw):
        return drawn
    from .errors import UnsupportedModelError
    from .views.ode import ode_system

    try:
        ode = ode_system(network)
    except UnsupportedModelError:
        return ()
    return tuple(dict.fromkeys(
        [sid for sid, f in zip(ode.state_ids, ode.rhs) if has_draw(f)]
        + [sid for sid, e in ode.values.items() if has_draw(e)]
        + [e.id for e in ode.events
           if any(has_draw(part) for part in (e.trigger, e.priority, e.delay))]))


def delay_users(network: Network) -> tuple[str, ...]:
    """The elements whose math calls delay() (event priorities and delays included),
    each once, in document order."""
    return tuple(dict.fromkeys(where for where, e in math_by_element(network)
                               if isinstance(e, sp.Basic) and e.has(Delay)))


def _using(network: Network, test: Callable[[sp.Basic], bool]) -> list[str]:
    return [where for where, expr in math_by_element(network)
            if isinstance(expr, sp.Basic) and test(expr)]


def _is_integer_number(value: sp.Basic) -> bool:
    return bool(value.is_Number) and float(value) == int(float(value))


def _stoichiometry_features(network: Network) -> tuple[list[str], list[str]]:
    non_integer, variable = [], []
    for r in network.reactions:
        for sr in (*r.reactants, *r.products):
            value = sp.sympify(sr.stoichiometry)
            if not value.is_Number or not sr.constant:
                variable.append(sr.id or r.id)
            elif not _is_integer_number(value):
                non_integer.append(r.id)
    return non_integer, variable


def _changed_by_math(network: Network) -> set[str]:
    """Ids whose value rules or events change over time."""
    changed = {a.variable for a in network.assignment_rules}
    changed |= {a.variable for a in network.rate_rules}
    return changed | set(network.event_assigned)


def _varying_compartments(network: Network) -> list[str]:
    changed = _changed_by_math(network)
    in_algebraic = set()
    for rule in network.algebraic_rules:
        in_algebraic |= {s.name for s in rule.math.free_symbols}
    return [c.id for c in network.compartments
            if c.id in changed or (not c.constant and c.id in in_algebraic)]


def _conversion_factors(network: Network) -> list[str]:
    ids = [s.id for s in network.species if s.conversion_factor]
    if network.conversion_factor:
        ids = [network.conversion_factor] + ids
    return ids


def _events(network: Network, test) -> list[str]:
    return [e.id for e in network.events if test(e)]


def network_features(network: Network) -> dict[str, tuple[str, ...]]:
    """{feature name: ids of the elements using it} for every feature present,
    in the order of FEATURES. Ids are listed once each, in model order."""
    non_integer, variable = _stoichiometry_features(network)
    found: dict[str, Iterable[str]] = {
        "reactions": [r.id for r in network.reactions],
        "reversible reactions": [r.id for r in network.reactions if r.reversible],
        "fast reactions": [r.id for r in network.reactions if r.fast],
        "reactions without rate math": [r.id for r in network.reactions if r.rate is None],
        "non-integer stoichiometry": non_integer,
        "variable stoichiometry": variable,
        "boundary species": [s.id for s in network.species if s.boundary_condition],
        "constant species": [s.id for s in network.species if s.constant],
        "hasOnlySubstanceUnits species": [s.id for s in network.species
                                          if s.has_only_substance_units],
        "conversion factors": _conversion_factors(network),
        "varying compartments": _varying_compartments(network),
        "non-3D compartments": [c.id for c in network.compartments
                                if c.spatial_dimensions is not None
                                and c.spatial_dimensions != 3],
        "initial assignments": [a.variable for a in network.initial_assignments],
        "assignment rules": [a.variable for a in network.assignment_rules],
        "rate rules": [a.variable for a in network.rate_rules],
        "algebraic rules": [_algebraic_rule_id(network, k)
                            for k in range(len(network.algebraic_rules))],
        "events": [e.id for e in network.events],
        "events with delay": _events(network, lambda e: e.delay is not None),
        "event priorities": _events(network, lambda e: e.priority is not None),
        "non-persistent triggers": _events(network, lambda e: not e.persistent),
        "trigger initialValue false": _events(network, lambda e: not e.trigger_initial_value),
        "event values at execution time": _events(
            network, lambda e: e.delay is not None and not e.use_values_from_trigger_time),
        "piecewise": _using(network, lambda x: x.has(sp.Piecewise)),
        "time": _using(network, lambda x: x.has(TIME)),
        "delay()": _using(network, lambda x: x.has(Delay)),
        "rateOf": _using(network, lambda x: x.has(RateOf)),
        "distrib draws": _using(network, has_draw),
        "distrib draws in continuous math": draws_in_continuous_math(network),
    }
    return {name: tuple(dict.fromkeys(found[name])) for name in FEATURES if found[name]}


def unsupported(network: Network, refused: Iterable[str]) -> list[tuple[str, tuple[str, ...]]]:
    """The features of `network` among `refused`, in the form `Backend.supports()`
    returns: [(feature, element ids)]. Unknown feature names are a programming error."""
    refused = list(refused)
    unknown = [f for f in refused if f not in FEATURES]
    if unknown:
        raise ValueError(f"unknown feature names {unknown}; known: {', '.join(FEATURES)}")
    present = network_features(network)
    return [(f, present[f]) for f in refused if f in present]


__all__ = ["FEATURES", "network_features", "unsupported", "math_by_element", "delay_users",
           "draws_in_continuous_math", "draws_evaluated_continuously", "CONTINUOUS_DRAW"]
