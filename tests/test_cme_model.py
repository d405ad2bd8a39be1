"""The CME backend's model (plugins/cme/model.py): what it solves, what it refuses,
and the generated propensity function (host build checked against sympy, CUDA
build checked by nvcc).

The network builders here are used by test_cme_statespace.py and test_cme_matrix.py."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from sbmlgpu import ir
from sbmlgpu.codegen.compile_check import nvcc_available, nvcc_compile
from sbmlgpu.errors import OptionError, UnsupportedModelError
from sbmlgpu.ir import TIME, Delay, sym
from sbmlgpu.plugins.cme import model
from sbmlgpu.plugins.cme.statespace import StateSpace, propensities_host
from sbmlgpu.runtime import host

needs_cxx = pytest.mark.skipif(host.find_compiler() is None, reason="no C++ compiler")


def ref(species: str, n: int = 1, sid: str | None = None, constant: bool = True):
    return ir.SpeciesReference(species, sp.Integer(n), id=sid, constant=constant)


def reaction(rid, reactants, products, rate, stoich=None, **kw):
    stoich = stoich or {}
    return ir.Reaction(rid, tuple(ref(s, stoich.get(s, 1)) for s in reactants),
                       tuple(ref(s, stoich.get(s, 1)) for s in products), (), rate, **kw)


def network(species, parameters, reactions, size=1.0, **fields) -> ir.Network:
    """species: {id: initial amount} (only substance units: a law reads amounts)."""
    return ir.Network(
        id="m", compartments=(ir.Compartment("c", size),),
        species=tuple(ir.Species(s, "c", initial_amount=v, has_only_substance_units=True)
                      for s, v in species.items()),
        parameters=tuple(ir.Parameter(p, v) for p, v in parameters.items()),
        reactions=tuple(reactions), **fields)


def birth_death(k=10.0, g=1.0, x0=0.0) -> ir.Network:
    """0 -> X at k, X -> 0 at g X: stationary law Poisson(k / g)."""
    return network({"X": x0}, {"k": k, "g": g},
                   [reaction("birth", [], ["X"], sym("k")),
                    reaction("death", ["X"], [], sym("g") * sym("X"))])


def isomerisation(n=10, k1=2.0, k2=3.0) -> ir.Network:
    """A <=> B (two reactions), A + B = n conserved: B ~ Binomial(n, k1 / (k1 + k2))."""
    return network({"A": float(n), "B": 0.0}, {"k1": k1, "k2": k2},
                   [reaction("AtoB", ["A"], ["B"], sym("k1") * sym("A")),
                    reaction("BtoA", ["B"], ["A"], sym("k2") * sym("B"))])


def dimerisation(x0=5.0, c=0.7) -> ir.Network:
    """2 X -> Y at c X (X - 1) / 2."""
    law = sym("c") * sym("X") * (sym("X") - 1) / 2
    return network({"X": x0, "Y": 0.0}, {"c": c},
                   [reaction("dimerise", ["X"], ["Y"], law, stoich={"X": 2})])


def three_species() -> ir.Network:
    """A + B <=> C, 0 -> A, A -> 0, 0 -> B, B -> 0, C -> 0 (with a fixed species E)."""
    A, B, C, E = (sym(s) for s in "ABCE")
    net = network({"A": 1.0, "B": 0.0, "C": 0.0}, {"kb": 0.8, "ku": 0.5, "ka": 2.0, "da": 0.3,
                                                    "kbB": 1.5, "dB": 0.4, "dC": 0.2},
                  [reaction("bind", ["A", "B"], ["C"], sym("kb") * A * B),
                   reaction("unbind", ["C"], ["A", "B"], sym("ku") * C),
                   reaction("makeA", [], ["A"], sym("ka") * E),
                   reaction("loseA", ["A"], [], sym("da") * A),
                   reaction("makeB", [], ["B"], sym("kbB")),
                   reaction("loseB", ["B"], [], sym("dB") * B),
                   reaction("loseC", ["C"], [], sym("dC") * C)])
    fixed = ir.Species("E", "c", initial_amount=3.0, has_only_substance_units=True,
                       boundary_condition=True)
    return ir.Network(**{**net.__dict__, "species": net.species + (fixed,)})


def with_fields(net: ir.Network, **fields) -> ir.Network:
    return ir.Network(**{**net.__dict__, **fields})


def space_of(states: np.ndarray, m: model.CmeModel) -> StateSpace:
    """A StateSpace holding only `states` (for evaluating propensities at them)."""
    n = states.shape[1]
    empty = np.full((m.n_reactions, n), -1, dtype=np.int32)
    return StateSpace(m.species, m.reaction_ids, np.ascontiguousarray(states, np.int32),
                      empty, empty, np.zeros(n, bool))


# -- what the model is ------------------------------------------------------------------
def test_birth_death_columns_stoichiometry_and_initial_state():
    m = model.build(birth_death(x0=4.0))
    assert m.species == ("X",)
    assert m.reaction_ids == ("birth", "death")
    assert m.stoichiometry.tolist() == [[1], [-1]]
    assert m.initial_state().tolist() == [4]
    assert m.initial_state({"X": 7}).tolist() == [7]


def test_fixed_species_is_a_literal_not_a_column():
    m = model.build(three_species())
    assert m.species == ("A", "B", "C")
    assert "E" not in m.species
    text = m.propensity_function()
    assert "s_E" not in text  # folded: E's amount 3 times ka 2 is the literal 6.0
    assert "a[2 * a_stride] = 6.0;" in text


def test_generated_function_names_sbml_ids_and_folds_parameters():
    text = model.build(birth_death(k=10.0, g=0.25)).propensity_function()
    table = text.split("*/", 1)[0]
    for name in ("X", "birth", "death", "k", "g"):
        assert name in table
    assert "= 10.0" in table and "= 0.25" in table  # the literals' values
    body = text.split("cme_propensities(", 1)[1]
    assert "s_k" not in body and "s_g" not in body  # parameters are literals
    assert "/* birth */" in body and "/* death */" in body


def test_initial_state_must_be_whole_numbers():
    m = model.build(birth_death(x0=2.5))
    with pytest.raises(OptionError, match="X") as err:
        m.initial_state()
    assert "whole number" in str(err.value)
    assert m.initial_state({"X": 3}).tolist() == [3]  # an override fixes it
    with pytest.raises(OptionError, match="X=3.5"):
        m.initial_state({"X": 3.5})
    with pytest.raises(OptionError, match="X"):
        m.initial_state({"X": -1})


def test_initial_override_of_something_that_is_no_column_is_refused():
    m = model.build(three_species())
    with pytest.raises(OptionError, match="E"):
        m.initial_state({"E": 2})
    with pytest.raises(OptionError, match="ka"):
        m.initial_state({"ka": 2})


def test_concentration_species_read_as_sbml_says():
    """hasOnlySubstanceUnits false in a compartment of size 2: the law k*X reads X as
    the concentration, so the propensity is k * count / 2 (DSMTS 00011)."""
    net = ir.Network(id="conc", compartments=(ir.Compartment("c", 2.0),),
                     species=(ir.Species("X", "c", initial_amount=4.0),),
                     parameters=(ir.Parameter("k", 3.0),),
                     reactions=(reaction("R", ["X"], [], sym("k") * sym("X")),))
    m = model.build(net)
    assert m.initial_state().tolist() == [4]
    if host.find_compiler() is None:
        pytest.skip("no C++ compiler")
    prop = propensities_host(m, space_of(np.array([[0, 1, 4, 10]]), m))
    np.testing.assert_array_equal(prop[0], 3.0 * np.array([0, 1, 4, 10]) / 2.0)


@needs_cxx
@pytest.mark.parametrize("builder", [birth_death, isomerisation, dimerisation, three_species])
def test_host_propensities_equal_the_folded_laws(builder):
    m = model.build(builder())
    rng = np.random.default_rng(5)
    states = rng.integers(0, 40, size=(m.n_species, 200)).astype(np.int32)
    prop = propensities_host(m, space_of(states, m))
    assert prop.shape == (m.n_reactions, 200)
    laws = sp.lambdify(m.x, list(m.propensities), "numpy")
    for i in range(states.shape[1]):
        expected = np.array(laws(*[float(v) for v in states[:, i]]), dtype=float)
        np.testing.assert_allclose(prop[:, i], expected, rtol=1e-14, atol=0)


@pytest.mark.skipif(not nvcc_available(), reason="nvcc not found")
def test_propensity_kernel_compiles_for_sm_90():
    source = model.build(three_species()).propensity_source()
    assert f"__global__ void {model.PROPENSITY_KERNEL}(" in source
    assert nvcc_compile(source, "sm_90", ("-O3",), name="cme_propensities").startswith(b"\x7fELF")


# -- what it refuses, by name -------------------------------------------------------------
def _refused(net: ir.Network) -> dict[str, tuple[str, ...]]:
    with pytest.raises(UnsupportedModelError) as err:
        model.build(net)
    assert model.unsupported(net), "supports() must say what build() refuses"
    return err.value.features


@pytest.mark.parametrize("change, words, element", [
    ({"rate_rules": (ir.RateRule("g", sp.Integer(1)),)}, "rate rule", "g"),
    ({"events": (ir.Event("reset", sp.Gt(sym("X"), 3), (ir.EventAssignment("X", sp.Integer(0)),)),)},
     "event", "reset"),
    ({"algebraic_rules": (ir.AlgebraicRule(sym("g") - 1, id="alg"),)}, "algebraic rule", "alg"),
])
def test_refusals_name_the_feature_and_the_element(change, words, element):
    net = birth_death()
    if "rate_rules" in change or "algebraic_rules" in change:
        net = with_fields(net, parameters=(ir.Parameter("k", 10.0),
                                           ir.Parameter("g", 1.0, constant=False)))
    features = _refused(with_fields(net, **change))
    hits = [ids for feature, ids in features.items() if words in feature]
    assert hits and element in hits[0], features


@pytest.mark.parametrize("bad, words", [
    (reaction("death", ["X"], [], sym("g") * sym("X"), fast=True), "fast reaction"),
    (reaction("death", ["X"], [], sym("g") * sym("X") * TIME), "depends on time"),
    (reaction("death", ["X"], [], sym("g") * Delay(sym("X"), sp.Integer(1))), "delay()"),
    (ir.Reaction("death", (ir.SpeciesReference("X", sp.Rational(3, 2)),), (), (),
                 sym("g") * sym("X")), "whole number"),
    (ir.Reaction("death", (ref("X", 1, sid="sx", constant=False),), (), (),
                 sym("g") * sym("X")), "stoichiometry that can change"),
])
def test_reactions_refused_by_name(bad, words):
    net = birth_death()
    features = _refused(with_fields(net, reactions=(net.reactions[0], bad)))
    hits = [ids for feature, ids in features.items() if words in feature]
    assert hits and any("death" in ids or "sx" in ids for ids in hits), features


def test_a_parameter_without_value_is_named():
    net = with_fields(birth_death(), parameters=(ir.Parameter("k", None), ir.Parameter("g", 1.0)))
    with pytest.raises(UnsupportedModelError, match="k"):
        model.build(net)


def test_accepted_models_have_no_refusals():
    for builder in (birth_death, isomerisation, dimerisation, three_species):
        assert model.unsupported(builder()) == []
