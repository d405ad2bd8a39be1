{#
  dopri5.cuh -- Dormand-Prince 5(4) with the step-size control and the dense output
  of Hairer's DOPRI5 (Hairer, Norsett, Wanner: Solving ODEs I, 2nd ed., sec. II.4,
  II.6; the coefficients are those of dopri5.f): FSAL (the last stage is f at the new
  point, the first stage of the next step), PI control with beta = 0.04, safety 0.9,
  step ratio within [0.2, 10], and the continuous extension of order 4 used for output
  times inside a step and for event root finding. Kovac et al. (2019) run one such
  integration per GPU thread.
#}
/* ---- DOPRI5, adaptive ------------------------------------------------------------ */
#define ODE_ORDER 5

typedef struct {
    real_t x[ODE_NX], f[ODE_NX];      /* state and f at t */
    ODE_ATOL_FIELD                    /* each state's atol (--scaled-atol) */
    real_t xn[ODE_NX], fn[ODE_NX];    /* at t + h after an accepted step */
    real_t k3[ODE_NX], k4[ODE_NX], k5[ODE_NX], k6[ODE_NX]; /* stages kept for dense output */
    real_t h;          /* the next step to try */
    real_t facold;     /* the previous accepted error (PI control) */
    bool reject;       /* the last step was rejected */
    bool nonfinite;    /* the last rejection was for a NaN/inf */
} ode_stepper;

#define DP_C2 ODE_R(0.2)
#define DP_C3 ODE_R(0.3)
#define DP_C4 ODE_R(0.8)
#define DP_C5 ODE_R(8.0 / 9.0)
#define DP_A21 ODE_R(0.2)
#define DP_A31 ODE_R(3.0 / 40.0)
#define DP_A32 ODE_R(9.0 / 40.0)
#define DP_A41 ODE_R(44.0 / 45.0)
#define DP_A42 ODE_R(-56.0 / 15.0)
#define DP_A43 ODE_R(32.0 / 9.0)
#define DP_A51 ODE_R(19372.0 / 6561.0)
#define DP_A52 ODE_R(-25360.0 / 2187.0)
#define DP_A53 ODE_R(64448.0 / 6561.0)
#define DP_A54 ODE_R(-212.0 / 729.0)
#define DP_A61 ODE_R(9017.0 / 3168.0)
#define DP_A62 ODE_R(-355.0 / 33.0)
#define DP_A63 ODE_R(46732.0 / 5247.0)
#define DP_A64 ODE_R(49.0 / 176.0)
#define DP_A65 ODE_R(-5103.0 / 18656.0)
#define DP_A71 ODE_R(35.0 / 384.0)
#define DP_A73 ODE_R(500.0 / 1113.0)
#define DP_A74 ODE_R(125.0 / 192.0)
#define DP_A75 ODE_R(-2187.0 / 6784.0)
#define DP_A76 ODE_R(11.0 / 84.0)
#define DP_E1 ODE_R(71.0 / 57600.0)
#define DP_E3 ODE_R(-71.0 / 16695.0)
#define DP_E4 ODE_R(71.0 / 1920.0)
#define DP_E5 ODE_R(-17253.0 / 339200.0)
#define DP_E6 ODE_R(22.0 / 525.0)
#define DP_E7 ODE_R(-1.0 / 40.0)
#define DP_D1 ODE_R(-12715105075.0 / 11282082432.0)
#define DP_D3 ODE_R(87487479700.0 / 32700410799.0)
#define DP_D4 ODE_R(-10690763975.0 / 1880347072.0)
#define DP_D5 ODE_R(701980252875.0 / 199316789632.0)
#define DP_D6 ODE_R(-1453857185.0 / 822651844.0)
#define DP_D7 ODE_R(69997945.0 / 29380423.0)
#define DP_BETA ODE_R(0.04)
#define DP_EXPO1 ODE_R(0.2 - 0.04 * 0.75)
#define DP_SAFE ODE_R(0.9)
#define DP_FACC1 ODE_R(5.0)  /* 1 / fac1, fac1 = 0.2: at most 5x smaller */
#define DP_FACC2 ODE_R(0.1)  /* 1 / fac2, fac2 = 10: at most 10x larger */

{% include "sbmlgpu.ode:adaptive.cuh" %}

SBMLGPU_HD void ode_restart(ode_stepper* S, real_t t, const real_t* p)
{
    model_rhs(t, S->x, p, S->f);
}

SBMLGPU_HD void ode_start(ode_stepper* S, real_t t, const real_t* p, const ode_config* cfg,
                          real_t t_end)
{
    S->facold = ODE_R(1e-4);
    S->reject = false;
    S->nonfinite = false;
    ODE_START_ATOL(S, cfg);
    ode_restart(S, t, p);
    S->h = cfg->h0 > ODE_R(0) ? cfg->h0 : ode_initial_step(S->x, S->f, t, p, cfg, ODE_ATOL_V(S),
                                                                t_end, ODE_ORDER);
}

/* One attempt of size h from (t, x). 1: accepted (xn, fn and the dense-output stages
   hold the step); 0: rejected, S->h is the next size to try. `force` accepts whatever
   the error (the step onto an event's location). */
SBMLGPU_HD int ode_step(ode_stepper* S, real_t t, real_t h, const real_t* p,
                        const ode_config* cfg, bool force)
{
    real_t k2[ODE_NX], y[ODE_NX];
    const real_t* x = S->x;
    const real_t* k1 = S->f;
{{ unroll }}
    for (int i = 0; i < ODE_NX; ++i) y[i] = x[i] + h * DP_A21 * k1[i];
    model_rhs(t + DP_C2 * h, y, p, k2);
{{ unroll }}
    for (int i = 0; i < ODE_NX; ++i) y[i] = x[i] + h * (DP_A31 * k1[i] + DP_A32 * k2[i]);
    model_rhs(t + DP_C3 * h, y, p, S->k3);
{{ unroll }}
    for (int i = 0; i < ODE_NX; ++i)
        y[i] = x[i] + h * (DP_A41 * k1[i] + DP_A42 * k2[i] + DP_A43 * S->k3[i]);
    model_rhs(t + DP_C4 * h, y, p, S->k4);
{{ unroll }}
    for (int i = 0; i < ODE_NX; ++i)
        y[i] = x[i] + h * (DP_A51 * k1[i] + DP_A52 * k2[i] + DP_A53 * S->k3[i]
                           + DP_A54 * S->k4[i]);
    model_rhs(t + DP_C5 * h, y, p, S->k5);
{{ unroll }}
    for (int i = 0; i < ODE_NX; ++i)
        y[i] = x[i] + h * (DP_A61 * k1[i] + DP_A62 * k2[i] + DP_A63 * S->k3[i]
                           + DP_A64 * S->k4[i] + DP_A65 * S->k5[i]);
    model_rhs(t + h, y, p, S->k6);
{{ unroll }}
    for (int i = 0; i < ODE_NX; ++i)
        S->xn[i] = x[i] + h * (DP_A71 * k1[i] + DP_A73 * S->k3[i] + DP_A74 * S->k4[i]
                               + DP_A75 * S->k5[i] + DP_A76 * S->k6[i]);
    model_rhs(t + h, S->xn, p, S->fn);
    if (force) return 1;

    real_t err = ODE_R(0);
{{ unroll }}
    for (int i = 0; i < ODE_NX; ++i) {
        const real_t e = h * (DP_E1 * k1[i] + DP_E3 * S->k3[i] + DP_E4 * S->k4[i]
                              + DP_E5 * S->k5[i] + DP_E6 * S->k6[i] + DP_E7 * S->fn[i]);
        const real_t sk = ODE_ATOL_AT(S->atol, i, cfg)
                         + cfg->rtol * ODE_MAX(ODE_ABS(x[i]), ODE_ABS(S->xn[i]));
        err += (e / sk) * (e / sk);
    }
    err = ODE_SQRT(err / ODE_R(ODE_NX_REAL));
    if (!ode_finite(err)) {  /* NaN or overflow in a stage: try a much smaller step */
        S->nonfinite = true;
        S->reject = true;
        S->h = h * ODE_R(0.1);
        return 0;
    }
    S->nonfinite = false;
    const real_t fac11 = ODE_POW(err, DP_EXPO1);
    if (err <= ODE_R(1)) {
        real_t fac = fac11 / ODE_POW(S->facold, DP_BETA);
        fac = ODE_MAX(DP_FACC2, ODE_MIN(DP_FACC1, fac / DP_SAFE));
        real_t hnew = h / fac;
        S->facold = ODE_MAX(err, ODE_R(1e-4));
        if (S->reject) hnew = ODE_MIN(hnew, h);
        S->reject = false;
        S->h = hnew;
        return 1;
    }
    S->h = h / ODE_MIN(DP_FACC1, fac11 / DP_SAFE);
    S->reject = true;
    return 0;
}

SBMLGPU_HD void ode_accept(ode_stepper* S)
{
{{ unroll }}
    for (int i = 0; i < ODE_NX; ++i) { S->x[i] = S->xn[i]; S->f[i] = S->fn[i]; }
}

/* Hairer's continuous extension at t + theta h of the last step. */
SBMLGPU_HD void ode_dense(const ode_stepper* S, real_t theta, real_t h, real_t* out)
{
    const real_t s = theta, s1 = ODE_R(1) - theta;
{{ unroll }}
    for (int i = 0; i < ODE_NX; ++i) {
        const real_t ydiff = S->xn[i] - S->x[i];
        const real_t bspl = h * S->f[i] - ydiff;
        const real_t r4 = ydiff - h * S->fn[i] - bspl;
        const real_t r5 = h * (DP_D1 * S->f[i] + DP_D3 * S->k3[i] + DP_D4 * S->k4[i]
                               + DP_D5 * S->k5[i] + DP_D6 * S->k6[i] + DP_D7 * S->fn[i]);
        out[i] = S->x[i] + s * (ydiff + s1 * (bspl + s * (r4 + s1 * r5)));
    }
}
