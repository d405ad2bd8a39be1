"""Ensemble summaries without keeping the time courses: per-batch statistics, merged.

Each batch yields, per output column (time x output), over its ok members: the
count, the number of non-finite values, mean and M2 (sum of squared deviations
from the batch mean; exact, two passes), min and max of the finite values, and a
histogram over a range fixed before the first batch (from the pilot run). Batches
merge exactly for count/mean/M2/min/max (Chan, Golub and LeVeque 1979) and by
adding for the histograms; quantiles are read from the merged histogram as numpy's
'linear' quantile of order statistics placed evenly inside their bins, so each
order statistic is off by at most one bin width ((hi - lo) / bins of that column),
except in the two end bins, which also hold the values outside the range and
stretch towards the true min and max.

On the GPU the statistics of a batch are computed by templates/summary.cu; on the
CPU path by `host_batch_stats` (the same definitions).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sbmlgpu.results import Summary


@dataclass
class BatchStats:
    count: np.ndarray  # (cols,) ok members
    nonfinite: np.ndarray  # (cols,) non-finite values among them
    mean: np.ndarray
    m2: np.ndarray
    vmin: np.ndarray
    vmax: np.ndarray
    hist: np.ndarray  # (cols, bins) int64

    @classmethod
    def from_device(cls, stats: np.ndarray, hist: np.ndarray) -> "BatchStats":
        """From summary.cu's stats (cols, 6) and histogram (cols, bins)."""
        s = np.asarray(stats, dtype=float).reshape(-1, 6)
        return cls(s[:, 0].copy(), s[:, 1].copy(), s[:, 2].copy(), s[:, 3].copy(),
                   s[:, 4].copy(), s[:, 5].copy(), np.asarray(hist, dtype=np.int64))

    def merge(self, other: "BatchStats") -> "BatchStats":
        n_a, n_b = self.count, other.count
        n = n_a + n_b
        with np.errstate(invalid="ignore", divide="ignore"):
            delta = other.mean - self.mean
            frac_b = np.where(n > 0, n_b / np.where(n > 0, n, 1), 0.0)
            mean = np.where(n_b == 0, self.mean, np.where(n_a == 0, other.mean,
                                                          self.mean + delta * frac_b))
            m2 = np.where(n_b == 0, self.m2, np.where(
                n_a == 0, other.m2, self.m2 + other.m2 + delta * delta * n_a * frac_b))
        return BatchStats(n, self.nonfinite + other.nonfinite, mean, m2,
                          np.fmin(self.vmin, other.vmin), np.fmax(self.vmax, other.vmax),
                          self.hist + other.hist)


def host_batch_stats(out: np.ndarray, ok: np.ndarray, ranges: np.ndarray,
                     bins: int) -> BatchStats:
    """The statistics of one batch on the host: out (times, outputs, members)."""
    values = np.asarray(out, dtype=float).reshape(-1, out.shape[-1])[:, np.asarray(ok, bool)]
    cols, n = values.shape
    count = np.full(cols, float(n))
    finite = np.isfinite(values)
    nonfinite = (~finite).sum(axis=1).astype(float)
    if n:
        mean = values.mean(axis=1)
        m2 = ((values - mean[:, None]) ** 2).sum(axis=1)
        masked = np.where(finite, values, np.nan)
        with np.errstate(all="ignore"):
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                vmin = np.nanmin(masked, axis=1)
                vmax = np.nanmax(masked, axis=1)
        vmin = np.where(np.isnan(vmin), np.inf, vmin)
        vmax = np.where(np.isnan(vmax), -np.inf, vmax)
    else:
        mean = np.zeros(cols)
        m2 = np.zeros(cols)
        vmin = np.full(cols, np.inf)
        vmax = np.full(cols, -np.inf)
    hist = np.zeros((cols, bins), dtype=np.int64)
    lo, hi = ranges[:, 0], ranges[:, 1]
    scale = bins / (hi - lo)
    with np.errstate(invalid="ignore", over="ignore"):
        position = (values - lo[:, None]) * scale[:, None]
    b = np.clip(np.floor(np.where(finite, position, 0.0)), 0, bins - 1).astype(np.int64)
    rows = np.broadcast_to(np.arange(cols)[:, None], b.shape)
    np.add.at(hist, (rows[finite], b[finite]), 1)
    return BatchStats(count, nonfinite, mean, m2, vmin, vmax, hist)


def ranges_from_pilot(pilot: np.ndarray | None, cols: int, margin: float = 0.1) -> np.ndarray:
    """(cols, 2) histogram ranges from pilot values (members, cols): the finite pilot
    range widened by `margin` of its span on each side."""
    ranges = np.tile([0.0, 1.0], (cols, 1))
    if pilot is None or pilot.size == 0:
        return ranges
    values = np.where(np.isfinite(pilot), pilot, np.nan)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        lo = np.nanmin(values, axis=0)
        hi = np.nanmax(values, axis=0)
    for c in range(cols):
        if not (np.isfinite(lo[c]) and np.isfinite(hi[c])):
            continue
        span = hi[c] - lo[c]
        if span <= 0:
            # a constant column, widened in float64: in a float32 pilot's arithmetic a
            # constant 0 would widen by 1e-301, which rounds to nothing ([0, 0] then)
            span = max(abs(float(hi[c])) * 1e-6, 1e-300)
            ranges[c] = (float(lo[c]) - margin * span, float(hi[c]) + margin * span)
            continue
        ranges[c] = (lo[c] - margin * span, hi[c] + margin * span)
    return ranges


def quantile_from_histogram(hist: np.ndarray, lo: float, hi: float, vmin: float, vmax: float,
                            q: float) -> float:
    """The q-quantile by numpy's 'linear' definition (rank q (N - 1), interpolated
    between the two order statistics around it), each order statistic placed evenly
    inside its bin."""
    total = int(hist.sum())
    if total == 0:
        return float("nan")
    bins = len(hist)
    width = (hi - lo) / bins
    cum = np.cumsum(hist)

    def order_statistic(k: int) -> float:
        b = min(int(np.searchsorted(cum, k, side="right")), bins - 1)
        before = cum[b] - hist[b]
        fraction = (k - before + 0.5) / hist[b] if hist[b] else 0.5
        left, right = lo + b * width, lo + (b + 1) * width
        if b == 0:
            left = min(left, vmin)
        if b == bins - 1:
            right = max(right, vmax)
        return float(min(max(left + fraction * (right - left), vmin), vmax))

    rank = q * (total - 1)
    k = int(np.floor(rank))
    value = order_statistic(k)
    if rank > k and k + 1 < total:
        value += (rank - k) * (order_statistic(k + 1) - value)
    return value


def to_summary(stats: BatchStats, ranges: np.ndarray, shape: tuple[int, int],
               quantiles: tuple[float, ...], n_members: int) -> tuple[Summary, np.ndarray]:
    """The Summary (shape = (times, outputs)) and the quantile resolution per column."""
    count = stats.count
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(count > 0, stats.mean, np.nan)
        sd = np.where(count > 1, np.sqrt(stats.m2 / np.where(count > 1, count - 1, 1)), np.nan)
    bad = stats.nonfinite > 0
    mean = np.where(bad, np.nan, mean)
    sd = np.where(bad, np.nan, sd)
    qv = np.full((len(quantiles), len(count)), np.nan)
    for c in range(len(count)):
        if count[c] == 0 or bad[c]:
            continue
        for k, q in enumerate(quantiles):
            qv[k, c] = quantile_from_histogram(stats.hist[c], ranges[c, 0], ranges[c, 1],
                                               stats.vmin[c], stats.vmax[c], q)
    n_used = int(count.max()) if count.size else 0
    summary = Summary(mean.reshape(shape), sd.reshape(shape), tuple(quantiles),
                      qv.reshape((len(quantiles),) + shape), n_used, n_members - n_used)
    resolution = ((ranges[:, 1] - ranges[:, 0]) / stats.hist.shape[1]).reshape(shape)
    return summary, resolution
