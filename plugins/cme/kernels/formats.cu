{#
  formats.cu -- the CME steady-state kernels for one matrix (plugins/cme/gpu_engine.py).

  A = O + diag(d) (column convention: row i of O = transitions into state i). O is
  stored in the engine's format (plugins/cme/formats.py documents the layouts); the
  multilevel aggregation levels are always CSR, so the CSR kernels are always here.

  Context:
    format      "csr" | "ell" | "dia+ell" | "dia+sell": the engine's own format
    offsets     the band offsets (column - row) of the dia formats, compiled in
    permuted    dia+sell: rows sorted within blocks (sell_perm is read), else thread t = row t
    block       threads per block of the reductions (a power of two)
    csr_lanes   lanes per row of cme_jacobi_csr_lanes (a power of two, at most 32)
    floor       cme_combine8's share of the newest iterate where a combination is not positive
    model_id    the model the matrix belongs to (a comment)
  Kernels (extern "C"; one thread per row position unless said):
    cme_fill                 values[q] = prop[gather[q]] (0 where gather is -1); grid-stride
    cme_diagonal             d_i = -sum_r prop[r, i] over the reactions that stay inside
    cme_jacobi_<fmt>         one damped Jacobi sweep p -> out (one launch per sweep)
    cme_jacobi_csr_lanes     the same on CSR, csr_lanes threads per row (the levels)
    cme_residual_<fmt>       per-block partials of max|Ap|, sum|Ap|, max|p|, max(0, -p)
    cme_sum                  per-block partial sums of a vector
    cme_dot                  per-block partial sums of x . y
    cme_dots4                per-block partial sums of up to four x_k . y_k
    cme_combine8             out = sum of up to 8 c_k v_k (clipped on request); grid-stride
    cme_reduce               one block: the partials to the final values (deterministic:
                             a fixed grid and a fixed tree, so a rerun gives the same bits)
    cme_divide               v /= total (if total > 0), total read on the device
    cme_level_restrict       per aggregate: pc and the coarse diagonal
    cme_level_coarse_values  per coarse off-diagonal slot: the weighted segment sum / pc_J
    cme_level_prolong        p_i * max(qc_I, tiny) / pc_I
  Double precision throughout. The level kernels multiply with __dmul_rn so that nvcc
  contracts nothing into FMAs there: their sums cancel (a coarse diagonal is the rate
  out of an aggregate minus its internal flows) and must round as the CPU engine does.
#}
/* CME generator kernels for model {{ model_id }}: matrix format {{ format }}
{% if offsets %}
   bands (column - row): {{ offsets | join(", ") }}
{% endif %}
*/
#include <math.h>

#define CME_BLOCK {{ block }}
#define CME_CSR_LANES {{ csr_lanes }}  /* lanes per row of the CSR Jacobi sweep (a power of 2 <= 32) */
#define CME_FLOOR {{ floor }}  /* cme_combine8: a clipped entry's share of the newest iterate */
#define CME_TINY 1e-300  /* a coarse probability never falls below this (cpu_engine.TINY) */

/* max that propagates NaN (as numpy's max does), so a diverged iterate shows. */
__device__ __forceinline__ double cme_max(double a, double b)
{
    return (a != a) ? a : ((b != b) ? b : (a > b ? a : b));
}

{% macro format_params(fmt) -%}
{%- if fmt == "csr" -%}
const long long* __restrict__ csr_ptr, const int* __restrict__ csr_col, const double* __restrict__ csr_val
{%- elif fmt == "ell" -%}
int ell_width, const int* __restrict__ ell_col, const double* __restrict__ ell_val
{%- elif fmt == "dia+ell" -%}
const double* __restrict__ dia_val, int ell_width, const int* __restrict__ ell_col, const double* __restrict__ ell_val
{%- elif fmt == "dia+sell" -%}
const double* __restrict__ dia_val, const long long* __restrict__ sell_ptr, const int* __restrict__ sell_col, const double* __restrict__ sell_val{% if permuted %}, const int* __restrict__ sell_perm{% endif %}

{%- else -%}
{{ fail("formats.cu: unknown format " ~ fmt) }}
{%- endif -%}
{%- endmacro %}

{% macro format_args(fmt) -%}
{%- if fmt == "csr" -%}csr_ptr, csr_col, csr_val
{%- elif fmt == "ell" -%}ell_width, ell_col, ell_val
{%- elif fmt == "dia+ell" -%}dia_val, ell_width, ell_col, ell_val
{%- else -%}dia_val, sell_ptr, sell_col, sell_val{% if permuted %}, sell_perm{% endif %}
{%- endif -%}
{%- endmacro %}

{% macro tag(fmt) %}{{ fmt | replace("+", "_") }}{% endmacro %}

{% macro incoming(fmt) %}
/* (O x)_row for the row at position t (row = t except in a sorted dia+sell). */
__device__ __forceinline__ double cme_incoming_{{ tag(fmt) }}({{ format_params(fmt) }},
    const double* __restrict__ x, int n, long long t, int& row)
{
    double sum = 0.0;
{% if fmt == "dia+sell" and permuted %}
    row = sell_perm[t];
{% else %}
    row = (int)t;
{% endif %}
{% if fmt == "csr" %}
    for (long long a = csr_ptr[t]; a < csr_ptr[t + 1]; ++a)
        sum += csr_val[a] * x[csr_col[a]];
{% endif %}
{% if fmt in ("dia+ell", "dia+sell") %}
    /* dense bands, stored by position: band b of position t at b*n + t; 0 where absent */
{% for offset in offsets %}
    {
        long long c = (long long)row + ({{ offset }});
        double v = dia_val[{{ loop.index0 }}LL * n + t];
        if (c >= 0 && c < n) sum += v * x[c];
    }
{% endfor %}
{% endif %}
{% if fmt in ("ell", "dia+ell") %}
    /* ELL, column-major: slot k of row t at k*n + t; padding is (0, own row) */
    for (int k = 0; k < ell_width; ++k) {
        long long a = (long long)k * n + t;
        sum += ell_val[a] * x[ell_col[a]];
    }
{% endif %}
{% if fmt == "dia+sell" %}
    /* warp-grained sliced ELL: slice t/32, column-major within it (lane t%32) */
    {
        long long slice = t >> 5;
        long long end = sell_ptr[slice + 1];
        for (long long a = sell_ptr[slice] + (t & 31); a < end; a += 32)
            sum += sell_val[a] * x[sell_col[a]];
    }
{% endif %}
    return sum;
}

/* One damped Jacobi sweep of A p = 0: out_i = (1 - w) p_i + w (O p)_i / (-d_i); a row
   with no way out (d_i = 0) takes the uniformised step p_i + (O p)_i / ||A||_inf. */
extern "C" __global__ void cme_jacobi_{{ tag(fmt) }}({{ format_params(fmt) }},
    const double* __restrict__ p, const double* __restrict__ d, int n, double omega,
    double inv_norm, double* __restrict__ out)
{
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    int row;
    double in = cme_incoming_{{ tag(fmt) }}({{ format_args(fmt) }}, p, n, t, row);
    double pi = p[row], di = d[row];
    double u = (di == 0.0) ? pi + in * inv_norm : in * (-1.0 / di);
    out[row] = (omega == 1.0) ? u : (1.0 - omega) * pi + omega * u;
}

/* Partials of the residual r = O p + d p: max |r|, sum |r|, max |p|, and the largest
   negative entry's size max(0, -p) (whether p is a distribution, without reading p on
   the host), as partials[k * gridDim.x + block]. absolute != 0 gives |O p| + |d p| instead (with
   p = 1: the row sums of |A|, whose max is ||A||_inf). Grid-stride over positions. */
extern "C" __global__ void cme_residual_{{ tag(fmt) }}({{ format_params(fmt) }},
    const double* __restrict__ p, const double* __restrict__ d, int n, int absolute,
    double* __restrict__ partials)
{
    double acc[4] = {0.0, 0.0, 0.0, 0.0};
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < n;
         t += (long long)gridDim.x * blockDim.x) {
        int row;
        double in = cme_incoming_{{ tag(fmt) }}({{ format_args(fmt) }}, p, n, t, row);
        double pi = p[row];
        double dp = d[row] * pi;
        double r = absolute ? fabs(in) + fabs(dp) : in + dp;
        acc[0] = cme_max(acc[0], fabs(r));
        acc[1] += fabs(r);
        acc[2] = cme_max(acc[2], fabs(pi));
        acc[3] = cme_max(acc[3], -pi);
    }
    cme_block_reduce4(acc, partials, 0xD);
}
{% endmacro %}

/* The block's values of each of `components` accumulators reduced in shared memory
   (bit k of max_mask: component k is a max, else a sum); thread 0 writes them to
   out[k * gridDim.x + blockIdx.x]. Needs blockDim.x == CME_BLOCK. */
__device__ void cme_block_reduce4(const double* acc, double* out, int max_mask)
{
    __shared__ double s[4][CME_BLOCK];
    for (int k = 0; k < 4; ++k) s[k][threadIdx.x] = acc[k];
    __syncthreads();
    for (int half = CME_BLOCK / 2; half > 0; half >>= 1) {
        if (threadIdx.x < half) {
            for (int k = 0; k < 4; ++k) {
                double a = s[k][threadIdx.x], b = s[k][threadIdx.x + half];
                s[k][threadIdx.x] = ((max_mask >> k) & 1) ? cme_max(a, b) : a + b;
            }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0)
        for (int k = 0; k < 4; ++k) out[(long long)k * gridDim.x + blockIdx.x] = s[k][0];
}

{{ incoming("csr") }}

/* The aggregation levels' smoother: a damped Jacobi sweep on CSR with CME_CSR_LANES
   consecutive lanes per row (launch n * CME_CSR_LANES threads), their partial sums
   added by shuffles. One thread per row read a coarse level's rows (tens of entries)
   uncoalesced: 1.82 of 2.74 s of kernel time in 143 V-cycles on the 10^7-state toggle
   switch; with 4 lanes 0.87 s. (The engine's own CSR format keeps one thread per row:
   its rows are short, and lanes made that sweep 27 % slower.) */
extern "C" __global__ void cme_jacobi_csr_lanes({{ format_params("csr") }},
    const double* __restrict__ p, const double* __restrict__ d, int n, double omega,
    double inv_norm, double* __restrict__ out)
{
    long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long t = g / CME_CSR_LANES;
    int lane = (int)(g % CME_CSR_LANES);
    double in = 0.0;
    if (t < n)
        for (long long a = csr_ptr[t] + lane; a < csr_ptr[t + 1]; a += CME_CSR_LANES)
            in += csr_val[a] * p[csr_col[a]];
    /* every lane of the warp reaches the shuffles (rows past n add zeros) */
    for (int step = CME_CSR_LANES / 2; step > 0; step >>= 1)
        in += __shfl_down_sync(0xffffffffu, in, step, CME_CSR_LANES);
    if (t >= n || lane != 0) return;
    double pi = p[t], di = d[t];
    double u = (di == 0.0) ? pi + in * inv_norm : in * (-1.0 / di);
    out[t] = (omega == 1.0) ? u : (1.0 - omega) * pi + omega * u;
}
{% if format != "csr" %}
{{ incoming(format) }}
{% endif %}

/* values[q] = prop[gather[q]], 0 for padding (gather -1): fills any format's values
   from the propensities (R, n), reaction-major, as the propensity kernel writes them. */
extern "C" __global__ void cme_fill(const long long* __restrict__ gather, long long count,
    const double* __restrict__ prop, double* __restrict__ values)
{
    for (long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x; q < count;
         q += (long long)gridDim.x * blockDim.x) {
        long long g = gather[q];
        values[q] = g >= 0 ? prop[g] : 0.0;
    }
}

/* d_i = -(sum of the rates out of state i that stay inside the enumerated space):
   reaction r counts where targets[r, i] >= 0 (dropped at a bound: it does not). */
extern "C" __global__ void cme_diagonal(const int* __restrict__ targets,
    const double* __restrict__ prop, int reactions, int n, double* __restrict__ d)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double out = 0.0;
    for (int r = 0; r < reactions; ++r) {
        long long a = (long long)r * n + i;
        if (targets[a] >= 0) out += prop[a];
    }
    d[i] = -out;
}

/* Per-block partial sums of v (component 0 of the partials; the others are zero). */
extern "C" __global__ void cme_sum(const double* __restrict__ v, long long n,
    double* __restrict__ partials)
{
    double acc[4] = {0.0, 0.0, 0.0, 0.0};
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        acc[0] += v[i];
    cme_block_reduce4(acc, partials, 0);
}

/* Per-block partial sums of x . y (the Anderson acceleration's Gram matrix). */
extern "C" __global__ void cme_dot(const double* __restrict__ x, const double* __restrict__ y,
    long long n, double* __restrict__ partials)
{
    double acc[4] = {0.0, 0.0, 0.0, 0.0};
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        acc[0] += x[i] * y[i];
    cme_block_reduce4(acc, partials, 0);
}

/* Per-block partial sums of up to four dot products x_k . y_k, k < m (component k of
   the partials): IDR(s)'s products with its shadow space, one pass and one
   synchronisation for four. Unused pairs may be any valid pointers; they are not read. */
extern "C" __global__ void cme_dots4(const double* __restrict__ x0, const double* __restrict__ y0,
    const double* __restrict__ x1, const double* __restrict__ y1,
    const double* __restrict__ x2, const double* __restrict__ y2,
    const double* __restrict__ x3, const double* __restrict__ y3,
    int m, long long n, double* __restrict__ partials)
{
    double acc[4] = {0.0, 0.0, 0.0, 0.0};
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        acc[0] += x0[i] * y0[i];
        if (m > 1) acc[1] += x1[i] * y1[i];
        if (m > 2) acc[2] += x2[i] * y2[i];
        if (m > 3) acc[3] += x3[i] * y3[i];
    }
    cme_block_reduce4(acc, partials, 0);
}

/* out = c0 v0 + c1 v1 + ... + c_{m-1} v_{m-1} (m <= 8) in one pass, summed left to
   right with every product and sum rounded on its own (__dmul_rn, __dadd_rn: no FMA),
   as the CPU engine's combine does, so that both paths take the same iterates. With
   clip (the last step of a combination of probability vectors, v_{m-1} the newest
   iterate), where the sum is not positive, a hundredth of v_{m-1} instead: a zero
   would leave its aggregate without weight in the next V-cycle, and v_{m-1} itself
   undoes the acceleration there (the factor measured on two switches,
   plugins/cme/solvers.py). out may be one of the v_k. */
extern "C" __global__ void cme_combine8(const double* v0, const double* v1, const double* v2,
    const double* v3, const double* v4, const double* v5, const double* v6, const double* v7,
    double c0, double c1, double c2, double c3, double c4, double c5, double c6, double c7,
    int m, long long n, int clip, double* out)
{
    const double* v[8] = {v0, v1, v2, v3, v4, v5, v6, v7};
    const double c[8] = {c0, c1, c2, c3, c4, c5, c6, c7};
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        double acc = __dmul_rn(c[0], v[0][i]);
        for (int k = 1; k < m; ++k)
            acc = __dadd_rn(acc, __dmul_rn(c[k], v[k][i]));
        out[i] = (clip && !(acc > 0.0)) ? CME_FLOOR * v[m - 1][i] : acc;
    }
}

/* One block: result[k] = the reduction of partials[k * blocks .. (k + 1) * blocks). */
extern "C" __global__ void cme_reduce(const double* __restrict__ partials, int blocks,
    int max_mask, double* __restrict__ result)
{
    double acc[4] = {0.0, 0.0, 0.0, 0.0};
    for (int b = threadIdx.x; b < blocks; b += blockDim.x)
        for (int k = 0; k < 4; ++k) {
            double v = partials[(long long)k * blocks + b];
            acc[k] = ((max_mask >> k) & 1) ? cme_max(acc[k], v) : acc[k] + v;
        }
    cme_block_reduce4(acc, result, max_mask);  /* gridDim.x == 1: result[k] */
}

/* v /= total[0] where total[0] > 0 (as the CPU engine's normalise). */
extern "C" __global__ void cme_divide(double* __restrict__ v, long long n,
    const double* __restrict__ total)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    double s = total[0];
    if (i < n && s > 0.0) v[i] = v[i] / s;
}

/* ---- multilevel aggregation (aggregation.py): level k -> level k + 1 ---------------
   Aggregate I = the states [I*s, min((I+1)*s, n)). With level k's CSR values val/col,
   Ac[I, J] = sum_{i in I, j in J} A[i, j] p_j / pc_J and
   Ac[I, I] = (sum_{i in I} d_i p_i + sum_{i != j in I} A[i, j] p_j) / pc_I. */

/* One thread per aggregate I: pc_I (never below CME_TINY) and the coarse diagonal. */
extern "C" __global__ void cme_level_restrict(const double* __restrict__ p,
    const double* __restrict__ d, const double* __restrict__ val,
    const int* __restrict__ col, const long long* __restrict__ diag_ptr,
    const long long* __restrict__ diag_perm, int n, int s, int n_coarse,
    double* __restrict__ pc, double* __restrict__ coarse_diag)
{
    long long I = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (I >= n_coarse) return;
    long long begin = I * s, end = begin + s < n ? begin + s : n;
    double mass = 0.0, out = 0.0;
    for (long long i = begin; i < end; ++i) {
        mass += p[i];
        out += __dmul_rn(d[i], p[i]);
    }
    double inside = 0.0;  /* flows between states of the same aggregate */
    for (long long q = diag_ptr[I]; q < diag_ptr[I + 1]; ++q) {
        long long e = diag_perm[q];
        inside += __dmul_rn(val[e], p[col[e]]);
    }
    double total = cme_max(mass, CME_TINY);
    pc[I] = total;
    coarse_diag[I] = (out + inside) / total;
}

/* One thread per coarse off-diagonal slot m: the fine entries perm[seg_ptr[m] ..
   seg_ptr[m+1]) weighted by p, over pc of the slot's coarse column. */
extern "C" __global__ void cme_level_coarse_values(const long long* __restrict__ seg_ptr,
    const long long* __restrict__ perm, const double* __restrict__ val,
    const int* __restrict__ col, const double* __restrict__ p,
    const int* __restrict__ coarse_column, const double* __restrict__ pc, long long slots,
    double* __restrict__ coarse_val)
{
    long long m = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (m >= slots) return;
    double sum = 0.0;
    for (long long q = seg_ptr[m]; q < seg_ptr[m + 1]; ++q) {
        long long e = perm[q];
        sum += __dmul_rn(val[e], p[col[e]]);
    }
    coarse_val[m] = sum / pc[coarse_column[m]];
}

/* out_i = p_i * max(qc_I, tiny) / pc_I: the coarse correction pushed back down. */
extern "C" __global__ void cme_level_prolong(const double* __restrict__ p,
    const double* __restrict__ qc, const double* __restrict__ pc, int n, int s,
    double* __restrict__ out)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    long long I = i / s;
    double factor = cme_max(qc[I], CME_TINY) / pc[I];
    out[i] = p[i] * factor;
}
