{#
  taylor.cuh -- the automatic-differentiation recurrences of interval Taylor series
  (sbmlgpu.codegen.taylor writes the calls; its docstring lists the formulas).
  Needs interval.cuh (ival and the outward-rounded operations) and
  SBMLGPU_TAYLOR_ORDER (the largest coefficient index any caller asks for).
  Each tay_<op> returns coefficient k of the result from the operands' coefficients
  0..k and, for the recursive operations, the result's own 0..k-1 (array w).
  Operands are tay_s: a pointer and a stride, because the series inputs live
  strided inside the coefficient matrix x[k*dim + i] and node arrays contiguously.
#}
#ifndef SBMLGPU_TAYLOR_CUH
#define SBMLGPU_TAYLOR_CUH

#ifndef SBMLGPU_TAYLOR_ORDER
#error "define SBMLGPU_TAYLOR_ORDER before including taylor.cuh"
#endif

typedef struct { const ival *p; int stride; } tay_s;

SBMLGPU_HD tay_s tay_series(const ival *p, int stride)
{
    tay_s s;
    s.p = p;
    s.stride = stride;
    return s;
}

SBMLGPU_HD ival tay_at(tay_s s, int j) { return s.p[j * s.stride]; }

/* sum_{lo <= j <= hi} a[j] * b[k - j] */
SBMLGPU_HD ival tay_dot(tay_s a, tay_s b, int k, int lo, int hi)
{
    ival sum = iv_point(0.0);
    for (int j = lo; j <= hi; ++j)
        sum = iv_add(sum, iv_mul(tay_at(a, j), tay_at(b, k - j)));
    return sum;
}

/* the same with the result's own coefficients w (contiguous) as b */
SBMLGPU_HD ival tay_dot_w(tay_s a, const ival *w, int k, int lo, int hi)
{
    return tay_dot(a, tay_series(w, 1), k, lo, hi);
}

SBMLGPU_HD ival tay_add(tay_s a, tay_s b, int k) { return iv_add(tay_at(a, k), tay_at(b, k)); }
SBMLGPU_HD ival tay_sub(tay_s a, tay_s b, int k) { return iv_sub(tay_at(a, k), tay_at(b, k)); }
SBMLGPU_HD ival tay_mul(tay_s a, tay_s b, int k) { return tay_dot(a, b, k, 0, k); }
SBMLGPU_HD ival tay_neg(tay_s a, int k) { return iv_neg(tay_at(a, k)); }

SBMLGPU_HD ival tay_add_sc(tay_s a, ival c, int k)
{
    return k == 0 ? iv_add(tay_at(a, 0), c) : tay_at(a, k);
}

SBMLGPU_HD ival tay_sub_sc(tay_s a, ival c, int k)
{
    return k == 0 ? iv_sub(tay_at(a, 0), c) : tay_at(a, k);
}

SBMLGPU_HD ival tay_sub_cs(ival c, tay_s b, int k)
{
    return k == 0 ? iv_sub(c, tay_at(b, 0)) : iv_neg(tay_at(b, k));
}

SBMLGPU_HD ival tay_mul_sc(tay_s a, ival c, int k) { return iv_mul(tay_at(a, k), c); }
SBMLGPU_HD ival tay_div_sc(tay_s a, ival c, int k) { return iv_div(tay_at(a, k), c); }

/* a^2: the symmetric products once, doubled, and the middle one squared (tighter
   than tay_mul(a, a): iv_sqr knows both factors are the same number) */
SBMLGPU_HD ival tay_sqr(tay_s a, int k)
{
    ival sum = iv_point(0.0);
    for (int j = 0; 2 * j < k; ++j)
        sum = iv_add(sum, iv_mul(tay_at(a, j), tay_at(a, k - j)));
    sum = iv_scale(sum, 2.0);  /* exact: a power of two */
    if (k % 2 == 0)
        sum = iv_add(sum, iv_sqr(tay_at(a, k / 2)));
    return sum;
}

/* w = a / b */
SBMLGPU_HD ival tay_div(tay_s a, tay_s b, const ival *w, int k)
{
    return iv_div(iv_sub(tay_at(a, k), tay_dot(b, tay_series(w, 1), k, 1, k)), tay_at(b, 0));
}

/* w = c / b, c constant */
SBMLGPU_HD ival tay_div_cs(ival c, tay_s b, const ival *w, int k)
{
    ival top = k == 0 ? c : iv_point(0.0);
    return iv_div(iv_sub(top, tay_dot(b, tay_series(w, 1), k, 1, k)), tay_at(b, 0));
}

/* sum_{1 <= j <= k} j a[j] w[k - j] */
SBMLGPU_HD ival tay_weighted(tay_s a, const ival *w, int k, int hi)
{
    ival sum = iv_point(0.0);
    for (int j = 1; j <= hi; ++j)
        sum = iv_add(sum, iv_mul(iv_scale(tay_at(a, j), (double)j), w[k - j]));
    return sum;
}

SBMLGPU_HD ival tay_exp(tay_s a, const ival *w, int k)
{
    if (k == 0)
        return iv_exp(tay_at(a, 0));
    return iv_div(tay_weighted(a, w, k, k), iv_point((double)k));
}

/* w = log a: a[k] = sum_{0<=j<k} ... solved for w[k]:
   w[k] = (a[k] - (1/k) sum_{1<=j<k} j w[j] a[k-j]) / a[0] */
SBMLGPU_HD ival tay_log(tay_s a, const ival *w, int k)
{
    if (k == 0)
        return iv_log(tay_at(a, 0));
    ival sum = iv_point(0.0);
    for (int j = 1; j < k; ++j)
        sum = iv_add(sum, iv_mul(iv_scale(w[j], (double)j), tay_at(a, k - j)));
    return iv_div(iv_sub(tay_at(a, k), iv_div(sum, iv_point((double)k))), tay_at(a, 0));
}

/* w = sqrt a: w[k] = (a[k] - sum_{1<=j<k} w[j] w[k-j]) / (2 w[0]) */
SBMLGPU_HD ival tay_sqrt(tay_s a, const ival *w, int k)
{
    if (k == 0)
        return iv_sqrt(tay_at(a, 0));
    ival sum = iv_point(0.0);
    for (int j = 1; j < k; ++j)
        sum = iv_add(sum, iv_mul(w[j], w[k - j]));
    return iv_div(iv_sub(tay_at(a, k), sum), iv_scale(w[0], 2.0));
}

/* w = a ** alpha, alpha constant:
   w[k] = (1 / (k a[0])) sum_{0<=j<k} (alpha (k-j) - j) a[k-j] w[j] */
SBMLGPU_HD ival tay_pow(tay_s a, ival alpha, const ival *w, int k)
{
    if (k == 0)
        return iv_pow(tay_at(a, 0), alpha);
    ival sum = iv_point(0.0);
    for (int j = 0; j < k; ++j) {
        ival factor = iv_sub(iv_scale(alpha, (double)(k - j)), iv_point((double)j));
        sum = iv_add(sum, iv_mul(iv_mul(factor, tay_at(a, k - j)), w[j]));
    }
    return iv_div(sum, iv_scale(tay_at(a, 0), (double)k));
}

/* s = sin a, c = cos a, both written at k */
SBMLGPU_HD void tay_sincos(tay_s a, ival *s, ival *c, int k)
{
    if (k == 0) {
        s[0] = iv_sin(tay_at(a, 0));
        c[0] = iv_cos(tay_at(a, 0));
        return;
    }
    ival kk = iv_point((double)k);
    s[k] = iv_div(tay_weighted(a, c, k, k), kk);
    c[k] = iv_neg(iv_div(tay_weighted(a, s, k, k), kk));
}

#endif
