{#
  rk4.cuh -- the classical fourth-order Runge-Kutta step with a fixed step size
  (Hagiescu et al. 2013 use the same per-thread scheme). Every output interval is
  split into n = ceil(interval / dt) equal steps, so that the last one lands exactly
  on the output time. The right-hand side at the end of a step is the first stage
  of the next one, so a step costs four evaluations, as in the hand-written kernel
  of the Lorenz benchmark; between the two ends a cubic Hermite interpolant (state
  and slope at both ends) serves the event root finder.
#}
/* ---- RK4, fixed step ------------------------------------------------------------ */

typedef struct {
    real_t x[ODE_NX];   /* state at t */
    real_t f[ODE_NX];   /* f(t, x) */
    real_t xn[ODE_NX];  /* state at t + h after a step */
    real_t fn[ODE_NX];  /* f(t + h, xn) */
    real_t h;           /* unused by rk4: the grid sets each step */
    bool nonfinite;
} ode_stepper;

SBMLGPU_HD void ode_restart(ode_stepper* S, real_t t, const real_t* p)
{
    model_rhs(t, S->x, p, S->f);
}

SBMLGPU_HD void ode_start(ode_stepper* S, real_t t, const real_t* p, const ode_config* cfg,
                          real_t t_end)
{
    (void)t_end;
    S->h = cfg->dt;
    S->nonfinite = false;
    ode_restart(S, t, p);
}

/* One step of size h from (t, x); always accepted. */
SBMLGPU_HD int ode_step(ode_stepper* S, real_t t, real_t h, const real_t* p,
                        const ode_config* cfg, bool force)
{
    (void)cfg; (void)force;
    real_t k2[ODE_NX], k3[ODE_NX], k4[ODE_NX], y[ODE_NX];
    const real_t half = ODE_R(0.5) * h;
    const real_t sixth = h / ODE_R(6);
{{ unroll }}
    for (int i = 0; i < ODE_NX; ++i) y[i] = S->x[i] + half * S->f[i];
    model_rhs(t + half, y, p, k2);
{{ unroll }}
    for (int i = 0; i < ODE_NX; ++i) y[i] = S->x[i] + half * k2[i];
    model_rhs(t + half, y, p, k3);
{{ unroll }}
    for (int i = 0; i < ODE_NX; ++i) y[i] = S->x[i] + h * k3[i];
    model_rhs(t + h, y, p, k4);
{{ unroll }}
    for (int i = 0; i < ODE_NX; ++i)
        S->xn[i] = S->x[i] + sixth * (S->f[i] + ODE_R(2) * k2[i] + ODE_R(2) * k3[i] + k4[i]);
    model_rhs(t + h, S->xn, p, S->fn);
    return 1;
}

SBMLGPU_HD void ode_accept(ode_stepper* S)
{
{{ unroll }}
    for (int i = 0; i < ODE_NX; ++i) { S->x[i] = S->xn[i]; S->f[i] = S->fn[i]; }
}

/* Cubic Hermite interpolant at t + theta h of the last step (x, f) -> (xn, fn). */
SBMLGPU_HD void ode_dense(const ode_stepper* S, real_t theta, real_t h, real_t* out)
{
    const real_t s = theta, s1 = ODE_R(1) - theta;
{{ unroll }}
    for (int i = 0; i < ODE_NX; ++i) {
        const real_t d = S->xn[i] - S->x[i];
        out[i] = s1 * S->x[i] + s * S->xn[i]
                 + s * s1 * ((s - s1) * d + h * (s1 * S->f[i] - s * S->fn[i]));
    }
}
