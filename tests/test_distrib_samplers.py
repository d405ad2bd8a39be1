"""The kernels' distrib samplers (core/codegen/templates/distrib.cuh), as the CUDA
printer prints them, compiled for the host and checked against scipy.stats.

Each distribution, plain and truncated, is drawn 20,000 times at a fixed seed (one
draw from each member's stream) and must pass a goodness-of-fit test against the
exact (truncated) law: Kolmogorov-Smirnov for the continuous ones, chi-square over
the pmf (cells of expected count >= 5) for the discrete ones, with p > P_MIN = 1e-3
(a correct sampler fails at a random seed one time in a thousand; the seed is fixed,
so the outcome is reproducible), and the sample mean within 5 standard errors of the
exact one. The inverse normal CDF is checked against scipy's ndtri directly.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
import sympy as sp
from scipy import special, stats

from sbmlgpu.codegen.compile_check import nvcc_available, nvcc_compile
from sbmlgpu.codegen.printer import CudaPrinter
from sbmlgpu.codegen.templates import render
from sbmlgpu.runtime import host
from sbmlgpu.sbml import distrib as D

needs_cxx = pytest.mark.skipif(host.find_compiler() is None, reason="no C++ compiler")
N = 20_000
P_MIN = 1e-3
SEED = 20261124
oo = sp.oo


def _draw(cls, *args):
    return cls(sp.Integer(0), *[sp.sympify(a) for a in args])


# (id, the Draw, scipy's law of it, discrete)
CASES = [
    ("normal", _draw(D.Normal, 1.5, 2, -oo, oo), stats.norm(1.5, 2), False),
    ("normal_two_sided", _draw(D.Normal, 0, 1.5, -0.5, 2), stats.truncnorm(-0.5 / 1.5, 2 / 1.5, 0, 1.5), False),
    ("normal_upper_tail", _draw(D.Normal, 0, 1, 3, oo), stats.truncnorm(3, np.inf), False),
    ("normal_far_tail", _draw(D.Normal, 0, 1, -oo, -40), stats.truncnorm(-np.inf, -40), False),
    ("normal_narrow", _draw(D.Normal, 0, 1, 40, sp.Rational(401, 10)), stats.truncnorm(40, 40.1), False),
    ("normal_tiny_range", _draw(D.Normal, 0, 1, 0.25, 0.2501), stats.truncnorm(0.25, 0.2501), False),
    ("lognormal", _draw(D.LogNormal, 0.5, 0.8, -oo, oo), stats.lognorm(0.8, scale=np.exp(0.5)), False),
    ("uniform", _draw(D.Uniform, -1, 3), stats.uniform(-1, 4), False),
    ("exponential", _draw(D.Exponential, 2, -oo, oo), stats.expon(scale=0.5), False),
    ("exponential_truncated", _draw(D.Exponential, 1, 2, 9), stats.truncexpon(7, loc=2), False),
    ("exponential_far", _draw(D.Exponential, 1, 500, 501), stats.truncexpon(1, loc=500), False),
    ("rayleigh", _draw(D.Rayleigh, 2, -oo, oo), stats.rayleigh(scale=2), False),
    ("cauchy", _draw(D.Cauchy, 1, 2, -oo, oo), stats.cauchy(1, 2), False),
    ("laplace", _draw(D.Laplace, 0, 2, -oo, oo), stats.laplace(0, 2), False),
    ("laplace_far", _draw(D.Laplace, 0, 1, -1000, -999), None, False),
    ("gamma", _draw(D.Gamma, 2, 1.1, -oo, oo), stats.gamma(2, scale=1.1), False),
    ("gamma_small_shape", _draw(D.Gamma, 0.3, 2, -oo, oo), stats.gamma(0.3, scale=2), False),
    ("chisquare", _draw(D.ChiSquare, 3.2, -oo, oo), stats.chi2(3.2), False),
    ("poisson_small", _draw(D.Poisson, 1.5, -oo, oo), stats.poisson(1.5), True),
    ("poisson_ptrs", _draw(D.Poisson, 37.5, -oo, oo), stats.poisson(37.5), True),
    ("poisson_large", _draw(D.Poisson, 1e6, -oo, oo), stats.poisson(1e6), True),
    ("binomial_inversion", _draw(D.Binomial, 20, 0.03, -oo, oo), stats.binom(20, 0.03), True),
    ("binomial_btrs", _draw(D.Binomial, 100, 0.2, -oo, oo), stats.binom(100, 0.2), True),
    ("binomial_flipped", _draw(D.Binomial, 1000, 0.7, -oo, oo), stats.binom(1000, 0.7), True),
    ("bernoulli", _draw(D.Bernoulli, 0.23), stats.bernoulli(0.23), True),
]
# truncated laws scipy has no class for: (law, lower, upper), bounds inclusive
TRUNCATED = {
    "rayleigh_truncated": (_draw(D.Rayleigh, 2, 3, 5), stats.rayleigh(scale=2), 3, 5, False),
    "cauchy_truncated": (_draw(D.Cauchy, 1, 2, 1.1, 10), stats.cauchy(1, 2), 1.1, 10, False),
    "laplace_truncated": (_draw(D.Laplace, 1, 2, 2, 10), stats.laplace(1, 2), 2, 10, False),
    "lognormal_truncated": (_draw(D.LogNormal, 1, 2, 3, 10), stats.lognorm(2, scale=np.e), 3, 10,
                            False),
    "gamma_truncated": (_draw(D.Gamma, 1, 2, 3, 6), stats.gamma(1, scale=2), 3, 6, False),
    "poisson_truncated": (_draw(D.Poisson, 3, 5, 8), stats.poisson(3), 5, 8, True),
    "binomial_truncated": (_draw(D.Binomial, 100, 0.2, 15, 32), stats.binom(100, 0.2), 15, 32,
                           True),
}


class _Truncated:
    """cdf/pmf/mean/var of `law` restricted to [lo, hi] (inclusive)."""

    def __init__(self, law, lo, hi, discrete):
        self.law, self.lo, self.hi, self.discrete = law, lo, hi, discrete
        below = np.ceil(lo) - 1 if discrete else lo
        self.f_lo, self.mass = law.cdf(below), law.cdf(hi) - law.cdf(below)

    def cdf(self, x):
        return np.clip((self.law.cdf(np.minimum(x, self.hi)) - self.f_lo) / self.mass, 0, 1)

    def pmf(self, k):
        return np.where((k >= self.lo) & (k <= self.hi), self.law.pmf(k) / self.mass, 0.0)

    def _moment(self, power):
        if self.discrete:
            k = np.arange(np.ceil(self.lo), np.floor(self.hi) + 1)
            return float(np.sum(k ** power * self.pmf(k)))
        from scipy.integrate import quad
        return quad(lambda x: x ** power * self.law.pdf(x), self.lo, self.hi)[0] / self.mass

    def mean(self):
        return self._moment(1)

    def var(self):
        return self._moment(2) - self.mean() ** 2


def _laws():
    out = {name: (draw, law, discrete) for name, draw, law, discrete in CASES if law is not None}
    for name, (draw, law, lo, hi, discrete) in TRUNCATED.items():
        out[name] = (draw, _Truncated(law, lo, hi, discrete), discrete)
    return out


LAWS = _laws()
INVALID = {  # arguments outside the domain: NaN and the bad flag, never a number
    "sd_negative": _draw(D.Normal, 0, -1, -oo, oo),
    "bounds_reversed": _draw(D.Normal, 0, 1, 2, 1),
    "uniform_empty": _draw(D.Uniform, 1, 1),
    "binomial_fractional_n": _draw(D.Binomial, 2.5, 0.5, -oo, oo),
    "poisson_negative": _draw(D.Poisson, -1, -oo, oo),
    "bernoulli_p_above_1": _draw(D.Bernoulli, 1.5),
    "exponential_range_below_support": _draw(D.Exponential, 1, -3, -1),
    "gamma_range_without_mass": _draw(D.Gamma, 2, 1, 2000, oo),  # rejection cannot hit it
}


def _harness(draws: dict, precision: str = "double") -> str:
    """One C function per draw: member i of [first, first + n) draws k values."""
    printer = CudaPrinter({}, precision)
    text = render("sbmlgpu.codegen", "common.cuh", precision=precision)
    text += render("sbmlgpu.codegen", "distrib.cuh", precision=precision)
    for name, draw in draws.items():
        text += f"""
extern "C" void draw_{name}(unsigned long long seed, long first, long n, int k, double* out,
                            int* bad)
{{
    for (long i = 0; i < n; ++i) {{
        sbmlgpu_draws_t state;
        sbmlgpu_draws_init(&state, seed, (unsigned long long)(first + i));
        sbmlgpu_draws_t* sbmlgpu_draws = &state;
        for (int j = 0; j < k; ++j) out[i * k + j] = (double){printer.doprint(draw)};
        bad[i] = state.bad;
    }}
}}
"""
    text += """
extern "C" void quantile(long n, const double* p, double* out)
{
    for (long i = 0; i < n; ++i) out[i] = sbmlgpu_normal_quantile(p[i]);
}
"""
    return text


@pytest.fixture(scope="module")
def library():
    if host.find_compiler() is None:
        pytest.skip("no C++ compiler")
    far = {name: draw for name, draw, law, _ in CASES if law is None}
    return host.load(_harness({**{k: v[0] for k, v in LAWS.items()}, **far, **INVALID}),
                     "distrib_samplers.cu", ("-ffp-contract=off",), openmp=False)


def sample(library, name, n=N, first=0, k=1, seed=SEED):
    out = np.empty(n * k)
    bad = np.zeros(n, np.int32)
    f = getattr(library, f"draw_{name}")
    f.argtypes = [ctypes.c_ulonglong, ctypes.c_long, ctypes.c_long, ctypes.c_int,
                  ctypes.c_void_p, ctypes.c_void_p]
    f(seed, first, n, k, out.ctypes.data_as(ctypes.c_void_p), bad.ctypes.data_as(ctypes.c_void_p))
    return out.reshape(n, k), bad


def _chisquare_p(values: np.ndarray, law) -> float:
    """Chi-square goodness of fit over the support, tail cells merged to >= 5 expected."""
    k = np.arange(values.min() - 50 if values.min() > 50 else 0, values.max() + 51)
    expected = law.pmf(k) * len(values)
    observed = np.array([np.count_nonzero(values == v) for v in k], float)
    cells_o, cells_e, acc_o, acc_e = [], [], 0.0, 0.0
    for o, e in zip(observed, expected):
        acc_o, acc_e = acc_o + o, acc_e + e
        if acc_e >= 5:
            cells_o.append(acc_o)
            cells_e.append(acc_e)
            acc_o = acc_e = 0.0
    cells_o[-1] += acc_o
    cells_e[-1] += acc_e + (len(values) - sum(cells_e) - acc_e)  # mass beyond the window
    if len(cells_o) < 2:
        return 1.0 if np.all(values == values[0]) else 0.0
    return float(stats.chisquare(cells_o, np.asarray(cells_e) * sum(cells_o) / sum(cells_e)).pvalue)


@needs_cxx
@pytest.mark.parametrize("name", sorted(LAWS))
def test_sampler_matches_its_law(library, name):
    draw, law, discrete = LAWS[name]
    values, bad = sample(library, name)
    values = values[:, 0]
    assert not bad.any() and np.all(np.isfinite(values))
    lo, hi = (float(b) for b in draw.bounds)
    assert np.all((values >= lo) & (values <= hi))
    if discrete:
        assert np.all(values == np.round(values))
        p = _chisquare_p(values, law)
    else:
        p = float(stats.kstest(values, law.cdf).pvalue)
    assert p > P_MIN, f"{name}: goodness of fit p = {p:.2e}"
    if name.startswith("cauchy") and name != "cauchy_truncated":
        return  # no mean
    mean, var = float(law.mean()), float(law.var())
    assert abs(values.mean() - mean) < 5 * np.sqrt(var / N) + 1e-12 * abs(mean)
    assert abs(values.var(ddof=1) / var - 1) < 0.1


@needs_cxx
def test_laplace_far_in_the_tail_is_exponential_from_the_upper_bound(library):
    """laplace(0, 1) on [-1000, -999]: e^x there, so -999 - x is Exp(1) cut at 1
    (a CDF would underflow: e^-999 is 0 in double)."""
    values, bad = sample(library, "laplace_far")
    assert not bad.any()
    p = stats.kstest(-999 - values[:, 0], stats.truncexpon(1).cdf).pvalue
    assert p > P_MIN


@needs_cxx
@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid_arguments_flag_the_draw(library, name):
    values, bad = sample(library, name, n=3)
    assert bad.all() and np.all(np.isnan(values))


@needs_cxx
def test_a_member_draws_the_same_numbers_whatever_the_batch(library):
    whole, _ = sample(library, "gamma", n=600, k=3)
    part, _ = sample(library, "gamma", n=7, first=250, k=3)
    np.testing.assert_array_equal(part, whole[250:257])
    other_seed, _ = sample(library, "gamma", n=600, k=3, seed=SEED + 1)
    assert not np.any(other_seed == whole)
    # successive draws of one member are different numbers
    assert np.all(whole[:, 0] != whole[:, 1])


@needs_cxx
def test_normal_quantile_is_double_precision(library):
    p = np.concatenate([10.0 ** -np.arange(1, 300, 7.3), np.linspace(1e-6, 1 - 1e-6, 2001),
                        1 - 10.0 ** -np.arange(1, 16, 0.7)])
    out = np.empty_like(p)
    library.quantile.argtypes = [ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    library.quantile(len(p), p.ctypes.data_as(ctypes.c_void_p), out.ctypes.data_as(ctypes.c_void_p))
    exact = special.ndtri(p)
    scale = np.maximum(np.abs(exact), 1e-3)
    assert np.max(np.abs(out - exact) / scale) < 1e-13


def test_float_kernels_print_draws_in_float():
    text = CudaPrinter({}, "float").doprint(2 * _draw(D.Normal, 0, 1, -oo, oo))
    assert "((float)sbmlgpu_draw_normal(sbmlgpu_draws, 0.0f, 1.0f, -INFINITY, INFINITY))" in text


@needs_cxx
def test_float_precision_builds_on_the_host():
    host.load(_harness({"normal": LAWS["normal"][0]}, "float"), "distrib_float.cu",
              ("-ffp-contract=off",), openmp=False)


@pytest.mark.skipif(not nvcc_available(), reason="nvcc not found")
def test_samplers_compile_with_nvcc():
    source = _harness({k: v[0] for k, v in LAWS.items()}).replace('extern "C" void',
                                                                    'extern "C" __device__ void')
    assert nvcc_compile(source, "sm_90")
