"""The ODE and stochastic views on bundled and hand-written models."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import sympy as sp

import sbmlgpu
from sbmlgpu.errors import OptionError, UnsupportedModelError
from sbmlgpu.views import cache as view_cache
from sbmlgpu.views import ode_system, stochastic_system

from .sbml_strings import math_apply, model, parameter, reaction, species

MODELS = Path(__file__).resolve().parents[1] / "sbml_models"


def test_stochastic_view_of_decay_dimerisation():
    s = stochastic_system(sbmlgpu.load(MODELS / "decay_dimerisation.xml"))
    assert s.state_ids == ("S1", "S2", "S3")
    assert s.stoichiometry.tolist() == [[-1, 0, 0], [-2, 1, 0], [2, -1, 0], [0, -1, 1]]
    assert s.reactant_orders.tolist() == [[1, 0, 0], [2, 0, 0], [0, 1, 0], [0, 1, 0]]
    p = dict(zip(s.p, s.p_values))
    x = dict(zip(s.x, [100, 7, 0]))
    a = [float(e.subs(p).subs(x)) for e in s.propensities]
    assert np.allclose(a, [1.0 * 100, 0.002 * 100 * 99 / 2, 0.5 * 7, 0.04 * 7])


def test_stochastic_propensity_follows_sbml_species_semantics():
    # compartment of size 2; kinetic law k*A with A not hasOnlySubstanceUnits: SBML
    # reads A as a concentration (amount / 2), as DSMTS 00011 expects
    text = model(species("A", 10), parameter("k", 0.5),
                 reaction("R", ["A"], [], math_apply("times", "<ci> k </ci><ci> A </ci>")), size=2.0)
    net = sbmlgpu.load(text)
    s = stochastic_system(net)
    val = float(s.propensities[0].subs(dict(zip(s.p, s.p_values))).subs({s.x[0]: 10}))
    assert val == 2.5
    # the other convention: every species symbol is its amount
    s = stochastic_system(net, species_in_rates="amount")
    val = float(s.propensities[0].subs(dict(zip(s.p, s.p_values))).subs({s.x[0]: 10}))
    assert val == 5.0


def test_stochastic_view_refuses_rate_rules_and_fractional_stoichiometry():
    with pytest.raises(UnsupportedModelError, match="rate rule"):
        stochastic_system(sbmlgpu.load(MODELS / "lorenz.xml"))
    text = model(species("A", 10) + species("B", 0), parameter("k", 1),
                 reaction("R", ["A"], ["B"], "<ci> k </ci>").replace('stoichiometry="1"', 'stoichiometry="0.5"', 1))
    with pytest.raises(UnsupportedModelError, match="whole number"):
        stochastic_system(sbmlgpu.load(text))


@pytest.mark.parametrize("name", sorted(p.name for p in MODELS.glob("*.xml")))
def test_every_bundled_model_has_an_ode_view(name):
    ode = ode_system(sbmlgpu.load(MODELS / name))
    assert ode.n_states > 0
    assert len(ode.rhs) == ode.n_states == len(ode.x0)
    assert not np.isnan(ode.p_values).any()
    # the Jacobian is square and symbolic in x and p only
    assert ode.jacobian.shape == (ode.n_states, ode.n_states)
    allowed = set(ode.x) | set(ode.p) | {ode.t}
    assert all(f.free_symbols <= allowed for f in ode.rhs)


# -- outputs: value, amount, concentration ------------------------------------------

def _two_compartments():
    """A (size-2 compartment), B (hasOnlySubstanceUnits), Z (0-D compartment)."""
    from .test_outputs import network

    return network()


def _at(view, e, amounts=None):
    """e at the start, or with the states set to `amounts` (by SBML id)."""
    p = dict(zip(view.p, view.p_values))
    x = [float(v.subs(p)) for v in view.x0] if amounts is None else \
        [amounts[sid] for sid in view.state_ids]
    return float(sp.sympify(e).subs(dict(zip(view.x, x))).subs(p))


@pytest.mark.parametrize("build", [ode_system, stochastic_system])
def test_views_report_values_amounts_and_concentrations(build):
    view = build(_two_compartments())
    # A: 10 molecules in size 2 -> value 5 (a concentration), amount 10
    assert _at(view, view.output("A")) == 5.0
    assert _at(view, view.output("A", "amount")) == 10.0
    assert _at(view, view.output_named("[A]")) == 5.0
    assert _at(view, view.output_named("amount(A)")) == 10.0
    # B has only substance units: its value is its amount
    later = {"A": 6.0, "B": 4.0}
    assert _at(view, view.output("B"), later) == 4.0
    assert _at(view, view.output_named("amount(B)"), later) == 4.0
    assert _at(view, view.output_named("concentration(B)"), later) == 2.0
    # Z in a 0-D compartment: value and amount are the amount; no concentration
    assert _at(view, view.output("Z")) == 3.0
    assert _at(view, view.output_named("amount(Z)")) == 3.0
    with pytest.raises(OptionError, match="spatialDimensions 0"):
        view.output_named("[Z]")
    with pytest.raises(OptionError, match="species only"):
        view.output("k", "amount")
    with pytest.raises(OptionError, match="did you mean A"):
        view.output_named("a")


def test_the_stochastic_view_reports_sbml_values_whatever_its_rate_reading():
    net = _two_compartments()
    amount_reading = stochastic_system(net, species_in_rates="amount")
    assert _at(amount_reading, amount_reading.output("A")) == 5.0
    assert amount_reading.output("A") == ode_system(net).output("A")


# -- one view per (network, kind) ------------------------------------------------------

def test_views_are_built_once_per_network_and_kind():
    net = sbmlgpu.load(MODELS / "decay_dimerisation.xml")
    ode = ode_system(net)
    assert ode_system(net) is ode
    sbml, amount = stochastic_system(net), stochastic_system(net, species_in_rates="amount")
    assert stochastic_system(net) is sbml and stochastic_system(net, "amount") is amount
    assert sbml is not amount
    # a transformed network is a new instance: views of its own, of its own network
    import dataclasses

    changed = dataclasses.replace(net, id="changed")
    assert ode_system(changed) is not ode and ode_system(changed).network is changed
    # the same model loaded again is another instance too
    assert ode_system(sbmlgpu.load(MODELS / "decay_dimerisation.xml")) is not ode


def test_a_refused_view_is_not_cached_and_a_pickled_network_carries_no_views():
    import pickle

    lorenz = sbmlgpu.load(MODELS / "lorenz.xml")
    for _ in range(2):  # refused each time, never a cached half-built view
        with pytest.raises(UnsupportedModelError, match="rate rule"):
            stochastic_system(lorenz)
    ode_system(lorenz)
    copy = pickle.loads(pickle.dumps(lorenz))  # e.g. to a worker process
    assert copy == lorenz and not copy.__dict__.get(view_cache._ATTRIBUTE)
    assert ode_system(copy).network is copy
