"""The host's work around the kernels of a large ensemble (issue 13), cut without
changing what is computed: the bundling plan predicts from the parameter table as it
lies (no (members x features) design matrix) and must give the order and figures of
the design-matrix prediction; a bundled batch's table columns are gathered once,
row-major, as the engine uploads them; benchmarks/ode_host_overhead.py runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sbmlgpu.errors import OptionError
from sbmlgpu.plugins.ode import bundling
from sbmlgpu.schedule import CostPredictor, bundle
from sbmlgpu.schedule.ensemble import MemberBatch

from .shared_data import MODELS

ROOT = Path(__file__).resolve().parents[1]
PETAB = MODELS / "petab-benchmark"


def _table(varied: int, n: int, seed: int) -> np.ndarray:
    return np.exp(np.random.default_rng(seed).normal(0, 2, size=(varied, n)))


def _steps(table: np.ndarray, pilot: np.ndarray, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    cost = 40 * np.abs(table[0, pilot]) ** 0.6 * rng.lognormal(0, 0.3, pilot.size)
    return cost.astype(np.int64) + 1


def _design_matrix_plan(table, pilot, steps, group=32):
    """What bundling.plan computes, the slow way: the predictor on a (members, features)
    design matrix of the columns that vary over the pilot."""
    table = np.asarray(table, dtype=float)
    sample = table[:, pilot]
    table = table[np.any(sample != sample[:, :1], axis=1)]
    features = table.T
    positive = bool(np.all(features[pilot] > 0))  # the pilot decides log features
    costs = np.maximum(np.asarray(steps, dtype=float), 1.0)
    predictor = CostPredictor(log_features=positive)
    usable = np.isfinite(features) & ((features > 0) if positive else True)
    features = np.where(usable, features, 1.0)
    predictor.fit(features[pilot], costs)
    predicted = predictor.predict(features)
    # a member with a value the fit cannot take: the pilot's largest cost
    predicted = np.where(np.isfinite(predicted) & usable.all(axis=1), predicted,
                         float(np.max(costs)))
    return predicted, bundle(predicted, group)


@pytest.mark.parametrize("log_features", [True, False])
def test_the_prediction_from_the_table_equals_the_design_matrix_one(log_features):
    table = _table(7, 5000, 1)
    pilot = bundling.pilot(5000, 300, 0)
    predictor = CostPredictor(log_features).fit(table[:, pilot].T, _steps(table, pilot, 2))
    np.testing.assert_allclose(predictor.predict_log_table(table),
                               predictor.predict_log(table.T), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(predictor.predict_log_rows(table),
                               predictor.predict_log(table.T), rtol=1e-13, atol=1e-13)
    # features as some rows of a larger table, in the order the fit used them
    wider = np.vstack([np.full((2, 5000), 3.0), table[::-1]])
    np.testing.assert_allclose(predictor.predict_log_rows(wider, range(8, 1, -1)),
                               predictor.predict_log(table.T), rtol=1e-13, atol=1e-13)


def test_a_row_prediction_marks_the_items_it_cannot_take():
    table = _table(3, 400, 3)
    predictor = CostPredictor().fit(table.T, np.arange(1, 401))
    table[1, 7], table[2, 9], table[0, 11] = 0.0, -1.0, np.nan
    predicted = predictor.predict_log_rows(table)
    assert np.flatnonzero(~np.isfinite(predicted)).tolist() == [7, 9, 11]
    with pytest.raises(OptionError, match="2 features; the fit used 3"):
        predictor.predict_log_rows(table, [0, 1])


def test_the_prediction_from_the_table_names_a_value_log_cannot_take():
    table = _table(3, 400, 3)
    predictor = CostPredictor().fit(table.T, np.arange(1, 401))
    table[1, 7] = 0.0
    with pytest.raises(OptionError, match="positive"):
        predictor.predict_log_table(table)
    with pytest.raises(OptionError, match="3 features"):
        CostPredictor().fit(table[:2].T + 1, np.arange(1, 401)).predict_log_table(table + 1)


@pytest.mark.parametrize("case", ["positive", "zeros", "not finite", "a zero outside the pilot"])
def test_the_plan_keeps_the_order_and_figures_of_the_design_matrix_plan(case):
    n = 20_000
    table = _table(12, n, 4)
    if case == "zeros":  # a column that is 0 for all: no feature (log features stay)
        table[5] = 0.0
    if case == "not finite":
        table[3, ::97] = np.nan
        table[8, ::131] = np.inf
    pilot = bundling.pilot(n, 512, 0)
    if case == "a zero outside the pilot":  # log features; those members cannot be fit
        outside = np.setdiff1d(np.arange(n), pilot)[::50]
        table[2, outside] = 0.0
    steps = _steps(table, pilot, 5)
    plan = bundling.plan(table, pilot, steps)
    predicted, permutation = _design_matrix_plan(table, pilot, steps)
    assert plan.info["log_features"] == (case != "not finite")
    assert np.array_equal(plan.permutation.order, permutation.order)
    assert plan.info["predicted_lane_efficiency_bundled"] == pytest.approx(
        bundling.lane_efficiency(predicted, 32, permutation), rel=1e-12)
    assert plan.info["r_squared"] > 0.3  # the steps follow column 0: the fit found it


def test_a_bundled_batch_gathers_its_columns_row_major():
    table = _table(6, 1000, 6)
    members = np.random.default_rng(0).permutation(1000)[:333]
    taken = MemberBatch(0, 333, members).take(table)
    assert taken.flags["C_CONTIGUOUS"]  # the engine's upload needs no second copy
    assert np.array_equal(taken, table[:, members])
    assert np.shares_memory(MemberBatch(10, 50, None).take(table), table)  # a range: a view


@pytest.mark.skipif(not (PETAB / "Fujita_SciSignal2010").is_dir(),
                    reason=f"no PEtab benchmark models in {PETAB}")
def test_the_host_overhead_benchmark_writes_its_figures(tmp_path):
    out = tmp_path / "overhead.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "ode_host_overhead.py"),
                           "--n", "3000", "--repeat", "1", "--objective",
                           "Fujita_SciSignal2010", "--time-course", "Raia_CancerResearch2011",
                           "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert [r["kind"] for r in rows] == ["objective", "time course"]
    for row in rows:
        assert row.get("missing") or (0 < row["best_s"] < 60 and len(row["runs_s"]) == 1)


def _steady_scan(sim, p, x0, result):
    """Steady states as found by scanning every member at every steady time (latest
    steady time wins): what Simulation.steady_state computed before it looked only
    at the members not found yet."""
    from sbmlgpu.petab.simulate import STEADY_ATOL, STEADY_RTOL, STEADY_TIMES

    states = result.data[:, :, [result.index(o) for o in sim.ev.output_names()]]
    x, found = np.full_like(x0, np.nan), np.zeros(x0.shape[1], bool)
    for ti in reversed(range(1, len(STEADY_TIMES))):
        at = states[:, ti, :].T
        rate = sim.ev.rhs(at, p, STEADY_TIMES[ti])
        with np.errstate(invalid="ignore"):
            ok = np.isfinite(at) & np.isfinite(rate) & \
                (np.abs(rate) <= STEADY_ATOL + STEADY_RTOL * np.abs(at))
        new = ok.all(axis=0) & ~found
        x[:, new], found = at[:, new], found | new
    return x, found


@pytest.mark.skipif(not (PETAB / "Brannmark_JBC2010").is_dir(),
                    reason=f"no PEtab benchmark models in {PETAB}")
@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning",
                            "ignore::UserWarning")
def test_steady_states_equal_the_scan_of_every_member_at_every_time(monkeypatch):
    pytest.importorskip("petab.v1", reason="the petab extra is not installed")
    from sbmlgpu.petab import simulate as simulate_module
    from sbmlgpu.petab import simulate_problem

    Simulation = simulate_module.Simulation
    original = Simulation.steady_state
    calls = []

    def steady_state(self, p, x0):
        results = []
        run = Simulation.time_course.__get__(self)
        self.time_course = lambda *a, **k: results.append(run(*a, **k)) or results[-1]
        try:
            out = original(self, p, x0)
        finally:
            del self.time_course
        calls.append((self, p, x0, results[0], out))
        return out

    monkeypatch.setattr(Simulation, "steady_state", steady_state)
    yaml = PETAB / "Brannmark_JBC2010" / "Brannmark_JBC2010.yaml"
    simulate_problem(yaml, ensemble=16, seed=2, device="cpu")
    assert calls  # Brannmark preequilibrates
    for sim, p, x0, result, (x, status, _) in calls:
        expected, found = _steady_scan(sim, p, x0, result)
        assert found.any()
        np.testing.assert_array_equal(x, expected)
        assert np.array_equal(status == 0, found)
        # members not steady at the last time (their last point spoilt) are found at
        # an earlier one, or not: the same as the scan says
        result.data[::3, -1, :] = np.nan
        sim.time_course = lambda *a, **k: result  # the spoilt time courses
        x2, status2, _ = original(sim, p, x0)
        del sim.time_course
        expected2, found2 = _steady_scan(sim, p, x0, result)
        np.testing.assert_array_equal(x2, expected2)
        assert np.array_equal(status2 == 0, found2)
        # the spoilt members were looked at again: found at an earlier time, or not
        assert not np.array_equal(x2[:, ::3], x[:, ::3], equal_nan=True)


def test_the_plan_is_not_used_where_its_order_fills_the_pilots_warps_no_better():
    """Bundling pays only where the steps follow the parameters: steps that do not
    (noise) leave the members in their order, with the reason; a pilot too small to
    tell bundles as before."""
    n = 20_000
    table = _table(6, n, 9)
    pilot = bundling.pilot(n, 1000, 0)
    noise = np.random.default_rng(1).lognormal(3, 1, pilot.size).astype(np.int64) + 1
    plan = bundling.plan(table, pilot, noise)
    assert plan.permutation is None
    assert plan.reason.startswith("not used") and "lane efficiency" in plan.reason
    assert plan.info["pilot_lane_efficiency_bundled"] < \
        bundling.MIN_GAIN * plan.info["pilot_lane_efficiency_unbundled"]
    follows = bundling.plan(table, pilot, _steps(table, pilot, 5))
    assert follows.permutation is not None
    assert follows.info["pilot_lane_efficiency_bundled"] >= \
        bundling.MIN_GAIN * follows.info["pilot_lane_efficiency_unbundled"]
    small = bundling.pilot(n, bundling.MIN_GAIN_MEMBERS // 2, 0)
    assert bundling.plan(table, small, noise[:small.size]).permutation is not None


def test_under_refill_the_plan_is_used_only_where_the_costliest_would_start_late():
    """With lanes that refill (more members than lanes) no lane waits for its warp:
    steps that follow the parameters but are alike (20-80) fill warps better ordered,
    yet end no sooner under refill; a few members that cost a lane's whole share do
    end much sooner when they start first. A lane for every member: nothing refills,
    and warps decide as before."""
    n = 20_000
    table = _table(3, n, 4)
    pilot = bundling.pilot(n, 2000, 0)
    log_x = np.log(table[0, pilot])
    alike = (20 + 60 * (log_x - log_x.min()) / np.ptp(log_x)).astype(np.int64)
    assert bundling.plan(table, pilot, alike).permutation is not None  # one per thread
    refill = bundling.plan(table, pilot, alike, lanes=n // 20)
    assert refill.permutation is None
    assert "refill" in refill.reason and refill.info["refill_lanes"] == n // 20
    assert refill.info["refill_gain_estimated"] < bundling.MIN_GAIN
    # 1 % of the members cost what a lane's 20 members cost together
    heavy = np.where(log_x > np.quantile(log_x, 0.99), 20 * 50, 50)
    costly_first = bundling.plan(table, pilot, heavy, lanes=n // 20)
    assert costly_first.permutation is not None
    assert costly_first.info["refill_gain_estimated"] >= bundling.MIN_GAIN
    assert costly_first.reason == "bundled by predicted step count"
    roomy = bundling.plan(table, pilot, alike, lanes=n)
    assert roomy.permutation is not None and "refill_lanes" not in roomy.info


@pytest.mark.skipif(not (PETAB / "Fujita_SciSignal2010").is_dir(),
                    reason=f"no PEtab benchmark models in {PETAB}")
def test_the_lane_efficiency_benchmark_writes_its_figures(tmp_path):
    out = tmp_path / "lanes.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "ode_lane_efficiency.py"),
                           "Fujita_SciSignal2010", "--n", "300", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert [r["members"] for r in rows] == [6 * 300]  # six runs of the 300 sets
    row = rows[0]
    assert 0 < row["unbundled"] <= row["by_true_steps"] <= 1
    assert 0 < row["bundled"] <= row["by_true_steps"]
    assert all(0 < p["paid_relative"] for p in row["two_passes"].values())
