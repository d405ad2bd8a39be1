{#
  distrib.cuh -- draws from the distributions of SBML distrib (normal, uniform, ...),
  for kernels whose math draws (jinja: include "distrib.cuh", after common.cuh).
  The printer (codegen/printer.py, _print_Draw) writes a draw as
      sbmlgpu_draw_<name>(sbmlgpu_draws, parameters..., lower, upper)
  where `sbmlgpu_draws` is a `sbmlgpu_draws_t*` the kernel declares in the scope of
  its initial values and event assignments. The same text compiles as CUDA and as
  host C++, so a member draws the same numbers on the GPU and the CPU (up to the last
  bit of log/exp/erfc in each math library).

  Stream: Philox4x32-10 keyed by the run's seed, counter (block, item): the member's
  own stream, from counter block 2^63 on, so it never meets the blocks a kernel uses
  for anything else (the SSA's firings count blocks from 0). Each uniform takes two
  32-bit words, and the k-th uniform a member draws is the same whatever the batch.

  Methods (all exact in the sense of drawing from the stated distribution up to
  double rounding; computed in double whatever real_t is):
    normal      inverse CDF on the truncated range (Acklam's quantile refined by one
                Halley step on erfc), mirrored so the range lies in the lower half
                (no cancellation); below -30 sd Robert's (1995) exponential
                rejection; a range narrow for its position by uniform rejection
    lognormal   exp of the normal on the logs of the bounds
    exponential, rayleigh, cauchy, laplace: inverse CDF on the truncated range
                (expm1/log1p forms, exact in the far tails)
    uniform     min + (max - min) u
    gamma       Marsaglia-Tsang (2000), shape < 1 by U^(1/shape) boosting
    chisquare   2 gamma(nu/2)
    poisson     product of uniforms below 10, Hoermann's PTRS (1993) above
    bernoulli   u < p
    binomial    inversion while n min(p, 1-p) < 10, Hoermann's BTRS (1993) above
  Truncated gamma, chisquare, poisson and binomial draw by rejection, at most
  SBMLGPU_DRAW_MAX_TRIES times; a range of too little probability for that, like any
  invalid argument (sd <= 0, lower >= upper, p outside [0, 1], ...), sets `bad` and
  returns NaN: the kernel flags the member as failed, never a silent NaN.
  Bounds are inclusive (for the discrete distributions it matters).
#}
#ifndef SBMLGPU_DISTRIB_CUH
#define SBMLGPU_DISTRIB_CUH

#define SBMLGPU_DRAW_FIRST_BLOCK 0x8000000000000000ull
#define SBMLGPU_DRAW_MAX_TRIES 1000000

typedef struct {
    sbmlgpu_rng_t rng;
    int bad; /* an invalid argument, or a truncation range rejection could not hit */
} sbmlgpu_draws_t;

SBMLGPU_HD void sbmlgpu_draws_init(sbmlgpu_draws_t* d, uint64_t seed, uint64_t item)
{
    sbmlgpu_rng_init(&d->rng, seed, item, SBMLGPU_DRAW_FIRST_BLOCK);
    d->bad = 0;
}

/* uniform in (0, 1), 52 bits, from two words of the member's draw stream */
SBMLGPU_HD double sbmlgpu_draw_u01(sbmlgpu_draws_t* d)
{
    uint32_t hi = sbmlgpu_rng_u32(&d->rng);
    uint32_t lo = sbmlgpu_rng_u32(&d->rng);
    return sbmlgpu_u01_double(hi, lo);
}

SBMLGPU_HD double sbmlgpu_draw_invalid(sbmlgpu_draws_t* d)
{
    d->bad = 1;
    return NAN;
}

SBMLGPU_HD double sbmlgpu_draw_clamp(double x, double lo, double hi)
{
    return x < lo ? lo : (x > hi ? hi : x);
}

/* bounds that make sense: not NaN, lower < upper */
SBMLGPU_HD bool sbmlgpu_draw_range_ok(double lo, double hi)
{
    return !isnan(lo) && !isnan(hi) && lo < hi;
}

/* ---- standard normal ------------------------------------------------------- */
SBMLGPU_HD double sbmlgpu_normal_cdf(double z)
{
    return 0.5 * erfc(-z * 0.70710678118654752440);
}

/* Acklam's rational approximation (relative error 1.2e-9), then one Halley step on
   erfc, which brings it to double precision. p in (0, 1). */
SBMLGPU_HD double sbmlgpu_normal_quantile(double p)
{
    const double a0 = -3.969683028665376e+01, a1 = 2.209460984245205e+02,
                 a2 = -2.759285104469687e+02, a3 = 1.383577518672690e+02,
                 a4 = -3.066479806614716e+01, a5 = 2.506628277459239e+00;
    const double b0 = -5.447609879822406e+01, b1 = 1.615858368580409e+02,
                 b2 = -1.556989798598866e+02, b3 = 6.680131188771972e+01,
                 b4 = -1.328068155288572e+01;
    const double c0 = -7.784894002430293e-03, c1 = -3.223964580411365e-01,
                 c2 = -2.400758277161838e+00, c3 = -2.549732539343734e+00,
                 c4 = 4.374664141464968e+00, c5 = 2.938163982698783e+00;
    const double d0 = 7.784695709041462e-03, d1 = 3.224671290700398e-01,
                 d2 = 2.445134137142996e+00, d3 = 3.754408661907416e+00;
    if (!(p > 0.0)) return -INFINITY;
    if (!(p < 1.0)) return INFINITY;
    double x;
    if (p < 0.02425) {
        const double q = sqrt(-2.0 * log(p));
        x = (((((c0 * q + c1) * q + c2) * q + c3) * q + c4) * q + c5) /
            ((((d0 * q + d1) * q + d2) * q + d3) * q + 1.0);
    } else if (p <= 1.0 - 0.02425) {
        const double q = p - 0.5, r = q * q;
        x = (((((a0 * r + a1) * r + a2) * r + a3) * r + a4) * r + a5) * q /
            (((((b0 * r + b1) * r + b2) * r + b3) * r + b4) * r + 1.0);
    } else {
        const double q = sqrt(-2.0 * log1p(-p));
        x = -(((((c0 * q + c1) * q + c2) * q + c3) * q + c4) * q + c5) /
            ((((d0 * q + d1) * q + d2) * q + d3) * q + 1.0);
    }
    /* Halley: e = Phi(x) - p, relative to the density (the upper half through the
       upper tail's own function, so that 1 - p loses nothing) */
    const double e = x <= 0.0 ? sbmlgpu_normal_cdf(x) - p
                              : (1.0 - p) - 0.5 * erfc(x * 0.70710678118654752440);
    const double u = e * 2.50662827463100050242 * exp(0.5 * x * x);
    if (isfinite(u)) x = x - u / (1.0 + 0.5 * x * u);
    return x;
}

/* standard normal truncated to [a, b], a < b */
SBMLGPU_HD double sbmlgpu_std_normal_between(sbmlgpu_draws_t* d, double a, double b)
{
    double sign = 1.0;
    if (a > 0.0) { /* mirror: the range then lies (partly) in the lower half */
        const double t = a;
        a = -b;
        b = -t;
        sign = -1.0;
    }
    double z;
    if (b < -30.0) {
        /* far lower tail, mirrored to [c, e] in the upper one: Robert (1995),
           exponential proposal of rate alpha truncated to the range */
        const double c = -b, e = -a;
        const double alpha = 0.5 * (c + sqrt(c * c + 4.0));
        const double mass = -expm1(-alpha * (e - c));
        int tries = 0;
        for (;;) {
            if (++tries > SBMLGPU_DRAW_MAX_TRIES) return sbmlgpu_draw_invalid(d);
            const double y = c - log1p(-sbmlgpu_draw_u01(d) * mass) / alpha;
            const double v = sbmlgpu_draw_u01(d);
            if (v <= exp(-0.5 * (y - alpha) * (y - alpha))) { z = -y; break; }
        }
    } else if ((b - a) * (fabs(a) + fabs(b)) < 1.0) {
        /* narrow for its position: uniform proposal, accepted by the density's ratio
           to its largest value on the range (at least exp(-1/2)) */
        const double m = (a <= 0.0 && b >= 0.0) ? 0.0 : (fabs(a) < fabs(b) ? a : b);
        int tries = 0;
        for (;;) {
            if (++tries > SBMLGPU_DRAW_MAX_TRIES) return sbmlgpu_draw_invalid(d);
            const double y = a + (b - a) * sbmlgpu_draw_u01(d);
            const double v = sbmlgpu_draw_u01(d);
            if (v <= exp(-0.5 * (y * y - m * m))) { z = y; break; }
        }
    } else {
        const double pa = sbmlgpu_normal_cdf(a), pb = sbmlgpu_normal_cdf(b);
        z = sbmlgpu_normal_quantile(pa + sbmlgpu_draw_u01(d) * (pb - pa));
    }
    return sign * sbmlgpu_draw_clamp(z, a, b);
}

SBMLGPU_HD double sbmlgpu_draw_normal(sbmlgpu_draws_t* d, double mean, double sd, double lo,
                                      double hi)
{
    if (!(sd > 0.0) || !isfinite(mean) || !isfinite(sd) || !sbmlgpu_draw_range_ok(lo, hi))
        return sbmlgpu_draw_invalid(d);
    const double z = sbmlgpu_std_normal_between(d, (lo - mean) / sd, (hi - mean) / sd);
    return sbmlgpu_draw_clamp(mean + sd * z, lo, hi);
}

SBMLGPU_HD double sbmlgpu_draw_lognormal(sbmlgpu_draws_t* d, double mean, double sd,
                                         double lo, double hi)
{
    if (!(sd > 0.0) || !isfinite(mean) || !isfinite(sd) || !sbmlgpu_draw_range_ok(lo, hi) ||
        !(hi > 0.0))
        return sbmlgpu_draw_invalid(d);
    const double llo = lo > 0.0 ? log(lo) : -INFINITY;
    const double lhi = log(hi);
    if (!(llo < lhi)) return sbmlgpu_draw_invalid(d);
    const double z = sbmlgpu_std_normal_between(d, (llo - mean) / sd, (lhi - mean) / sd);
    return sbmlgpu_draw_clamp(exp(mean + sd * z), lo, hi);
}

/* ---- closed-form inverse CDFs ----------------------------------------------- */
/* Exp(1) truncated to [0, width]: -log(1 - u (1 - e^-width)), exact for any width */
SBMLGPU_HD double sbmlgpu_std_exponential_below(sbmlgpu_draws_t* d, double width)
{
    return -log1p(sbmlgpu_draw_u01(d) * expm1(-width));
}

SBMLGPU_HD double sbmlgpu_draw_exponential(sbmlgpu_draws_t* d, double rate, double lo,
                                           double hi)
{
    if (!(rate > 0.0) || !isfinite(rate) || !sbmlgpu_draw_range_ok(lo, hi) || !(hi > 0.0))
        return sbmlgpu_draw_invalid(d);
    const double start = lo > 0.0 ? lo : 0.0; /* memoryless: the tail from `start` */
    const double x = start + sbmlgpu_std_exponential_below(d, rate * (hi - start)) / rate;
    return sbmlgpu_draw_clamp(x, lo, hi);
}

SBMLGPU_HD double sbmlgpu_draw_rayleigh(sbmlgpu_draws_t* d, double scale, double lo, double hi)
{
    if (!(scale > 0.0) || !isfinite(scale) || !sbmlgpu_draw_range_ok(lo, hi) || !(hi > 0.0))
        return sbmlgpu_draw_invalid(d);
    /* x^2 / (2 scale^2) is Exp(1): draw it on the bounds' images */
    const double start = lo > 0.0 ? lo : 0.0;
    const double wa = 0.5 * (start / scale) * (start / scale);
    const double wb = 0.5 * (hi / scale) * (hi / scale);
    const double w = wa + sbmlgpu_std_exponential_below(d, wb - wa);
    return sbmlgpu_draw_clamp(scale * sqrt(2.0 * w), lo, hi);
}

SBMLGPU_HD double sbmlgpu_draw_cauchy(sbmlgpu_draws_t* d, double location, double scale,
                                      double lo, double hi)
{
    if (!(scale > 0.0) || !isfinite(scale) || !isfinite(location) ||
        !sbmlgpu_draw_range_ok(lo, hi))
        return sbmlgpu_draw_invalid(d);
    const double ta = atan((lo - location) / scale), tb = atan((hi - location) / scale);
    const double x = location + scale * tan(ta + sbmlgpu_draw_u01(d) * (tb - ta));
    return sbmlgpu_draw_clamp(x, lo, hi);
}

SBMLGPU_HD double sbmlgpu_draw_laplace(sbmlgpu_draws_t* d, double location, double scale,
                                       double lo, double hi)
{
    if (!(scale > 0.0) || !isfinite(scale) || !isfinite(location) ||
        !sbmlgpu_draw_range_ok(lo, hi))
        return sbmlgpu_draw_invalid(d);
    double a = (lo - location) / scale, b = (hi - location) / scale, sign = 1.0;
    if (a > 0.0) { const double t = a; a = -b; b = -t; sign = -1.0; }
    double z;
    if (b <= 0.0) {
        /* wholly in the lower half, where the density is proportional to e^z */
        z = b - sbmlgpu_std_exponential_below(d, b - a);
    } else {
        const double pa = 0.5 * exp(a), qb = 0.5 * exp(-b); /* P(Z < a), P(Z > b) */
        const double p = pa + sbmlgpu_draw_u01(d) * ((1.0 - qb) - pa);
        z = p < 0.5 ? log(2.0 * p) : -log(2.0 * (1.0 - p));
    }
    return sbmlgpu_draw_clamp(location + scale * sign * sbmlgpu_draw_clamp(z, a, b), lo, hi);
}

SBMLGPU_HD double sbmlgpu_draw_uniform(sbmlgpu_draws_t* d, double lo, double hi)
{
    if (!isfinite(lo) || !isfinite(hi) || !(lo < hi) || !isfinite(hi - lo))
        return sbmlgpu_draw_invalid(d);
    const double x = lo + (hi - lo) * sbmlgpu_draw_u01(d);
    return x < hi ? x : lo; /* [lo, hi): rounding never returns the excluded end */
}

SBMLGPU_HD double sbmlgpu_draw_bernoulli(sbmlgpu_draws_t* d, double p)
{
    if (!(p >= 0.0 && p <= 1.0)) return sbmlgpu_draw_invalid(d);
    return sbmlgpu_draw_u01(d) < p ? 1.0 : 0.0;
}

/* ---- gamma, chi-square ------------------------------------------------------ */
/* Marsaglia & Tsang (2000), scale 1; shape < 1 through gamma(shape + 1) U^(1/shape) */
SBMLGPU_HD double sbmlgpu_std_gamma(sbmlgpu_draws_t* d, double shape)
{
    double boost = 0.0; /* log of the factor U^(1/shape) */
    if (shape < 1.0) {
        boost = log(sbmlgpu_draw_u01(d)) / shape;
        shape += 1.0;
    }
    const double dd = shape - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * dd);
    for (;;) {
        double x, v;
        do {
            x = sbmlgpu_normal_quantile(sbmlgpu_draw_u01(d));
            v = 1.0 + c * x;
        } while (v <= 0.0);
        v = v * v * v;
        const double u = sbmlgpu_draw_u01(d);
        if (u < 1.0 - 0.0331 * (x * x) * (x * x) ||
            log(u) < 0.5 * x * x + dd * (1.0 - v + log(v)))
            return boost == 0.0 ? dd * v : exp(log(dd * v) + boost);
    }
}

SBMLGPU_HD double sbmlgpu_draw_gamma(sbmlgpu_draws_t* d, double shape, double scale, double lo,
                                     double hi)
{
    if (!(shape > 0.0) || !(scale > 0.0) || !isfinite(shape) || !isfinite(scale) ||
        !sbmlgpu_draw_range_ok(lo, hi) || !(hi > 0.0))
        return sbmlgpu_draw_invalid(d);
    for (int tries = 0; tries < SBMLGPU_DRAW_MAX_TRIES; ++tries) {
        const double x = scale * sbmlgpu_std_gamma(d, shape);
        if (x >= lo && x <= hi) return x;
    }
    return sbmlgpu_draw_invalid(d);
}

SBMLGPU_HD double sbmlgpu_draw_chisquare(sbmlgpu_draws_t* d, double dof, double lo, double hi)
{
    return sbmlgpu_draw_gamma(d, 0.5 * dof, 2.0, lo, hi);
}

/* ---- Poisson, binomial -------------------------------------------------------- */
SBMLGPU_HD double sbmlgpu_std_poisson(sbmlgpu_draws_t* d, double lam)
{
    if (lam == 0.0) return 0.0;
    if (lam < 10.0) { /* count uniforms whose running product stays above e^-lam */
        const double limit = exp(-lam);
        double k = 0.0, prod = sbmlgpu_draw_u01(d);
        while (prod > limit) {
            k += 1.0;
            prod *= sbmlgpu_draw_u01(d);
        }
        return k;
    }
    /* PTRS: Hoermann, "The transformed rejection method for generating Poisson
       random variables", Insurance: Mathematics and Economics 12 (1993) */
    const double slam = sqrt(lam), loglam = log(lam);
    const double b = 0.931 + 2.53 * slam, a = -0.059 + 0.02483 * b;
    const double invalpha = 1.1239 + 1.1328 / (b - 3.4), vr = 0.9277 - 3.6224 / (b - 2.0);
    for (;;) {
        const double u = sbmlgpu_draw_u01(d) - 0.5, v = sbmlgpu_draw_u01(d);
        const double us = 0.5 - fabs(u);
        const double k = floor((2.0 * a / us + b) * u + lam + 0.43);
        if (us >= 0.07 && v <= vr) return k;
        if (k < 0.0 || (us < 0.013 && v > us)) continue;
        if (log(v) + log(invalpha) - log(a / (us * us) + b) <=
            -lam + k * loglam - lgamma(k + 1.0))
            return k;
    }
}

SBMLGPU_HD double sbmlgpu_draw_poisson(sbmlgpu_draws_t* d, double rate, double lo, double hi)
{
    if (!(rate >= 0.0) || !isfinite(rate) || isnan(lo) || isnan(hi) || !(lo <= hi) ||
        !(hi >= 0.0) || floor(hi) < ceil(lo))
        return sbmlgpu_draw_invalid(d);
    for (int tries = 0; tries < SBMLGPU_DRAW_MAX_TRIES; ++tries) {
        const double k = sbmlgpu_std_poisson(d, rate);
        if (k >= lo && k <= hi) return k;
    }
    return sbmlgpu_draw_invalid(d);
}

/* binomial(n, p) for p <= 1/2 */
SBMLGPU_HD double sbmlgpu_std_binomial(sbmlgpu_draws_t* d, double n, double p)
{
    if (n == 0.0 || p == 0.0) return 0.0;
    const double q = 1.0 - p;
    if (n * p < 10.0) { /* inversion: walk the pmf from 0 */
        const double s = p / q, a = (n + 1.0) * s;
        for (;;) {
            double r = pow(q, n), u = sbmlgpu_draw_u01(d), k = 0.0;
            while (u > r && k <= n && r > 0.0) {
                u -= r;
                k += 1.0;
                r *= a / k - s;
            }
            if (u <= r && k <= n) return k; /* else rounding ran past the end: again */
        }
    }
    /* BTRS: Hoermann, "The generation of binomial random variates", J. Statist.
       Comput. Simul. 46 (1993) */
    const double spq = sqrt(n * p * q);
    const double b = 1.15 + 2.53 * spq, a = -0.0873 + 0.0248 * b + 0.01 * p;
    const double c = n * p + 0.5, vr = 0.92 - 4.2 / b;
    const double alpha = (2.83 + 5.1 / b) * spq, lpq = log(p / q);
    const double m = floor((n + 1.0) * p);
    const double h = lgamma(m + 1.0) + lgamma(n - m + 1.0);
    for (;;) {
        const double u = sbmlgpu_draw_u01(d) - 0.5;
        double v = sbmlgpu_draw_u01(d);
        const double us = 0.5 - fabs(u);
        const double k = floor((2.0 * a / us + b) * u + c);
        if (k < 0.0 || k > n) continue;
        if (us >= 0.07 && v <= vr) return k;
        v = log(v * alpha / (a / (us * us) + b));
        if (v <= h - lgamma(k + 1.0) - lgamma(n - k + 1.0) + (k - m) * lpq) return k;
    }
}

SBMLGPU_HD double sbmlgpu_draw_binomial(sbmlgpu_draws_t* d, double n, double p, double lo,
                                        double hi)
{
    if (!(n >= 0.0) || !isfinite(n) || n != floor(n) || !(p >= 0.0 && p <= 1.0) ||
        isnan(lo) || isnan(hi) || !(lo <= hi) || !(hi >= 0.0) || !(lo <= n) ||
        floor(hi) < ceil(lo))
        return sbmlgpu_draw_invalid(d);
    for (int tries = 0; tries < SBMLGPU_DRAW_MAX_TRIES; ++tries) {
        const double k = p <= 0.5 ? sbmlgpu_std_binomial(d, n, p)
                                  : n - sbmlgpu_std_binomial(d, n, 1.0 - p);
        if (k >= lo && k <= hi) return k;
    }
    return sbmlgpu_draw_invalid(d);
}

#endif /* SBMLGPU_DISTRIB_CUH */
