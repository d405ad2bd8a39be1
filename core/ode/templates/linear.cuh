{#
  linear.cuh -- what the implicit methods (rodas4, bdf) share: -J (analytic, or forward
  differences, context `fd_jacobian`; the stored entries of a sparse plan, context
  `sparse_lu`), a shift of its diagonal, and the LU factorisation and solves of the
  result: dense with partial pivoting (small systems, context `lu_static`, swap rows
  by selects over constant indices, so that the matrix stays in registers; larger
  ones index rows at run time) or sparse in an order fixed at generation.
  Expects UNROLL set by the includer.
#}
/* ---- dense LU with partial pivoting (row-major ODE_NX x ODE_NX, in place) --------- */
{% if lu_static %}
/* Rows are swapped by a select over every candidate row, so that every index is a
   compile-time constant once the loops are unrolled: the matrix stays in registers. */
SBMLGPU_HD bool ode_lu(real_t* A, int* piv)
{
{{ UNROLL }}
    for (int k = 0; k < ODE_NX; ++k) {
        int pk = k;
        real_t big = ODE_ABS(A[k * ODE_NX + k]);
{{ UNROLL }}
        for (int r = k + 1; r < ODE_NX; ++r) {
            const real_t v = ODE_ABS(A[r * ODE_NX + k]);
            if (v > big) { big = v; pk = r; }
        }
        piv[k] = pk;
        if (!(big > ODE_R(0))) return false;
{{ UNROLL }}
        for (int r = k + 1; r < ODE_NX; ++r) {
            if (r == pk) {
{{ UNROLL }}
                for (int c = 0; c < ODE_NX; ++c) {
                    const real_t tmp = A[k * ODE_NX + c];
                    A[k * ODE_NX + c] = A[r * ODE_NX + c];
                    A[r * ODE_NX + c] = tmp;
                }
            }
        }
        const real_t inv = ODE_R(1) / A[k * ODE_NX + k];
{{ UNROLL }}
        for (int r = k + 1; r < ODE_NX; ++r) {
            const real_t l = A[r * ODE_NX + k] * inv;
            A[r * ODE_NX + k] = l;
{{ UNROLL }}
            for (int c = k + 1; c < ODE_NX; ++c) A[r * ODE_NX + c] -= l * A[k * ODE_NX + c];
        }
    }
    return true;
}

SBMLGPU_HD void ode_lu_solve(const real_t* A, const int* piv, real_t* b)
{
{{ UNROLL }}
    for (int k = 0; k < ODE_NX; ++k) {
{{ UNROLL }}
        for (int r = k + 1; r < ODE_NX; ++r) {
            if (piv[k] == r) { const real_t tmp = b[k]; b[k] = b[r]; b[r] = tmp; }
        }
    }
{% else %}
SBMLGPU_HD bool ode_lu(real_t* A, int* piv)
{
    for (int k = 0; k < ODE_NX; ++k) {
        int pk = k;
        real_t big = ODE_ABS(A[k * ODE_NX + k]);
        for (int r = k + 1; r < ODE_NX; ++r) {
            const real_t v = ODE_ABS(A[r * ODE_NX + k]);
            if (v > big) { big = v; pk = r; }
        }
        piv[k] = pk;
        if (!(big > ODE_R(0))) return false;
        if (pk != k) {
            for (int c = 0; c < ODE_NX; ++c) {
                const real_t tmp = A[k * ODE_NX + c];
                A[k * ODE_NX + c] = A[pk * ODE_NX + c];
                A[pk * ODE_NX + c] = tmp;
            }
        }
        const real_t inv = ODE_R(1) / A[k * ODE_NX + k];
        for (int r = k + 1; r < ODE_NX; ++r) {
            const real_t l = A[r * ODE_NX + k] * inv;
            A[r * ODE_NX + k] = l;
            if (l != ODE_R(0)) {  /* Jacobians of reaction networks are sparse */
                for (int c = k + 1; c < ODE_NX; ++c) A[r * ODE_NX + c] -= l * A[k * ODE_NX + c];
            }
        }
    }
    return true;
}

SBMLGPU_HD void ode_lu_solve(const real_t* A, const int* piv, real_t* b)
{
    for (int k = 0; k < ODE_NX; ++k) {
        if (piv[k] != k) { const real_t tmp = b[k]; b[k] = b[piv[k]]; b[piv[k]] = tmp; }
    }
{% endif %}
{{ UNROLL }}
    for (int r = 1; r < ODE_NX; ++r) {
        real_t s = b[r];
{{ UNROLL }}
        for (int c = 0; c < r; ++c) s -= A[r * ODE_NX + c] * b[c];
        b[r] = s;
    }
{{ UNROLL }}
    for (int r = ODE_NX - 1; r >= 0; --r) {
        real_t s = b[r];
{{ UNROLL }}
        for (int c = r + 1; c < ODE_NX; ++c) s -= A[r * ODE_NX + c] * b[c];
        b[r] = s / A[r * ODE_NX + r];
    }
}

{% if sparse_lu %}
/* ---- sparse LU (sbmlgpu.ode.sparse_lu) over the {{ nnz }} stored entries of M (non-zeros
   of J, the diagonal, fill-in), pivot order fixed when the kernel was generated. d[k]
   holds the inverse of pivot k. {% if lu_tables %}Loops over index tables (a large plan: straight-line
   code would take nvcc minutes); the same operations in the same order.{% else %}Straight-line code.{% endif %} */
#define ODE_LU_SIZE {{ nnz }}
#define ODE_PIVOT_T real_t
{% if lu_tables %}

/* the plan's index tables (sparse_lu.LuTables says what each holds); one copy for the
   device (global memory: every thread of a warp reads the same entry at once) and one
   for the host build */
typedef {{ lu_index_type }} ode_lu_index;
#ifdef __CUDA_ARCH__
#define ODE_LU(name) ode_lu_##name##_device
#else
#define ODE_LU(name) ode_lu_##name##_host
#endif
{% for name, values in lu_tables.items() %}
#define ODE_LU_DATA_{{ name }} {{ values }}
#ifdef __CUDA_ARCH__
__device__ const ode_lu_index ode_lu_{{ name }}_device[] = {ODE_LU_DATA_{{ name }}};
#else
static const ode_lu_index ode_lu_{{ name }}_host[] = {ODE_LU_DATA_{{ name }}};
#endif
{% endfor %}
{% endif %}

/* A = -J on the stored entries, zero on fill-in; ft = df/dt */
ODE_MODEL_FN void ode_minus_jacobian(real_t t, const real_t* __restrict__ x,
                                     const real_t* __restrict__ f,
                                     const real_t* __restrict__ p, real_t* __restrict__ A,
                                     real_t* __restrict__ ft)
{
    (void)f;
    model_m_sparse(t, x, p, A, ft);
}

/* A += v I */
SBMLGPU_HD void ode_add_diagonal(real_t* __restrict__ A, real_t v)
{
{% for e in diag_entries %}
    A[{{ e }}] += v;
{% endfor %}
}

/* A = LU in place; false on a zero or non-finite pivot */
ODE_MODEL_FN bool ode_lu_factor(real_t* __restrict__ A, real_t* __restrict__ d)
{
    bool ok = true;
{% if lu_tables %}
    int lo = 0, up = 0, u = 0;  /* where step s starts in the lower, upper, update tables */
    for (int s = 0; s < ODE_NX; ++s) {
        const int k = ODE_LU(pivot)[s], kk = ODE_LU(pivot_entry)[s];
        const int nl = ODE_LU(lower_count)[s], nu = ODE_LU(upper_count)[s];
        d[k] = ODE_R(1) / A[kk];
        ok = ok && ode_finite(d[k]) && A[kk] != ODE_R(0);
        for (int i = 0; i < nl; ++i) {
            const int rk = ODE_LU(lower_entry)[lo + i];
            A[rk] *= d[k];
            const real_t l = A[rk];
            for (int j = 0; j < nu; ++j, ++u)
                A[ODE_LU(update_entry)[u]] -= l * A[ODE_LU(upper_entry)[up + j]];
        }
        lo += nl;
        up += nu;
    }
{% else %}
{{ lu_code }}
{% endif %}
    return ok;
}

ODE_MODEL_FN void ode_solve_lin(const real_t* __restrict__ A, const real_t* __restrict__ d,
                                real_t* __restrict__ b)
{
{% if lu_tables %}
    int lo = 0;  /* L: forward, in pivot order */
    for (int s = 0; s < ODE_NX; ++s) {
        const int nl = ODE_LU(lower_count)[s];
        const real_t bk = b[ODE_LU(pivot)[s]];
        for (int i = 0; i < nl; ++i)
            b[ODE_LU(lower_row)[lo + i]] -= A[ODE_LU(lower_entry)[lo + i]] * bk;
        lo += nl;
    }
    int up = {{ lu_upper_total }};  /* U: backward */
    for (int s = ODE_NX - 1; s >= 0; --s) {
        const int k = ODE_LU(pivot)[s], nu = ODE_LU(upper_count)[s];
        up -= nu;
        real_t v = b[k];
        for (int j = 0; j < nu; ++j)
            v -= A[ODE_LU(upper_entry)[up + j]] * b[ODE_LU(upper_col)[up + j]];
        b[k] = v * d[k];
    }
{% else %}
{{ solve_code }}
{% endif %}
}
{% else %}
#define ODE_LU_SIZE (ODE_NX * ODE_NX)
#define ODE_PIVOT_T int

/* J = df/dx and ft = df/dt at (t, x) into A and ft. */
SBMLGPU_HD void ode_jacobian(real_t t, const real_t* x, const real_t* f, const real_t* p,
                             real_t* A, real_t* ft)
{
{% if fd_jacobian %}
    /* forward differences, increments sqrt(uround) * max(|x_j|, 1e-5) (as in rodas.f's
       numerical Jacobian) */
    real_t y[ODE_NX], fy[ODE_NX];
{{ UNROLL }}
    for (int i = 0; i < ODE_NX; ++i) y[i] = x[i];
    const real_t root_u = ODE_SQRT(ODE_UROUND);
    for (int j = 0; j < ODE_NX; ++j) {
        const real_t delta = root_u * ODE_MAX(ODE_R(1e-5), ODE_ABS(x[j]));
        const real_t saved = y[j];
        y[j] = saved + delta;
        model_rhs(t, y, p, fy);
        y[j] = saved;
        const real_t inv = ODE_R(1) / ((saved + delta) - saved);
        for (int i = 0; i < ODE_NX; ++i) A[i * ODE_NX + j] = (fy[i] - f[i]) * inv;
    }
{% if rhs_has_time %}
    {
        const real_t delta = root_u * ODE_MAX(ODE_R(1e-5), ODE_ABS(t));
        model_rhs(t + delta, x, p, fy);
        const real_t inv = ODE_R(1) / ((t + delta) - t);
        for (int i = 0; i < ODE_NX; ++i) ft[i] = (fy[i] - f[i]) * inv;
    }
{% else %}
    for (int i = 0; i < ODE_NX; ++i) ft[i] = ODE_R(0);
{% endif %}
{% else %}
    (void)f;
    model_jacobian(t, x, p, A, ft);
{% endif %}
}

/* A = -J, ft = df/dt at (t, x) */
SBMLGPU_HD void ode_minus_jacobian(real_t t, const real_t* x, const real_t* f, const real_t* p,
                                   real_t* A, real_t* ft)
{
    ode_jacobian(t, x, f, p, A, ft);
{{ UNROLL }}
    for (int k = 0; k < ODE_NX * ODE_NX; ++k) A[k] = -A[k];
}

/* A += v I */
SBMLGPU_HD void ode_add_diagonal(real_t* A, real_t v)
{
{{ UNROLL }}
    for (int i = 0; i < ODE_NX; ++i) A[i * ODE_NX + i] += v;
}

/* A = LU in place (partial pivoting); false if singular (or NaN) */
SBMLGPU_HD bool ode_lu_factor(real_t* A, int* piv)
{
    return ode_lu(A, piv);
}

SBMLGPU_HD void ode_solve_lin(const real_t* A, const int* piv, real_t* b)
{
    ode_lu_solve(A, piv, b);
}
{% endif %}

