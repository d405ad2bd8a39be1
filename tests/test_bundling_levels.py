"""bundle()'s 16-bit log-cost levels (from LEVELS_FROM items) order items as the costs
do, up to ties within a level, and the ode bundling plan fits only the columns that
vary over its pilot."""

from __future__ import annotations

import numpy as np

from sbmlgpu.plugins.ode import bundling as ode_bundling
from sbmlgpu.schedule.bundling import LEVELS, LEVELS_FROM, bundle, lane_efficiency


def test_levels_order_as_the_costs_up_to_one_level():
    rng = np.random.default_rng(4)
    costs = 10.0 ** rng.uniform(0, 6, LEVELS_FROM * 3)
    costs[:5] = 0.0  # zero costs go last (descending), as with a float sort
    for descending in (True, False):
        order = bundle(costs, descending=descending).order
        assert sorted(order.tolist()) == list(range(costs.size))  # a permutation
        ranked = np.log(np.maximum(costs[order], costs[costs > 0].min()))
        step = (np.log(costs.max()) - np.log(costs[costs > 0].min())) / LEVELS
        diffs = np.diff(ranked) if not descending else -np.diff(ranked)
        assert diffs.min() >= -1.01 * step  # out of order by less than one level
    assert set(bundle(costs).order[-5:].tolist()) == set(range(5))
    exact = np.argsort(-costs, kind="stable")
    assert abs(lane_efficiency(costs, 32, bundle(costs)) -
               lane_efficiency(costs[exact], 32)) < 1e-4


def test_equal_costs_keep_their_order():
    costs = np.full(LEVELS_FROM * 2, 7.0)
    np.testing.assert_array_equal(bundle(costs).order, np.arange(costs.size))


def test_the_plan_fits_only_the_columns_that_vary_over_the_pilot():
    rng = np.random.default_rng(1)
    n = 20_000
    table = np.ones((6, n))
    table[2] = 10.0 ** rng.uniform(-1, 1, n)  # the one that sets the cost
    table[4] = 3.0  # constant: no feature
    pilot = rng.choice(n, 512, replace=False)
    steps = np.rint(40 * table[2, pilot] ** 0.5).astype(int)
    plan = ode_bundling.plan(table, pilot, steps, 32)
    assert plan.info["r_squared"] > 0.99
    ordered = table[2, plan.permutation.order]
    assert np.all(np.diff(ordered[:1000]) <= 1e-3 * ordered[:1000].max())  # descending cost


def test_negative_costs_sort_as_they_are():
    costs = np.r_[-1.0, -5.0, 0.0, np.ones(LEVELS_FROM)]
    np.testing.assert_array_equal(bundle(costs, descending=False).order[:3], [1, 0, 2])
    np.testing.assert_array_equal(bundle(costs).order[-3:], [2, 0, 1])
