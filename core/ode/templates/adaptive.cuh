{#
  adaptive.cuh -- what the adaptive methods share: the starting step of Hairer's
  codes (HINIT in dopri5.f and rodas.f; Hairer, Norsett, Wanner: Solving ODEs I,
  sec. II.4, "Starting Step Size"), from the sizes of x0, f(x0) and an estimate of
  the second derivative, in the norm the error control uses.
#}
{% if scaled_atol %}
/* --scaled-atol: a state whose initial value is nonzero but below atol / rtol is held
   to rtol x |its initial value| instead of atol (never looser than atol; not below
   ODE_ATOL_FLOOR). Under atol alone such a value is noise to the error norm, and where
   it grows (a species that starts at 1e-20 under logistic growth: Beer_MolBioSystems2014's
   init_Bac from its PEtab bounds), rodas4's and bdf's long steps gave it a wrong growth
   factor, even a sign change, that showed once it had grown. libRoadRunner scales its
   absolute tolerance by each state's initial value likewise. Set once per member, from
   the state ode_start begins with (after the events at t0). */
SBMLGPU_HD void ode_start_atol(real_t* atol, const real_t* x0, const ode_config* cfg)
{
{{ unroll }}
    for (int i = 0; i < ODE_NX; ++i) {
        const real_t scaled = cfg->rtol * ODE_ABS(x0[i]);  /* 0 where it underflows */
        atol[i] = x0[i] != ODE_R(0) && scaled < cfg->atol
            ? ODE_MAX(scaled, ODE_R(ODE_ATOL_FLOOR)) : cfg->atol;
    }
}
#define ODE_START_ATOL(S, cfg) ode_start_atol((S)->atol, (S)->x, (cfg))
{% else %}
#define ODE_START_ATOL(S, cfg)
{% endif %}

/* `atol`: the states' absolute tolerances (ODE_ATOL_V; unread without --scaled-atol) */
SBMLGPU_HD real_t ode_initial_step(const real_t* x, const real_t* f, real_t t,
                                   const real_t* p, const ode_config* cfg,
                                   const real_t* atol, real_t t_end, int order)
{
{% if not scaled_atol %}
    (void)atol;  /* --no-scaled-atol: ODE_ATOL_AT reads cfg->atol */
{% endif %}
    real_t dnf = ODE_R(0), dny = ODE_R(0);
{{ unroll }}
    for (int i = 0; i < ODE_NX; ++i) {
        const real_t sk = ODE_ATOL_AT(atol, i, cfg) + cfg->rtol * ODE_ABS(x[i]);
        dnf += (f[i] / sk) * (f[i] / sk);
        dny += (x[i] / sk) * (x[i] / sk);
    }
    const real_t span = ODE_ABS(t_end - t);
    const real_t hmax = cfg->max_step > ODE_R(0) ? ODE_MIN(cfg->max_step, span) : span;
    real_t h = (dnf <= ODE_R(1e-10) || dny <= ODE_R(1e-10)) ? ODE_R(1e-6)
                                                          : ODE_SQRT(dny / dnf) * ODE_R(0.01);
    h = ODE_MIN(h, hmax);
    real_t y1[ODE_NX], f1[ODE_NX];
{{ unroll }}
    for (int i = 0; i < ODE_NX; ++i) y1[i] = x[i] + h * f[i];
    model_rhs(t + h, y1, p, f1);
    real_t der2 = ODE_R(0);
{{ unroll }}
    for (int i = 0; i < ODE_NX; ++i) {
        const real_t sk = ODE_ATOL_AT(atol, i, cfg) + cfg->rtol * ODE_ABS(x[i]);
        der2 += ((f1[i] - f[i]) / sk) * ((f1[i] - f[i]) / sk);
    }
    der2 = ODE_SQRT(der2) / h;
    const real_t der12 = ODE_MAX(ODE_ABS(der2), ODE_SQRT(dnf));
    const real_t h1 = der12 <= ODE_R(1e-15) ? ODE_MAX(ODE_R(1e-6), h * ODE_R(1e-3))
                                            : ODE_POW(ODE_R(0.01) / der12, ODE_R(1) / ODE_R(order));
    h = ODE_MIN(ODE_MIN(ODE_R(100) * h, h1), hmax);
    /* a NaN here (f not finite at x0) becomes a tiny step; the step then reports it */
    return ode_finite(h) && h > ODE_R(0) ? h : ODE_R(1e-6) * (span > ODE_R(0) ? span : ODE_R(1));
}
