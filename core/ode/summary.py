"""The host side of templates/summary.cu: one batch's statistics, reduced on the GPU.

summary.cu gives, per output column (time x output), over the batch's ok members:
the count, the number of non-finite values among them, mean and M2 (two passes,
exact), min and max of the finite values, and a histogram of `bins` bins over the
column's (lo, hi) range with the values outside counted in the end bins. Here that
becomes a partial `sbmlgpu.ensemble_summary.EnsembleStats`, which merges with the
other batches' (and reads quantiles) like any other; the grid is the one the
kernel binned with (`BinGrid.spanning` of the pilot, `grid.ranges` as its input).
"""

from __future__ import annotations

import numpy as np

from ..ensemble_summary import BinGrid, EnsembleStats


def from_device(stats: np.ndarray, hist: np.ndarray, grid: BinGrid) -> EnsembleStats:
    """summary.cu's stats (cols, 6: count, nonfinite, mean, m2, min, max) and
    histogram (cols, bins) as partial statistics over `grid`."""
    s = np.asarray(stats, dtype=float).reshape(-1, 6)
    hist = np.asarray(hist, dtype=np.int64).reshape(len(s), grid.bins)
    # the kernel has no under- and overflow entries: it counts them in the end bins
    padded = np.pad(hist, ((0, 0), (1, 1)))
    return EnsembleStats.of_moments(s[:, 0], s[:, 1], s[:, 2], s[:, 3], s[:, 4], s[:, 5],
                                    padded, grid)

