"""PEtab's negative log-likelihood and chi2, vectorised over rows and parameter sets.

The same terms as `petab.v1.calculate_single_llh` (normal or laplace noise, on the
lin/log/log10 scale of observableTransformation; the log scales' Jacobian uses the
measurement, as petab does) and `calculate_chi2` (squared residuals on the
transformed scale, divided by sigma).
"""

from __future__ import annotations

import numpy as np

LOG10 = np.log(10.0)


def _scaled(values: np.ndarray, scale: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.where(scale == "log", np.log(values),
                        np.where(scale == "log10", np.log10(values), values))


def terms(measurement: np.ndarray, simulation: np.ndarray, sigma: np.ndarray,
          scale: np.ndarray, distribution: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(negative log-likelihood, squared normalised residual) per row and set.
    measurement, scale, distribution: (R,); simulation, sigma: (R, n)."""
    m = measurement[:, None]
    scale = np.asarray(scale)[:, None]
    normal = (np.asarray(distribution) == "normal")[:, None]
    residual = (_scaled(simulation, scale) - _scaled(m, scale)) / sigma
    with np.errstate(all="ignore"):
        # the Jacobian of the transformation at the measurement (1 on the lin scale)
        jacobian = np.where(scale == "log", m, np.where(scale == "log10", m * LOG10, 1.0))
        nll_normal = 0.5 * np.log(2 * np.pi * sigma**2 * jacobian**2) + 0.5 * residual**2
        nll_laplace = np.log(2 * sigma * jacobian) + np.abs(residual)
    return np.where(normal, nll_normal, nll_laplace), residual**2


#: measurement rows per block of summed_terms (its temporaries are (block, n))
SUM_BLOCK = 32


def summed_terms(measurement: np.ndarray, simulation: np.ndarray, sigma: np.ndarray,
                 scale: np.ndarray, distribution: np.ndarray,
                 block: int = SUM_BLOCK) -> tuple[np.ndarray, np.ndarray]:
    """terms(...) summed over the rows, (nll, chi2) per set, without its (R, n)
    arrays: rows grouped by scale and distribution (each group computes its own
    transformation and noise model only, where terms evaluates every branch for every
    row) and taken `block` at a time. Measured (Blasi_CellSystems2016, 252 rows at
    t = inf x 10^5 sets, where the host scores every row): terms and its branches took
    0.7 s of a 3.6 s call on the H100's host."""
    measurement = np.asarray(measurement, dtype=float)
    scale, distribution = np.asarray(scale), np.asarray(distribution)
    n = simulation.shape[1] if simulation.ndim == 2 else 0
    nll, chi2 = np.zeros(n), np.zeros(n)
    for sc in np.unique(scale):
        for dist in np.unique(distribution):
            group = np.flatnonzero((scale == sc) & (distribution == dist))
            for start in range(0, len(group), block):
                rows = group[start:start + block]
                m = measurement[rows][:, None]
                y, s = simulation[rows], sigma[rows]
                with np.errstate(all="ignore"):
                    if sc == "log":
                        residual, jacobian = (np.log(y) - np.log(m)) / s, m
                    elif sc == "log10":
                        residual, jacobian = (np.log10(y) - np.log10(m)) / s, m * LOG10
                    else:
                        residual, jacobian = (y - m) / s, 1.0
                    if dist == "normal":
                        term = 0.5 * np.log(2 * np.pi * s**2 * jacobian**2) + 0.5 * residual**2
                    else:
                        term = np.log(2 * s * jacobian) + np.abs(residual)
                nll += term.sum(axis=0)
                chi2 += (residual**2).sum(axis=0)
    return nll, chi2
