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
trajectories. Two kinds of column need every run's values instead (then the run
keeps them): a statistic of ln(X) (`ln(X)-mean`, `ln(X)-sd`: the lognormal cases
00056 and 00064), computed from the logs of the runs; and a `-mean` column without
its `-sd` (the Cauchy cases): for an untruncated Cauchy (00048, 00049) the law has
no mean and the notes say the column holds its location, its median, checked by the
sign test (without_mean, sign_test); for a truncated one (00059) it is the mean,
checked by Z with the runs' own sd.

A model without reactions is deterministic between its distrib draws, so the
reference (and any backend that integrates) samples it exactly, each member with
its own draws: the reference runs such cases; for any other it declines.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import sympy as sp

from ..sbml.distrib import Cauchy, draws_in
from .cases import Case, CaseError, Settings
from .compare import Worst
from .outcome import Outcome
from .semantic import case_outputs

NEEDS_BACKEND = "stochastic case: needs a stochastic backend (--backend ssa)"


@dataclass(frozen=True)
class Statistic:
    """What the results file expects of one column label (`X` or `ln(X)`)."""

    label: str  # as in the results' column names: X-mean, ln(X)-mean
    variable: str  # the settings' variable it is a statistic of
    log: bool  # of ln(variable) (the lognormal cases 00056, 00064)
    mu: np.ndarray
    sigma: np.ndarray | None  # None: a mean column alone (see run_stochastic)


def expected_statistics(case: Case, settings: Settings):
    """(times, [Statistic]) from the case's results file: for every variable X its
    `X-mean` / `X-sd` columns, or those of ln(X); a `-mean` column may come alone
    when the settings' `output:` does not ask for its `-sd` (see run_stochastic)."""
    times, columns = case.expected()
    out = []
    for v in settings.variables:
        found = False
        for label, log in ((v, False), (f"ln({v})", True)):
            mean, sd = columns.get(f"{label}-mean"), columns.get(f"{label}-sd")
            if mean is None:
                continue
            if sd is None and (f"{label}-sd" in settings.output or not settings.output):
                break  # its sd is asked for and missing
            if not np.all(np.isfinite(mean)) or (sd is not None and (
                    np.any(sd < 0) or not np.all(np.isfinite(sd)))):
                raise CaseError(f"{label}-mean / {label}-sd hold negative or non-finite values")
            out.append(Statistic(label, v, log, mean, sd))
            found = True
        if not found:
            raise CaseError(f"the results file has no {v}-mean / {v}-sd columns")
    return times, out


def _log_values(values: np.ndarray, mu, sigma) -> np.ndarray:
    """ln of every run's values. Where ln is undefined in every run alike (t = 0 of
    00056 and 00064: every run holds X = 0, and the files give ln(X) 0 with sd 0),
    the point is checked as what it is, a deterministic value: every run equal
    stands for the expected value (sd 0); runs that differ there stay NaN and fail."""
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.log(values)
    same = np.all(values == values[:1], axis=0) & np.all(values <= 0, axis=0)
    deterministic = same & (np.asarray(sigma) == 0) if sigma is not None else same
    return np.where(deterministic[None, :], np.asarray(mu)[None, :], logs)


def without_mean(network, variable: str) -> bool:
    """Whether `variable` takes its values from a law without a mean: an untruncated
    distrib cauchy() in its initial or event assignments (00048, 00049). Then a
    `-mean` column holds the law's location, which is its median (the cases' notes
    say so); any other `-mean` column without `-sd` is a mean (00059: a truncated
    Cauchy has one). CaseError for a Cauchy cut on one side only: no mean, and its
    median is not its location, so no statistic is defined."""
    exprs = [a.math for a in network.initial_assignments if a.variable == variable]
    exprs += [a.math for e in network.events for a in e.assignments if a.variable == variable]
    cauchy = [d for e in exprs for d in draws_in(e) if isinstance(d, Cauchy)]
    infinite = [sum(1 for b in d.bounds if b in (sp.oo, -sp.oo)) for d in cauchy]
    if any(k == 1 for k in infinite):
        raise CaseError(f"{variable}: a Cauchy draw cut on one side has no mean and no "
                        f"defined statistic for a -mean column")
    return any(k == 2 for k in infinite)


def sign_test(values: np.ndarray, median, mean_range=(-3.0, 3.0)):
    """(bad, score, Z) per point for a column holding a law's median (without_mean):
    the runs above it minus those below, over the square root of their number, is
    N(0, 1) when it is the median (the sign test, distribution-free). Where every run
    equals it exactly the point is exact and passes."""
    values = np.asarray(values, float)  # (runs, points)
    above = np.count_nonzero(values > median, axis=0)
    below = np.count_nonzero(values < median, axis=0)
    exact = (above + below) == 0
    with np.errstate(invalid="ignore", divide="ignore"):
        z = (above - below) / np.sqrt(above + below)
    lo, hi = mean_range
    bad = np.where(exact, False, ~((z > lo) & (z < hi)))
    bound = np.where(z < 0, -lo, hi)
    score = np.where(exact, 0.0, np.abs(z) / bound)
    return bad, np.where(np.isnan(score), np.inf, score), z


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
    # a transformed statistic, or a mean without sd, needs every run's values; the others come
    # from the backend's summary (on the GPU accumulated there)
    per_run = any(st.log or st.sigma is None for st in expected)
    result = run(network, backend=backend, times=times, outputs=list(names.values()), n=runs,
                 seed=seed, summary=not per_run, progress=False)
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
    for st in expected:
        mu, sigma = st.mu, st.sigma
        if per_run:
            values = result.data[result.ok][:, :, result.index(names[st.variable])]
            if st.log:
                values = _log_values(values, mu, sigma)
            n_used = len(values)
            with np.errstate(invalid="ignore"):
                mean = values.mean(axis=0)
                sd = values.std(axis=0, ddof=1) if n_used > 1 else np.zeros(len(times))
        else:
            stats = result.summary_of(names[st.variable])
            mean, sd = np.asarray(stats["mean"], float), np.asarray(stats["sd"], float)
        if sigma is None:
            if without_mean(network, st.variable):
                bad_z, score, z_all = sign_test(values, mu, mean_range)
                mean = np.median(values, axis=0)  # what the worst point reports
            else:  # a mean whose sd the file omits: Z with the runs' own sd
                bad_z, _, score = check_points(mean, sd, mu, sd, n_used, mean_range, sd_range)
                z_all, _ = z_and_y(mean, sd, mu, sd, n_used)
            bad_y = np.zeros_like(bad_z)
        else:
            bad_z, bad_y, score = check_points(mean, sd, mu, sigma, n_used, mean_range, sd_range)
        misses_z += int(bad_z.sum())
        misses_y += int(bad_y.sum())
        k = int(np.argmax(score))
        if worst is None or score[k] > worst.ratio:
            worst = Worst(st.label, float(times[k]), float(mean[k]), float(mu[k]),
                          float(score[k]))
            if sigma is None:
                worst_zy = (float(z_all[k]), float("nan"))
            else:
                z, y = z_and_y(mean[k], sd[k], mu[k], sigma[k], n_used)
                worst_zy = (float(z), float(y))
    misses = misses_z + misses_y
    if misses <= allowed_misses:
        return Outcome(case.number, "pass", worst=worst)
    z, y = worst_zy
    detail = ("expected exactly this value with sd 0" if np.isnan(z)
              else f"no sd in the file: Z {z:+.2f}" if np.isnan(y)
              else f"Z {z:+.2f}, Y {y:+.2f}")
    return Outcome(case.number, "fail", worst=worst,
                   message=f"{misses_z} Z and {misses_y} Y check(s) outside {mean_range} / "
                           f"{sd_range} (n = {n_used}, seed {seed}); worst: {worst.variable} at "
                           f"t={worst.time:g}: mean {worst.got:.6g}, expected {worst.expected:.6g}"
                           f" ({detail})")
