{#
  bdf.cuh -- a variable-order (1-5), variable-step backward differentiation method for
  stiff systems, with the Jacobian and its LU factorisation kept from step to step.

  The formulas are the numerical differentiation formulas (NDF) of Shampine and
  Reichelt ("The MATLAB ODE Suite", SIAM J. Sci. Comput. 18, 1997: ode15s), in the
  quasi-constant step form of scipy.integrate.BDF: the past is held as backward
  differences D (scaled to a step hD) and a step of another size rescales them; each
  step predicts from D and corrects by a simplified Newton iteration on
  (I - c J) dy = c f - psi - d, c = h / alpha_k. J is evaluated again only when the
  iteration fails to converge with a J from an earlier step; M = I - c J is factorised
  again when c changes (a new step size or order). Error estimate: error_const_k * d;
  the order moves by one after k + 1 steps of one size where that allows a larger
  step (as scipy's BDF and CVODE do). Against rodas4 (a factorisation and a Jacobian
  every step, order 4) it pays where steps are many and the Jacobian costly: stiff
  members of 10^4-10^6 steps, large systems.

  The driver's contract (driver.cuh): ode_step computes the step from (t, x) of
  length h into xn, fn and the dense output, changing nothing ode_accept would need
  to undo (the driver may drop the step: a delay() history check, an event before
  its end); ode_accept commits it; ode_restart starts at order 1 from x (after an
  event's jump).
#}
{% set UNROLL = "#pragma unroll" if lu_static else no_unroll %}
/* ---- BDF (NDF form), variable order 1..5, stiff ---------------------------------- */
#define ODE_ORDER 1  /* the starting step's order (adaptive.cuh) */
#define BDF_MAX_ORDER 5
#define BDF_ROWS (BDF_MAX_ORDER + 3)
#define BDF_NEWTON_MAXITER 4
#define BDF_MIN_FACTOR ODE_R(0.2)
#define BDF_MAX_FACTOR ODE_R(10)
/* Newton increments below this share of the Newton tolerance are roundoff (ode_step) */
#define BDF_NEWTON_NOISE ODE_R(0.01)


/* the NDF's kappa, and gamma_k = sum 1/j, alpha_k = (1 - kappa_k) gamma_k, the error
   constants kappa_k gamma_k + 1/(k + 1) (Shampine and Reichelt 1997, Table 1) */
SBMLGPU_HD real_t bdf_gamma(int k)
{
    real_t g = ODE_R(0);
    for (int j = 1; j <= k; ++j) g += ODE_R(1) / (real_t)j;
    return g;
}

SBMLGPU_HD real_t bdf_kappa(int k)
{
    switch (k) {
    case 1: return ODE_R(-0.1850);
    case 2: return ODE_R(-1) / ODE_R(9);
    case 3: return ODE_R(-0.0823);
    case 4: return ODE_R(-0.0415);
    default: return ODE_R(0);
    }
}

SBMLGPU_HD real_t bdf_alpha(int k) { return (ODE_R(1) - bdf_kappa(k)) * bdf_gamma(k); }

SBMLGPU_HD real_t bdf_error_const(int k)
{
    return bdf_kappa(k) * bdf_gamma(k) + ODE_R(1) / (real_t)(k + 1);
}

{% include "sbmlgpu.ode:adaptive.cuh" %}

{% include "sbmlgpu.ode:linear.cuh" %}

typedef struct {
    real_t x[ODE_NX], f[ODE_NX];    /* state and f at t */
    ODE_ATOL_FIELD                  /* each state's atol (--scaled-atol) */
    real_t xn[ODE_NX], fn[ODE_NX];  /* at t + h after a step */
    real_t D[BDF_ROWS][ODE_NX];     /* backward differences of the past, step hD */
    real_t Dn[BDF_ROWS][ODE_NX];    /* ... after the last step (ode_accept takes them) */
    real_t J[ODE_LU_SIZE];          /* -J, kept from step to step */
    real_t A[ODE_LU_SIZE];          /* LU of I/c - J */
    ODE_PIVOT_T piv[ODE_NX];
    real_t h;       /* the next step (the driver reads and may shorten it) */
    real_t hD;      /* the step D is scaled to */
    real_t c_lu;    /* c of the factorisation in A; 0: none */
    real_t h_next;  /* pending (after a step) */
    int order, order_next, n_equal, n_equal_next;
    bool jac_valid, jac_current, reject, nonfinite;
    bool keep_lu;   /* the last attempt failed the error test only: its LU serves on */
} ode_stepper;

/* D[0..order] rescaled from step hD to step h: the same polynomial through past points
   spaced h instead of hD (scipy's change_D: D <- (R U)^T D, R and U of compute_R) */
SBMLGPU_HD void bdf_rescale(ode_stepper* S, real_t factor)
{
    const int k = S->order;
    real_t R[BDF_MAX_ORDER + 1][BDF_MAX_ORDER + 1], U[BDF_MAX_ORDER + 1][BDF_MAX_ORDER + 1];
    for (int c = 0; c <= k; ++c) { R[0][c] = ODE_R(1); U[0][c] = ODE_R(1); }
    for (int r = 1; r <= k; ++r) {
        for (int c = 0; c <= k; ++c) {
            const real_t mr = c == 0 ? ODE_R(0) : ((real_t)(r - 1) - factor * (real_t)c) / (real_t)r;
            const real_t mu = c == 0 ? ODE_R(0) : ((real_t)(r - 1) - (real_t)c) / (real_t)r;
            R[r][c] = R[r - 1][c] * mr;
            U[r][c] = U[r - 1][c] * mu;
        }
    }
    real_t RU[BDF_MAX_ORDER + 1][BDF_MAX_ORDER + 1];
    for (int r = 0; r <= k; ++r) {
        for (int c = 0; c <= k; ++c) {
            real_t v = ODE_R(0);
            for (int m = 0; m <= k; ++m) v += R[r][m] * U[m][c];
            RU[r][c] = v;
        }
    }
    for (int i = 0; i < ODE_NX; ++i) {
        real_t old[BDF_MAX_ORDER + 1];
        for (int r = 0; r <= k; ++r) old[r] = S->D[r][i];
        for (int c = 0; c <= k; ++c) {
            real_t v = ODE_R(0);
            for (int r = 0; r <= k; ++r) v += RU[r][c] * old[r];
            S->D[c][i] = v;
        }
    }
}

SBMLGPU_HD void ode_restart(ode_stepper* S, real_t t, const real_t* p)
{
    model_rhs(t, S->x, p, S->f);
{{ UNROLL }}
    for (int i = 0; i < ODE_NX; ++i) {
        S->D[0][i] = S->x[i];
        S->D[1][i] = S->h * S->f[i];
        for (int r = 2; r < BDF_ROWS; ++r) S->D[r][i] = ODE_R(0);
    }
    S->hD = S->h;
    S->order = 1;
    S->n_equal = 0;
    S->c_lu = ODE_R(0);
    S->jac_valid = false;  /* the state jumped: J at the old one may be far off */
    S->jac_current = false;
    S->keep_lu = false;
}

SBMLGPU_HD void ode_start(ode_stepper* S, real_t t, const real_t* p, const ode_config* cfg,
                          real_t t_end)
{
    S->reject = false;
    S->nonfinite = false;
    ODE_START_ATOL(S, cfg);
    model_rhs(t, S->x, p, S->f);
    S->h = cfg->h0 > ODE_R(0) ? cfg->h0 : ode_initial_step(S->x, S->f, t, p, cfg, ODE_ATOL_V(S),
                                                                t_end, ODE_ORDER);
    ode_restart(S, t, p);
}

SBMLGPU_HD bool bdf_finite(const real_t* v)
{
    bool ok = true;
{{ UNROLL }}
    for (int i = 0; i < ODE_NX; ++i) ok = ok && ode_finite(v[i]);
    return ok;
}

/* the weighted RMS norm of v with weights atol + rtol |y| (`atol`: ODE_ATOL_V) */
SBMLGPU_HD real_t bdf_norm(const real_t* v, const real_t* y, const ode_config* cfg,
                           const real_t* atol)
{
{% if not scaled_atol %}
    (void)atol;  /* --no-scaled-atol: ODE_ATOL_AT reads cfg->atol */
{% endif %}
    real_t s = ODE_R(0);
{{ UNROLL }}
    for (int i = 0; i < ODE_NX; ++i) {
        const real_t w = v[i] / (ODE_ATOL_AT(atol, i, cfg) + cfg->rtol * ODE_ABS(y[i]));
        s += w * w;
    }
    return ODE_SQRT(s / ODE_R(ODE_NX_REAL));
}

SBMLGPU_HD int ode_step(ode_stepper* S, real_t t, real_t h, const real_t* p,
                        const ode_config* cfg, bool force)
{
    /* the driver hands (t + S->h) - t, which differs from S->h by rounding in most
       steps: that is the same step (no rescaling, the count of equal steps and the LU
       go on), not a new size */
    if (ODE_ABS(h - S->hD) > ODE_R(64) * ODE_UROUND * ODE_ABS(S->hD)) {
        bdf_rescale(S, h / S->hD);
        S->hD = h;
        S->n_equal = 0;
        /* a new size: factorise again, except after an error-test rejection, where
           the old LU serves the Newton iteration (as scipy's BDF keeps it) */
        if (!S->keep_lu) S->c_lu = ODE_R(0);
    }
    S->keep_lu = false;
    const int k = S->order;
    const real_t t_new = t + h;
    const real_t alpha = bdf_alpha(k);
    const real_t c = S->hD / alpha;
    real_t gamma[BDF_MAX_ORDER + 1];  /* once a step, not once a state */
    for (int r = 1; r <= k; ++r) gamma[r] = bdf_gamma(r);
    real_t y[ODE_NX], psi[ODE_NX], d[ODE_NX], dy[ODE_NX], fy[ODE_NX];
{{ UNROLL }}
    for (int i = 0; i < ODE_NX; ++i) {
        real_t yp = ODE_R(0), ps = ODE_R(0);
        for (int r = 0; r <= k; ++r) yp += S->D[r][i];
        for (int r = 1; r <= k; ++r) ps += S->D[r][i] * gamma[r];
        y[i] = yp;
        psi[i] = ps / alpha;
    }
    const real_t newton_tol = ODE_MAX(ODE_R(10) * ODE_UROUND / cfg->rtol,
                                      ODE_MIN(ODE_R(0.03), ODE_SQRT(cfg->rtol)));
    real_t yp[ODE_NX];
{{ UNROLL }}
    for (int i = 0; i < ODE_NX; ++i) yp[i] = y[i];
    bool converged = false;
    int iterations = 0;
    for (;;) {  /* at most twice: with the kept J, then with one evaluated here */
        if (!S->jac_valid) {
            real_t ft[ODE_NX];
            model_rhs(t_new, yp, p, fy);
            ode_minus_jacobian(t_new, yp, fy, p, S->J, ft);
            S->jac_valid = true;
            S->jac_current = true;
            S->c_lu = ODE_R(0);
        }
        if (S->c_lu == ODE_R(0)) {
{{ UNROLL }}
            for (int e = 0; e < ODE_LU_SIZE; ++e) S->A[e] = S->J[e];
            ode_add_diagonal(S->A, ODE_R(1) / c);
            if (!ode_lu_factor(S->A, S->piv)) {
                S->c_lu = ODE_R(0);
                S->nonfinite = !ode_finite(S->A[0]);
                S->reject = true;
                S->h = h * ODE_R(0.25);  /* a smaller c makes M diagonal-dominant */
                return force ? -1 : 0;
            }
            S->c_lu = c;
        }
        /* the simplified Newton iteration (scipy's solve_bdf_system) */
{{ UNROLL }}
        for (int i = 0; i < ODE_NX; ++i) { y[i] = yp[i]; d[i] = ODE_R(0); }
        real_t dy_norm_old = ODE_R(-1);
        converged = false;
        for (iterations = 1; iterations <= BDF_NEWTON_MAXITER; ++iterations) {
            model_rhs(t_new, y, p, fy);
            if (!bdf_finite(fy)) break;
{{ UNROLL }}
            for (int i = 0; i < ODE_NX; ++i) dy[i] = (c * fy[i] - psi[i] - d[i]) / S->c_lu;
            /* A = I/c_lu - J: (I - c_lu J) dy = b, c_lu = c unless the LU is kept
               from a rejected attempt (a simplified Newton iteration either way) */
            ode_solve_lin(S->A, S->piv, dy);
            const real_t dy_norm = bdf_norm(dy, yp, cfg, ODE_ATOL_V(S));  /* scaled as the prediction */
            real_t rate = ODE_R(-1);
            if (dy_norm_old > ODE_R(0)) rate = dy_norm / dy_norm_old;
            if (rate >= ODE_R(0) &&
                (rate >= ODE_R(1) ||
                 ODE_POW(rate, (real_t)(BDF_NEWTON_MAXITER - iterations + 1)) / (ODE_R(1) - rate)
                     * dy_norm > newton_tol)) {
                /* two increments far below the tolerance that do not shrink are the
                   roundoff of f, not divergence: converged (scipy's test alone called
                   that divergence and halved the step, again and again: a member of
                   Brannmark_JBC2010 at atol 1e-12 took 237,261 order-1 steps of ~1e-4
                   where scipy's BDF took 472, its increments ~4e-11 of the weights, as
                   CVODE, whose test scales by min(1, rate), would accept) */
                if (dy_norm <= BDF_NEWTON_NOISE * newton_tol &&
                    dy_norm_old <= BDF_NEWTON_NOISE * newton_tol) {
{{ UNROLL }}
                    for (int i = 0; i < ODE_NX; ++i) { y[i] += dy[i]; d[i] += dy[i]; }
                    converged = true;
                }
                break;
            }
{{ UNROLL }}
            for (int i = 0; i < ODE_NX; ++i) { y[i] += dy[i]; d[i] += dy[i]; }
            if (dy_norm == ODE_R(0) ||
                (rate >= ODE_R(0) && rate / (ODE_R(1) - rate) * dy_norm < newton_tol)) {
                converged = true;
                break;
            }
            if (!ode_finite(dy_norm)) break;
            dy_norm_old = dy_norm;
        }
        if (converged || S->jac_current) break;
        S->jac_valid = false;  /* J from an earlier step: evaluate it here and again */
    }
    if (!converged) {
        S->reject = true;
        S->nonfinite = !bdf_finite(y);
        S->h = h * ODE_R(0.5);
        S->c_lu = ODE_R(0);  /* a new LU for the halved step */
        return force ? -1 : 0;
    }
    const real_t safety = ODE_R(0.9) * (real_t)(2 * BDF_NEWTON_MAXITER + 1)
                          / (real_t)(2 * BDF_NEWTON_MAXITER + iterations);
    real_t err[ODE_NX];
    const real_t error_const = bdf_error_const(k);
{{ UNROLL }}
    for (int i = 0; i < ODE_NX; ++i) err[i] = error_const * d[i];
    const real_t error_norm = bdf_norm(err, y, cfg, ODE_ATOL_V(S));
    if (!force) {
        if (!ode_finite(error_norm)) {
            S->nonfinite = true;
            S->reject = true;
            S->h = h * ODE_R(0.1);
            return 0;
        }
        S->nonfinite = false;
        if (error_norm > ODE_R(1)) {
            const real_t factor = ODE_MAX(BDF_MIN_FACTOR,
                                          safety * ODE_POW(error_norm, ODE_R(-1) / (real_t)(k + 1)));
            S->reject = true;
            S->h = h * factor;
            S->keep_lu = true;
            return 0;
        }
    }
    /* the differences after the step: D[k+2] = d - D[k+1], D[k+1] = d, D[i] += D[i+1] */
{{ UNROLL }}
    for (int i = 0; i < ODE_NX; ++i) {
        for (int r = 0; r < BDF_ROWS; ++r) S->Dn[r][i] = S->D[r][i];
        S->Dn[k + 2][i] = d[i] - S->D[k + 1][i];
        S->Dn[k + 1][i] = d[i];
        for (int r = k; r >= 0; --r) S->Dn[r][i] += S->Dn[r + 1][i];
        S->xn[i] = y[i];
    }
    model_rhs(t_new, S->xn, p, S->fn);
    /* the next step and order (after k + 1 steps of one size: the order, of k - 1, k,
       k + 1, that allows the largest step) */
    S->order_next = k;
    S->n_equal_next = S->n_equal + 1;
    real_t h_next = h;
    if (S->n_equal_next >= k + 1) {
        real_t e_lower = ODE_R(-1), e_higher = ODE_R(-1);
        if (k > 1) {
            const real_t lower = bdf_error_const(k - 1);
{{ UNROLL }}
            for (int i = 0; i < ODE_NX; ++i) err[i] = lower * S->Dn[k][i];
            e_lower = bdf_norm(err, y, cfg, ODE_ATOL_V(S));
        }
        if (k < BDF_MAX_ORDER) {
            const real_t higher = bdf_error_const(k + 1);
{{ UNROLL }}
            for (int i = 0; i < ODE_NX; ++i) err[i] = higher * S->Dn[k + 2][i];
            e_higher = bdf_norm(err, y, cfg, ODE_ATOL_V(S));
        }
        /* the factor each order allows (an error of 0: any, so the largest); of equal
           ones the lowest order, as scipy's argmax */
        const real_t any = BDF_MAX_FACTOR / safety;
        const real_t f_here = error_norm > ODE_R(0)
            ? ODE_POW(error_norm, ODE_R(-1) / (real_t)(k + 1)) : any;
        real_t best = ODE_R(-1);
        int delta = 0;
        if (e_lower >= ODE_R(0)) {
            best = e_lower > ODE_R(0) ? ODE_POW(e_lower, ODE_R(-1) / (real_t)k) : any;
            delta = -1;
        }
        if (f_here > best) { best = f_here; delta = 0; }
        if (e_higher >= ODE_R(0)) {
            const real_t f_higher = e_higher > ODE_R(0)
                ? ODE_POW(e_higher, ODE_R(-1) / (real_t)(k + 2)) : any;
            if (f_higher > best) { best = f_higher; delta = 1; }
        }
        S->order_next = k + delta;
        h_next = h * ODE_MIN(BDF_MAX_FACTOR, safety * best);
        S->n_equal_next = 0;
    }
    S->h_next = h_next;
    S->h = h_next;
    S->reject = false;
    return 1;
}

SBMLGPU_HD void ode_accept(ode_stepper* S)
{
{{ UNROLL }}
    for (int i = 0; i < ODE_NX; ++i) {
        S->x[i] = S->xn[i];
        S->f[i] = S->fn[i];
        for (int r = 0; r < BDF_ROWS; ++r) S->D[r][i] = S->Dn[r][i];
    }
    /* a new order or step size (n_equal_next = 0): M = I - cJ changes, a new LU */
    if (S->order_next != S->order || S->n_equal_next == 0) S->c_lu = ODE_R(0);
    S->order = S->order_next;
    S->n_equal = S->n_equal_next;
    S->jac_current = false;  /* J stays, from an earlier step now */
}

/* The interpolating polynomial of the last step at t + theta h: through the new point
   and the past ones spaced h (scipy's BdfDenseOutput, with t - t_new = (theta - 1) h). */
SBMLGPU_HD void ode_dense(const ode_stepper* S, real_t theta, real_t h, real_t* out)
{
    (void)h;
    const int k = S->order;  /* the step's order (ode_accept has not run) */
{{ UNROLL }}
    for (int i = 0; i < ODE_NX; ++i) {
        real_t v = S->Dn[0][i], prod = ODE_R(1);
        for (int j = 1; j <= k; ++j) {
            prod *= (theta - ODE_R(1) + (real_t)(j - 1)) / (real_t)j;
            v += S->Dn[j][i] * prod;
        }
        out[i] = v;
    }
}
