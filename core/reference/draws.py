"""distrib draws for the CPU reference: numpy's Generator on Philox, keyed by
(seed, member).

The reference's generated functions call `_draw(name, parameters..., lower, upper)`
(core's NumpyPrinter prints a Draw so); `bind_draws` gives them one `Draws` per run.
Member i of a run with seed s draws from Philox with the 128-bit key (i << 64) | s,
so a member's numbers do not depend on the ensemble's size or order.

These streams are NOT the kernels' (distrib.cuh draws from sbmlgpu's own Philox
counters with its own samplers): the reference and the ssa/ode backends give the
same distributions, not the same numbers. The reference draws with numpy's own
methods; a truncated draw is rejection from the full distribution where the range
holds at least MIN_MASS of it, else (or after MAX_TRIES misses) the inverse CDF on
the range (scipy.stats; truncnorm for the normal and lognormal), from the tail
nearer the range so that nothing cancels.

Invalid arguments (sd <= 0, lower >= upper, p outside [0, 1], ...) raise
InvalidDraw, which the time loop turns into a failed member naming the draw.
"""

from __future__ import annotations

import math

import numpy as np

MAX_TRIES = 1000
#: a truncation range less probable than this goes straight to the inverse CDF
MIN_MASS = 0.05
_MASK64 = (1 << 64) - 1


class InvalidDraw(Exception):
    """A draw with arguments outside its distribution's domain (not an arithmetic
    error: the generated functions' fallback to IEEE arithmetic must not catch it)."""


def _require(ok: bool, name: str, args, why: str) -> None:
    if not ok:
        shown = ", ".join(repr(float(a)) for a in args)
        raise InvalidDraw(f"distrib draw {name}({shown}): {why}")


def _bounds_ok(lo: float, hi: float) -> bool:
    return not (math.isnan(lo) or math.isnan(hi)) and lo < hi


def _scipy(name: str, params):
    """The scipy.stats frozen distribution of SBML's `name` with its parameters."""
    from scipy import stats

    if name == "normal":
        return stats.norm(params[0], params[1])
    if name == "lognormal":
        return stats.lognorm(params[1], scale=math.exp(params[0]))
    if name == "exponential":
        return stats.expon(scale=1.0 / params[0])
    if name == "gamma":
        return stats.gamma(params[0], scale=params[1])
    if name == "chisquare":
        return stats.chi2(params[0])
    if name == "cauchy":
        return stats.cauchy(params[0], params[1])
    if name == "laplace":
        return stats.laplace(params[0], params[1])
    if name == "rayleigh":
        return stats.rayleigh(scale=params[0])
    if name == "poisson":
        return stats.poisson(params[0])
    if name == "binomial":
        return stats.binom(int(params[0]), params[1])
    raise KeyError(name)


def _plain(rng: np.random.Generator, name: str, p) -> float:
    """One untruncated draw with numpy's own method."""
    if name == "normal":
        return rng.normal(p[0], p[1])
    if name == "lognormal":
        return rng.lognormal(p[0], p[1])
    if name == "exponential":
        return rng.exponential(1.0 / p[0])
    if name == "gamma":
        return rng.gamma(p[0], p[1])
    if name == "chisquare":
        return rng.chisquare(p[0])
    if name == "cauchy":
        return p[0] + p[1] * rng.standard_cauchy()
    if name == "laplace":
        return rng.laplace(p[0], p[1])
    if name == "rayleigh":
        return rng.rayleigh(p[0])
    if name == "poisson":
        return float(rng.poisson(p[0]))
    if name == "binomial":
        return float(rng.binomial(int(p[0]), p[1]))
    raise KeyError(name)


def _check(name: str, p, lo: float, hi: float) -> None:
    args = (*p, lo, hi)
    finite = all(math.isfinite(v) for v in p)
    _require(finite, name, args, "parameters must be finite")
    if name in ("normal", "lognormal", "cauchy", "laplace"):
        _require(p[1] > 0, name, args, "the scale (sd) must be positive")
    elif name in ("exponential", "rayleigh", "chisquare"):
        _require(p[0] > 0, name, args, "the parameter must be positive")
    elif name == "gamma":
        _require(p[0] > 0 and p[1] > 0, name, args, "shape and scale must be positive")
    elif name == "poisson":
        _require(p[0] >= 0, name, args, "the rate must not be negative")
    elif name == "binomial":
        _require(p[0] >= 0 and p[0] == math.floor(p[0]), name, args,
                 "the number of trials must be a whole number >= 0")
        _require(0 <= p[1] <= 1, name, args, "the probability must lie in [0, 1]")
    if name in ("poisson", "binomial"):
        _require(not (math.isnan(lo) or math.isnan(hi)) and np.floor(hi) >= np.ceil(lo)
                 and hi >= 0, name, args, "the truncation range holds no possible value")
    else:
        _require(_bounds_ok(lo, hi), name, args, "the lower bound must be below the upper")


def _inverse_cdf(rng: np.random.Generator, name: str, p, lo: float, hi: float) -> float:
    if name in ("normal", "lognormal"):  # scipy's truncnorm: exact beyond double's cdf
        from scipy import stats

        if name == "lognormal":
            lo = math.log(lo) if lo > 0 else -math.inf
            hi = math.log(hi) if hi > 0 else -math.inf
        a, b = (lo - p[0]) / p[1], (hi - p[0]) / p[1]
        if not a < b:
            raise InvalidDraw(f"distrib draw {name}: the truncation range has no probability")
        z = float(stats.truncnorm(a, b).ppf(rng.random()))
        x = p[0] + p[1] * z
        return math.exp(x) if name == "lognormal" else x
    dist = _scipy(name, p)
    if name in ("poisson", "binomial"):  # inclusive integer bounds
        lo, hi = float(np.ceil(lo)) - 1, float(np.floor(hi))
    below_lo, below_hi = float(dist.cdf(lo)), float(dist.cdf(hi))
    above_lo, above_hi = float(dist.sf(lo)), float(dist.sf(hi))
    u = rng.random()
    if below_lo < 0.5:  # the range starts in the lower half: count from below
        if not below_hi > below_lo:
            raise InvalidDraw(f"distrib draw {name}: the truncation range has no probability")
        return float(dist.ppf(below_lo + u * (below_hi - below_lo)))
    if not above_lo > above_hi:
        raise InvalidDraw(f"distrib draw {name}: the truncation range has no probability")
    return float(dist.isf(above_lo - u * (above_lo - above_hi)))


def _mass(name: str, p, lo: float, hi: float) -> float:
    """The probability of [lo, hi] (inclusive) under the untruncated law."""
    dist = _scipy(name, p)
    if name in ("poisson", "binomial"):
        lo = float(np.ceil(lo)) - 1
    return float(dist.cdf(hi) - dist.cdf(lo)) if dist.cdf(lo) < 0.5 else \
        float(dist.sf(lo) - dist.sf(hi))


class Draws:
    """`_draw` for one member's run: Philox keyed by (seed, member)."""

    def __init__(self, seed: int, member: int = 0):
        key = (int(seed) & _MASK64) | (int(member) << 64)
        self.rng = np.random.Generator(np.random.Philox(key=key))

    def __call__(self, name: str, *args) -> float:
        args = [float(a) for a in args]
        rng = self.rng
        if name == "uniform":
            lo, hi = args
            _require(math.isfinite(lo) and math.isfinite(hi) and lo < hi, name, args,
                     "minimum and maximum must be finite, minimum below maximum")
            return float(rng.uniform(lo, hi))
        if name == "bernoulli":
            (prob,) = args
            _require(0 <= prob <= 1, name, args, "the probability must lie in [0, 1]")
            return 1.0 if rng.random() < prob else 0.0
        *p, lo, hi = args
        _check(name, p, lo, hi)
        if math.isinf(lo) and math.isinf(hi) or _mass(name, p, lo, hi) >= MIN_MASS:
            for _ in range(MAX_TRIES):
                x = float(_plain(rng, name, p))
                if lo <= x <= hi:
                    return x
        return min(max(_inverse_cdf(rng, name, p, lo, hi), lo), hi)


__all__ = ["Draws", "InvalidDraw", "MAX_TRIES"]
