"""The reaction-network IR: what every backend compiles.

A `Network` is an immutable record of one SBML model after libsbml has converted it
to Level 3 Version 2, flattened comp submodels, inlined function definitions and
promoted local parameters to global ones. Math is held as sympy expressions.

Symbol meaning follows SBML: `sym("S")` for a species is its *SBML value*, which is
a concentration unless the species has only substance units (or lives in a
0-dimensional compartment); for a compartment it is the size, for a parameter its
value, for a species reference id its stoichiometry, and for a reaction id the
reaction's rate (the kinetic law). Backends never read SBML ids from strings: they
use `sym()` and the special symbols below.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterable

import sympy as sp

# csymbols. Their names contain '@', which no SBML id can, so they never collide
# with a model's own ids (a model may well have a parameter called `time`).
TIME = sp.Symbol("@time", real=True)
# SBML L3 fixes Avogadro's number to this value (L3V1 and L3V2 spec, sec. 3.4.6).
AVOGADRO_VALUE = 6.02214179e23


class RateOf(sp.Function):
    """csymbol rateOf(x): the time derivative of x's SBML value (L3V2)."""

    nargs = 1


class Delay(sp.Function):
    """csymbol delay(x, d): the value of x at time t - d."""

    nargs = 2


def sym(sbml_id: str) -> sp.Symbol:
    """The one sympy symbol that stands for an SBML id everywhere in the IR."""
    return sp.Symbol(sbml_id)


@dataclass(frozen=True)
class Compartment:
    id: str
    size: float | None  # None: not set (then an initial assignment or rule gives it)
    constant: bool = True
    spatial_dimensions: float | None = 3.0
    name: str = ""


@dataclass(frozen=True)
class Species:
    id: str
    compartment: str
    initial_amount: float | None = None
    initial_concentration: float | None = None
    has_only_substance_units: bool = False
    boundary_condition: bool = False
    constant: bool = False
    conversion_factor: str | None = None  # id of a parameter, or None
    name: str = ""

    @property
    def initial_value_is_amount(self) -> bool:
        return self.initial_amount is not None


@dataclass(frozen=True)
class Parameter:
    id: str
    value: float | None
    constant: bool = True
    name: str = ""


@dataclass(frozen=True)
class SpeciesReference:
    """A reactant or product. `stoichiometry` is a number, or `sym(id)` when the
    reference has an id whose value rules, initial assignments or events set."""

    species: str
    stoichiometry: sp.Expr
    id: str | None = None
    constant: bool = True
    value: float | None = None  # the stoichiometry attribute, the default value of `id`


@dataclass(frozen=True)
class Reaction:
    id: str
    reactants: tuple[SpeciesReference, ...]
    products: tuple[SpeciesReference, ...]
    modifiers: tuple[str, ...]
    rate: sp.Expr | None  # kinetic law (substance per time); None: the file gives no math
    reversible: bool = False
    fast: bool = False
    compartment: str | None = None
    name: str = ""


@dataclass(frozen=True)
class InitialAssignment:
    variable: str
    math: sp.Expr


@dataclass(frozen=True)
class AssignmentRule:
    variable: str
    math: sp.Expr


@dataclass(frozen=True)
class RateRule:
    variable: str
    math: sp.Expr


@dataclass(frozen=True)
class AlgebraicRule:
    math: sp.Expr  # 0 = math
    id: str = ""


@dataclass(frozen=True)
class EventAssignment:
    variable: str
    math: sp.Expr


@dataclass(frozen=True)
class Event:
    id: str  # SBML id, or "event_<n>" (1-based position) when the event has none
    trigger: sp.Basic  # a sympy boolean
    assignments: tuple[EventAssignment, ...]
    trigger_initial_value: bool = True
    persistent: bool = True
    delay: sp.Expr | None = None
    priority: sp.Expr | None = None
    use_values_from_trigger_time: bool = True


@dataclass(frozen=True)
class Network:
    """One SBML model. Rules are in an order that is safe to evaluate in: an
    assignment rule only uses variables of rules before it."""

    id: str
    compartments: tuple[Compartment, ...] = ()
    species: tuple[Species, ...] = ()
    parameters: tuple[Parameter, ...] = ()
    reactions: tuple[Reaction, ...] = ()
    initial_assignments: tuple[InitialAssignment, ...] = ()
    assignment_rules: tuple[AssignmentRule, ...] = ()
    rate_rules: tuple[RateRule, ...] = ()
    algebraic_rules: tuple[AlgebraicRule, ...] = ()
    events: tuple[Event, ...] = ()
    conversion_factor: str | None = None  # the model-wide species conversion factor
    name: str = ""
    source: str = ""  # where it was loaded from, for messages
    level: int = 3  # the level and version of the file as read, before conversion
    version: int = 2
    notes: tuple[str, ...] = field(default=(), compare=False)  # what import changed

    # -- lookups ---------------------------------------------------------------
    @cached_property
    def compartment_by_id(self) -> dict[str, Compartment]:
        return {c.id: c for c in self.compartments}

    @cached_property
    def species_by_id(self) -> dict[str, Species]:
        return {s.id: s for s in self.species}

    @cached_property
    def parameter_by_id(self) -> dict[str, Parameter]:
        return {p.id: p for p in self.parameters}

    @cached_property
    def reaction_by_id(self) -> dict[str, Reaction]:
        return {r.id: r for r in self.reactions}

    @cached_property
    def species_reference_by_id(self) -> dict[str, SpeciesReference]:
        return {
            sr.id: sr
            for r in self.reactions
            for sr in (*r.reactants, *r.products)
            if sr.id
        }

    @cached_property
    def assignment_rule_by_variable(self) -> dict[str, AssignmentRule]:
        return {r.variable: r for r in self.assignment_rules}

    @cached_property
    def rate_rule_by_variable(self) -> dict[str, RateRule]:
        return {r.variable: r for r in self.rate_rules}

    @cached_property
    def initial_assignment_by_variable(self) -> dict[str, InitialAssignment]:
        return {a.variable: a for a in self.initial_assignments}

    def kind_of(self, sbml_id: str) -> str | None:
        """'compartment', 'species', 'parameter', 'species_reference', 'reaction' or None."""
        if sbml_id in self.species_by_id:
            return "species"
        if sbml_id in self.compartment_by_id:
            return "compartment"
        if sbml_id in self.parameter_by_id:
            return "parameter"
        if sbml_id in self.species_reference_by_id:
            return "species_reference"
        if sbml_id in self.reaction_by_id:
            return "reaction"
        return None

    @cached_property
    def event_assigned(self) -> frozenset[str]:
        return frozenset(a.variable for e in self.events for a in e.assignments)

    def species_value_is_amount(self, species_id: str) -> bool:
        """True when the species' symbol in math means an amount, not a concentration
        (hasOnlySubstanceUnits, or a compartment with spatialDimensions 0)."""
        s = self.species_by_id[species_id]
        if s.has_only_substance_units:
            return True
        c = self.compartment_by_id.get(s.compartment)
        return c is not None and c.spatial_dimensions == 0

    def species_conversion_factor(self, species_id: str) -> str | None:
        s = self.species_by_id[species_id]
        return s.conversion_factor or self.conversion_factor

    def all_math(self) -> Iterable[tuple[str, sp.Basic]]:
        """(where, expression) for every expression in the model; for checks."""
        for r in self.reactions:
            if r.rate is not None:
                yield f"reaction {r.id}", r.rate
            for sr in (*r.reactants, *r.products):
                yield f"reaction {r.id}", sr.stoichiometry
        for a in self.initial_assignments:
            yield f"initialAssignment {a.variable}", a.math
        for a in self.assignment_rules:
            yield f"assignmentRule {a.variable}", a.math
        for a in self.rate_rules:
            yield f"rateRule {a.variable}", a.math
        for a in self.algebraic_rules:
            yield f"algebraicRule {a.id or ''}".strip(), a.math
        for e in self.events:
            yield f"event {e.id} trigger", e.trigger
            if e.delay is not None:
                yield f"event {e.id} delay", e.delay
            if e.priority is not None:
                yield f"event {e.id} priority", e.priority
            for a in e.assignments:
                yield f"event {e.id} assignment {a.variable}", a.math

    def summary(self) -> dict[str, int]:
        return {
            "compartments": len(self.compartments),
            "species": len(self.species),
            "parameters": len(self.parameters),
            "reactions": len(self.reactions),
            "initial assignments": len(self.initial_assignments),
            "assignment rules": len(self.assignment_rules),
            "rate rules": len(self.rate_rules),
            "algebraic rules": len(self.algebraic_rules),
            "events": len(self.events),
        }
