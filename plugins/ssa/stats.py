"""Ensemble statistics without keeping the trajectories: shifted sums and histograms.

Per (sample time, output): the count n, S1 = sum(v - c), S2 = sum((v - c)^2) and a
histogram, where the shift c is the mean of a pilot batch. Then mean = c + S1/n and
var = (S2 - S1^2/n)/(n - 1): with c near the mean the subtraction loses nothing
(the textbook sum-of-squares formula loses digits when sd << mean). The GPU kernel
accumulates exactly these with atomics (kernels/ssa.cu, SsaSummarySink); the CPU
path folds batches of trajectories into the same sums with numpy, with the same
bin rule, so both give the same statistics for the same realisations.

Histogram bins come from the pilot's range, widened by half its span on each
side (and integer-aligned when every pilot value is a whole number, as counts
are), plus an underflow and an overflow bin. Quantiles are read from the
histogram by linear interpolation inside a bin (a width-1 bin of whole numbers
gives its number exactly): exact to within a bin width while they lie inside the
range, and clamped to its ends outside it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sbmlgpu.results import DEFAULT_QUANTILES, Summary


@dataclass
class Histograms:
    lo: np.ndarray  # (K, O) lower edge of bin 1
    width: np.ndarray  # (K, O)
    counts: np.ndarray  # (K, O, bins + 2): underflow, bins, overflow

    def as_metadata(self, outputs) -> dict:
        return {"outputs": list(outputs), "lo": self.lo.tolist(), "width": self.width.tolist(),
                "counts": self.counts.tolist(),
                "layout": "counts[time][output][0: below lo, 1..bins, bins+1: at or above "
                          "lo + bins * width]"}


class SummaryAccumulator:
    def __init__(self, n_times: int, n_outputs: int, bins: int):
        shape = (n_times, n_outputs)
        self.bins = int(bins)
        self.shift = np.zeros(shape)
        self.lo = np.zeros(shape)
        self.width = np.ones(shape)
        self.s1 = np.zeros(shape)
        self.s2 = np.zeros(shape)
        self.count = np.zeros(shape, np.int64)
        self.hist = np.zeros(shape + (self.bins + 2,), np.int64)
        self.integral = np.zeros(shape, bool)  # bins of whole numbers (counts)
        self.has_reference = False

    @property
    def inv_width(self) -> np.ndarray:
        return 1.0 / self.width

    def set_reference(self, pilot: np.ndarray) -> None:
        """Shift and bins from pilot trajectories (members, K, O)."""
        pilot = np.asarray(pilot, float)
        finite = np.isfinite(pilot)
        with np.errstate(invalid="ignore", divide="ignore"):
            n = finite.sum(axis=0)
            total = np.where(finite, pilot, 0.0).sum(axis=0)
            self.shift = np.where(n > 0, total / np.maximum(n, 1), 0.0)
            vmin = np.where(n > 0, np.where(finite, pilot, np.inf).min(axis=0), 0.0)
            vmax = np.where(n > 0, np.where(finite, pilot, -np.inf).max(axis=0), 0.0)
        integral = np.all(np.where(finite, pilot == np.round(pilot), True), axis=0)
        if self.bins:
            span = vmax - vmin
            margin = 0.5 * span + np.where(integral, 1.0, np.maximum(1e-9 * np.abs(vmax), 1e-12))
            lo, hi = vmin - margin, vmax + margin
            width = (hi - lo) / self.bins
            # whole numbers: integer bin widths, edges at half-integers, centred
            width_int = np.maximum(1.0, np.ceil(width))
            lo_int = np.floor(0.5 * (vmin + vmax) - 0.5 * self.bins * width_int) - 0.5
            self.width = np.where(integral, width_int, width)
            self.lo = np.where(integral, lo_int, lo)
            self.integral = integral
        self.has_reference = True

    def bin_of(self, values: np.ndarray) -> np.ndarray:
        """The kernel's bin rule, for values (members, K, O)."""
        with np.errstate(invalid="ignore"):
            pos = (values - self.lo) * self.inv_width
            b = np.where(pos < 0, 0, np.where(pos >= self.bins, self.bins + 1,
                                              1 + np.floor(np.where(np.isfinite(pos), pos, 0))))
        return b.astype(np.int64)

    def add_data(self, data: np.ndarray, ok: np.ndarray | None = None) -> None:
        """Fold trajectories (members, K, O) of ok members into the sums."""
        if not self.has_reference:
            raise RuntimeError("set_reference() first")
        data = np.asarray(data, float)
        if ok is not None:
            data = data[np.asarray(ok, bool)]
        finite = np.isfinite(data)
        d = np.where(finite, data - self.shift, 0.0)
        self.s1 += d.sum(axis=0)
        self.s2 += (d * d).sum(axis=0)
        self.count += finite.sum(axis=0)
        if self.bins:
            b = self.bin_of(np.where(finite, data, np.nan))
            K, O = self.shift.shape
            flat = (np.arange(K)[:, None] * O + np.arange(O)[None, :]) * (self.bins + 2)
            index = (flat[None] + b)[finite]
            self.hist += np.bincount(index, minlength=K * O * (self.bins + 2)).reshape(
                self.hist.shape)

    def add_sums(self, s1, s2, count, hist) -> None:
        """Fold sums accumulated elsewhere (the GPU) with the same shift and bins."""
        self.s1 += s1
        self.s2 += s2
        self.count += np.asarray(count, np.int64)
        if self.bins:
            self.hist += np.asarray(hist, np.int64).reshape(self.hist.shape)

    def mean_sd(self) -> tuple[np.ndarray, np.ndarray]:
        n = self.count.astype(float)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(n > 0, self.shift + self.s1 / np.maximum(n, 1), np.nan)
            var = (self.s2 - self.s1 * self.s1 / np.maximum(n, 1)) / (n - 1)
            sd = np.where(n > 1, np.sqrt(np.maximum(var, 0.0)), np.nan)
        return mean, sd

    def quantiles(self, qs) -> np.ndarray:
        K, O = self.shift.shape
        out = np.full((len(qs), K, O), np.nan)
        if not self.bins:
            return out
        cum = np.cumsum(self.hist, axis=-1)
        total = cum[..., -1]
        for i, q in enumerate(qs):
            target = q * total
            b = np.argmax(cum >= target[..., None], axis=-1)  # first bin reaching q
            below = np.take_along_axis(cum, np.maximum(b - 1, 0)[..., None], -1)[..., 0]
            below = np.where(b == 0, 0, below)
            inside = np.take_along_axis(self.hist, b[..., None], -1)[..., 0]
            with np.errstate(invalid="ignore", divide="ignore"):
                frac = np.clip((target - below) / np.where(inside > 0, inside, 1), 0, 1)
            left = self.lo + (b - 1) * self.width
            # a bin of width 1 around a whole number holds only that number
            inside_value = np.where(self.integral & (self.width == 1), left + 0.5,
                                    left + frac * self.width)
            value = np.where(b == 0, self.lo,
                             np.where(b == self.bins + 1, self.lo + self.bins * self.width,
                                      inside_value))
            out[i] = np.where(total > 0, value, np.nan)
        return out

    def summary(self, n_used: int, n_excluded: int,
                quantiles=DEFAULT_QUANTILES) -> Summary:
        mean, sd = self.mean_sd()
        qs = tuple(quantiles) if self.bins else ()
        return Summary(mean, sd, qs, self.quantiles(qs) if qs else
                       np.empty((0,) + mean.shape), int(n_used), int(n_excluded))

    def histograms(self) -> Histograms | None:
        if not self.bins:
            return None
        return Histograms(self.lo.copy(), self.width.copy(), self.hist.copy())
