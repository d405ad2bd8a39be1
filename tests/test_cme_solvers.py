"""The CME solvers (plugins/cme/solvers.py) and the aggregation hierarchy on the CPU
engine, on generators built here directly (the enumeration has its own tests)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sps
from scipy.sparse.linalg import spsolve
from scipy.stats import poisson

from sbmlgpu.plugins.cme.aggregation import Hierarchy
from sbmlgpu.plugins.cme.cpu_engine import CpuEngine, segment_sums
from sbmlgpu.plugins.cme.solvers import (ConvergenceError, SolverSettings,
                                         coarsest_solution, solve)


def split(a: sps.spmatrix):
    a = sps.csr_matrix(a)
    d = a.diagonal()
    o = (a - sps.diags(d)).tocsr()
    o.eliminate_zeros()
    return o, d


def birth_death(k: float, g: float, n_max: int) -> sps.csr_matrix:
    """0 -> X at rate k, X -> 0 at rate g*x, on 0..n_max (births at n_max dropped)."""
    x = np.arange(n_max + 1)
    up = np.where(x < n_max, k, 0.0)
    down = g * x
    a = sps.diags([up[:-1], down[1:]], [-1, 1], shape=(n_max + 1,) * 2).tolil()
    a.setdiag(-(up + down))
    return a.tocsr()


def lattice_toggle(b: int, a: float = 40.0, k: float = 100.0) -> sps.csr_matrix:
    """A bistable two-gene switch on {0..b}^2 (x produced at a/(1+y^2/k), degraded
    at x; y likewise): Jacobi creeps here, the slow mode being the switching."""
    xs, ys = (v.ravel() for v in np.meshgrid(np.arange(b + 1), np.arange(b + 1),
                                             indexing="ij"))
    n = len(xs)
    rows, cols, vals = [], [], []
    for rate, dx, dy in ((a / (1 + ys ** 2 / k), 1, 0), (xs * 1.0, -1, 0),
                         (a / (1 + xs ** 2 / k), 0, 1), (ys * 1.0, 0, -1)):
        tx, ty = xs + dx, ys + dy
        ok = (tx >= 0) & (tx <= b) & (ty >= 0) & (ty <= b) & (rate > 0)
        j = np.nonzero(ok)[0]
        rows += [tx[ok] * (b + 1) + ty[ok], j]
        cols += [j, j]
        vals += [rate[ok], -rate[ok]]
    return sps.csr_matrix((np.concatenate(vals), (np.concatenate(rows),
                                                  np.concatenate(cols))), shape=(n, n))


def dense_stationary(a: np.ndarray) -> np.ndarray:
    m = np.array(a, dtype=float)
    m[-1, :] = 1.0
    b = np.zeros(len(m))
    b[-1] = 1.0
    return np.linalg.solve(m, b)


@pytest.mark.parametrize("solver", ["jacobi", "aggregation", "auto", "idr"])
def test_birth_death_matches_poisson(solver):
    k, g, n_max = 10.0, 1.0, 80
    o, d = split(birth_death(k, g, n_max))
    engine = CpuEngine(o, d, coarsest=8)
    s = solve(engine, np.full(n_max + 1, 1 / (n_max + 1)),
              SolverSettings(solver=solver, tol=1e-12))
    exact = poisson.pmf(np.arange(n_max + 1), k / g)
    exact /= exact.sum()  # reflecting truncation keeps detailed balance: renormalised
    assert s.converged and s.residual <= 1e-12
    assert np.abs(engine.host(s.p) - exact).sum() <= 1e-6


@pytest.mark.parametrize("solver", ["aggregation", "idr"])
def test_random_small_networks_match_a_dense_solve(solver):
    rng = np.random.default_rng(7)
    for n in (5, 17, 60, 300):
        mask = rng.random((n, n)) < min(1.0, 6.0 / n)
        rates = np.where(mask, rng.exponential(size=(n, n)), 0.0)
        np.fill_diagonal(rates, 0.0)
        ring = np.roll(np.eye(n), 1, axis=0) * 0.5  # irreducible
        a = rates + ring
        np.fill_diagonal(a, -a.sum(axis=0))
        o, d = split(sps.csr_matrix(a))
        s = solve(CpuEngine(o, d, aggregate=3, coarsest=4), np.full(n, 1 / n),
                  SolverSettings(solver=solver, tol=1e-14, max_cycles=2000))
        assert np.abs(s.p - dense_stationary(a)).max() <= 1e-10, n


def test_coarse_level_is_the_aggregated_chain():
    a = lattice_toggle(14)
    o, d = split(a)
    n = a.shape[0]
    levels = CpuEngine(o, d, aggregate=4, coarsest=16).levels()
    p = np.random.default_rng(1).random(n)
    pc = levels[0].coarsen(p)
    agg = sps.csr_matrix((np.ones(n), (np.arange(n), np.arange(n) // 4)))
    expected = agg.T @ a @ sps.diags(p) @ agg @ sps.diags(1 / (agg.T @ p))
    assert np.allclose(pc, agg.T @ p, rtol=1e-14)
    assert np.abs(levels[1].dense() - expected.toarray()).max() <= 1e-12 * abs(a).max()
    assert np.abs(levels[1].dense().sum(axis=0)).max() <= 1e-10 * abs(a).max()


def test_segment_sums_do_not_cancel():
    v = np.array([1e20, -1e20, 1e-30, 2e-30, 5.0])
    out = segment_sums(v, np.array([0, 2, 2, 4, 5]))
    assert out[:2].tolist() == [0.0, 0.0] and out[3] == 5.0
    assert math.isclose(out[2], 3e-30, rel_tol=1e-15)


def test_hierarchy_levels_shrink_to_the_coarsest():
    o, _ = split(lattice_toggle(30))
    h = Hierarchy.build(o.indptr, o.indices, o.shape[0], aggregate=4, coarsest=50)
    assert h.sizes == (961, 241, 61, 16)


def test_undamped_jacobi_oscillates_on_a_bipartite_chain():
    # every reaction changes x + y by one: the chain is bipartite, so plain Jacobi's
    # iteration matrix has the eigenvalue -1 and the default damping is what converges
    o, d = split(lattice_toggle(40))
    n = o.shape[0]
    with pytest.raises(ConvergenceError, match="stagnation"):
        solve(CpuEngine(o, d), np.full(n, 1 / n),
              SolverSettings(solver="jacobi", tol=1e-8, jacobi_omega=1.0, stagnation=20))
    assert solve(CpuEngine(o, d), np.full(n, 1 / n),
                 SolverSettings(solver="jacobi", tol=1e-8)).converged


@pytest.mark.parametrize("solver", ["jacobi", "aggregation", "auto", "idr"])
def test_bistable_switch_matches_a_dense_solve(solver):
    o, d = split(lattice_toggle(50))
    n = o.shape[0]
    exact = dense_stationary((o + sps.diags(d)).toarray())
    s = solve(CpuEngine(o, d), np.full(n, 1 / n), SolverSettings(solver=solver, tol=1e-11))
    assert s.residual <= 1e-11 and s.solver.startswith(solver if solver != "auto" else "idr")
    assert np.abs(s.p - exact).sum() <= 1e-6


def test_auto_runs_idr_and_hands_a_stopped_idr_over_to_jacobi(monkeypatch):
    import sbmlgpu.plugins.cme.solvers as solvers

    o, d = split(lattice_toggle(50))
    n = o.shape[0]
    exact = dense_stationary((o + sps.diags(d)).toarray())
    s = solve(CpuEngine(o, d), np.full(n, 1 / n), SolverSettings(solver="auto", tol=1e-11))
    assert s.solver == "idr" and s.converged
    # IDR stopping short (as on a breakdown) leaves Jacobi to finish, from IDR's best
    # iterate when that is a distribution, else from the start
    real = solvers._idr

    def stopped_early(run, p):
        run.settings.max_sweeps, limit = 64, run.settings.max_sweeps
        best, _ = real(run, p)
        run.settings.max_sweeps = limit
        return best, False

    monkeypatch.setattr(solvers, "_idr", stopped_early)
    s = solve(CpuEngine(o, d), np.full(n, 1 / n), SolverSettings(solver="auto", tol=1e-11))
    assert s.solver == "idr>jacobi" and s.converged and s.residual <= 1e-11
    assert np.abs(s.p - exact).sum() <= 1e-6


def test_unconverged_is_an_error_with_the_partial_solution():
    o, d = split(birth_death(10.0, 1.0, 60))
    with pytest.raises(ConvergenceError, match=r"iteration limit.*residual") as err:
        solve(CpuEngine(o, d), np.full(61, 1 / 61),
              SolverSettings(solver="jacobi", tol=1e-15, max_sweeps=300, check_every=100))
    assert err.value.solution.sweeps == 300 and not err.value.solution.converged
    assert math.isclose(err.value.solution.p.sum(), 1.0)


def test_absorbing_state_takes_a_uniformised_step():
    # 0 <- 1 <- 2: state 0 has no way out; the stationary law is all mass on it
    a = np.array([[0.0, 1.0, 0.0], [0.0, -1.0, 2.0], [0.0, 0.0, -2.0]])
    o, d = split(sps.csr_matrix(a))
    s = solve(CpuEngine(o, d), np.full(3, 1 / 3),
              SolverSettings(solver="jacobi", tol=1e-12, check_every=10))
    assert np.allclose(s.p, [1.0, 0.0, 0.0], atol=1e-12)


def test_coarsest_solution_of_a_reducible_chain_is_a_distribution():
    q = coarsest_solution(np.zeros((3, 3)))
    assert np.all(q >= 0) and math.isclose(q.sum(), 1.0)


@pytest.fixture(scope="module")
def schnakenberg():
    """The shipped Schnakenberg model at bounds 150: a limit cycle (a chain far from
    reversible), where the aggregation V-cycle is not a contraction."""
    from pathlib import Path

    import sbmlgpu
    from sbmlgpu.plugins.cme.matrix import diagonal, offdiag_csr
    from sbmlgpu.plugins.cme.model import build
    from sbmlgpu.plugins.cme.statespace import enumerate_states, propensities_host

    path = Path(__file__).resolve().parents[1] / "sbml_models" / "cme_schnakenberg.xml"
    model = build(sbmlgpu.load(path))
    space = enumerate_states(model, {"X": 150, "Y": 150})
    prop = propensities_host(model, space)
    return offdiag_csr(space, prop), diagonal(space, prop)


def test_diverging_aggregation_is_reported_and_auto_solves_it(schnakenberg):
    o, d = schnakenberg
    n = o.shape[0]
    a = (o + sps.diags(d)).tolil()
    a[n - 1, :] = 1.0  # A p = 0 with sum p = 1 in place of the last equation
    exact = spsolve(a.tocsc(), np.r_[np.zeros(n - 1), 1.0])
    with pytest.raises(ConvergenceError, match="divergence of the aggregation cycles"):
        solve(CpuEngine(o, d), np.full(n, 1 / n), SolverSettings(solver="aggregation"))
    s = solve(CpuEngine(o, d), np.full(n, 1 / n), SolverSettings(solver="auto", tol=1e-12))
    assert s.converged and s.solver == "idr"
    assert np.abs(s.p - exact).sum() <= 1e-6


def test_anderson_acceleration_takes_fewer_cycles_to_the_same_answer():
    o, d = split(lattice_toggle(50))
    n = o.shape[0]
    exact = dense_stationary((o + sps.diags(d)).toarray())
    plain = solve(CpuEngine(o, d), np.full(n, 1 / n),
                  SolverSettings(solver="aggregation", tol=1e-11))
    fast = solve(CpuEngine(o, d), np.full(n, 1 / n),
                 SolverSettings(solver="aggregation", tol=1e-11, accelerate=4))
    assert fast.converged and fast.cycles < plain.cycles / 2  # measured: 186 -> 55
    assert np.abs(fast.p - exact).sum() <= 1e-6 and np.all(fast.p >= 0)


def test_idr_converges_on_the_limit_cycle_with_fewer_sweeps_than_jacobi(schnakenberg):
    o, d = schnakenberg
    n = o.shape[0]
    a = (o + sps.diags(d)).tolil()
    a[n - 1, :] = 1.0
    exact = spsolve(a.tocsc(), np.r_[np.zeros(n - 1), 1.0])
    # residual 1e-11 still leaves ||p - p*||_1 ~ 1e-6 on this chain (docs/cme.md)
    jacobi = solve(CpuEngine(o, d), np.full(n, 1 / n), SolverSettings(solver="jacobi", tol=1e-12))
    idr = solve(CpuEngine(o, d), np.full(n, 1 / n), SolverSettings(solver="idr", tol=1e-12))
    assert idr.converged and idr.solver == "idr" and idr.cycles == 0
    assert idr.sweeps < jacobi.sweeps / 2  # measured: 1,968 against 9,000
    assert np.abs(idr.p - exact).sum() <= 1e-6
    assert idr.p.min() >= -1e-6 * idr.p.max()


def test_a_slow_mode_with_a_small_residual_is_not_a_distribution():
    # p* + c v, v the switch's slow mode (zero sum, A v = lambda v with lambda tiny):
    # its normalised residual is about |lambda| / ||A||, yet it is no distribution
    from sbmlgpu.plugins.cme.solvers import _Run

    o, d = split(lattice_toggle(30))
    a = (o + sps.diags(d)).toarray()
    values, vectors = np.linalg.eig(a)
    order = np.argsort(np.abs(values))
    exact = np.real(vectors[:, order[0]])
    exact /= exact.sum()
    slow = np.real(vectors[:, order[1]])
    run = _Run(CpuEngine(o, d), SolverSettings(tol=1e-8), None)
    assert run.check(exact.copy(), "test", 0) <= 1e-10 and run.distribution
    mixed = exact + 100 * slow / np.abs(slow).max() * exact.max()
    uniform = np.full(len(exact), 1.0 / len(exact))
    assert run.check(mixed, "test", 1) < 1e-3 * run.check(uniform, "test", 1)
    assert run.check(mixed, "test", 1) and not run.distribution
    assert run.check(-exact, "test", 2) <= 1e-10 and not run.distribution  # sum < 0


def test_idr_takes_fewer_shadow_vectors_than_states():
    # s random vectors of an n-state space are independent only for s < n
    o, d = split(birth_death(2.0, 1.0, 1))
    s = solve(CpuEngine(o, d), np.full(2, 0.5), SolverSettings(solver="idr", tol=1e-12,
                                                               idr_shadow=8))
    assert s.converged and np.allclose(s.p, [1 / 3, 2 / 3], atol=1e-10)


def test_idr_stops_before_passing_max_sweeps():
    o, d = split(lattice_toggle(30))
    n = o.shape[0]
    with pytest.raises(ConvergenceError, match="iteration limit") as err:
        solve(CpuEngine(o, d), np.full(n, 1 / n),
              SolverSettings(solver="idr", tol=1e-15, max_sweeps=100, idr_sweeps=8))
    assert 0 < err.value.solution.sweeps <= 100


def test_a_passing_iterate_that_is_no_distribution_stops_the_bar_short():
    from sbmlgpu.plugins.cme.solvers import NOT_AN_ANSWER, _Run

    o, d = split(lattice_toggle(30))
    n = o.shape[0]
    shown = []
    run = _Run(CpuEngine(o, d), SolverSettings(tol=1e-2), lambda *a: shown.append(a[2]))
    exact = solve(CpuEngine(o, d), np.full(n, 1 / n), SolverSettings(tol=1e-12)).p
    tilted = exact * (1 + 1e-3 * np.sign(np.arange(n) - n / 2))  # a distribution
    assert run.check(tilted.copy(), "test", 0) <= 1e-2 and run.distribution
    assert run.check(-tilted, "test", 1) <= 1e-2 and not run.distribution
    assert shown[0] <= 1e-2 and shown[1] == pytest.approx(NOT_AN_ANSWER * 1e-2)


def test_idr_keeps_its_best_distribution_and_auto_restarts_jacobi_from_it(monkeypatch):
    """IDR records the best of its iterates that were distributions; when it stops
    short, auto's Jacobi starts there, not from p0, even when IDR's best-residual
    iterate is not a distribution."""
    from sbmlgpu.plugins.cme import solvers

    o, d = split(lattice_toggle(30))
    n = o.shape[0]
    run = solvers._Run(CpuEngine(o, d), SolverSettings(tol=1e-15, max_sweeps=400), None)
    p0 = np.full(n, 1 / n)
    run.check(p0.copy(), "start", 0)
    best, done = solvers._idr(run, p0.copy())
    assert not done and run.best_distribution is not None
    assert run.check(run.best_distribution.copy(), "test", 0) < 1e-2 and run.distribution

    exact = solve(CpuEngine(o, d), p0, SolverSettings(tol=1e-13)).p
    near = exact * (1 + 1e-7 * np.cos(np.arange(n)))  # a distribution near the answer

    def idr_stopping_short(run, p):
        run.phases.append("idr")
        run.best_distribution = near / near.sum()
        run.stop_reason = "a test's breakdown"
        return -p, False  # its best-residual iterate: not a distribution

    monkeypatch.setattr(solvers, "_idr", idr_stopping_short)
    s = solve(CpuEngine(o, d), p0, SolverSettings(tol=1e-8))
    from_start = solve(CpuEngine(o, d), p0, SolverSettings(tol=1e-8, solver="jacobi"))
    assert s.converged and s.solver == "idr>jacobi"
    assert s.sweeps < from_start.sweeps / 4
