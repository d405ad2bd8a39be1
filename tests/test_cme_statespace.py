"""The compiled state-space enumeration (plugins/cme/statespace.py,
kernels/statespace.cpp) and the bounds it uses (plugins/cme/conservation.py)."""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest
import sympy as sp

from sbmlgpu.errors import OptionError
from sbmlgpu.ir import sym
from sbmlgpu.plugins.cme import model
from sbmlgpu.plugins.cme.conservation import GIVEN
from sbmlgpu.plugins.cme.statespace import PropensityError, enumerate_states

from .test_cme_model import (birth_death, dimerisation, isomerisation, needs_cxx, network,
                             reaction, three_species)

pytestmark = needs_cxx


def check_consistent(space) -> None:
    """sources is the inverse of targets, reaction by reaction; every edge moves by
    the reaction's stoichiometry and stays inside the bounds."""
    n = space.n
    assert space.states.shape == (len(space.species), n) and space.states.dtype == np.int32
    for arr in (space.sources, space.targets):
        assert arr.shape == (len(space.reaction_ids), n) and arr.dtype == np.int32
    for r in range(len(space.reaction_ids)):
        has_source = space.sources[r] >= 0
        assert np.array_equal(space.targets[r, space.sources[r, has_source]],
                              np.flatnonzero(has_source))
        has_target = space.targets[r] >= 0
        assert np.array_equal(space.sources[r, space.targets[r, has_target]],
                              np.flatnonzero(has_target))
    assert len({tuple(c) for c in space.states.T}) == n, "a state is listed twice"
    high = np.array([space.bounds[s] for s in space.species])[:, None]
    assert (space.states >= 0).all() and (space.states <= high).all()


# -- the brief's cases ----------------------------------------------------------------
@pytest.mark.parametrize("lookup", ["direct", "hash"])
def test_birth_death_is_a_chain_in_order_with_the_boundary_at_the_bound(lookup):
    bound = 30
    m = model.build(birth_death())
    space = enumerate_states(m, {"X": bound}, {}, lookup=lookup)
    assert space.n == bound + 1
    assert space.states.tolist() == [list(range(bound + 1))]  # depth first: 0, 1, ..., N
    assert np.flatnonzero(space.boundary).tolist() == [bound]
    birth, death = space.targets
    assert birth.tolist() == [*range(1, bound + 1), -1]  # the birth at N is dropped
    assert death.tolist() == [-1, *range(bound)]  # no death at 0 (propensity 0)
    assert space.bounds == {"X": bound} and space.bound_origin == {"X": GIVEN}
    check_consistent(space)


def test_isomerisation_is_bounded_by_its_conservation_law():
    n = 12
    m = model.build(isomerisation(n))
    space = enumerate_states(m, {}, {})
    assert space.n == n + 1
    assert space.bounds == {"A": n, "B": n}
    assert space.bound_origin == {"A": f"A + B = {n}", "B": f"A + B = {n}"}
    assert (space.states.sum(axis=0) == n).all()
    assert not space.boundary.any()
    # depth first: a reversible pair's states are neighbours
    for r in range(2):
        j = np.flatnonzero(space.targets[r] >= 0)
        assert (np.abs(space.targets[r, j] - j) == 1).all()
    check_consistent(space)


def test_dimerisation_law_has_no_edge_at_one_molecule():
    m = model.build(dimerisation(x0=5))
    space = enumerate_states(m, {}, {})
    assert space.bounds == {"X": 5, "Y": 2}  # X + 2*Y = 5
    assert space.bound_origin["Y"] == "X + 2*Y = 5"
    assert sorted(map(tuple, space.states.T)) == [(1, 2), (3, 1), (5, 0)]
    at_one = [i for i in range(space.n) if space.states[0, i] == 1][0]
    assert space.targets[0, at_one] == -1  # c*X*(X-1)/2 = 0 at X = 1: no edge ...
    assert not space.boundary[at_one]  # ... and no boundary either
    check_consistent(space)


def test_a_law_that_reactions_only_lower_bounds_too():
    """S1 -> 0, 2 S1 <=> S2, S2 -> S3: nothing is conserved, but no reaction raises
    S1 + 2*S2 + 2*S3, so it bounds every species (and nothing leaves the bounds)."""
    S1, S2 = sym("S1"), sym("S2")
    net = network({"S1": 9.0, "S2": 0.0, "S3": 0.0}, {},
                  [reaction("decay", ["S1"], [], 0.1 * S1),
                   reaction("dimerise", ["S1"], ["S2"], 0.2 * S1 * (S1 - 1) / 2,
                            stoich={"S1": 2}),
                   reaction("split", ["S2"], ["S1"], 0.3 * S2, stoich={"S1": 2}),
                   reaction("convert", ["S2"], ["S3"], 0.4 * S2)])
    space = enumerate_states(model.build(net), {}, {})
    assert space.bounds == {"S1": 9, "S2": 4, "S3": 4}
    assert space.bound_origin["S1"] == "S1 + 2*S2 <= 9"
    assert space.bound_origin["S3"] == "S1 + 2*S2 + 2*S3 <= 9"
    assert not space.boundary.any()
    weights = np.array([1, 2, 2])
    assert (weights @ space.states <= 9).all()
    check_consistent(space)


def test_a_species_nothing_bounds_needs_a_bound_and_is_named():
    m = model.build(three_species())
    with pytest.raises(OptionError, match="bound") as err:
        enumerate_states(m, {"A": 4}, {})
    assert "B" in str(err.value) and "--bound" in str(err.value)
    assert "A" not in str(err.value).split("bounds", 1)[1].split(":", 1)[0]


def test_a_law_positive_where_the_count_would_go_negative_names_reaction_and_state():
    net = network({"X": 2.0}, {"k": 1.0, "g": 0.5},
                  [reaction("make", [], ["X"], sym("k")),
                   reaction("leak", ["X"], [], sym("g"))])  # should be g*X
    with pytest.raises(PropensityError, match="leak") as err:
        enumerate_states(model.build(net), {"X": 5}, {})
    assert err.value.reaction == "leak" and err.value.state == {"X": 0}
    assert "X=0" in str(err.value)


def test_a_negative_propensity_is_named():
    net = network({"X": 0.0}, {"k": 1.0},
                  [reaction("make", [], ["X"], sym("k") * (sym("X") - 2)),
                   reaction("loss", ["X"], [], sym("X"))])
    with pytest.raises(PropensityError, match="make") as err:
        enumerate_states(model.build(net), {"X": 5}, {})
    assert "negative" in str(err.value) and err.value.state == {"X": 0}


def test_a_propensity_that_is_not_finite_is_named():
    net = network({"X": 0.0}, {"k": 1.0},
                  [reaction("make", [], ["X"], sym("k") / sym("X")),
                   reaction("loss", ["X"], [], sym("X"))])
    with pytest.raises(PropensityError, match="make") as err:
        enumerate_states(model.build(net), {"X": 5}, {})
    assert "finite" in str(err.value)


# -- against a pure-Python breadth-first search ---------------------------------------
def python_reachable(m, bounds: dict, x0) -> tuple[set, dict, set]:
    """(states, {(state, reaction): target state}, boundary states) by BFS."""
    laws = sp.lambdify(m.x, list(m.propensities), "numpy")
    high = np.array([bounds[s] for s in m.species])
    start = tuple(int(v) for v in x0)
    seen, edges, boundary = {start}, {}, set()
    queue = deque([start])
    while queue:
        x = queue.popleft()
        a = laws(*map(float, x))
        for r, delta in enumerate(m.stoichiometry):
            if a[r] <= 0 or not delta.any():
                continue
            y = tuple(int(v) for v in np.array(x) + delta)
            if (np.array(y) > high).any():
                boundary.add(x)
                continue
            edges[x, r] = y
            if y not in seen:
                seen.add(y)
                queue.append(y)
    return seen, edges, boundary


@pytest.mark.parametrize("lookup", ["direct", "hash"])
def test_three_species_match_a_python_search(lookup):
    m = model.build(three_species())
    bounds = {"A": 4, "B": 3, "C": 2}
    space = enumerate_states(m, bounds, {"A": 2, "B": 1}, lookup=lookup)
    states, edges, boundary = python_reachable(m, bounds, [2, 1, 0])
    found = [tuple(int(v) for v in c) for c in space.states.T]
    assert found[0] == (2, 1, 0)  # column 0 is the initial state
    assert set(found) == states
    assert {found[i] for i in np.flatnonzero(space.boundary)} == boundary
    ours = {(found[j], r): found[t] for r in range(m.n_reactions)
            for j, t in enumerate(space.targets[r]) if t >= 0}
    assert ours == edges
    check_consistent(space)


def test_direct_and_hash_lookups_give_the_same_space():
    m = model.build(three_species())
    bounds = {"A": 6, "B": 5, "C": 4}
    one = enumerate_states(m, bounds, {}, lookup="direct")
    two = enumerate_states(m, bounds, {}, lookup="hash")
    for name in ("states", "sources", "targets", "boundary"):
        assert np.array_equal(getattr(one, name), getattr(two, name)), name


def test_depth_first_order_of_a_grid():
    """Two independent birth-death species: index assigned at discovery, depth first,
    so every state's first unexplored neighbour gets the next index."""
    X, Y = sym("X"), sym("Y")
    net = network({"X": 0.0, "Y": 0.0}, {"k": 1.0},
                  [reaction("bx", [], ["X"], sym("k")), reaction("dx", ["X"], [], X),
                   reaction("by", [], ["Y"], sym("k")), reaction("dy", ["Y"], [], Y)])
    space = enumerate_states(model.build(net), {"X": 3, "Y": 2}, {})
    assert space.n == 12
    # births of X first up to its bound, then Y's birth, then X's death back down ...
    assert [tuple(c) for c in space.states.T[:6]] == [(0, 0), (1, 0), (2, 0), (3, 0),
                                                      (3, 1), (2, 1)]
    check_consistent(space)


# -- bad bounds, initial states and sizes ------------------------------------------------
@pytest.mark.parametrize("bounds, words", [
    ({"X": -1}, "X=-1"), ({"X": 2.5}, "X=2.5"), ({"X": "ten"}, "X='ten'"),
    ({"nope": 3}, "nope"), ({"X": 3, "E": 2}, "E"),
])
def test_bad_bounds_are_option_errors_naming_them(bounds, words):
    net = birth_death()
    from sbmlgpu import ir
    fixed = ir.Species("E", "c", initial_amount=1.0, has_only_substance_units=True,
                       boundary_condition=True)
    net = ir.Network(**{**net.__dict__, "species": net.species + (fixed,)})
    with pytest.raises(OptionError, match="bound") as err:
        enumerate_states(model.build(net), bounds, {})
    assert words in str(err.value)


def test_an_initial_state_past_a_bound_is_refused():
    with pytest.raises(OptionError, match="X starts at 9"):
        enumerate_states(model.build(birth_death(x0=9)), {"X": 5}, {})


def test_initial_overrides_move_the_start():
    space = enumerate_states(model.build(isomerisation(10)), {}, {"A": 3, "B": 4})
    assert space.n == 8 and space.bounds == {"A": 7, "B": 7}
    assert space.states[:, 0].tolist() == [3, 4]


def test_max_states_stops_before_allocating_more():
    m = model.build(birth_death())
    with pytest.raises(OptionError, match="max-states") as err:
        enumerate_states(m, {"X": 1000}, {}, max_states=100)
    text = str(err.value)
    assert "more than 100 states" in text and "reached 100" in text
    assert "GiB" in text and "memory available" in text
    assert enumerate_states(m, {"X": 99}, {}, max_states=100).n == 100  # exactly fits


def test_a_search_with_progress_reports_its_count_and_finds_the_same_space(monkeypatch, capsys):
    """Bounds far too large enumerated for minutes without a word (a bad-input audit):
    with `progress` the search runs in a thread and its count (written every 65,536
    states) is shown against the most states possible; where stderr is no terminal, as
    lines. 2**17 + 1 states: the count passes two of the writes."""
    from sbmlgpu.plugins.cme import statespace

    monkeypatch.setattr(statespace, "PROGRESS_DELAY", 0.0)
    m = model.build(birth_death())
    bound = 2**17
    shown = enumerate_states(m, {"X": bound}, {}, progress=True)
    plain = enumerate_states(m, {"X": bound}, {})
    assert shown.n == plain.n == bound + 1
    assert np.array_equal(shown.states, plain.states)
    assert np.array_equal(shown.targets, plain.targets)
    err = capsys.readouterr().err
    assert f"{bound + 1:,} of {bound + 1:,} possible states enumerated (100 %)" in err


def test_a_failed_search_with_progress_raises_as_without(monkeypatch):
    from sbmlgpu.plugins.cme import statespace

    monkeypatch.setattr(statespace, "PROGRESS_DELAY", 0.0)
    m = model.build(birth_death())
    with pytest.raises(OptionError, match="more than 1,000 states"):
        enumerate_states(m, {"X": 5000}, {}, max_states=1000, progress=True)


def test_an_error_in_the_search_thread_is_raised_in_the_caller():
    from sbmlgpu.plugins.cme import statespace

    class Broken:
        def cme_enumerate(self, *args):
            raise OSError("the library went away")

    with pytest.raises(OSError, match="went away"):
        statespace._enumerate_showing_progress(Broken(), (), np.zeros(6, np.int64), 10)


def test_an_interrupt_stops_the_search_and_leaves_no_thread(monkeypatch):
    """Ctrl-C while the search runs (here: the first progress update raises it) sets
    the stop request; the search stops at its next count, the interrupt goes on, and no
    search thread is left holding a space that nothing will free."""
    import threading

    from sbmlgpu.plugins.cme import statespace
    from sbmlgpu.schedule.progress import Progress

    monkeypatch.setattr(statespace, "PROGRESS_DELAY", 0.0)
    monkeypatch.setattr(statespace, "PROGRESS_POLL_S", 0.0005)

    def interrupt(self, items):
        raise KeyboardInterrupt

    monkeypatch.setattr(Progress, "advance", interrupt)
    m = model.build(birth_death())
    with pytest.raises(KeyboardInterrupt):
        enumerate_states(m, {"X": 2**22}, {}, progress=True)
    assert not [t for t in threading.enumerate() if t.name == "sbmlgpu-cme-enumerate"]
    monkeypatch.undo()
    assert enumerate_states(m, {"X": 10}, {}, progress=True).n == 11
