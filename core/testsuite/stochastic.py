"""Stochastic (DSMTS) cases: n realisations, then the suite's statistics.

With n runs, at every time point and for every variable X with expected mean mu
and sd sigma (the case's X-mean and X-sd columns):

    Z = sqrt(n) (mean - mu) / sigma        must lie in meanRange, default (-3, 3)
    Y = sqrt(n/2) (S^2 / sigma^2 - 1)      must lie in sdRange,   default (-5, 5)

with S^2 the sample variance (n - 1 in the denominator). Where sigma = 0 (the start,
where every run is equal, or right after an event sets a count) Z and Y are not
defined; there the simulated runs must all agree with the expected value: mean ==
mu and S == 0 exactly. A correct simulator still misses a few of these checks over
the whole suite (DSMTS documentation: at 10,000 runs expect a handful of Z and Y
misses in about 1,500 points per statistic), so a case that misses once is
reported as a FAIL with its worst point, and passes again with another --seed.

Variables are reported as the settings' `amount:` / `concentration:` lists say:
the run asks for `amount(X)` or `[X]` (core/outputs.py), so the backend reports
the mean and sd of exactly that quantity.

The run goes through `sbmlgpu.run(..., summary=True)`: the backend returns the
ensemble mean and sd (on the GPU they are accumulated there), never the n
trajectories.
"""

from __future__ import annotations

import numpy as np

from .cases import Case, CaseError, Settings
from .compare import Worst
from .outcome import Outcome
from .semantic import case_outputs

NEEDS_BACKEND = "stochastic case: needs a stochastic backend (--backend ssa)"


def expected_statistics(case: Case, settings: Settings):
    """(times, {variable: (mu, sigma)}) from the case's results file."""
    times, columns = case.expected()
    out = {}
    for v in settings.variables:
        mean, sd = columns.get(f"{v}-mean"), columns.get(f"{v}-sd")
        if mean is None or sd is None:
            raise CaseError(f"the results file has no {v}-mean / {v}-sd columns")
        if np.any(sd < 0) or not np.all(np.isfinite(mean)) or not np.all(np.isfinite(sd)):
            raise CaseError(f"{v}-mean / {v}-sd hold negative or non-finite values")
        out[v] = (mean, sd)
    return times, out


def z_and_y(mean, sd, mu, sigma, runs: int) -> tuple[np.ndarray, np.ndarray]:
    """The DSMTS statistics at every point (NaN where sigma = 0)."""
    mean, sd, mu, sigma = (np.asarray(a, float) for a in (mean, sd, mu, sigma))
    safe = np.where(sigma > 0, sigma, np.nan)
    z = np.sqrt(runs) * (mean - mu) / safe
    y = np.sqrt(runs / 2.0) * (sd**2 / safe**2 - 1.0)
    return z, y


def check_points(mean, sd, mu, sigma, runs: int, mean_range=(-3.0, 3.0),
                 sd_range=(-5.0, 5.0)):
    """(bad Z, bad Y, score) per point. sigma = 0: bad unless mean == mu and sd == 0
    (counted once, as a Z miss). score: max(|Z|/Z bound, |Y|/Y bound), inf for a
    missed exact point; <= 1 passes."""
    mean, sd, mu, sigma = (np.asarray(a, float) for a in (mean, sd, mu, sigma))
    z, y = z_and_y(mean, sd, mu, sigma, runs)
    exact = sigma == 0
    exact_bad = exact & ((mean != mu) | (sd != 0))
    z_lo, z_hi = mean_range
    y_lo, y_hi = sd_range
    with np.errstate(invalid="ignore"):
        bad_z = np.where(exact, exact_bad, ~((z > z_lo) & (z < z_hi)))
        bad_y = np.where(exact, False, ~((y > y_lo) & (y < y_hi)))
        z_bound = np.where(z < 0, -z_lo, z_hi)
        y_bound = np.where(y < 0, -y_lo, y_hi)
        score = np.where(exact, np.where(exact_bad, np.inf, 0.0),
                         np.maximum(np.abs(z) / z_bound, np.abs(y) / y_bound))
    score = np.where(np.isnan(score), np.inf, score)  # a NaN mean or sd misses
    return bad_z, bad_y, score


def run_stochastic(case: Case, settings: Settings, backend: str | None, *, runs: int,
                   seed: int, allowed_misses: int = 0) -> Outcome:
    from .. import load
    from ..api import run

    network = load(case.model_path())  # first: a model we refuse is skipped, whatever its table
    if backend is None or backend == "reference":
        # the reference integrates: exact for a model without reactions, whose
        # randomness is all in its distrib draws (each member draws its own)
        if network.reactions:
            return Outcome.refused(case.number, NEEDS_BACKEND)
        backend = "reference"
    times, expected = expected_statistics(case, settings)
    if not expected:
        raise CaseError(f"{case.settings_path}: 'variables:' names nothing to compare")
    names = case_outputs(network, settings)
    result = run(network, backend=backend, times=times, outputs=list(names.values()), n=runs,
                 seed=seed, summary=True, progress=False)
    if result.n_failed:
        first = result.failures()[0]
        return Outcome(case.number, "fail", f"{result.n_failed} of {runs} runs failed; "
                                            f"member {first[0]}: {first[2]}")
    n_used = result.summary.n_used if result.summary is not None else runs
    mean_range = settings.mean_range or (-3.0, 3.0)
    sd_range = settings.sd_range or (-5.0, 5.0)
    misses_z = misses_y = 0
    worst: Worst | None = None
    worst_zy = (0.0, 0.0)
    for v, (mu, sigma) in expected.items():
        stats = result.summary_of(names[v])
        mean, sd = np.asarray(stats["mean"], float), np.asarray(stats["sd"], float)
        bad_z, bad_y, score = check_points(mean, sd, mu, sigma, n_used, mean_range, sd_range)
        misses_z += int(bad_z.sum())
        misses_y += int(bad_y.sum())
        k = int(np.argmax(score))
        if worst is None or score[k] > worst.ratio:
            worst = Worst(v, float(times[k]), float(mean[k]), float(mu[k]), float(score[k]))
            z, y = z_and_y(mean[k], sd[k], mu[k], sigma[k], n_used)
            worst_zy = (float(z), float(y))
    misses = misses_z + misses_y
    if misses <= allowed_misses:
        return Outcome(case.number, "pass", worst=worst)
    z, y = worst_zy
    detail = ("expected exactly this value with sd 0" if np.isnan(z)
              else f"Z {z:+.2f}, Y {y:+.2f}")
    return Outcome(case.number, "fail", worst=worst,
                   message=f"{misses_z} Z and {misses_y} Y check(s) outside {mean_range} / "
                           f"{sd_range} (n = {n_used}, seed {seed}); worst: {worst.variable} at "
                           f"t={worst.time:g}: mean {worst.got:.6g}, expected {worst.expected:.6g}"
                           f" ({detail})")
