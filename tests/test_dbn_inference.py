"""Factored-frontier forward inference on DbnResult (sbmlgpu.results.dbn_inference) and the
inferred-vs-counted error it reports."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from sbmlgpu.results.dbn_inference import infer

from .dbn_helpers import count, random_network, random_walk_bins, result_of, sparse_copy


def test_inference_is_exact_when_every_variable_depends_only_on_itself():
    # each marginal then evolves by its own empirical transition matrix, which maps the
    # counted marginal at s onto the counted marginal at s + 1 exactly
    variables = ("a", "b", "c", "d")
    records = random_walk_bins(np.random.default_rng(11), 300, 6, 4, 5)
    parents = {v: (v,) for v in variables}
    result = result_of(variables, parents, 5, *count(records, variables, parents, 5)).infer()
    np.testing.assert_allclose(result.inferred, result.counted, rtol=0, atol=1e-12)
    assert not result.unvisited_mass.any()  # unvisited configurations have no mass here
    error = result.inference_error()
    assert error["max"] <= 1e-12 and error["undefined"] == 0


def two_variables(x_counts, y_counts, counted0):
    """x with parents (x, y), y with parent y; K = 2, one transition."""
    counts = {"x": np.array([x_counts]), "y": np.array([y_counts])}
    counted = np.array([counted0, [[0.5, 0.5], [0.5, 0.5]]])
    return result_of(("x", "y"), {"x": ("x", "y"), "y": ("y",)}, 2, counts, counted)


def test_a_hand_computed_step_of_two_variables():
    # rows of x's table: (x, y) = 00, 01, 10, 11 -> P(x') = .75/.25, .5/.5, .5/.5, .25/.75
    # masses from m(x) = (.25, .75), m(y) = (.5, .5): .125, .125, .375, .375
    # P(x' = 0) = .125*.75 + .125*.5 + .375*.5 + .375*.25 = .4375
    # P(y' = 0) = .5*.5 + .5*.25 = .375
    result = two_variables([[3, 1], [1, 1], [1, 1], [1, 3]], [[2, 2], [1, 3]],
                           [[0.25, 0.75], [0.5, 0.5]]).infer()
    np.testing.assert_allclose(result.inferred[1], [[0.4375, 0.5625], [0.375, 0.625]],
                               rtol=0, atol=1e-15)
    np.testing.assert_array_equal(result.unvisited_mass, [[0.0, 0.0]])
    np.testing.assert_array_equal(result.inferred[0], result.counted[0])


def test_mass_on_unvisited_configurations_is_reported_and_the_rest_renormalised():
    # as above but (x, y) = 11 never visited: its mass .375 is reported, and the visited
    # sum (.34375, .28125) is divided by .625
    result = two_variables([[3, 1], [1, 1], [1, 1], [0, 0]], [[2, 2], [1, 3]],
                           [[0.25, 0.75], [0.5, 0.5]]).infer()
    np.testing.assert_allclose(result.unvisited_mass, [[0.375, 0.0]], rtol=0, atol=1e-15)
    np.testing.assert_allclose(result.inferred[1, 0], [0.55, 0.45], rtol=0, atol=1e-15)
    np.testing.assert_allclose(result.inferred[1].sum(axis=1), 1.0)


def test_no_visited_mass_gives_nan_that_stays_visible_downstream():
    # y is always in bin 0, but x's table only has rows with y = 1: nothing to go on
    variables = ("x", "y", "z")
    parents = {"x": ("x", "y"), "y": ("y",), "z": ("x", "z")}
    counts = {"x": np.zeros((2, 4, 2), int), "y": np.zeros((2, 2, 2), int),
              "z": np.ones((2, 4, 2), int)}
    counts["x"][:, 1] = [2, 1]
    counts["x"][:, 3] = [1, 2]
    counts["y"][:, 0, 0] = 5
    counted = np.tile([[0.5, 0.5], [1.0, 0.0], [0.5, 0.5]], (3, 1, 1))
    dense = result_of(variables, parents, 2, counts, counted)
    for result in (dense, sparse_copy(dense)):
        inferred, unvisited = infer(result)
        assert np.isnan(inferred[1:, 0]).all() and np.isnan(inferred[2, 2]).all()
        assert unvisited[0, 0] == 1.0 and unvisited[0, 2] == 0.0
        assert np.isnan(unvisited[1, 0]) and np.isnan(unvisited[1, 2])  # parents unknown
        np.testing.assert_allclose(inferred[1:, 1], [[1, 0], [1, 0]])  # y is unaffected
        error = result.inference_error()
        assert error["per_variable"]["x"]["undefined"] == 2
        assert np.isnan(error["per_variable"]["x"]["mean"])
        assert error["per_variable"]["y"] == {"mean": 0.0, "max": 0.0, "worst_slice": 1,
                                              "undefined": 0}
        assert error["undefined"] == 3


def test_dense_and_sparse_counts_give_the_same_inference():
    dense = random_network(np.random.default_rng(21), variables=("a", "b", "c", "d"),
                           bins=4, slices=5, trajectories=150, max_parents=3)
    assert any(len(dense.unvisited(v, s)) for v in dense.variables for s in range(5))
    for sparse in (sparse_copy(dense), sparse_copy(dense, ["b", "d"])):
        got, want = infer(sparse), infer(dense)
        np.testing.assert_allclose(got[0], want[0], rtol=0, atol=1e-12)
        np.testing.assert_allclose(got[1], want[1], rtol=0, atol=1e-12)


def brute_force(result):
    """Factored frontier written out: every parent configuration by itertools.product."""
    k, index = result.bins, {v: i for i, v in enumerate(result.variables)}
    marginals = [result.counted[0].copy()]
    for s in range(result.slices):
        now, nxt = marginals[-1], np.zeros_like(marginals[-1])
        for v, var in enumerate(result.variables):
            table = result.counts[var][s]
            acc, visited = np.zeros(k), 0.0
            for row, config in enumerate(itertools.product(range(k),
                                                           repeat=len(result.parents[var]))):
                mass = 1.0
                for parent, b in zip(result.parents[var], config):
                    mass *= now[index[parent], b]
                if table[row].sum() > 0:
                    acc += mass * table[row] / table[row].sum()
                    visited += mass
            nxt[v] = acc / visited
        marginals.append(nxt)
    return np.array(marginals)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_inference_equals_an_enumeration_of_every_configuration(seed):
    rng = np.random.default_rng(seed)
    variables, k, slices = ("a", "b", "c"), 3, 4
    parents = {"a": ("a", "c"), "b": ("a", "b", "c"), "c": ("b", "c")}
    counts = {}
    for var in variables:
        table = rng.integers(0, 6, (slices, k ** len(parents[var]), k))
        table[rng.random(table.shape[:2]) < 0.2] = 0  # some configurations unvisited
        counts[var] = table
    counted = rng.dirichlet(np.ones(k), (slices + 1, 3))
    result = result_of(variables, parents, k, counts, counted)
    inferred, unvisited = infer(result)
    np.testing.assert_allclose(inferred, brute_force(result), rtol=0, atol=1e-12)
    assert (unvisited >= 0).all() and (unvisited < 1).all() and unvisited.any()


def test_inference_error_is_the_total_variation_over_later_slices():
    result = random_network(np.random.default_rng(4), slices=4)
    assert result.inferred is None
    error = result.inference_error()
    assert result.inferred is None  # reported without storing
    result.infer()
    tv = 0.5 * np.abs(result.inferred - result.counted).sum(axis=2)
    np.testing.assert_allclose(error["total_variation"], tv)
    assert error["total_variation"][0].max() == 0.0  # slice 0 is the counted marginal
    for v, var in enumerate(result.variables):
        figures = error["per_variable"][var]
        assert figures["mean"] == pytest.approx(tv[1:, v].mean())
        assert figures["max"] == pytest.approx(tv[1:, v].max())
        assert tv[figures["worst_slice"], v] == figures["max"]
    assert error["mean"] == pytest.approx(tv[1:].mean())
    assert error["max"] == pytest.approx(tv[1:].max()) and error["max"] > 0
