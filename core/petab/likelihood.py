"""PEtab's negative log-likelihood and chi2, vectorised over rows and parameter sets.

The same terms as `petab.v1.calculate_single_llh` (normal or laplace noise, on the
lin/log/log10 scale of observableTransformation; the log scales' Jacobian uses the
measurement, as petab does) and `calculate_chi2` (squared residuals on the
transformed scale, divided by sigma).
"""

from __future__ import annotations

import numpy as np

LOG10 = np.log(10.0)


def _group_terms(m: np.ndarray, y: np.ndarray, s: np.ndarray, scale: str,
                 distribution: str) -> tuple[np.ndarray, np.ndarray]:
    """(negative log-likelihood, normalised residual) of rows that share one scale
    and one noise model: m (k, 1) measurements, y and s (k, n) simulations and sigmas.
    A scale other than log / log10 is lin, a distribution other than normal laplace."""
    with np.errstate(all="ignore"):
        # a sigma that is not positive is no noise model: NaN, so the set's objective is
        # not finite (the normal's s**2 scored a negative sigma as its absolute value)
        s = np.where(s > 0, s, np.nan)
        # the Jacobian of the transformation at the measurement (1 on the lin scale)
        if scale == "log":
            residual, jacobian = (np.log(y) - np.log(m)) / s, m
        elif scale == "log10":
            residual, jacobian = (np.log10(y) - np.log10(m)) / s, m * LOG10
        else:
            residual, jacobian = (y - m) / s, 1.0
        if distribution == "normal":
            nll = 0.5 * np.log(2 * np.pi * s**2 * jacobian**2) + 0.5 * residual**2
        else:
            nll = np.log(2 * s * jacobian) + np.abs(residual)
    return nll, residual


def _groups(scale: np.ndarray, distribution: np.ndarray):
    """(scale, distribution, rows) of each combination the rows use."""
    for sc in np.unique(scale):
        for dist in np.unique(distribution):
            rows = np.flatnonzero((scale == sc) & (distribution == dist))
            if rows.size:
                yield sc, dist, rows


def terms(measurement: np.ndarray, simulation: np.ndarray, sigma: np.ndarray,
          scale: np.ndarray, distribution: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(negative log-likelihood, squared normalised residual) per row and set.
    measurement, scale, distribution: (R,); simulation, sigma: (R, n)."""
    measurement = np.asarray(measurement, dtype=float)
    nll = np.full(np.shape(simulation), np.nan)
    chi2 = np.full(np.shape(simulation), np.nan)
    for sc, dist, rows in _groups(np.asarray(scale), np.asarray(distribution)):
        nll[rows], residual = _group_terms(measurement[rows][:, None], simulation[rows],
                                           sigma[rows], sc, dist)
        chi2[rows] = residual**2
    return nll, chi2


#: measurement rows per block of summed_terms (its temporaries are (block, n))
SUM_BLOCK = 32


def summed_terms(measurement: np.ndarray, simulation: np.ndarray, sigma: np.ndarray,
                 scale: np.ndarray, distribution: np.ndarray,
                 block: int = SUM_BLOCK) -> tuple[np.ndarray, np.ndarray]:
    """terms(...) summed over the rows, (nll, chi2) per set, without its (R, n)
    arrays: each group of rows (one scale, one noise model) taken `block` rows at a
    time. Measured (Blasi_CellSystems2016, 252 rows at t = inf x 10^5 sets, where the
    host scores every row): terms as it was, every branch for every row and then the
    sums, took 0.7 s of a 3.6 s call on the H100's host."""
    measurement = np.asarray(measurement, dtype=float)
    scale, distribution = np.asarray(scale), np.asarray(distribution)
    n = simulation.shape[1] if simulation.ndim == 2 else 0
    nll, chi2 = np.zeros(n), np.zeros(n)
    for sc, dist, group in _groups(scale, distribution):
        for start in range(0, len(group), block):
            rows = group[start:start + block]
            term, residual = _group_terms(measurement[rows][:, None], simulation[rows],
                                          sigma[rows], sc, dist)
            nll += term.sum(axis=0)
            chi2 += (residual**2).sum(axis=0)
    return nll, chi2
