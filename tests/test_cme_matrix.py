"""The CPU assembly of the CME generator (plugins/cme/matrix.py): its structure
against a per-entry construction, its columns, and its stationary laws against the
known ones (birth-death: truncated Poisson; isomerisation: binomial)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.linalg

from sbmlgpu.ir import sym
from sbmlgpu.plugins.cme import model
from sbmlgpu.plugins.cme.matrix import diagonal, generator, offdiag_csr
from sbmlgpu.plugins.cme.statespace import enumerate_states, propensities_host

from .test_cme_model import (birth_death, isomerisation, needs_cxx, network, reaction,
                             three_species)

pytestmark = needs_cxx


def assembled(net, bounds, initial=None):
    m = model.build(net)
    space = enumerate_states(m, bounds, initial or {})
    return m, space, propensities_host(m, space)


def stationary(a: np.ndarray) -> np.ndarray:
    """The normalised null vector of a dense generator."""
    null = scipy.linalg.null_space(a)
    assert null.shape[1] == 1, "the chain must have one stationary law"
    p = null[:, 0]
    return p / p.sum()


def test_columns_of_a_sum_to_zero():
    _, space, prop = assembled(three_species(), {"A": 5, "B": 4, "C": 3})
    a = generator(space, prop)
    scale = np.abs(a).sum(axis=0).A1
    assert np.all(np.abs(a.sum(axis=0).A1) <= 1e-12 * scale)
    assert space.boundary.any(), "the test must cover dropped reactions"


def test_offdiagonal_and_diagonal_entry_by_entry():
    """Two reactions with the same jump (make1, make2): their entries are summed."""
    X = sym("X")
    net = network({"X": 0.0}, {"k1": 1.5, "k2": 0.25},
                  [reaction("make1", [], ["X"], sym("k1")),
                   reaction("make2", [], ["X"], sym("k2") * X),
                   reaction("loss", ["X"], [], 0.5 * X)])
    _, space, prop = assembled(net, {"X": 6})
    n = space.n
    expected = np.zeros((n, n))
    out = np.zeros(n)
    for r in range(prop.shape[0]):
        for j in range(n):
            i = space.targets[r, j]
            if i >= 0:
                expected[i, j] += prop[r, j]
                out[j] += prop[r, j]
            # through sources too: the contract's own definition
            src = space.sources[r, j]
            if src >= 0:
                assert space.targets[r, src] == j
    got = offdiag_csr(space, prop)
    assert got.shape == (n, n)
    np.testing.assert_array_equal(got.toarray(), expected)
    np.testing.assert_array_equal(diagonal(space, prop), -out)
    assert not np.any(got.diagonal())


def test_boundary_states_keep_dropped_rates_out_of_the_diagonal():
    _, space, prop = assembled(birth_death(k=10.0, g=1.0), {"X": 8})
    d = diagonal(space, prop)
    # X = 8: only the death (8.0) stays inside; the birth (10.0) is dropped
    assert d[8] == -8.0 and d[0] == -10.0 and d[3] == -13.0


def test_birth_death_stationary_law_is_the_truncated_poisson():
    k, g, bound = 6.0, 1.5, 30
    _, space, prop = assembled(birth_death(k=k, g=g), {"X": bound})
    p = stationary(generator(space, prop).toarray())
    lam = k / g
    poisson = np.array([math.exp(-lam) * lam**x / math.factorial(x) for x in space.states[0]])
    np.testing.assert_allclose(p, poisson / poisson.sum(), rtol=1e-9, atol=1e-14)


def test_isomerisation_stationary_law_is_binomial():
    n, k1, k2 = 15, 2.0, 3.0
    _, space, prop = assembled(isomerisation(n, k1, k2), {})
    p = stationary(generator(space, prop).toarray())
    q = k1 / (k1 + k2)
    binomial = np.array([math.comb(n, b) * q**b * (1 - q)**(n - b) for b in space.states[1]])
    np.testing.assert_allclose(p, binomial, rtol=1e-9, atol=1e-14)


def test_empty_reaction_set_gives_a_single_absorbing_state():
    net = network({"X": 3.0}, {}, [reaction("idle", ["X"], ["X"], sym("X"))])
    _, space, prop = assembled(net, {})
    assert space.n == 1 and space.bounds == {"X": 3}
    assert offdiag_csr(space, prop).nnz == 0
    assert diagonal(space, prop).tolist() == [0.0]  # zero net change: no transition


@pytest.mark.parametrize("n_rows", [1, 3])
def test_generator_is_offdiag_plus_diagonal(n_rows):
    _, space, prop = assembled(birth_death(), {"X": n_rows})
    a = generator(space, prop).toarray()
    np.testing.assert_array_equal(a - np.diag(np.diag(a)), offdiag_csr(space, prop).toarray())
    np.testing.assert_array_equal(np.diag(a), diagonal(space, prop))
