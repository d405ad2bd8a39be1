"""Ensemble statistics without keeping the time courses: one accumulator for every backend.

`EnsembleStats` holds, per column (a time point of an output): the count of the
finite values folded in, the count of non-finite ones, their mean and M2 (the sum of
squared deviations from the mean), min and max, and a histogram over a `BinGrid`
fixed before the first batch (from a pilot). It is fed three ways, all giving the
same kind of partial that merges with any other:

- `of_values`: a block of values on the host (two passes: exact mean and M2);
- `of_moments`: count, mean, M2, min, max reduced on a device (ode's summary.cu);
- `of_shifted_sums`: S1 = sum(v - c), S2 = sum((v - c)^2) and the count, summed
  on a device with a shift c near the mean (ssa's in-kernel atomics): the mean is
  c + S1/n and M2 = S2 - S1^2/n, without the cancellation of plain sums of squares.

Partials merge exactly (Chan, Golub and LeVeque 1979) for count/mean/M2/min/max and
by adding for the histograms, in whatever batches and on whatever devices they
were made; the runner merges them in member order, so a run gives the same numbers
on any number of GPUs.

What a summary is taken over, and how quantiles are read from the histograms, is a
backend's documented definition, kept as it was when each had its own accumulator
(`SummaryRules`): `OVER_OK_MEMBERS` (ode) and `OVER_REACHED_SAMPLES` (ssa).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .results import Summary


# -- where the bins are ---------------------------------------------------------------------
@dataclass(frozen=True)
class BinGrid:
    """`bins` equal bins per column, from `lo` in steps of `width`. A value's bin
    position is (v - lo) * scale, as the kernels compute it (so the host bins a value
    where the device would). `open_ends`: values outside the range count in their own
    under- and overflow bins; else in the first or last bin. Histograms have bins + 2
    entries per column either way: underflow, the bins, overflow."""

    lo: np.ndarray  # (cols,)
    width: np.ndarray  # (cols,)
    scale: np.ndarray  # (cols,)
    bins: int
    open_ends: bool
    integral: np.ndarray  # (cols,) bool: bins of whole numbers (width-1 bins hold one count)
    hi: np.ndarray  # (cols,) the upper end as the grid was asked for (kernels taking ranges)

    @property
    def ranges(self) -> np.ndarray:
        """(cols, 2): lo and hi of every column."""
        return np.stack([self.lo, self.hi], axis=1)

    @classmethod
    def spanning(cls, pilot: np.ndarray, bins: int, margin: float = 0.1) -> "BinGrid":
        """Over the finite range of the pilot values (members, cols), widened by `margin`
        of its span on each side; outside values go to the end bins."""
        ranges = pilot_ranges(pilot, pilot.shape[1], margin)
        lo, hi = ranges[:, 0].copy(), ranges[:, 1].copy()
        return cls(lo, (hi - lo) / bins, bins / (hi - lo), int(bins), False,
                   np.zeros(lo.shape, bool), hi)

    @classmethod
    def around(cls, pilot: np.ndarray, bins: int) -> "BinGrid":
        """Over the pilot's range (members, cols) widened by half its span on each side,
        with under- and overflow bins; where every pilot value is a whole number (counts),
        integer widths with edges at half-integers, centred on the range."""
        pilot = np.asarray(pilot, float)
        finite = np.isfinite(pilot)
        with np.errstate(invalid="ignore", divide="ignore"):
            n = finite.sum(axis=0)
            vmin = np.where(n > 0, np.where(finite, pilot, np.inf).min(axis=0), 0.0)
            vmax = np.where(n > 0, np.where(finite, pilot, -np.inf).max(axis=0), 0.0)
        integral = np.all(np.where(finite, pilot == np.round(pilot), True), axis=0)
        span = vmax - vmin
        margin = 0.5 * span + np.where(integral, 1.0, np.maximum(1e-9 * np.abs(vmax), 1e-12))
        lo, hi = vmin - margin, vmax + margin
        width = (hi - lo) / bins
        width_int = np.maximum(1.0, np.ceil(width))
        lo_int = np.floor(0.5 * (vmin + vmax) - 0.5 * bins * width_int) - 0.5
        width = np.where(integral, width_int, width)
        lo = np.where(integral, lo_int, lo)
        return cls(lo, width, 1.0 / width, int(bins), True, integral, lo + bins * width)

    def index(self, values: np.ndarray, finite: np.ndarray) -> np.ndarray:
        """The histogram entry (0 .. bins + 1) of each value of (cols, m); only the
        entries where `finite` is True mean anything."""
        bins = self.bins
        with np.errstate(invalid="ignore", over="ignore"):
            position = (values - self.lo[:, None]) * self.scale[:, None]
        if self.open_ends:
            inside = 1 + np.floor(np.where(np.isfinite(position), position, 0))
            b = np.where(position < 0, 0, np.where(position >= bins, bins + 1, inside))
        else:
            b = 1 + np.clip(np.floor(np.where(finite, position, 0.0)), 0, bins - 1)
        return b.astype(np.int64)


def pilot_ranges(pilot: np.ndarray | None, cols: int, margin: float = 0.1) -> np.ndarray:
    """(cols, 2) ranges from pilot values (members, cols): the finite pilot range
    widened by `margin` of its span on each side ([0, 1] for a column with none)."""
    ranges = np.tile([0.0, 1.0], (cols, 1))
    if pilot is None or pilot.size == 0:
        return ranges
    values = np.where(np.isfinite(pilot), pilot, np.nan)
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


def pilot_mean(values: np.ndarray) -> np.ndarray:
    """(cols,) mean of the finite pilot values (members, cols), 0 where none: the
    shift of device-side shifted sums."""
    values = np.asarray(values, float)
    finite = np.isfinite(values)
    n = finite.sum(axis=0)
    total = np.where(finite, values, 0.0).sum(axis=0)
    return np.where(n > 0, total / np.maximum(n, 1), 0.0)


# -- the accumulator -----------------------------------------------------------------------
class EnsembleStats:
    """Per-column moments and histogram of the values folded in (see the module
    docstring). `extremes_known` is False once a partial without min/max (shifted
    sums) was merged: only quantile rules that do not need them can be read then."""

    def __init__(self, count, nonfinite, mean, m2, vmin, vmax, hist=None, grid=None,
                 extremes_known: bool = True):
        self.count = np.asarray(count, float)  # finite values folded into the moments
        self.nonfinite = np.asarray(nonfinite, float)
        self.mean = np.asarray(mean, float)
        self.m2 = np.asarray(m2, float)
        self.vmin = np.asarray(vmin, float)
        self.vmax = np.asarray(vmax, float)
        self.grid = grid
        self.hist = None if grid is None else (
            np.zeros((len(self.count), grid.bins + 2), np.int64) if hist is None
            else np.asarray(hist, np.int64).reshape(len(self.count), grid.bins + 2))
        self.extremes_known = bool(extremes_known)

    @classmethod
    def empty(cls, cols: int, grid: BinGrid | None = None) -> "EnsembleStats":
        zeros = np.zeros(cols)
        return cls(zeros, zeros, zeros, zeros, np.full(cols, np.inf), np.full(cols, -np.inf),
                   None, grid)

    @classmethod
    def of_values(cls, values: np.ndarray, grid: BinGrid | None = None) -> "EnsembleStats":
        """From a block of values (members, cols) on the host, in two passes."""
        values = np.ascontiguousarray(values, dtype=float)
        m, cols = values.shape
        if m == 0:
            return cls.empty(cols, grid)
        v = values.T  # (cols, members): each column's values in one reduction
        finite = np.isfinite(v)
        count = finite.sum(axis=1).astype(float)
        with np.errstate(all="ignore"):  # columns without finite values: dropped below
            mean = np.where(finite, v, 0.0).sum(axis=1) / count
            m2 = np.where(finite, (v - mean[:, None]) ** 2, 0.0).sum(axis=1)
        mean = np.where(count > 0, mean, 0.0)
        m2 = np.where(count > 0, m2, 0.0)
        vmin = np.where(finite, v, np.inf).min(axis=1)
        vmax = np.where(finite, v, -np.inf).max(axis=1)
        hist = None
        if grid is not None:
            b = grid.index(v, finite)
            flat = (np.arange(cols)[:, None] * (grid.bins + 2) + b)[finite]
            hist = np.bincount(flat, minlength=cols * (grid.bins + 2))
        return cls(count, (~finite).sum(axis=1), mean, m2, vmin, vmax, hist, grid)

    @classmethod
    def of_moments(cls, count, nonfinite, mean, m2, vmin, vmax, hist=None,
                   grid: BinGrid | None = None) -> "EnsembleStats":
        """From moments reduced elsewhere over `count` values of which `nonfinite`
        were not finite (their mean and M2 are then NaN, as the sums that made them)."""
        count, nonfinite = np.asarray(count, float), np.asarray(nonfinite, float)
        bad = nonfinite > 0
        return cls(count - nonfinite, nonfinite, np.where(bad, np.nan, mean),
                   np.where(bad, np.nan, m2), vmin, vmax, hist, grid)

    @classmethod
    def of_shifted_sums(cls, shift, s1, s2, count, hist=None,
                        grid: BinGrid | None = None) -> "EnsembleStats":
        """From S1 = sum(v - shift), S2 = sum((v - shift)^2) over `count` finite values."""
        n = np.asarray(count, float).reshape(-1)
        s1, s2 = np.asarray(s1, float).reshape(-1), np.asarray(s2, float).reshape(-1)
        safe = np.maximum(n, 1)
        mean = np.where(n > 0, np.asarray(shift, float).reshape(-1) + s1 / safe, 0.0)
        m2 = np.where(n > 0, s2 - s1 * s1 / safe, 0.0)
        return cls(n, np.zeros_like(n), mean, m2, np.full(n.shape, np.inf),
                   np.full(n.shape, -np.inf), hist, grid, extremes_known=False)

    def merge(self, other: "EnsembleStats") -> "EnsembleStats":
        """The statistics of both sets of values (Chan et al.: exact up to rounding)."""
        n_a, n_b = self.count, other.count
        n = n_a + n_b
        with np.errstate(invalid="ignore", divide="ignore"):
            delta = other.mean - self.mean
            frac_b = np.where(n > 0, n_b / np.where(n > 0, n, 1), 0.0)
            mean = np.where(n_b == 0, self.mean, np.where(n_a == 0, other.mean,
                                                          self.mean + delta * frac_b))
            m2 = np.where(n_b == 0, self.m2, np.where(
                n_a == 0, other.m2, self.m2 + other.m2 + delta * delta * n_a * frac_b))
        hist = None
        if self.hist is not None and other.hist is not None:
            hist = self.hist + other.hist
        elif (self.hist is None) != (other.hist is None):
            raise ValueError("merging statistics with and without histograms")
        return EnsembleStats(n, self.nonfinite + other.nonfinite, mean, m2,
                             np.fmin(self.vmin, other.vmin), np.fmax(self.vmax, other.vmax),
                             hist, self.grid, self.extremes_known and other.extremes_known)

    def summary(self, rules: "SummaryRules", shape: tuple[int, int],
                quantiles: tuple[float, ...], n_used: int, n_excluded: int) -> Summary:
        """The Summary (each statistic of `shape` = (times, outputs)) under `rules`."""
        count = self.count
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(count > 0, self.mean, np.nan)
            sd = np.where(count > 1, np.sqrt(np.maximum(self.m2, 0.0)
                                             / np.where(count > 1, count - 1, 1)), np.nan)
        usable = count > 0
        if rules.nonfinite_poisons:
            bad = self.nonfinite > 0
            mean, sd = np.where(bad, np.nan, mean), np.where(bad, np.nan, sd)
            usable &= ~bad
        quantiles = tuple(quantiles) if self.hist is not None else ()
        qv = (rules.quantiles(self, quantiles, usable) if quantiles
              else np.empty((0, len(count))))
        return Summary(mean.reshape(shape), sd.reshape(shape), quantiles,
                       qv.reshape((len(quantiles),) + tuple(shape)), int(n_used),
                       int(n_excluded))


# -- reading quantiles from the histograms ---------------------------------------------------
def order_statistic_quantiles(stats: EnsembleStats, quantiles, usable) -> np.ndarray:
    """numpy's 'linear' quantile (rank q (N - 1), interpolated between the order
    statistics around it), each order statistic placed evenly inside its bin; the
    end bins (holding the values outside the range) stretch to the min and max.
    Each order statistic is off by at most one bin width inside the range."""
    if not stats.extremes_known:
        raise ValueError("order-statistic quantiles need the min and max of the values")
    grid, cols = stats.grid, len(stats.count)
    out = np.full((len(quantiles), cols), np.nan)
    for c in range(cols):
        if not usable[c]:
            continue
        hist = stats.hist[c, 1:-1].copy()
        hist[0] += stats.hist[c, 0]
        hist[-1] += stats.hist[c, -1]
        for k, q in enumerate(quantiles):
            out[k, c] = quantile_from_histogram(hist, grid.lo[c], grid.width[c],
                                                stats.vmin[c], stats.vmax[c], q)
    return out


def quantile_from_histogram(hist: np.ndarray, lo: float, width: float, vmin: float,
                            vmax: float, q: float) -> float:
    """The q-quantile of one column under `order_statistic_quantiles`' rule."""
    total = int(hist.sum())
    if total == 0:
        return float("nan")
    bins = len(hist)
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


def binned_cdf_quantiles(stats: EnsembleStats, quantiles, usable) -> np.ndarray:
    """The histogram's cumulative distribution inverted by linear interpolation inside
    the first bin that reaches q: exact to within a bin width inside the range,
    clamped to its ends outside it; a width-1 bin of whole numbers gives its number."""
    grid, hist = stats.grid, stats.hist
    cum = np.cumsum(hist, axis=-1)
    total = cum[..., -1]
    out = np.full((len(quantiles), len(stats.count)), np.nan)
    for i, q in enumerate(quantiles):
        target = q * total
        b = np.argmax(cum >= target[..., None], axis=-1)  # first bin reaching q
        below = np.take_along_axis(cum, np.maximum(b - 1, 0)[..., None], -1)[..., 0]
        below = np.where(b == 0, 0, below)
        inside = np.take_along_axis(hist, b[..., None], -1)[..., 0]
        with np.errstate(invalid="ignore", divide="ignore"):
            frac = np.clip((target - below) / np.where(inside > 0, inside, 1), 0, 1)
        left = grid.lo + (b - 1) * grid.width
        inside_value = np.where(grid.integral & (grid.width == 1), left + 0.5,
                                left + frac * grid.width)
        value = np.where(b == 0, grid.lo,
                         np.where(b == grid.bins + 1, grid.lo + grid.bins * grid.width,
                                  inside_value))
        out[i] = np.where((total > 0) & usable, value, np.nan)
    return out


# -- what a summary is over ---------------------------------------------------------------------
@dataclass(frozen=True)
class SummaryRules:
    """A backend's definition of its summary: which values enter, what a non-finite
    value does, where the histogram bins lie (from the pilot) and how quantiles are
    read from them."""

    name: str
    ok_members_only: bool  # only members whose status is ok (else every member's samples)
    nonfinite_poisons: bool  # a non-finite value makes its column NaN (else it is skipped)
    grid: Callable[[np.ndarray, int], BinGrid]  # (pilot values (members, cols), bins)
    quantiles: Callable[[EnsembleStats, tuple, np.ndarray], np.ndarray]

    def values(self, data: np.ndarray, status: np.ndarray) -> np.ndarray:
        """The (members, cols) values of time courses (members, times, outputs) that
        enter the summary."""
        data = np.asarray(data)
        values = data.reshape(data.shape[0], -1)
        return values[np.asarray(status) == 0] if self.ok_members_only else values

    def fold(self, data: np.ndarray, status: np.ndarray,
             grid: BinGrid | None) -> EnsembleStats:
        """The partial statistics of a block of time courses."""
        return EnsembleStats.of_values(self.values(data, status), grid)


#: over the members that succeeded; a non-finite value of one makes its column NaN;
#: quantiles as numpy's, from 10 %-widened pilot ranges (the ode backend)
OVER_OK_MEMBERS = SummaryRules("over ok members", True, True, BinGrid.spanning,
                               order_statistic_quantiles)
#: over every finite sample a member reached (a failed member's samples before its
#: failure); quantiles from the binned distribution, whole-number bins for counts (ssa)
OVER_REACHED_SAMPLES = SummaryRules("over reached samples", False, False, BinGrid.around,
                                    binned_cdf_quantiles)
