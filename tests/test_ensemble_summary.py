"""sbmlgpu.ensemble_summary: one accumulator fed by host blocks and by device partials,
merged over batches, read under each backend's rules."""

from __future__ import annotations

import numpy as np
import pytest

from sbmlgpu.ensemble_summary import (OVER_OK_MEMBERS, OVER_REACHED_SAMPLES, BinGrid,
                                      EnsembleStats, pilot_mean)
from sbmlgpu.results import DEFAULT_QUANTILES


def _values(rng, members=1000, cols=6):
    scale = 10.0 ** rng.uniform(-2, 4, cols)
    return rng.lognormal(size=(members, cols)) * scale + 1e3 * scale  # sd << mean


def _merged(values, grid, cuts):
    stats = EnsembleStats.empty(values.shape[1], grid)
    for a, b in zip(cuts[:-1], cuts[1:]):
        stats = stats.merge(EnsembleStats.of_values(values[a:b], grid))
    return stats


def test_batches_merge_to_numpy_moments_and_one_histogram():
    rng = np.random.default_rng(3)
    values = _values(rng)
    grid = BinGrid.spanning(values[:100], 64)
    stats = _merged(values, grid, [0, 1, 250, 251, 700, 1000])
    whole = EnsembleStats.of_values(values, grid)
    assert np.array_equal(stats.count, np.full(6, 1000.0))
    np.testing.assert_allclose(stats.mean, values.mean(axis=0), rtol=1e-14)
    np.testing.assert_allclose(stats.m2 / 999, values.var(axis=0, ddof=1), rtol=1e-11)
    assert np.array_equal(stats.vmin, values.min(axis=0))
    assert np.array_equal(stats.vmax, values.max(axis=0))
    assert np.array_equal(stats.hist, whole.hist) and stats.hist.sum() == 6000
    # a closed grid counts the values outside the pilot's range in its end bins
    assert not stats.hist[:, 0].any() and not stats.hist[:, -1].any()


def test_device_partials_equal_the_host_fold():
    """Moments reduced on a device (ode's summary.cu) and shifted sums (ssa's atomics)
    are the same statistics as the host's two passes."""
    rng = np.random.default_rng(4)
    values = _values(rng, 500, 4)
    grid = BinGrid.around(values[:50], 32)
    host = EnsembleStats.of_values(values, grid)
    v = values.T
    moments = EnsembleStats.of_moments(np.full(4, 500.0), np.zeros(4), v.mean(axis=1),
                                       ((v - v.mean(axis=1)[:, None]) ** 2).sum(axis=1),
                                       v.min(axis=1), v.max(axis=1), host.hist, grid)
    shift = pilot_mean(values[:50])
    d = values - shift
    sums = EnsembleStats.of_shifted_sums(shift, d.sum(axis=0), (d * d).sum(axis=0),
                                         np.full(4, 500), host.hist, grid)
    for partial in (moments, sums):
        np.testing.assert_allclose(partial.mean, host.mean, rtol=1e-14)
        np.testing.assert_allclose(partial.m2, host.m2, rtol=1e-8)
    assert not sums.extremes_known and moments.extremes_known
    merged = host.merge(sums)
    np.testing.assert_allclose(merged.mean, host.mean, rtol=1e-14)
    np.testing.assert_allclose(merged.m2, 2 * host.m2 + 0.0, rtol=1e-8)
    with pytest.raises(ValueError, match="min and max"):
        merged.summary(OVER_OK_MEMBERS, (2, 2), DEFAULT_QUANTILES, 1000, 0)


def test_ok_member_rules_poison_a_column_and_read_numpy_like_quantiles():
    rng = np.random.default_rng(5)
    values = _values(rng, 2000, 3)
    data = values.reshape(2000, 1, 3)
    status = np.zeros(2000, np.int8)
    status[::10] = 1  # failed members: left out
    data[::10] = np.nan
    data[7, 0, 2] = np.inf  # an ok member with a non-finite value: its column is NaN
    grid = OVER_OK_MEMBERS.grid(OVER_OK_MEMBERS.values(data[:300], status[:300]), 4096)
    stats = OVER_OK_MEMBERS.fold(data, status, grid)
    s = stats.summary(OVER_OK_MEMBERS, (1, 3), DEFAULT_QUANTILES, 1800, 200)
    ok = values[status == 0]
    np.testing.assert_allclose(s.mean[0, :2], ok[:, :2].mean(axis=0), rtol=1e-13)
    np.testing.assert_allclose(s.sd[0, :2], ok[:, :2].std(axis=0, ddof=1), rtol=1e-11)
    assert np.isnan(s.mean[0, 2]) and np.isnan(s.sd[0, 2])
    assert np.all(np.isnan(s.quantile_values[:, 0, 2]))
    exact = np.quantile(ok[:, :2], DEFAULT_QUANTILES, axis=0)
    assert np.all(np.abs(s.quantile_values[:, 0, :2] - exact) <= grid.width[:2] * 1.0001)
    assert (s.n_used, s.n_excluded) == (1800, 200)


def test_reached_sample_rules_skip_nan_samples_and_read_counts_exactly():
    """ssa's rules: a failed member's samples before its failure count, NaN samples
    after it do not; width-1 bins of whole numbers give quantiles exactly."""
    rng = np.random.default_rng(6)
    counts = rng.poisson(20.0, size=(3000, 2, 1)).astype(float)
    status = np.zeros(3000, np.int8)
    status[:100] = 1
    counts[:100, 1] = np.nan  # failed after the first sample
    grid = OVER_REACHED_SAMPLES.grid(OVER_REACHED_SAMPLES.values(counts[:500], status[:500]),
                                     64)
    assert grid.integral.all() and np.all(grid.width == 1.0)
    stats = OVER_REACHED_SAMPLES.fold(counts, status, grid)
    s = stats.summary(OVER_REACHED_SAMPLES, (2, 1), (0.25, 0.5, 0.75), 2900, 100)
    first, second = counts[:, 0, 0], counts[100:, 1, 0]
    np.testing.assert_allclose(s.mean[:, 0], [first.mean(), second.mean()], rtol=1e-14)
    np.testing.assert_allclose(s.sd[:, 0], [first.std(ddof=1), second.std(ddof=1)],
                               rtol=1e-12)
    assert stats.count.tolist() == [3000.0, 2900.0]
    for k, column in enumerate((first, second)):
        # the binned CDF's q-quantile: the smallest count whose CDF reaches q
        expected = [np.sort(column)[int(np.ceil(q * column.size)) - 1] for q in (0.25, 0.5,
                                                                                 0.75)]
        assert s.quantile_values[:, k, 0].tolist() == expected


def test_without_bins_there_are_no_quantiles():
    values = np.arange(12.0).reshape(4, 3)
    stats = EnsembleStats.of_values(values)
    s = stats.summary(OVER_REACHED_SAMPLES, (1, 3), DEFAULT_QUANTILES, 4, 0)
    assert s.quantiles == () and s.quantile_values.shape == (0, 1, 3)
    np.testing.assert_allclose(s.mean[0], values.mean(axis=0))
