"""sbmlgpu.ode.summary: per-batch statistics and the histogram ranges from a pilot."""

from __future__ import annotations

import numpy as np
import pytest

from sbmlgpu.ode.summary import BatchStats, host_batch_stats, ranges_from_pilot


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_pilot_ranges_are_proper_intervals_for_constant_columns(dtype):
    """A column every pilot member agrees on (a fixed initial value, 0 or not) gets a
    range of positive width, whatever the kernel's precision (a float32 pilot once
    gave [0, 0] for a constant 0, and the histogram's bin of every value was NaN)."""
    pilot = np.array([[0.0, 5.0, 1.0], [0.0, 5.0, 3.0]], dtype=dtype)
    ranges = ranges_from_pilot(pilot, 3)
    assert np.all(ranges[:, 1] > ranges[:, 0])
    assert ranges[0, 0] < 0.0 < ranges[0, 1] and ranges[1, 0] < 5.0 < ranges[1, 1]
    assert np.allclose(ranges[2], [0.8, 3.2])
    out = np.stack([pilot.T, pilot.T])  # (times, outputs, members)
    stats = host_batch_stats(out.reshape(2, 3, 2), np.ones(2, bool),
                             np.vstack([ranges, ranges]), 16)
    assert isinstance(stats, BatchStats) and stats.hist.sum() == 2 * 6
