"""The ODE and stochastic views on bundled and hand-written models."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import sympy as sp

import sbmlgpu
from sbmlgpu.errors import UnsupportedModelError
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
