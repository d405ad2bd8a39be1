{#
  interval.cuh -- sound interval arithmetic in double precision for generated code
  (the interval backend, issue 11; DESIGN.md "Intervals"). No template variables:
  the text is plain C++14/CUDA, included standalone or after common.cuh, and compiles
  as device code (nvcc, default flags) and as host C++ (g++ -O2 -ffp-contract=off).
  docs/interval.md, "Interval arithmetic", explains the choices; the tests are
  tests/test_interval_arithmetic*.py (op table: codegen/interval_selftest.py).
#}
#ifndef SBMLGPU_INTERVAL_CUH
#define SBMLGPU_INTERVAL_CUH

#include <math.h>
#include <float.h>
#include <string.h>

#ifdef __FAST_MATH__
#error "interval.cuh: -ffast-math drops the rounding rules that the enclosures rely on"
#endif

#ifndef __CUDACC__
/* Plain host C++ (the same definitions as common.cuh, so either order works). */
#ifndef __host__
#define __host__
#endif
#ifndef __device__
#define __device__
#endif
#ifndef __forceinline__
#define __forceinline__ inline
#endif
#endif
#ifndef SBMLGPU_HD
#define SBMLGPU_HD __host__ __device__ __forceinline__
#endif

/* [lo, hi] with lo <= hi; lo = -inf and hi = +inf stand for unbounded sides. No bound
   is ever NaN: a NaN bound becomes -inf (lo) or +inf (hi), so code comparing bounds
   never decides on a NaN. The empty set is any lo > hi; iv_intersect returns
   [+inf, -inf] (a neutral element of iv_hull). Other operations are not defined on
   empty intervals: check iv_is_empty first where one can arise. */
typedef struct { double lo, hi; } ival;

/* Exact powers of two (C++14 has no hexadecimal float literals). */
#define SBMLGPU_TWO_M52   2.220446049250313e-16    /* 2^-52: ulp(1) */
#define SBMLGPU_TWO_M1074 5e-324                   /* 2^-1074: the least subnormal */
#define SBMLGPU_TWO_M960  1.0261342003245941e-289  /* 2^-960 */
#define SBMLGPU_TWO_M900  1.1830521861667747e-271  /* 2^-900 */
#define SBMLGPU_TWO_1020  1.1235582092889474e+307  /* 2^1020 */
#define SBMLGPU_TWO_50    1125899906842624.0       /* 2^50 */
#define SBMLGPU_PI_LO 3.141592653589793   /* the doubles either side of pi */
#define SBMLGPU_PI_HI 3.1415926535897936
#define SBMLGPU_HALF_PI_HI 1.5707963267948968

/* ---- directed scalar operations --------------------------------------------------
   On the GPU, CUDA's directed-rounding intrinsics (never contracted, unaffected by
   fast-math). On the host the rounding mode stays round-to-nearest: r = RN(op) and
   an error-free transformation gives the sign of the exact error (exact - r); the
   directed result is r or its neighbour on that side. sbmlgpu_err_* return that sign
   (-1, 0, +1), or SBMLGPU_INEXACT where the transformation is not exact (products
   below 2^-900 or over 2^1020, see each): the caller then steps outward anyway (an
   enclosure, not always the tightest). An overflow to +-inf from finite operands has
   an exact value beyond DBL_MAX on that side, so its sign steps round-down to DBL_MAX
   (never +inf as a lower bound) and round-up to -DBL_MAX. */
#define SBMLGPU_INEXACT 2

SBMLGPU_HD int sbmlgpu_sign(double e) { return (e > 0.0) - (e < 0.0); }

/* r = RN(result) was +-inf although the operands were finite: an overflow. */
SBMLGPU_HD int sbmlgpu_overflow_err(double r) { return r > 0.0 ? -1 : 1; }

SBMLGPU_HD int sbmlgpu_err_add(double a, double b)
{
    double r = a + b;
    if (!isfinite(r)) return (isfinite(a) && isfinite(b)) ? sbmlgpu_overflow_err(r) : 0;
    double bb = r - a;                              /* TwoSum (Knuth): exact for any */
    double e = (a - (r - bb)) + (b - bb);           /* finite a, b whose sum is finite */
    return isfinite(e) ? sbmlgpu_sign(e) : SBMLGPU_INEXACT;
}

SBMLGPU_HD int sbmlgpu_err_mul(double a, double b)
{
    double r = a * b;
    if (!isfinite(r)) return (isfinite(a) && isfinite(b)) ? sbmlgpu_overflow_err(r) : 0;
    if (a == 0.0 || b == 0.0) return 0;
    if (r == 0.0) return sbmlgpu_sign(a) * sbmlgpu_sign(b);  /* underflow to +-0 */
    /* fma rounds a*b - r once, so a nonzero e has the right sign even when tiny; a
       zero e proves exactness only where a nonzero remainder cannot underflow to 0 */
    double e = fma(a, b, -r);
    if (e != 0.0) return sbmlgpu_sign(e);
    return fabs(r) >= SBMLGPU_TWO_M960 ? 0 : SBMLGPU_INEXACT;
}

SBMLGPU_HD int sbmlgpu_err_div(double a, double b)
{
    double q = a / b;
    if (!isfinite(q))
        return (isfinite(a) && isfinite(b) && b != 0.0) ? sbmlgpu_overflow_err(q) : 0;
    if (a == 0.0 || !isfinite(b)) return 0;          /* +-0 exactly */
    double e = fma(-q, b, a);                        /* a - q b: its sign times b's */
    if (e != 0.0) return sbmlgpu_sign(e) * sbmlgpu_sign(b);
    return fabs(a) >= SBMLGPU_TWO_M900 ? 0 : SBMLGPU_INEXACT;
}

SBMLGPU_HD int sbmlgpu_err_sqrt(double a)
{
    double s = sqrt(a);
    if (!(a > 0.0) || !isfinite(a)) return 0;        /* NaN, +-0, +inf: exact */
    double e = fma(-s, s, a);                        /* a - s^2 */
    if (e != 0.0) return sbmlgpu_sign(e);
    return a >= SBMLGPU_TWO_M960 ? 0 : SBMLGPU_INEXACT;
}

/* a*b + c - RN(a*b + c) by Boldo and Muller's ErrFma ("Exact and approximated error
   of the FMA", IEEE Trans. Computers 60(2), 2011): a*b + c = r1 + r2 + r3 exactly
   with |r3| <= ulp(r2)/2, so the error has r2's sign. Their proof assumes no
   underflow and no overflow: only the product can underflow (sums are exact there),
   hence the bounds on |a*b| and |c|. */
SBMLGPU_HD int sbmlgpu_err_fma(double a, double b, double c)
{
    double r1 = fma(a, b, c);
    if (!isfinite(r1))
        return (isfinite(a) && isfinite(b) && isfinite(c)) ? sbmlgpu_overflow_err(r1) : 0;
    if (a == 0.0 || b == 0.0) return 0;              /* RN(+-0 + c) = c exactly */
    double u1 = a * b;
    if (!(fabs(u1) >= SBMLGPU_TWO_M900 && fabs(u1) < SBMLGPU_TWO_1020
          && fabs(c) < SBMLGPU_TWO_1020))
        return SBMLGPU_INEXACT;
    double u2 = fma(a, b, -u1);
    double alpha1 = c + u2, t = alpha1 - c;
    double z = (c - (alpha1 - t)) + (u2 - t);        /* TwoSum(c, u2) */
    double beta1 = u1 + alpha1, v = beta1 - u1;
    double beta2 = (u1 - (beta1 - v)) + (alpha1 - v); /* TwoSum(u1, alpha1) */
    double gamma = (beta1 - r1) + beta2;
    return sbmlgpu_sign(gamma + z);                  /* r2 of Fast2Sum(gamma, z) */
}

/* nextafter(r, +inf) inline: the next double up by its bit pattern (libm's nextafter
   is a call, 10 % of the host engine's time on the Lotka-Volterra search). NaN and
   +inf stay; +-0 gives the smallest subnormal; -inf gives -DBL_MAX. */
SBMLGPU_HD double sbmlgpu_next_up(double r)
{
    if (r != r || r == HUGE_VAL) return r;
    if (r == 0.0) return 4.9406564584124654e-324;
    long long bits;
    memcpy(&bits, &r, sizeof bits);
    bits += r > 0.0 ? 1 : -1;  /* away from 0 above it, towards 0 below */
    memcpy(&r, &bits, sizeof bits);
    return r;
}

SBMLGPU_HD double sbmlgpu_next_down(double r) { return -sbmlgpu_next_up(-r); }

/* The directed result from r = RN(exact) and err = sign(exact - r). */
SBMLGPU_HD double sbmlgpu_step_down(double r, int err)
{
    return (err < 0 || err == SBMLGPU_INEXACT) ? sbmlgpu_next_down(r) : r;
}

SBMLGPU_HD double sbmlgpu_step_up(double r, int err)
{
    return (err > 0 || err == SBMLGPU_INEXACT) ? sbmlgpu_next_up(r) : r;
}

/* IEEE 754: an exact zero sum x + y is -0 when rounding down unless x and y are both
   +0 (round-to-nearest and round-up give +0 unless both are -0, as RN(x + y) does). */
SBMLGPU_HD double sbmlgpu_zero_sum_rd(double x, double y)
{
    return (x == 0.0 && y == 0.0 && !signbit(x) && !signbit(y)) ? 0.0 : -0.0;
}

#ifdef __CUDA_ARCH__
/* round-to-nearest, never contracted into an FMA (nvcc contracts a*b + c by default) */
SBMLGPU_HD double sbmlgpu_add_rn(double a, double b) { return __dadd_rn(a, b); }
SBMLGPU_HD double sbmlgpu_mul_rn(double a, double b) { return __dmul_rn(a, b); }
SBMLGPU_HD double sbmlgpu_add_rd(double a, double b) { return __dadd_rd(a, b); }
SBMLGPU_HD double sbmlgpu_add_ru(double a, double b) { return __dadd_ru(a, b); }
SBMLGPU_HD double sbmlgpu_sub_rd(double a, double b) { return __dsub_rd(a, b); }
SBMLGPU_HD double sbmlgpu_sub_ru(double a, double b) { return __dsub_ru(a, b); }
SBMLGPU_HD double sbmlgpu_mul_rd(double a, double b) { return __dmul_rd(a, b); }
SBMLGPU_HD double sbmlgpu_mul_ru(double a, double b) { return __dmul_ru(a, b); }
SBMLGPU_HD double sbmlgpu_div_rd(double a, double b) { return __ddiv_rd(a, b); }
SBMLGPU_HD double sbmlgpu_div_ru(double a, double b) { return __ddiv_ru(a, b); }
SBMLGPU_HD double sbmlgpu_sqrt_rd(double a) { return __dsqrt_rd(a); }
SBMLGPU_HD double sbmlgpu_sqrt_ru(double a) { return __dsqrt_ru(a); }
SBMLGPU_HD double sbmlgpu_fma_rd(double a, double b, double c) { return __fma_rd(a, b, c); }
SBMLGPU_HD double sbmlgpu_fma_ru(double a, double b, double c) { return __fma_ru(a, b, c); }
#else
SBMLGPU_HD double sbmlgpu_add_rn(double a, double b) { return a + b; }
SBMLGPU_HD double sbmlgpu_mul_rn(double a, double b) { return a * b; }
SBMLGPU_HD double sbmlgpu_add_rd(double a, double b)
{
    double r = a + b;
    int err = sbmlgpu_err_add(a, b);
    return (err == 0 && r == 0.0) ? sbmlgpu_zero_sum_rd(a, b) : sbmlgpu_step_down(r, err);
}
SBMLGPU_HD double sbmlgpu_add_ru(double a, double b) { return sbmlgpu_step_up(a + b, sbmlgpu_err_add(a, b)); }
SBMLGPU_HD double sbmlgpu_sub_rd(double a, double b) { return sbmlgpu_add_rd(a, -b); }
SBMLGPU_HD double sbmlgpu_sub_ru(double a, double b) { return sbmlgpu_add_ru(a, -b); }
/* A product's or quotient's zero sign does not depend on the rounding direction. */
SBMLGPU_HD double sbmlgpu_mul_rd(double a, double b) { return sbmlgpu_step_down(a * b, sbmlgpu_err_mul(a, b)); }
SBMLGPU_HD double sbmlgpu_mul_ru(double a, double b) { return sbmlgpu_step_up(a * b, sbmlgpu_err_mul(a, b)); }
SBMLGPU_HD double sbmlgpu_div_rd(double a, double b) { return sbmlgpu_step_down(a / b, sbmlgpu_err_div(a, b)); }
SBMLGPU_HD double sbmlgpu_div_ru(double a, double b) { return sbmlgpu_step_up(a / b, sbmlgpu_err_div(a, b)); }
SBMLGPU_HD double sbmlgpu_sqrt_rd(double a) { return sbmlgpu_step_down(sqrt(a), sbmlgpu_err_sqrt(a)); }
SBMLGPU_HD double sbmlgpu_sqrt_ru(double a) { return sbmlgpu_step_up(sqrt(a), sbmlgpu_err_sqrt(a)); }
SBMLGPU_HD double sbmlgpu_fma_rd(double a, double b, double c)
{
    double r = fma(a, b, c);
    int err = sbmlgpu_err_fma(a, b, c);
    return (err == 0 && r == 0.0) ? sbmlgpu_zero_sum_rd(a * b, c) : sbmlgpu_step_down(r, err);
}
SBMLGPU_HD double sbmlgpu_fma_ru(double a, double b, double c)
{
    return sbmlgpu_step_up(fma(a, b, c), sbmlgpu_err_fma(a, b, c));
}
#endif

/* ---- construction and bounds ------------------------------------------------------ */
SBMLGPU_HD double sbmlgpu_lo_bound(double v) { return v != v ? -HUGE_VAL : v; }
SBMLGPU_HD double sbmlgpu_hi_bound(double v) { return v != v ? HUGE_VAL : v; }
SBMLGPU_HD double sbmlgpu_min2(double a, double b) { return b < a ? b : a; }
SBMLGPU_HD double sbmlgpu_max2(double a, double b) { return b > a ? b : a; }

SBMLGPU_HD ival iv_make(double lo, double hi)
{
    ival r = {sbmlgpu_lo_bound(lo), sbmlgpu_hi_bound(hi)};
    return r;
}
SBMLGPU_HD ival iv_point(double a) { return iv_make(a, a); }
SBMLGPU_HD ival iv_entire(void) { return iv_make(-HUGE_VAL, HUGE_VAL); }
SBMLGPU_HD ival iv_empty(void) { return iv_make(HUGE_VAL, -HUGE_VAL); }
SBMLGPU_HD int iv_is_empty(ival x) { return x.lo > x.hi; }
SBMLGPU_HD ival sbmlgpu_iv_pi(void) { return iv_make(SBMLGPU_PI_LO, SBMLGPU_PI_HI); }

/* ---- arithmetic ------------------------------------------------------------------- */
SBMLGPU_HD ival iv_neg(ival x) { return iv_make(-x.hi, -x.lo); }

SBMLGPU_HD ival iv_add(ival x, ival y)
{
    return iv_make(sbmlgpu_add_rd(x.lo, y.lo), sbmlgpu_add_ru(x.hi, y.hi));
}

SBMLGPU_HD ival iv_sub(ival x, ival y)
{
    return iv_make(sbmlgpu_sub_rd(x.lo, y.hi), sbmlgpu_sub_ru(x.hi, y.lo));
}

/* Bound products: 0 * anything is 0, +-inf included (a bound of +-inf stands for
   "unbounded", and 0 times any real is 0: the set-based convention of IEEE 1788). */
SBMLGPU_HD double sbmlgpu_bound_mul_rd(double a, double b)
{
    return (a == 0.0 || b == 0.0) ? 0.0 : sbmlgpu_lo_bound(sbmlgpu_mul_rd(a, b));
}
SBMLGPU_HD double sbmlgpu_bound_mul_ru(double a, double b)
{
    return (a == 0.0 || b == 0.0) ? 0.0 : sbmlgpu_hi_bound(sbmlgpu_mul_ru(a, b));
}

/* On the host, by the signs of the factors (Moore's nine cases): two directed
   products where the min and max of all four would take eight, and four where both
   straddle 0. Directed rounding is monotone, so each bound is the one the four
   products would give (the host engine spent 36 % of its time here with all eight,
   each a software-emulated directed product). A bound that is NaN fails every
   comparison and takes the last case, which is the hull.
   On the GPU a directed product is one instruction and the branches diverge across a
   warp: the eight products without branches measured faster there (H200, the same
   run: SEIR-3P's search 3.40 s against 4.79 s with the cases, SEIR-2P 0.60 against
   0.80 s; docs/benchmarks.md), so the device skips the cases. */
SBMLGPU_HD ival iv_mul(ival x, ival y)
{
    const double a = x.lo, b = x.hi, c = y.lo, d = y.hi;
#ifndef __CUDA_ARCH__
    if (a >= 0.0) {
        if (c >= 0.0) return iv_make(sbmlgpu_bound_mul_rd(a, c), sbmlgpu_bound_mul_ru(b, d));
        if (d <= 0.0) return iv_make(sbmlgpu_bound_mul_rd(b, c), sbmlgpu_bound_mul_ru(a, d));
        if (c < 0.0 && d > 0.0)
            return iv_make(sbmlgpu_bound_mul_rd(b, c), sbmlgpu_bound_mul_ru(b, d));
    } else if (b <= 0.0) {
        if (c >= 0.0) return iv_make(sbmlgpu_bound_mul_rd(a, d), sbmlgpu_bound_mul_ru(b, c));
        if (d <= 0.0) return iv_make(sbmlgpu_bound_mul_rd(b, d), sbmlgpu_bound_mul_ru(a, c));
        if (c < 0.0 && d > 0.0)
            return iv_make(sbmlgpu_bound_mul_rd(a, d), sbmlgpu_bound_mul_ru(a, c));
    } else if (a < 0.0 && b > 0.0) {
        if (c >= 0.0) return iv_make(sbmlgpu_bound_mul_rd(a, d), sbmlgpu_bound_mul_ru(b, d));
        if (d <= 0.0) return iv_make(sbmlgpu_bound_mul_rd(b, c), sbmlgpu_bound_mul_ru(a, c));
    }
#endif
    double lo = sbmlgpu_min2(sbmlgpu_min2(sbmlgpu_bound_mul_rd(a, c), sbmlgpu_bound_mul_rd(a, d)),
                             sbmlgpu_min2(sbmlgpu_bound_mul_rd(b, c), sbmlgpu_bound_mul_rd(b, d)));
    double hi = sbmlgpu_max2(sbmlgpu_max2(sbmlgpu_bound_mul_ru(a, c), sbmlgpu_bound_mul_ru(a, d)),
                             sbmlgpu_max2(sbmlgpu_bound_mul_ru(b, c), sbmlgpu_bound_mul_ru(b, d)));
    return iv_make(lo, hi);
}

/* c * x for a point c (cheaper than iv_mul with iv_point(c)). */
SBMLGPU_HD ival iv_scale(ival x, double c)
{
    if (c != c) return iv_entire();
    if (c >= 0.0) return iv_make(sbmlgpu_bound_mul_rd(c, x.lo), sbmlgpu_bound_mul_ru(c, x.hi));
    return iv_make(sbmlgpu_bound_mul_rd(c, x.hi), sbmlgpu_bound_mul_ru(c, x.lo));
}

/* Bound quotients: inf / inf stands for large / large, any value of that sign:
   0 or -inf as a lower bound, +inf or 0 as an upper bound. */
SBMLGPU_HD double sbmlgpu_bound_div_rd(double a, double b)
{
    if (isinf(a) && isinf(b)) return (a > 0.0) == (b > 0.0) ? 0.0 : -HUGE_VAL;
    return sbmlgpu_lo_bound(sbmlgpu_div_rd(a, b));
}
SBMLGPU_HD double sbmlgpu_bound_div_ru(double a, double b)
{
    if (isinf(a) && isinf(b)) return (a > 0.0) == (b > 0.0) ? HUGE_VAL : 0.0;
    return sbmlgpu_hi_bound(sbmlgpu_div_ru(a, b));
}

/* Division by an interval that holds 0 gives the entire line (not an error). */
SBMLGPU_HD ival iv_div(ival x, ival y)
{
    if (y.lo <= 0.0 && y.hi >= 0.0) return iv_entire();
    double lo = sbmlgpu_min2(sbmlgpu_min2(sbmlgpu_bound_div_rd(x.lo, y.lo), sbmlgpu_bound_div_rd(x.lo, y.hi)),
                             sbmlgpu_min2(sbmlgpu_bound_div_rd(x.hi, y.lo), sbmlgpu_bound_div_rd(x.hi, y.hi)));
    double hi = sbmlgpu_max2(sbmlgpu_max2(sbmlgpu_bound_div_ru(x.lo, y.lo), sbmlgpu_bound_div_ru(x.lo, y.hi)),
                             sbmlgpu_max2(sbmlgpu_bound_div_ru(x.hi, y.lo), sbmlgpu_bound_div_ru(x.hi, y.hi)));
    return iv_make(lo, hi);
}

/* Smallest and largest |v| over x. */
SBMLGPU_HD double sbmlgpu_iv_mig(ival x) { return x.lo > 0.0 ? x.lo : (x.hi < 0.0 ? -x.hi : 0.0); }
SBMLGPU_HD double sbmlgpu_iv_mag(ival x) { return sbmlgpu_max2(fabs(x.lo), fabs(x.hi)); }

SBMLGPU_HD ival iv_abs(ival x) { return iv_make(sbmlgpu_iv_mig(x), sbmlgpu_iv_mag(x)); }

/* x^2 is tight ([0, ...] when x holds 0), unlike iv_mul(x, x). */
SBMLGPU_HD ival iv_sqr(ival x)
{
    double m = sbmlgpu_iv_mig(x), M = sbmlgpu_iv_mag(x);
    return iv_make(sbmlgpu_mul_rd(m, m), sbmlgpu_mul_ru(M, M));
}

/* a^n for a >= 0 by binary powering, every product rounded the same way: products
   of non-negative lower (upper) bounds stay lower (upper) bounds. */
SBMLGPU_HD double sbmlgpu_pow_nonneg(double a, unsigned long long n, int up)
{
    double r = 1.0;
    while (n) {
        if (n & 1ull) r = up ? sbmlgpu_mul_ru(r, a) : sbmlgpu_mul_rd(r, a);
        n >>= 1;
        if (n) a = up ? sbmlgpu_mul_ru(a, a) : sbmlgpu_mul_rd(a, a);
    }
    return r;
}

/* x^n for any integer n: odd n is increasing, even n follows |x|; n < 0 is
   1 / x^|n| (entire when x holds 0); x^0 = 1 (0^0 = 1, as sympy and C's pow). */
SBMLGPU_HD ival iv_powi(ival x, int n)
{
    if (n == 0) return iv_point(1.0);
    unsigned long long k = n < 0 ? (unsigned long long)(-(long long)n) : (unsigned long long)n;
    ival p;
    if (k & 1ull) {
        p.lo = x.lo >= 0.0 ? sbmlgpu_pow_nonneg(x.lo, k, 0) : -sbmlgpu_pow_nonneg(-x.lo, k, 1);
        p.hi = x.hi >= 0.0 ? sbmlgpu_pow_nonneg(x.hi, k, 1) : -sbmlgpu_pow_nonneg(-x.hi, k, 0);
    } else {
        p.lo = sbmlgpu_pow_nonneg(sbmlgpu_iv_mig(x), k, 0);
        p.hi = sbmlgpu_pow_nonneg(sbmlgpu_iv_mag(x), k, 1);
    }
    p = iv_make(p.lo, p.hi);
    if (n > 0) return p;
    /* x excludes 0 but x^|n| underflowed to 0: 1 / x^|n| is beyond DBL_MAX there */
    if (sbmlgpu_iv_mig(x) > 0.0 && p.lo == 0.0)
        return iv_make(sbmlgpu_min2(sbmlgpu_div_rd(1.0, p.hi), DBL_MAX), HUGE_VAL);
    if (sbmlgpu_iv_mig(x) > 0.0 && p.hi == 0.0)
        return iv_make(-HUGE_VAL, sbmlgpu_max2(sbmlgpu_div_ru(1.0, p.lo), -DBL_MAX));
    return iv_div(iv_point(1.0), p);
}

/* ---- elementary functions ---------------------------------------------------------
   The library's round-to-nearest value v is widened by SBMLGPU_ULPS_<F> = the
   documented maximum error + 1:
     CUDA Math API, "Double Precision Mathematical Functions" maximum ulp errors
     (CUDA C++ Programming Guide, appendix "Mathematical Functions"): exp 1, log 1,
     sin 2, cos 2, tan 2, atan 2, tanh 1;
     glibc manual, "Errors in Math Functions", x86_64 double (libm-test-ulps):
     exp 1, log 1, sin 1, cos 1, tan 0, atan 1, tanh 2.
   Both are measured maxima, not proofs; we take the larger of the two plus one.
   Widening by k "ulps" subtracts / adds k * 2^-52 * |v| + k * 2^-1074, rounded
   outward: if |v - t| <= (k - 1) ulp(t) for the true t, then (k - 1) ulp(t) <=
   (k - 1) 2^-52 |t| <= (k - 1) 2^-52 |v| / (1 - (k - 1) 2^-52) < k 2^-52 |v|
   (normal t), and (k - 1) 2^-1074 < k 2^-1074 covers subnormal t. */
#define SBMLGPU_ULPS_EXP  2.0
#define SBMLGPU_ULPS_LOG  2.0
#define SBMLGPU_ULPS_TRIG 3.0   /* sin, cos, tan */
#define SBMLGPU_ULPS_ATAN 3.0
#define SBMLGPU_ULPS_TANH 3.0

SBMLGPU_HD double sbmlgpu_widening(double v, double ulps)
{
    return sbmlgpu_fma_ru(fabs(v), ulps * SBMLGPU_TWO_M52, ulps * SBMLGPU_TWO_M1074);
}

/* A library value that overflowed to +inf may stand for a true value just below
   DBL_MAX: widen from DBL_MAX (likewise -inf for an upper bound). */
SBMLGPU_HD double sbmlgpu_widen_lo(double v, double ulps)
{
    if (v != v) return -HUGE_VAL;
    if (v == HUGE_VAL) v = DBL_MAX;
    return v == -HUGE_VAL ? v : sbmlgpu_sub_rd(v, sbmlgpu_widening(v, ulps));
}

SBMLGPU_HD double sbmlgpu_widen_hi(double v, double ulps)
{
    if (v != v) return HUGE_VAL;
    if (v == -HUGE_VAL) v = -DBL_MAX;
    return v == HUGE_VAL ? v : sbmlgpu_add_ru(v, sbmlgpu_widening(v, ulps));
}

/* Increasing functions: the widened values at the two ends. */
SBMLGPU_HD ival sbmlgpu_increasing(double f_lo, double f_hi, double ulps)
{
    return iv_make(sbmlgpu_widen_lo(f_lo, ulps), sbmlgpu_widen_hi(f_hi, ulps));
}

SBMLGPU_HD ival iv_exp(ival x)
{
    ival r = sbmlgpu_increasing(exp(x.lo), exp(x.hi), SBMLGPU_ULPS_EXP);
    r.lo = sbmlgpu_max2(r.lo, 0.0);
    return r;
}

/* Defined for lo > 0; where x reaches 0 or below, the part x > 0 (lo = -inf); where
   no part of x is positive (hi <= 0), entire. */
SBMLGPU_HD ival iv_log(ival x)
{
    if (!(x.hi > 0.0)) return iv_entire();
    ival r = sbmlgpu_increasing(log(x.lo), log(x.hi), SBMLGPU_ULPS_LOG);
    if (!(x.lo > 0.0)) r.lo = -HUGE_VAL;
    return r;
}

/* Correctly rounded bounds (no library error); the part x >= 0, entire when hi < 0. */
SBMLGPU_HD ival iv_sqrt(ival x)
{
    if (!(x.hi >= 0.0)) return iv_entire();
    return iv_make(sbmlgpu_sqrt_rd(sbmlgpu_max2(x.lo, 0.0)), sbmlgpu_sqrt_ru(x.hi));
}

SBMLGPU_HD ival iv_atan(ival x)
{
    ival r = sbmlgpu_increasing(atan(x.lo), atan(x.hi), SBMLGPU_ULPS_ATAN);
    return iv_make(sbmlgpu_max2(r.lo, -SBMLGPU_HALF_PI_HI), sbmlgpu_min2(r.hi, SBMLGPU_HALF_PI_HI));
}

SBMLGPU_HD ival iv_tanh(ival x)
{
    ival r = sbmlgpu_increasing(tanh(x.lo), tanh(x.hi), SBMLGPU_ULPS_TANH);
    return iv_make(sbmlgpu_max2(r.lo, -1.0), sbmlgpu_min2(r.hi, 1.0));
}

SBMLGPU_HD ival iv_pow(ival x, ival y)
{
    /* a point integer exponent: powi (also for x <= 0, where exp(y log x) is undefined) */
    if (y.lo == y.hi && y.lo == floor(y.lo) && fabs(y.lo) <= 2147483647.0)
        return iv_powi(x, (int)y.lo);
    /* x^y = exp(y log x) for x > 0; with x.lo = 0 and y > 0, log's lo = -inf makes
       the product's lo -inf and exp's lo 0, which covers 0^y = 0 */
    if (x.lo > 0.0 || (x.lo == 0.0 && y.lo > 0.0))
        return iv_exp(iv_mul(y, iv_log(x)));
    return iv_entire();
}

/* Which integers [q.lo, q.hi] may hold: bit 1 an even one, bit 2 an odd one; both
   where q is too wide or too large to enumerate (|q| >= 2^50, or q not finite). */
SBMLGPU_HD int sbmlgpu_iv_integer_parities(ival q)
{
    if (!(fabs(q.lo) < SBMLGPU_TWO_50 && fabs(q.hi) < SBMLGPU_TWO_50) || q.hi - q.lo >= 2.0)
        return 3;
    int found = 0;
    for (double m = ceil(q.lo); m <= q.hi; m += 1.0)   /* at most three: exact integers */
        found |= fmod(m, 2.0) == 0.0 ? 1 : 2;
    return found;
}

/* sin, cos and tan between their critical points. q encloses x / pi (cos: extrema at
   m pi) or x / pi - 1/2 (sin: extrema and tan: poles at (m + 1/2) pi), computed with
   outward rounding and pi's two neighbouring doubles, so any integer m for which the
   true critical point lies in x lies in q (a spurious m only loosens the result). */
SBMLGPU_HD ival sbmlgpu_iv_periodic_hull(double f_lo, double f_hi, int parities, int even_is_max)
{
    ival r = iv_make(sbmlgpu_widen_lo(sbmlgpu_min2(f_lo, f_hi), SBMLGPU_ULPS_TRIG),
                     sbmlgpu_widen_hi(sbmlgpu_max2(f_lo, f_hi), SBMLGPU_ULPS_TRIG));
    if (parities & (even_is_max ? 1 : 2)) r.hi = 1.0;
    if (parities & (even_is_max ? 2 : 1)) r.lo = -1.0;
    return iv_make(sbmlgpu_max2(r.lo, -1.0), sbmlgpu_min2(r.hi, 1.0));
}

SBMLGPU_HD ival sbmlgpu_iv_over_pi(ival x, double shift)
{
    return iv_sub(iv_div(x, sbmlgpu_iv_pi()), iv_point(shift));
}

SBMLGPU_HD ival iv_cos(ival x)
{
    int p = sbmlgpu_iv_integer_parities(sbmlgpu_iv_over_pi(x, 0.0)); /* 2k pi: max */
    return sbmlgpu_iv_periodic_hull(cos(x.lo), cos(x.hi), p, 1);
}

SBMLGPU_HD ival iv_sin(ival x)
{
    int p = sbmlgpu_iv_integer_parities(sbmlgpu_iv_over_pi(x, 0.5)); /* (2k + 1/2) pi: max */
    return sbmlgpu_iv_periodic_hull(sin(x.lo), sin(x.hi), p, 1);
}

SBMLGPU_HD ival iv_tan(ival x)
{
    if (sbmlgpu_iv_integer_parities(sbmlgpu_iv_over_pi(x, 0.5)) != 0) return iv_entire();
    return sbmlgpu_increasing(tan(x.lo), tan(x.hi), SBMLGPU_ULPS_TRIG);
}

/* ---- lattice operations and measures ------------------------------------------------ */
SBMLGPU_HD ival iv_min(ival x, ival y) { return iv_make(sbmlgpu_min2(x.lo, y.lo), sbmlgpu_min2(x.hi, y.hi)); }
SBMLGPU_HD ival iv_max(ival x, ival y) { return iv_make(sbmlgpu_max2(x.lo, y.lo), sbmlgpu_max2(x.hi, y.hi)); }
SBMLGPU_HD ival iv_hull(ival x, ival y) { return iv_make(sbmlgpu_min2(x.lo, y.lo), sbmlgpu_max2(x.hi, y.hi)); }

SBMLGPU_HD ival iv_intersect(ival x, ival y)
{
    ival r = iv_make(sbmlgpu_max2(x.lo, y.lo), sbmlgpu_min2(x.hi, y.hi));
    return iv_is_empty(r) ? iv_empty() : r;
}

/* A point of x: finite for finite bounds, no overflow ((lo + hi) / 2 could overflow;
   lo / 2 + hi / 2 could lose a subnormal). Rounding is monotone, so the result stays
   in [lo, hi]. One infinite side: the finite bound's side of +-DBL_MAX; entire: 0. */
SBMLGPU_HD double iv_mid(ival x)
{
    if (x.lo == -HUGE_VAL && x.hi == HUGE_VAL) return 0.0;
    if (x.lo == -HUGE_VAL) return sbmlgpu_min2(-DBL_MAX, x.hi);
    if (x.hi == HUGE_VAL) return sbmlgpu_max2(DBL_MAX, x.lo);
    if (fabs(x.lo) <= 1.0 && fabs(x.hi) <= 1.0) return sbmlgpu_mul_rn(sbmlgpu_add_rn(x.lo, x.hi), 0.5);
    return sbmlgpu_add_rn(sbmlgpu_mul_rn(x.lo, 0.5), sbmlgpu_mul_rn(x.hi, 0.5));
}

/* mid +- rad encloses x (rounded up). */
SBMLGPU_HD double iv_rad(ival x)
{
    double m = iv_mid(x);
    return sbmlgpu_max2(sbmlgpu_sub_ru(m, x.lo), sbmlgpu_sub_ru(x.hi, m));
}

SBMLGPU_HD double iv_width(ival x) { return sbmlgpu_hi_bound(sbmlgpu_sub_ru(x.hi, x.lo)); }

SBMLGPU_HD int iv_contains(ival x, double v) { return x.lo <= v && v <= x.hi; }
SBMLGPU_HD int iv_subset(ival a, ival b) { return b.lo <= a.lo && a.hi <= b.hi; }
SBMLGPU_HD int iv_disjoint(ival a, ival b) { return a.hi < b.lo || b.hi < a.lo; }
SBMLGPU_HD int iv_is_finite(ival x) { return isfinite(x.lo) && isfinite(x.hi); }

#endif /* SBMLGPU_INTERVAL_CUH */
