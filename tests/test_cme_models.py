"""The CME models of sbml_models/ (cme_*.xml, written by sbml_models/build_cme_models.py):
they load, their laws are the combinatorial mass action we meant, no law fires where
its reaction would make a count negative, and the state counts their notes quote are
the ones a breadth-first enumeration finds."""

from __future__ import annotations

import importlib.util
import itertools
import re
from math import comb
from pathlib import Path

import libsbml
import numpy as np
import pytest
import sympy as sp

import sbmlgpu
from sbmlgpu.views import stochastic_system

MODELS = Path(__file__).resolve().parent.parent / "sbml_models"
NAMES = ("cme_toggle_switch", "cme_brusselator", "cme_schnakenberg", "cme_phage_lambda")


def _build_script():
    # The build script imports its sibling build_small_models by plain name, as it
    # does when run from sbml_models/.
    import sys
    sys.path.insert(0, str(MODELS))
    try:
        spec = importlib.util.spec_from_file_location("build_cme_models", MODELS / "build_cme_models.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(MODELS))


BUILD = _build_script()


def _system(name):
    return stochastic_system(sbmlgpu.load(MODELS / f"{name}.xml"))


class Model:
    """A stochastic view with numbers in: propensities as functions of the state."""

    def __init__(self, name):
        s = _system(name)
        self.ids = s.state_ids
        self.index = {sid: i for i, sid in enumerate(self.ids)}
        self.reaction_ids = s.reaction_ids
        values = dict(zip(s.p, s.p_values))
        self.laws = [sp.sympify(a).subs(values) for a in s.propensities]
        self.symbols = s.x
        self._f = sp.lambdify(s.x, self.laws, "math")
        self.stoichiometry = s.stoichiometry
        self.reactant_orders = s.reactant_orders
        self.x0 = tuple(int(float(sp.sympify(v).subs(values))) for v in s.x0)

    def propensities(self, state):
        return self._f(*state)

    def state(self, **counts):
        return tuple(counts.get(sid, 0) for sid in self.ids)


def reachable(model: Model, start, bounds: dict) -> set:
    """States reachable from `start` by reactions with positive propensity whose result
    stays in [0, bound] (species without a bound: at most their value in `start`, or 1)."""
    hi = np.array([bounds.get(sid, max(1, start[i])) for i, sid in enumerate(model.ids)])
    seen, todo = {tuple(start)}, [tuple(start)]
    while todo:
        x = todo.pop()
        for j, a in enumerate(model.propensities(x)):
            if a > 0:
                y = np.asarray(x) + model.stoichiometry[j]
                if (y >= 0).all() and (y <= hi).all():
                    y = tuple(int(v) for v in y)
                    if y not in seen:
                        seen.add(y)
                        todo.append(y)
    return seen


# -- loading and stoichiometry ------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_model_loads_with_constant_whole_number_stoichiometry(name):
    net = sbmlgpu.load(MODELS / f"{name}.xml")
    assert net.reactions
    for r in net.reactions:
        for ref in (*r.reactants, *r.products):
            assert ref.constant and ref.stoichiometry.is_Integer and int(ref.stoichiometry) >= 1
    s = stochastic_system(net)  # refuses anything a jump process cannot take
    assert s.stoichiometry.dtype == np.int64 and s.stoichiometry.any()
    for sp_ in net.species:
        assert sp_.has_only_substance_units and not sp_.boundary_condition
    assert all(c.size == 1 and c.constant for c in net.compartments)


# -- laws are the combinatorial mass action intended ----------------------------------
def _mass_action(model: Model, j: int, c: float, state, gates=()) -> float:
    """c * prod C(x_i, order_i) * prod of the gating species (0/1 site states)."""
    value = c
    for i, order in enumerate(model.reactant_orders[j]):
        if order:
            value *= comb(state[i], int(order))
    for g in gates:
        value *= state[model.index[g]]
    return value


INTENDED = {  # reaction id: (rate constant, gating species)
    "cme_toggle_switch": {
        "synthesis_Pa": (100.0, ("Da",)), "synthesis_Pb": (100.0, ("Db",)),
        "degradation_Pa": (1.0, ()), "degradation_Pb": (1.0, ()),
        "Pb_dimer_binds_gene_A": (1e-5, ()), "Pa_dimer_binds_gene_B": (1e-5, ()),
        "Pb_dimer_leaves_gene_A": (0.1, ()), "Pa_dimer_leaves_gene_B": (0.1, ()),
    },
    "cme_brusselator": {
        "inflow_X": (5000.0, ()), "conversion_X_to_Y": (50.0, ()),
        "autocatalysis": (5e-5, ()), "outflow_X": (5.0, ()),
    },
    "cme_schnakenberg": {
        "inflow_X": (10.0, ()), "outflow_X": (1.0, ()), "inflow_Y": (50.0, ()),
        "autocatalysis": (2e-4, ()),
    },
}


def _lambda_intended():
    k = dict(BUILD.LAMBDA_PARAMETERS)
    out = {
        "SynReaction1": (k["ks_CI"], ("OR3", "OR2")), "SynReaction2": (k["ks_CI"], ("OR3", "COR2")),
        "SynReaction3": (k["ks_CIcoop"], ("OR3", "ROR2")), "SynReaction4": (k["ks_Cro"], ("OR1", "OR2")),
        "DegReaction1": (k["kd_CI"], ()), "DegReaction2": (k["kd_Cro"], ()),
        "DimReaction1_forward": (k["kb_DimerCI"], ()), "DimReaction1_reverse": (k["ku_Dimer"], ()),
        "DimReaction2_forward": (k["kb_DimerCro"], ()), "DimReaction2_reverse": (k["ku_Dimer"], ()),
    }
    for n in range(1, 7):
        out[f"BindReaction{n}"] = (k["kb_DimerDNA"], ())
    for n, (_, rate, context) in enumerate(BUILD.LAMBDA_UNBINDING, start=1):
        out[f"UnbindReaction{n}"] = (k[rate], context)
    return out


INTENDED["cme_phage_lambda"] = _lambda_intended()

SAMPLE_STATES = {
    "cme_toggle_switch": [dict(Pa=0, Pb=0, Da=1, Db=1), dict(Pa=7, Pb=3, Da=1, Db=0, BDb=1),
                          dict(Pa=1, Pb=250, Da=0, Db=1, BDa=1), dict(Pa=120, Pb=2, BDa=1, BDb=1)],
    "cme_brusselator": [dict(X=0, Y=0), dict(X=1, Y=5), dict(X=2, Y=1), dict(X=1000, Y=2000)],
    "cme_schnakenberg": [dict(X=0, Y=0), dict(X=1, Y=9), dict(X=2, Y=1), dict(X=60, Y=139)],
    "cme_phage_lambda": [
        dict(OR1=1, OR2=1, OR3=1, CI=5, CI2=2, Cro=3, Cro2=1),
        dict(ROR1=1, ROR2=1, OR3=1, CI=1, CI2=0, Cro=2, Cro2=4),
        dict(COR1=1, OR2=1, ROR3=1, CI=12, CI2=7, Cro=0, Cro2=0),
        dict(OR1=1, COR2=1, COR3=1, CI=0, CI2=3, Cro=9, Cro2=2),
        dict(ROR1=1, COR2=1, ROR3=1, CI=4, CI2=1, Cro=1, Cro2=1),
    ],
}


@pytest.mark.parametrize("name", NAMES)
def test_laws_are_the_intended_combinatorial_mass_action(name):
    model = Model(name)
    intended = INTENDED[name]
    assert set(model.reaction_ids) == set(intended)
    for counts in SAMPLE_STATES[name]:
        state = model.state(**counts)
        got = model.propensities(state)
        for j, rid in enumerate(model.reaction_ids):
            c, gates = intended[rid]
            want = _mass_action(model, j, c, state, gates)
            assert got[j] == pytest.approx(want, rel=1e-12, abs=1e-300), (rid, counts)


def test_every_lambda_site_has_exactly_one_unbinding_law_per_neighbour_state():
    """The 38 context rates of the deposit partition the neighbour states: in every
    operator configuration a bound site leaves by exactly one positive law."""
    model = Model("cme_phage_lambda")
    unbinding = [j for j, rid in enumerate(model.reaction_ids) if rid.startswith("Unbind")]
    for cfg in itertools.product("FRC", repeat=3):
        counts = {(("OR" if s == "F" else s + "OR") + str(i + 1)): 1 for i, s in enumerate(cfg)}
        a = model.propensities(model.state(CI2=1, Cro2=1, **counts))
        for i, s in enumerate(cfg):
            if s != "F":
                bound = model.index[f"{s}OR{i + 1}"]
                firing = [j for j in unbinding if a[j] > 0 and model.stoichiometry[j][bound] == -1]
                assert len(firing) == 1, (cfg, i)


# -- no law fires where its reaction would go negative --------------------------------
GRID = {
    "cme_toggle_switch": {"Pa": range(4), "Pb": range(4), "Da": range(2), "Db": range(2),
                          "BDa": range(2), "BDb": range(2)},
    "cme_brusselator": {"X": range(5), "Y": range(5)},
    "cme_schnakenberg": {"X": range(5), "Y": range(5)},
    "cme_phage_lambda": {"CI": range(3), "CI2": range(2), "Cro": range(3), "Cro2": range(2)},
}


def _grid_states(name, model):
    if name != "cme_phage_lambda":
        names = list(GRID[name])
        for values in itertools.product(*GRID[name].values()):
            yield model.state(**dict(zip(names, values)))
        return
    # sites: each free, CI2- or Cro2-bound, or (off the reachable set) in no state at all
    names = list(GRID[name])
    for cfg in itertools.product("FRCN", repeat=3):
        sites = {(("OR" if s == "F" else s + "OR") + str(i + 1)): 1
                 for i, s in enumerate(cfg) if s != "N"}
        for values in itertools.product(*GRID[name].values()):
            yield model.state(**sites, **dict(zip(names, values)))


@pytest.mark.parametrize("name", NAMES)
def test_no_law_is_positive_where_its_reaction_would_make_a_count_negative(name):
    model = Model(name)
    checked = 0
    for state in _grid_states(name, model):
        a = model.propensities(state)
        for j, aj in enumerate(a):
            goes_negative = (np.asarray(state) + model.stoichiometry[j] < 0).any()
            assert aj >= 0, (model.reaction_ids[j], state)
            if goes_negative:
                assert aj == 0, (model.reaction_ids[j], state)
                checked += 1
    assert checked > 0  # the grid does reach the edges


# -- state counts ----------------------------------------------------------------------
SMALL_BOUNDS = {
    "cme_toggle_switch": [{"Pa": 2, "Pb": 2}, {"Pa": 3, "Pb": 5}, {"Pa": 6, "Pb": 2}],
    "cme_brusselator": [{"X": 2, "Y": 2}, {"X": 4, "Y": 7}, {"X": 9, "Y": 3}],
    "cme_schnakenberg": [{"X": 2, "Y": 2}, {"X": 5, "Y": 3}, {"X": 3, "Y": 8}],
    "cme_phage_lambda": [{"CI": 2, "CI2": 2, "Cro": 2, "Cro2": 2},
                         {"CI": 4, "CI2": 3, "Cro": 3, "Cro2": 2},
                         {"CI": 2, "CI2": 5, "Cro": 3, "Cro2": 4},
                         {"CI": 5, "CI2": 2, "Cro": 4, "Cro2": 3}],
}


def _small_start(model, bounds):
    """The model's initial state where it fits the small bounds, else with the bounded
    species at zero (the suggested bounds hold the model's own initial state)."""
    return tuple(0 if sid in bounds and v > bounds[sid] else v
                 for sid, v in zip(model.ids, model.x0))


@pytest.mark.parametrize("name", NAMES)
def test_small_bound_enumeration_matches_the_state_count_formula(name):
    model = Model(name)
    for bounds in SMALL_BOUNDS[name]:
        states = reachable(model, _small_start(model, bounds), bounds)
        assert len(states) == BUILD.STATE_COUNT[name](bounds), bounds


@pytest.mark.parametrize("name", NAMES)
def test_reachable_set_does_not_depend_on_where_in_it_one_starts(name):
    """The formulas count the set reachable from the model's initial state; the
    enumerations start elsewhere inside it. From any state of the set the same set is
    reached (it is one communicating class), so they count the same set."""
    model = Model(name)
    bounds = SMALL_BOUNDS[name][1]
    states = sorted(reachable(model, _small_start(model, bounds), bounds))
    for other in (states[0], states[len(states) // 2], states[-1]):
        assert reachable(model, other, bounds) == set(states)


def _quoted_sizes(name):
    """(bounds, state count) pairs as the model's notes state them."""
    notes = libsbml.readSBMLFromFile(str(MODELS / f"{name}.xml")).getModel().getNotesString()
    out = []
    for spec, count in re.findall(r"bounds ([A-Za-z0-9_=, ]+): (\d+) states", notes):
        bounds = {k: int(v) for k, v in (item.split("=") for item in spec.split(", "))}
        out.append((bounds, int(count)))
    return out


@pytest.mark.parametrize("name", NAMES)
def test_notes_quote_the_counts_of_the_suggested_bounds_and_the_initial_state_fits(name):
    model = Model(name)
    sizes = _quoted_sizes(name)
    assert [b for b, _ in sizes] == list(BUILD.BOUNDS[name])
    counts = [n for _, n in sizes]
    for bounds, count in sizes:
        assert count == BUILD.STATE_COUNT[name](bounds)
        for sid, bound in bounds.items():
            assert 0 <= model.x0[model.index[sid]] <= bound
    # one set of the size of Maggioni et al.'s Table I and one near 1e8
    assert any(3e5 <= n <= 1e7 for n in counts)
    assert any(0.9e8 <= n <= 1.3e8 for n in counts)


def test_toggle_switch_count_has_the_four_corner_states_missing():
    """An independent check of one closed form: the four gene configurations over the
    whole (Pa, Pb) box, less exactly the both-bound states with Pa > Na-2 and Pb > Nb-2."""
    model = Model("cme_toggle_switch")
    bounds = {"Pa": 4, "Pb": 3}
    states = reachable(model, model.x0, bounds)
    i = model.index
    both_bound = {(s[i["Pa"]], s[i["Pb"]]) for s in states if s[i["BDa"]] and s[i["BDb"]]}
    missing = [(pa, pb) for pa in range(5) for pb in range(4) if (pa, pb) not in both_bound]
    assert missing == [(3, 2), (3, 3), (4, 2), (4, 3)]
    for gene_a, gene_b in ((1, 1), (1, 0), (0, 1)):  # the other three configurations: whole
        assert sum(1 for s in states if (s[i["Da"]], s[i["Db"]]) == (gene_a, gene_b)) == 20
