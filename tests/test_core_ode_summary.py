"""The ode summary's histogram ranges from a pilot, and a batch's statistics over them
(sbmlgpu.ensemble_summary, which sbmlgpu.ode.summary feeds)."""

from __future__ import annotations

import numpy as np
import pytest

from sbmlgpu.ensemble_summary import BinGrid, EnsembleStats, pilot_ranges


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_pilot_ranges_are_proper_intervals_for_constant_columns(dtype):
    """A column every pilot member agrees on (a fixed initial value, 0 or not) gets a
    range of positive width, whatever the kernel's precision (a float32 pilot once
    gave [0, 0] for a constant 0, and the histogram's bin of every value was NaN)."""
    pilot = np.array([[0.0, 5.0, 1.0], [0.0, 5.0, 3.0]], dtype=dtype)
    ranges = pilot_ranges(pilot, 3)
    assert np.all(ranges[:, 1] > ranges[:, 0])
    assert ranges[0, 0] < 0.0 < ranges[0, 1] and ranges[1, 0] < 5.0 < ranges[1, 1]
    assert np.allclose(ranges[2], [0.8, 3.2])
    values = np.concatenate([pilot, pilot], axis=1)  # (members, 2 times x 3 outputs)
    grid = BinGrid.spanning(values, 16)
    assert np.array_equal(grid.ranges, np.vstack([ranges, ranges]))
    stats = EnsembleStats.of_values(values, grid)
    assert isinstance(stats, EnsembleStats) and stats.hist.sum() == 2 * 6
