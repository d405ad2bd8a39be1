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
