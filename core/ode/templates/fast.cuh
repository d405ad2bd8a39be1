{#
  fast.cuh -- fast reactions (SBML fast="true"): the relaxation of the state onto
  their equilibrium at a fixed time, as the CPU reference does it
  (core/reference/fast.py). Included by model.cuh, only for models with fast
  reactions. Context: `body.fast` (dx = f_fast(t, x): the fast reactions' part of
  the rates, without the factor that scales them in f), `body.fast_jacobian` (J =
  df_fast/dx, row-major; None: forward differences).

  Between instants the kernel integrates f = f_slow + K f_fast with K large (stiff:
  rodas4), which keeps the fast reactions at equilibrium. Where the state jumps (the
  start, events) it is first moved onto the equilibrium by pseudo-transient
  continuation: linearly implicit Euler steps x += (I - H J)^-1 H f_fast(x) in a
  pseudo-time whose step H grows tenfold after each accepted step (Newton's method
  once H is large) and shrinks where a step leaves the finite or non-negative
  states. The linear invariants of the fast reactions (conserved moieties) hold
  exactly: with the analytic J, c^T J = 0 for each of them, so c^T x never moves.
#}
/* ---- fast reactions: relaxation onto their equilibrium (fast.cuh) ---------------------- */
#define ODE_RELAX_STEPS 400

/* dx = the fast reactions' rates (unscaled) */
SBMLGPU_HD void model_fast_rates(const real_t t, const real_t* __restrict__ x,
                                 const real_t* __restrict__ p, real_t* __restrict__ dx)
{
{{ body.fast }}
}
{% if body.fast_jacobian is not none %}

/* J = d(fast rates)/dx, row-major */
SBMLGPU_HD void model_fast_jacobian(const real_t t, const real_t* __restrict__ x,
                                    const real_t* __restrict__ p, real_t* __restrict__ J)
{
    for (int k = 0; k < ODE_NX * ODE_NX; ++k) J[k] = ODE_R(0);
{{ body.fast_jacobian }}
}
{% endif %}

/* fast rates within the tolerances: at equilibrium */
SBMLGPU_HD bool ode_fast_settled(const real_t* x, const real_t* r, const ode_config* cfg)
{
    bool ok = true;
    for (int i = 0; i < ODE_NX; ++i)
        ok = ok && ODE_ABS(r[i]) <= cfg->atol + cfg->rtol * ODE_ABS(x[i]);
    return ok;
}

/* solves A d = b in place (b becomes d) by LU with partial pivoting; false: singular */
SBMLGPU_HD bool ode_fast_solve(real_t* A, real_t* b)
{
    for (int k = 0; k < ODE_NX; ++k) {
        int m = k;
        for (int i = k + 1; i < ODE_NX; ++i)
            if (ODE_ABS(A[i * ODE_NX + k]) > ODE_ABS(A[m * ODE_NX + k])) m = i;
        if (!(A[m * ODE_NX + k] != ODE_R(0)) || !ode_finite(A[m * ODE_NX + k])) return false;
        if (m != k) {
            for (int j = 0; j < ODE_NX; ++j) {
                const real_t s = A[k * ODE_NX + j];
                A[k * ODE_NX + j] = A[m * ODE_NX + j];
                A[m * ODE_NX + j] = s;
            }
            const real_t s = b[k]; b[k] = b[m]; b[m] = s;
        }
        for (int i = k + 1; i < ODE_NX; ++i) {
            const real_t l = A[i * ODE_NX + k] / A[k * ODE_NX + k];
            for (int j = k + 1; j < ODE_NX; ++j) A[i * ODE_NX + j] -= l * A[k * ODE_NX + j];
            b[i] -= l * b[k];
        }
    }
    for (int k = ODE_NX - 1; k >= 0; --k) {
        real_t s = b[k];
        for (int j = k + 1; j < ODE_NX; ++j) s -= A[k * ODE_NX + j] * b[j];
        b[k] = s / A[k * ODE_NX + k];
    }
    return true;
}

/* x moved onto the fast reactions' equilibrium at time t. SBMLGPU_STATUS_OK, or
   FAILED where none is reached (a fast subsystem that grows without bound) */
SBMLGPU_HD int ode_relax(real_t t, real_t* x, const real_t* p, const ode_config* cfg)
{
    real_t r[ODE_NX], rn[ODE_NX], xn[ODE_NX], d[ODE_NX], A[ODE_NX * ODE_NX];
    for (int i = 0; i < ODE_NX; ++i)
        if (!ode_finite(x[i])) return SBMLGPU_STATUS_NON_FINITE;
    model_fast_rates(t, x, p, r);
    real_t H = ODE_R(1);  /* pseudo-time step */
    for (int it = 0; it < ODE_RELAX_STEPS; ++it) {
        if (ode_fast_settled(x, r, cfg)) return SBMLGPU_STATUS_OK;
{% if body.fast_jacobian is not none %}
        model_fast_jacobian(t, x, p, A);
{% else %}
        for (int j = 0; j < ODE_NX; ++j) {  /* forward differences */
            const real_t delta = ODE_SQRT(ODE_UROUND) * ODE_MAX(ODE_ABS(x[j]), ODE_R(1e-6));
            for (int i = 0; i < ODE_NX; ++i) xn[i] = x[i];
            xn[j] += delta;
            model_fast_rates(t, xn, p, rn);
            for (int i = 0; i < ODE_NX; ++i) A[i * ODE_NX + j] = (rn[i] - r[i]) / delta;
        }
{% endif %}
        for (int k = 0; k < ODE_NX * ODE_NX; ++k) A[k] *= -H;
        for (int i = 0; i < ODE_NX; ++i) { A[i * ODE_NX + i] += ODE_R(1); d[i] = H * r[i]; }
        bool ok = ode_fast_solve(A, d);
        if (ok) {
            for (int i = 0; i < ODE_NX; ++i) {
                xn[i] = x[i] + d[i];
                /* a state that was not negative does not become so (amounts) */
                ok = ok && ode_finite(xn[i]) && !(x[i] >= ODE_R(0) && xn[i] < ODE_R(0));
            }
        }
        if (ok) {
            model_fast_rates(t, xn, p, rn);
            for (int i = 0; i < ODE_NX; ++i) ok = ok && ode_finite(rn[i]);
        }
        if (ok) {
            for (int i = 0; i < ODE_NX; ++i) { x[i] = xn[i]; r[i] = rn[i]; }
            H = ODE_MIN(H * ODE_R(10), ODE_R(1e30));
        } else {
            H *= ODE_R(0.1);
            if (!(H > ODE_R(1e-30))) break;
        }
    }
    return ode_fast_settled(x, r, cfg) ? SBMLGPU_STATUS_OK : SBMLGPU_STATUS_FAILED;
}
