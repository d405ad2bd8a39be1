"""The SSA backend's model (plugins/ssa/model.py): what it simulates and what it refuses.

The network builders here are used by the other test_ssa_* files too."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import sympy as sp

from sbmlgpu import ir, load, plugin_manager
from sbmlgpu.errors import OptionError, UnsupportedModelError
from sbmlgpu.ir import TIME, sym
from sbmlgpu.plugins.ssa import model

from .shared_data import STOCHASTIC, needs_stochastic

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "sbml_models"


def one(x) -> sp.Integer:
    return sp.Integer(x)


def reaction(rid, reactants, products, rate, stoich=None):
    stoich = stoich or {}
    return ir.Reaction(rid, tuple(ir.SpeciesReference(s, one(stoich.get(s, 1))) for s in reactants),
                       tuple(ir.SpeciesReference(s, one(stoich.get(s, 1))) for s in products),
                       (), rate)


def decay(k: float = 0.5, a0: float = 100.0, size: float = 1.0, hosu: bool = True,
          events=(), rules=()) -> ir.Network:
    """A -> 0 at rate k*A: A(t) ~ Binomial(a0, exp(-k t))."""
    return ir.Network(
        id="decay", compartments=(ir.Compartment("c", size),),
        species=(ir.Species("A", "c", initial_amount=a0, has_only_substance_units=hosu),),
        parameters=(ir.Parameter("k", k),),
        reactions=(reaction("R", ["A"], [], sym("k") * sym("A")),),
        events=tuple(events), assignment_rules=tuple(rules))


def immigration_death(alpha=10.0, mu=0.1, events=()) -> ir.Network:
    """0 -> X at alpha, X -> 0 at mu X: X(t) ~ Poisson(alpha/mu (1 - exp(-mu t)))."""
    return ir.Network(
        id="imdeath", compartments=(ir.Compartment("c", 1.0),),
        species=(ir.Species("X", "c", initial_amount=0.0, has_only_substance_units=True),),
        parameters=(ir.Parameter("alpha", alpha), ir.Parameter("mu", mu)),
        reactions=(reaction("birth", [], ["X"], sym("alpha")),
                   reaction("death", ["X"], [], sym("mu") * sym("X"))),
        events=tuple(events))


def dimerisation() -> ir.Network:
    return load(MODELS / "decay_dimerisation.xml")


def small_dimerisation(s1: float = 150.0) -> ir.Network:
    """Decay-dimerisation (Gillespie 2001) from S1 = s1 instead of 10,000: the same
    reactions and rates, a few hundred firings per realisation (fast on numpy)."""
    net = dimerisation()
    species = tuple(ir.Species(**{**s.__dict__, "initial_amount": s1}) if s.id == "S1" else s
                    for s in net.species)
    return ir.Network(**{**net.__dict__, "species": species})


# ----------------------------------------------------------------------------------------
def test_registered_through_the_entry_point():
    backend = plugin_manager.backend("ssa")
    assert backend.name == "ssa"
    assert backend.supports(dimerisation()) == []


def test_state_stoichiometry_and_dependency_graph_of_decay_dimerisation():
    m = model.build(dimerisation())
    assert m.state_ids == ("S1", "S2", "S3")
    assert m.stoichiometry.tolist() == [[-1, 0, 0], [-2, 1, 0], [2, -1, 0], [0, -1, 1]]
    # R1 changes S1 only: R1 and R2 read S1; R4 changes S2 and S3: R3, R4 read S2
    assert m.dependents[0] == (0, 1)
    assert m.dependents[3] == (2, 3)
    assert m.default_outputs() == ("S1", "S2", "S3")


def _value(expr, **values) -> float:
    """expr with its symbols (x@A, p@k, ...) replaced by values named without the prefix."""
    return float(expr.xreplace({s: values[s.name.split("@", 1)[1]] for s in expr.free_symbols}))


def test_kinetic_laws_read_species_as_sbml_says_unless_asked_otherwise():
    # hasOnlySubstanceUnits false in a compartment of size 2: the law k*A reads A as
    # a concentration, so the propensity in molecules per time is k * amount / 2
    net = decay(k=0.5, size=2.0, hosu=False)
    sbml = model.build(net, "sbml").propensities[0]
    amount = model.build(net, "amount").propensities[0]
    assert _value(sbml, A=10.0, k=0.5, c=2.0) == pytest.approx(2.5)
    assert _value(amount, A=10.0, k=0.5, c=2.0) == pytest.approx(5.0)
    # with only substance units both readings agree
    net = decay(k=0.5, size=2.0, hosu=True)
    assert _value(model.build(net, "sbml").propensities[0], A=10.0, k=0.5, c=2.0) == 5.0


@needs_stochastic
def test_dsmts_00011_propensity_is_the_kinetic_law_in_sbml_units():
    m = model.build(load(STOCHASTIC / "00011" / "00011-sbml-l3v2.xml"))
    cell = [s for s in m.propensities[0].free_symbols if s.name == "p@Cell"]
    assert cell, "the compartment size must appear: the law reads X as a concentration"


def test_time_event_and_state_event_are_classified():
    time_event = ir.Event("reset", sp.Ge(TIME, sym("T")), (ir.EventAssignment("X", one(50)),),
                          trigger_initial_value=False)
    state_event = ir.Event("cap", sp.Gt(sym("X"), 30), (ir.EventAssignment("X", one(0)),))
    net = immigration_death(events=[time_event, state_event])
    net = ir.Network(**{**net.__dict__, "parameters": net.parameters + (ir.Parameter("T", 25.0),)})
    m = model.build(net)
    assert m.events[0].time_threshold is not None
    assert m.events[1].time_threshold is None


@pytest.mark.parametrize("change, feature", [
    # a rate that reads a species (a constant rate would be a clock, tests/test_ssa_clocks.py)
    ({"rate_rules": (ir.RateRule("k", sym("A")),)}, "rate rule"),
    ({"reactions": (reaction("R", ["A"], [], sym("k") * sym("A") * TIME),)},
     "propensity that depends on time"),
    ({"events": (ir.Event("e", sp.And(sp.Ge(TIME, 2), sp.Gt(sym("A"), 3)),
                          (ir.EventAssignment("A", one(0)),)),)}, "event trigger that uses time"),
    ({"events": (ir.Event("e", sp.Gt(sym("A"), 3), (ir.EventAssignment("A", one(0)),),
                          delay=one(1)),)}, "event delay"),
    ({"events": (ir.Event("e", sp.Gt(sym("A"), 3), (ir.EventAssignment("A", one(0)),),
                          priority=one(1)),)}, "event priority"),
])
def test_refusals_name_the_feature_and_the_element(change, feature):
    base = decay()
    fields = dict(base.__dict__)
    if "rate_rules" in change:  # a rate rule needs a non-constant parameter
        fields["parameters"] = (ir.Parameter("k", 0.5, constant=False),)
    fields.update(change)
    net = ir.Network(**fields)
    refused = model.unsupported(net)
    assert any(feature in name for name, _ in refused), refused
    with pytest.raises(UnsupportedModelError, match=feature.split()[0]):
        model.build(net)
    assert plugin_manager.backend("ssa").supports(net)


def test_assignment_rule_outputs_are_expressions_of_the_state():
    net = decay(rules=[ir.AssignmentRule("y", 2 * sym("A"))])
    net = ir.Network(**{**net.__dict__,
                        "parameters": net.parameters + (ir.Parameter("y", 0.0, constant=False),)})
    m = model.build(net)
    assert "y" in m.default_outputs()
    assert m.output_expression("y") == 2 * m.x[0]
    with pytest.raises(OptionError, match="nope"):  # an output it cannot report: typed
        m.output_expression("nope")


def test_vilar_oscillator_is_accepted():
    m = model.build(load(MODELS / "BIOMD0000000035.xml"))
    assert m.n_reactions == 16 and m.n_states == 9
    assert np.all(np.abs(m.stoichiometry) <= 2)
