"""network_features on hand-built Networks: each feature found, with the right ids."""

import pytest
import sympy as sp

from sbmlgpu import ir
from sbmlgpu.features import FEATURES, network_features, unsupported
from sbmlgpu.ir import TIME, Delay, RateOf, sym


def ref(species, stoich=1, **kw):
    return ir.SpeciesReference(species=species, stoichiometry=sp.sympify(stoich), **kw)


def plain_network(**extra):
    base = dict(
        id="m",
        compartments=(ir.Compartment("c", 1.0),),
        species=(ir.Species("A", "c", initial_concentration=1.0),
                 ir.Species("B", "c", initial_concentration=0.0)),
        parameters=(ir.Parameter("k", 0.5),),
        reactions=(ir.Reaction("R1", (ref("A"),), (ref("B"),), (), sym("k") * sym("A")),),
    )
    base.update(extra)
    return ir.Network(**base)


def test_a_plain_mass_action_model_has_only_reactions():
    assert network_features(plain_network()) == {"reactions": ("R1",)}


def test_species_and_reaction_flags():
    net = plain_network(
        species=(ir.Species("A", "c", initial_amount=1.0, has_only_substance_units=True),
                 ir.Species("B", "c", initial_amount=0.0, boundary_condition=True),
                 ir.Species("C", "c", initial_amount=0.0, constant=True, boundary_condition=True,
                            conversion_factor="cf")),
        parameters=(ir.Parameter("k", 0.5), ir.Parameter("cf", 2.0)),
        reactions=(
            ir.Reaction("R1", (ref("A", 2),), (ref("B", 0.5),), (), sym("k") * sym("A"),
                        reversible=True),
            ir.Reaction("R2", (ref("A"),), (), (), sym("k"), fast=True),
            ir.Reaction("R3", (ref("A"),), (), (), None),
        ),
        conversion_factor="cf",
    )
    f = network_features(net)
    assert f["reactions"] == ("R1", "R2", "R3")
    assert f["reversible reactions"] == ("R1",)
    assert f["fast reactions"] == ("R2",)
    assert f["reactions without rate math"] == ("R3",)
    assert f["non-integer stoichiometry"] == ("R1",)
    assert f["hasOnlySubstanceUnits species"] == ("A",)
    assert f["boundary species"] == ("B", "C")
    assert f["constant species"] == ("C",)
    assert f["conversion factors"] == ("cf", "C")
    assert "variable stoichiometry" not in f


def test_rules_assignments_and_varying_compartments():
    net = plain_network(
        compartments=(ir.Compartment("c", 1.0, constant=False),
                      ir.Compartment("d", 1.0, spatial_dimensions=2)),
        parameters=(ir.Parameter("k", 0.5), ir.Parameter("y", None, constant=False),
                    ir.Parameter("z", 0.0, constant=False)),
        initial_assignments=(ir.InitialAssignment("k", sp.Integer(2)),),
        assignment_rules=(ir.AssignmentRule("y", 2 * sym("A")),),
        rate_rules=(ir.RateRule("c", sp.Float(0.1)), ir.RateRule("z", sym("y"))),
        algebraic_rules=(ir.AlgebraicRule(sym("z") - sym("B")),),
    )
    f = network_features(net)
    assert f["initial assignments"] == ("k",)
    assert f["assignment rules"] == ("y",)
    assert f["rate rules"] == ("c", "z")
    assert f["algebraic rules"] == ("algebraicRule_1",)
    assert f["varying compartments"] == ("c",)
    assert f["non-3D compartments"] == ("d",)


def test_variable_stoichiometry_names_the_species_reference():
    net = plain_network(
        parameters=(ir.Parameter("k", 0.5),),
        reactions=(ir.Reaction("R1", (ref("A", sym("s1"), id="s1", constant=False, value=1.0),),
                               (), (), sym("k")),),
        rate_rules=(ir.RateRule("s1", sp.Float(0.1)),),
    )
    assert network_features(net)["variable stoichiometry"] == ("s1",)


def test_events_and_their_kinds():
    a = ir.EventAssignment("A", sp.Integer(0))
    net = plain_network(events=(
        ir.Event("E1", sym("A") < 0.5, (a,)),
        ir.Event("E2", TIME > 1, (a,), delay=sp.Integer(1), use_values_from_trigger_time=False),
        ir.Event("E3", TIME > 2, (a,), priority=sp.Integer(1), persistent=False,
                 trigger_initial_value=False),
    ))
    f = network_features(net)
    assert f["events"] == ("E1", "E2", "E3")
    assert f["events with delay"] == ("E2",)
    assert f["event values at execution time"] == ("E2",)
    assert f["event priorities"] == ("E3",)
    assert f["non-persistent triggers"] == ("E3",)
    assert f["trigger initialValue false"] == ("E3",)
    assert f["time"] == ("E2", "E3")


def test_math_functions_are_found_where_they_are_used():
    net = plain_network(
        parameters=(ir.Parameter("k", 0.5), ir.Parameter("y", None, constant=False),
                    ir.Parameter("w", None, constant=False)),
        reactions=(ir.Reaction("R1", (ref("A"),), (), (),
                               sp.Piecewise((sym("k"), TIME < 1), (0, True))),),
        assignment_rules=(ir.AssignmentRule("y", Delay(sym("A"), sp.Integer(1))),
                          ir.AssignmentRule("w", RateOf(sym("A")))),
    )
    f = network_features(net)
    assert f["piecewise"] == ("R1",)
    assert f["time"] == ("R1",)
    assert f["delay()"] == ("y",)
    assert f["rateOf"] == ("w",)


def test_every_reported_name_is_a_known_feature_in_order():
    net = plain_network(events=(ir.Event("E1", TIME > 1, (), delay=sp.Integer(1)),))
    names = list(network_features(net))
    assert names == [n for n in FEATURES if n in names]


def test_unsupported_lists_refused_features_present_with_ids():
    net = plain_network(events=(ir.Event("E1", TIME > 1, ()),))
    assert unsupported(net, ["events", "delay()"]) == [("events", ("E1",))]
    assert unsupported(plain_network(), ["events"]) == []
    with pytest.raises(ValueError, match="unknown feature"):
        unsupported(net, ["eventz"])
