"""A converted libsbml Model (L3V2, flat, functions inlined, no local parameters)
-> ir.Network.

Elements whose MathML is missing are left out, as the SBML Test Suite expects
(L3V2 allows it and such an element has no effect); a reaction without a rate
keeps `rate=None` so that backends can refuse it by name.
"""

from __future__ import annotations

import graphlib
import math

import libsbml
import sympy as sp

from .. import ir
from ..errors import SBMLImportError, SBMLProblem
from .math import convert_math


def _opt(obj, is_set: str, get: str):
    return getattr(obj, get)() if getattr(obj, is_set)() else None


def _spatial_dimensions(c: libsbml.Compartment) -> float | None:
    return c.getSpatialDimensionsAsDouble() if c.isSetSpatialDimensions() else None


class NetworkBuilder:
    def __init__(self, model: libsbml.Model, source: str, level: int, version: int):
        self.m = model
        self.source = source
        self.level, self.version = level, version
        self.notes: list[str] = []

    def math(self, node, where: str, boolean: bool = False):
        return convert_math(node, where, boolean=boolean)

    # -- elements ---------------------------------------------------------------
    def compartments(self):
        return tuple(
            ir.Compartment(id=c.getId(), size=_opt(c, "isSetSize", "getSize"),
                           constant=c.getConstant(), spatial_dimensions=_spatial_dimensions(c),
                           name=c.getName())
            for c in self.m.getListOfCompartments())

    def species(self):
        return tuple(
            ir.Species(
                id=s.getId(), compartment=s.getCompartment(),
                initial_amount=_opt(s, "isSetInitialAmount", "getInitialAmount"),
                initial_concentration=_opt(s, "isSetInitialConcentration", "getInitialConcentration"),
                has_only_substance_units=s.getHasOnlySubstanceUnits(),
                boundary_condition=s.getBoundaryCondition(), constant=s.getConstant(),
                conversion_factor=_opt(s, "isSetConversionFactor", "getConversionFactor"),
                name=s.getName())
            for s in self.m.getListOfSpecies())

    def parameters(self):
        return tuple(
            ir.Parameter(id=p.getId(), value=_opt(p, "isSetValue", "getValue"),
                         constant=p.getConstant(), name=p.getName())
            for p in self.m.getListOfParameters())

    def _species_reference(self, sr: libsbml.SpeciesReference, assigned: set[str], reaction_id: str):
        value = sr.getStoichiometry() if sr.isSetStoichiometry() else None
        sid = sr.getId() if sr.isSetId() else None
        if sid and (sid in assigned or not sr.getConstant()):
            stoich = ir.sym(sid)
        elif value is not None:
            check_stoichiometry(value, reaction_id, sr.getSpecies(), self.source)
            # exact, as literal numbers in math (sbml/math.py: _number)
            stoich = sp.Integer(int(value)) if value == int(value) else sp.Rational(value)
        else:
            # L3 leaves an unset stoichiometry undefined; every tool we compare with uses 1
            self.notes.append(f"species reference to {sr.getSpecies()} has no stoichiometry; using 1")
            stoich = sp.Integer(1)
        return ir.SpeciesReference(species=sr.getSpecies(), stoichiometry=stoich, id=sid,
                                   constant=sr.getConstant(), value=value)

    def reactions(self, assigned: set[str]):
        out = []
        for r in self.m.getListOfReactions():
            kl = r.getKineticLaw() if r.isSetKineticLaw() else None
            rate = self.math(kl.getMath(), f"reaction {r.getId()}") if kl is not None and kl.isSetMath() else None
            out.append(ir.Reaction(
                id=r.getId(),
                reactants=tuple(self._species_reference(x, assigned, r.getId()) for x in r.getListOfReactants()),
                products=tuple(self._species_reference(x, assigned, r.getId()) for x in r.getListOfProducts()),
                modifiers=tuple(x.getSpecies() for x in r.getListOfModifiers()),
                rate=rate, reversible=r.getReversible(),
                fast=r.isSetFast() and r.getFast(),
                compartment=_opt(r, "isSetCompartment", "getCompartment"), name=r.getName()))
        return tuple(out)

    def initial_assignments(self):
        out = []
        for a in self.m.getListOfInitialAssignments():
            if a.isSetMath():
                out.append(ir.InitialAssignment(a.getSymbol(), self.math(a.getMath(), f"initialAssignment {a.getSymbol()}")))
        return tuple(out)

    def rules(self):
        assignment, rate, algebraic = [], [], []
        for i, r in enumerate(self.m.getListOfRules()):
            if not r.isSetMath():
                continue
            if r.isAssignment():
                assignment.append(ir.AssignmentRule(r.getVariable(), self.math(r.getMath(), f"assignmentRule {r.getVariable()}")))
            elif r.isRate():
                rate.append(ir.RateRule(r.getVariable(), self.math(r.getMath(), f"rateRule {r.getVariable()}")))
            else:
                rid = r.getId() if r.isSetId() else f"algebraicRule_{len(algebraic) + 1}"
                algebraic.append(ir.AlgebraicRule(self.math(r.getMath(), rid), id=rid))
        return assignment, tuple(rate), tuple(algebraic)

    def events(self):
        out = []
        for i, e in enumerate(self.m.getListOfEvents()):
            eid = e.getId() if e.isSetId() else f"event_{i + 1}"
            t = e.getTrigger() if e.isSetTrigger() else None
            if t is None or not t.isSetMath():
                self.notes.append(f"event {eid} has no trigger math and never fires")
                continue
            delay = e.getDelay() if e.isSetDelay() else None
            priority = e.getPriority() if e.isSetPriority() else None
            delay_math = self.math(delay.getMath(), f"event {eid} delay") \
                if delay is not None and delay.isSetMath() else None
            check_delay(delay_math, eid, self.source)
            out.append(ir.Event(
                id=eid,
                trigger=self.math(t.getMath(), f"event {eid} trigger", boolean=True),
                assignments=tuple(
                    ir.EventAssignment(a.getVariable(), self.math(a.getMath(), f"event {eid} assignment {a.getVariable()}"))
                    for a in e.getListOfEventAssignments() if a.isSetMath()),
                trigger_initial_value=t.getInitialValue() if t.isSetInitialValue() else True,
                persistent=t.getPersistent() if t.isSetPersistent() else True,
                delay=delay_math,
                priority=self.math(priority.getMath(), f"event {eid} priority") if priority is not None and priority.isSetMath() else None,
                use_values_from_trigger_time=e.getUseValuesFromTriggerTime() if e.isSetUseValuesFromTriggerTime() else True,
            ))
        return tuple(out)

    # -- the whole model ---------------------------------------------------------
    def build(self) -> ir.Network:
        m = self.m
        assigned = {a.getSymbol() for a in m.getListOfInitialAssignments() if a.isSetMath()}
        assigned |= {r.getVariable() for r in m.getListOfRules() if r.isSetMath() and not r.isAlgebraic()}
        assigned |= {a.getVariable() for e in m.getListOfEvents() for a in e.getListOfEventAssignments()}
        assignment, rate, algebraic = self.rules()
        net = ir.Network(
            id=m.getId() or "model",
            name=m.getName(),
            compartments=self.compartments(),
            species=self.species(),
            parameters=self.parameters(),
            reactions=self.reactions(assigned),
            initial_assignments=self.initial_assignments(),
            assignment_rules=tuple(assignment),
            rate_rules=rate,
            algebraic_rules=algebraic,
            events=self.events(),
            conversion_factor=_opt(m, "isSetConversionFactor", "getConversionFactor"),
            source=self.source, level=self.level, version=self.version,
        )
        check_references(net)
        return net


#: the largest stoichiometry accepted: far beyond any chemistry, small enough that a
#: rate times it stays finite and an SSA state update stays an exact integer
MAX_STOICHIOMETRY = 1e15


def check_stoichiometry(value: float, reaction_id: str, species_id: str, source: str) -> None:
    """SBMLImportError for a NaN, infinite or absurdly large stoichiometry (the file
    may say stoichiometry="NaN" or "INF"; no number computed from it means anything)."""
    if math.isfinite(value) and abs(value) <= MAX_STOICHIOMETRY:
        return
    what = "not a number" if math.isnan(value) else "infinite" if math.isinf(value) \
        else f"larger than {MAX_STOICHIOMETRY:g} in magnitude"
    raise SBMLImportError(source, "a stoichiometry is not a usable number", (SBMLProblem(
        "error", f"reaction {reaction_id}: the stoichiometry of species {species_id} is "
                 f"{value!r}, {what}"),))


def check_delay(delay, event_id: str, source: str) -> None:
    """SBMLImportError for an event delay that is a negative (or NaN) constant: SBML
    requires a delay >= 0; a delay that depends on the state is checked as it runs."""
    if delay is None or not delay.is_number:
        return
    if delay is sp.nan or (delay.is_extended_real and delay < 0):
        raise SBMLImportError(source, "an event delay is negative", (SBMLProblem(
            "error", f"event {event_id}: its delay is {delay}; SBML requires a delay >= 0"),))


def check_delay_lags(net: ir.Network, source: str) -> None:
    """SBMLImportError for a delay(x, d) whose d is negative (or NaN) at the model's
    own values: SBML requires d >= 0, and the integrators would read a look-up into
    the future as the present state, a silently wrong answer. d of constants only
    (numbers, constant parameters and compartments without initial assignments or
    rules); a d that changes as the model runs is not checked here."""
    fixed = {ir.sym(p.id): sp.Float(p.value) for p in net.parameters
             if p.constant and p.value is not None}
    fixed.update({ir.sym(c.id): sp.Float(c.size) for c in net.compartments
                  if c.constant and c.size is not None})
    for name in (*net.initial_assignment_by_variable, *net.assignment_rule_by_variable):
        fixed.pop(ir.sym(name), None)
    problems = []
    for where, expr in net.all_math():
        if not isinstance(expr, sp.Basic) or not expr.has(ir.Delay):
            continue
        for call in expr.atoms(ir.Delay):
            lag = call.args[1].xreplace(fixed)
            if not lag.is_number:
                continue
            try:  # a draw, a delay or rateOf of numbers has no value before it runs
                value = complex(lag.evalf())
            except (TypeError, ValueError):
                continue
            real = value.imag == 0 and not math.isnan(value.real)  # zoo, 0/0: nan + nan j
            if real and value.real >= 0:
                continue
            x, d = call.args
            shown = f"{value.real:g}" if real else "not a real number"
            problems.append(SBMLProblem("error", f"{where}: delay({x}, {d}) has the delay "
                                        f"{shown}; SBML requires a delay >= 0"))
    if problems:
        raise SBMLImportError(source, "a delay() is negative or not a number", tuple(problems))


def order_assignment_rules(net: ir.Network) -> tuple[ir.AssignmentRule, ...]:
    """Assignment rules in an order where each uses only rules before it.

    Reaction ids in rule math stand for rates, whose laws may use rule variables,
    so a rule depends on the rules its reactions' rates use too."""
    rules = {r.variable: r for r in net.assignment_rules}
    rates = {r.id: r.rate for r in net.reactions if r.rate is not None}

    def deps(expr, seen=()):
        out = set()
        for s in expr.free_symbols:
            if s.name in rules:
                out.add(s.name)
            elif s.name in rates and s.name not in seen:
                out |= deps(rates[s.name], (*seen, s.name))
        return out

    graph = {v: deps(r.math) for v, r in rules.items()}
    try:
        order = list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        cycle = exc.args[1]
        raise SBMLImportError(net.source, "assignment rules form a cycle",
                              (SBMLProblem("error", " -> ".join(cycle)),)) from None
    return tuple(rules[v] for v in order)


def _structure_problems(net: ir.Network) -> list[SBMLProblem]:
    """Ids that elements use to point at each other. libsbml's consistency checks
    find these too, but stop early after some errors (an undefined unit), and they
    can be switched off (validate=False): every later step indexes by these ids."""
    bad = []
    for s in net.species:
        if s.compartment not in net.compartment_by_id:
            bad.append(SBMLProblem("error", f"species {s.id}: its compartment "
                                            f"'{s.compartment}' is not defined"))
    for r in net.reactions:
        for role, ids in (("reactant", [x.species for x in r.reactants]),
                          ("product", [x.species for x in r.products]),
                          ("modifier", list(r.modifiers))):
            bad += [SBMLProblem("error", f"reaction {r.id}: {role} '{sid}' is not a species "
                                         f"of the model") for sid in ids if sid not in net.species_by_id]
        if r.compartment is not None and r.compartment not in net.compartment_by_id:
            bad.append(SBMLProblem("error", f"reaction {r.id}: its compartment "
                                            f"'{r.compartment}' is not defined"))
    return bad


def check_references(net: ir.Network) -> None:
    """Every identifier in the math must name something with a value."""
    bad = _structure_problems(net)
    if bad:
        raise SBMLImportError(net.source, "elements refer to ids the model does not define",
                              tuple(bad))
    known = set(net.compartment_by_id) | set(net.species_by_id) | set(net.parameter_by_id)
    known |= set(net.species_reference_by_id) | set(net.reaction_by_id)
    for where, expr in net.all_math():
        for s in expr.free_symbols:
            if s is not ir.TIME and s.name not in known:
                bad.append(SBMLProblem("error", f"{where}: unknown identifier '{s.name}'"))
    for v in [a.variable for a in net.initial_assignments] + [r.variable for r in net.assignment_rules] \
            + [r.variable for r in net.rate_rules] + [a.variable for e in net.events for a in e.assignments]:
        if v not in known or v in net.reaction_by_id:
            bad.append(SBMLProblem("error", f"'{v}' is assigned but is not a compartment, "
                                   "species, parameter or species reference"))
    if bad:
        raise SBMLImportError(net.source, "the math refers to identifiers the model does not define", tuple(bad))
