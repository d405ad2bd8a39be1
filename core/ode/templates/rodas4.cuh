{#
  rodas4.cuh -- RODAS, the stiffly accurate, L-stable Rosenbrock method of order
  4(3) with six stages of Hairer and Wanner (Solving ODEs II, 2nd ed., sec. IV.7,
  Table 7.2; the coefficients and the dense output of order 3 are those of rodas.f,
  METH = 1, as also printed in Numerical Recipes 3rd ed., sec. 17.5.1), with the
  step-size controller of Gustafsson (predictive, as in rodas.f / StepperRoss).

  Each attempt solves six linear systems with the matrix M = I/(gamma h) - J, J the
  analytic Jacobian df/dx (or forward differences, context `fd_jacobian`), after one
  LU factorisation with partial pivoting in the thread. Small systems (context
  `lu_static`) swap rows by selects over constant indices, so that the matrix stays
  in registers; larger ones index rows at run time (local memory).
#}
{# small systems: every loop unrolled (registers); large ones: loops (compile time and
   code size grow with the square of the size otherwise), kept as loops (`no_unroll`)
   above codegen.INLINE_MODEL_MAX states, where nvcc would unroll them by itself #}
{% set UNROLL = "#pragma unroll" if lu_static else no_unroll %}
/* ---- RODAS4, adaptive, stiff ------------------------------------------------------ */
#define ODE_ORDER 4

typedef struct {
    real_t x[ODE_NX], f[ODE_NX];    /* state and f at t */
    ODE_ATOL_FIELD                  /* each state's atol (--scaled-atol) */
    real_t xn[ODE_NX], fn[ODE_NX];  /* at t + h after an accepted step */
    real_t c3[ODE_NX], c4[ODE_NX];  /* dense-output coefficients of the last step */
    real_t h, hold, errold;
    bool first, reject, nonfinite;
} ode_stepper;

#define RO_GAMMA ODE_R(0.25)
#define RO_C2 ODE_R(0.386)
#define RO_C3 ODE_R(0.21)
#define RO_C4 ODE_R(0.63)
#define RO_D1 ODE_R(0.25)
#define RO_D2 ODE_R(-0.1043)
#define RO_D3 ODE_R(0.1035)
#define RO_D4 ODE_R(-0.3620000000000023e-01)
#define RO_A21 ODE_R(1.544)
#define RO_A31 ODE_R(0.9466785280815826)
#define RO_A32 ODE_R(0.2557011698983284)
#define RO_A41 ODE_R(3.314825187068521)
#define RO_A42 ODE_R(2.896124015972201)
#define RO_A43 ODE_R(0.9986419139977817)
#define RO_A51 ODE_R(1.221224509226641)
#define RO_A52 ODE_R(6.019134481288629)
#define RO_A53 ODE_R(12.53708332932087)
#define RO_A54 ODE_R(-0.6878860361058950)
#define RO_C21 ODE_R(-5.6688)
#define RO_C31 ODE_R(-2.430093356833875)
#define RO_C32 ODE_R(-0.2063599157091915)
#define RO_C41 ODE_R(-0.1073529058151375)
#define RO_C42 ODE_R(-9.594562251023355)
#define RO_C43 ODE_R(-20.47028614809616)
#define RO_C51 ODE_R(7.496443313967647)
#define RO_C52 ODE_R(-10.24680431464352)
#define RO_C53 ODE_R(-33.99990352819905)
#define RO_C54 ODE_R(11.70890893206160)
#define RO_C61 ODE_R(8.083246795921522)
#define RO_C62 ODE_R(-7.981132988064893)
#define RO_C63 ODE_R(-31.52159432874371)
#define RO_C64 ODE_R(16.31930543123136)
#define RO_C65 ODE_R(-6.058818238834054)
#define RO_D21 ODE_R(10.12623508344586)
#define RO_D22 ODE_R(-7.487995877610167)
#define RO_D23 ODE_R(-34.80091861555747)
#define RO_D24 ODE_R(-7.992771707568823)
#define RO_D25 ODE_R(1.025137723295662)
#define RO_D31 ODE_R(-0.6762803392801253)
#define RO_D32 ODE_R(6.087714651680015)
#define RO_D33 ODE_R(16.43084320892478)
#define RO_D34 ODE_R(24.76722511418386)
#define RO_D35 ODE_R(-6.594389125716872)
#define RO_SAFE ODE_R(0.9)
#define RO_FAC1 ODE_R(5.0)        /* at most 5x smaller ... */
#define RO_FAC2 ODE_R(1.0 / 6.0)  /* ... or 6x larger per step */

{% include "sbmlgpu.ode:adaptive.cuh" %}

{% include "sbmlgpu.ode:linear.cuh" %}

/* M = I/(gamma h) - J at (t, x), factorised; false if singular (or NaN) */
SBMLGPU_HD bool ode_factor(real_t t, const real_t* x, const real_t* f, const real_t* p,
                           real_t h, real_t* A, real_t* ft, ODE_PIVOT_T* piv)
{
    ode_minus_jacobian(t, x, f, p, A, ft);
    ode_add_diagonal(A, ODE_R(1) / (RO_GAMMA * h));
    return ode_lu_factor(A, piv);
}

SBMLGPU_HD void ode_restart(ode_stepper* S, real_t t, const real_t* p)
{
    model_rhs(t, S->x, p, S->f);
}

SBMLGPU_HD void ode_start(ode_stepper* S, real_t t, const real_t* p, const ode_config* cfg,
                          real_t t_end)
{
    S->first = true;
    S->reject = false;
    S->nonfinite = false;
    S->hold = ODE_R(0);
    S->errold = ODE_R(1);
    ODE_START_ATOL(S, cfg);
    ode_restart(S, t, p);
    S->h = cfg->h0 > ODE_R(0) ? cfg->h0 : ode_initial_step(S->x, S->f, t, p, cfg, ODE_ATOL_V(S),
                                                                t_end, ODE_ORDER);
}

SBMLGPU_HD int ode_step(ode_stepper* S, real_t t, real_t h, const real_t* p,
                        const ode_config* cfg, bool force)
{
    real_t A[ODE_LU_SIZE];
    real_t ft[ODE_NX];
    ODE_PIVOT_T piv[ODE_NX];
    if (!ode_factor(t, S->x, S->f, p, h, A, ft, piv)) {
        /* singular (or NaN): a smaller step makes M diagonal-dominant */
        S->nonfinite = !ode_finite(A[0]);
        S->reject = true;
        S->h = h * ODE_R(0.25);
        return force ? -1 : 0;
    }
    const real_t* x = S->x;
    const real_t inv_h = ODE_R(1) / h;
    real_t k1[ODE_NX], k2[ODE_NX], k3[ODE_NX], k4[ODE_NX], k5[ODE_NX], y[ODE_NX], dy[ODE_NX];
{{ UNROLL }}
    for (int i = 0; i < ODE_NX; ++i) k1[i] = S->f[i] + h * RO_D1 * ft[i];
    ode_solve_lin(A, piv, k1);
{{ UNROLL }}
    for (int i = 0; i < ODE_NX; ++i) y[i] = x[i] + RO_A21 * k1[i];
    model_rhs(t + RO_C2 * h, y, p, dy);
{{ UNROLL }}
    for (int i = 0; i < ODE_NX; ++i) k2[i] = dy[i] + h * RO_D2 * ft[i] + RO_C21 * k1[i] * inv_h;
    ode_solve_lin(A, piv, k2);
{{ UNROLL }}
    for (int i = 0; i < ODE_NX; ++i) y[i] = x[i] + RO_A31 * k1[i] + RO_A32 * k2[i];
    model_rhs(t + RO_C3 * h, y, p, dy);
{{ UNROLL }}
    for (int i = 0; i < ODE_NX; ++i)
        k3[i] = dy[i] + h * RO_D3 * ft[i] + (RO_C31 * k1[i] + RO_C32 * k2[i]) * inv_h;
    ode_solve_lin(A, piv, k3);
{{ UNROLL }}
    for (int i = 0; i < ODE_NX; ++i) y[i] = x[i] + RO_A41 * k1[i] + RO_A42 * k2[i] + RO_A43 * k3[i];
    model_rhs(t + RO_C4 * h, y, p, dy);
{{ UNROLL }}
    for (int i = 0; i < ODE_NX; ++i)
        k4[i] = dy[i] + h * RO_D4 * ft[i]
                + (RO_C41 * k1[i] + RO_C42 * k2[i] + RO_C43 * k3[i]) * inv_h;
    ode_solve_lin(A, piv, k4);
{{ UNROLL }}
    for (int i = 0; i < ODE_NX; ++i)
        y[i] = x[i] + RO_A51 * k1[i] + RO_A52 * k2[i] + RO_A53 * k3[i] + RO_A54 * k4[i];
    model_rhs(t + h, y, p, dy);
{{ UNROLL }}
    for (int i = 0; i < ODE_NX; ++i)
        k5[i] = dy[i] + (RO_C51 * k1[i] + RO_C52 * k2[i] + RO_C53 * k3[i] + RO_C54 * k4[i]) * inv_h;
    ode_solve_lin(A, piv, k5);
{{ UNROLL }}
    for (int i = 0; i < ODE_NX; ++i) y[i] += k5[i];  /* the embedded solution */
    model_rhs(t + h, y, p, dy);
    real_t* k6 = dy;  /* becomes the error estimate */
{{ UNROLL }}
    for (int i = 0; i < ODE_NX; ++i)
        k6[i] = dy[i] + (RO_C61 * k1[i] + RO_C62 * k2[i] + RO_C63 * k3[i] + RO_C64 * k4[i]
                         + RO_C65 * k5[i]) * inv_h;
    ode_solve_lin(A, piv, k6);
    real_t err = ODE_R(0);
{{ UNROLL }}
    for (int i = 0; i < ODE_NX; ++i) {
        S->xn[i] = y[i] + k6[i];
        const real_t sk = ODE_ATOL_AT(S->atol, i, cfg)
                         + cfg->rtol * ODE_MAX(ODE_ABS(x[i]), ODE_ABS(S->xn[i]));
        err += (k6[i] / sk) * (k6[i] / sk);
    }
    err = ODE_SQRT(err / ODE_R(ODE_NX_REAL));
    if (!force) {
        if (!ode_finite(err)) {
            S->nonfinite = true;
            S->reject = true;
            S->h = h * ODE_R(0.1);
            return 0;
        }
        S->nonfinite = false;
        real_t fac = ODE_MAX(RO_FAC2, ODE_MIN(RO_FAC1, ODE_POW(err, ODE_R(0.25)) / RO_SAFE));
        real_t hnew = h / fac;
        if (err > ODE_R(1)) {
            S->h = hnew;
            S->reject = true;
            return 0;
        }
        if (!S->first) {
            real_t facpred = (S->hold / h) * ODE_POW(err * err / S->errold, ODE_R(0.25)) / RO_SAFE;
            facpred = ODE_MAX(RO_FAC2, ODE_MIN(RO_FAC1, facpred));
            fac = ODE_MAX(fac, facpred);
            hnew = h / fac;
        }
        S->first = false;
        S->hold = h;
        S->errold = ODE_MAX(ODE_R(0.01), err);
        if (S->reject) hnew = ODE_MIN(hnew, h);
        S->reject = false;
        S->h = hnew;
    }
{{ UNROLL }}
    for (int i = 0; i < ODE_NX; ++i) {
        S->c3[i] = RO_D21 * k1[i] + RO_D22 * k2[i] + RO_D23 * k3[i] + RO_D24 * k4[i] + RO_D25 * k5[i];
        S->c4[i] = RO_D31 * k1[i] + RO_D32 * k2[i] + RO_D33 * k3[i] + RO_D34 * k4[i] + RO_D35 * k5[i];
    }
    model_rhs(t + h, S->xn, p, S->fn);
    return 1;
}

SBMLGPU_HD void ode_accept(ode_stepper* S)
{
{{ UNROLL }}
    for (int i = 0; i < ODE_NX; ++i) { S->x[i] = S->xn[i]; S->f[i] = S->fn[i]; }
}

/* The continuous extension of order 3 at t + theta h of the last step. */
SBMLGPU_HD void ode_dense(const ode_stepper* S, real_t theta, real_t h, real_t* out)
{
    (void)h;
    const real_t s = theta, s1 = ODE_R(1) - theta;
{{ UNROLL }}
    for (int i = 0; i < ODE_NX; ++i)
        out[i] = S->x[i] * s1 + s * (S->xn[i] + s1 * (S->c3[i] + s * S->c4[i]));
}
