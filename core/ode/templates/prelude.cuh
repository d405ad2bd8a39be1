{#
  prelude.cuh -- what every ODE kernel starts with (after common.cuh): the table of
  the SBML ids the kernel uses, its sizes, status codes, precision-dependent math,
  the launch settings (ode_config) and the sign classes and truth table of watched
  atoms. Context: the one sbmlgpu.ode.codegen.kernel_context builds (model_id,
  method, precision, sizes, `id_table`: the comment naming x[i], p[j], y[k], the
  literals, atoms g[a] and events).
#}
/* sbmlgpu ode kernel: model {{ model_id }}, method {{ method }}, {{ precision }}
   states {{ nx }}, varied parameters {{ np }}, outputs {{ nout }}, atoms {{ natoms }},
   events {{ events | length }}

{{ id_table }}
*/

#define ODE_NX {{ nx_alloc }}
#define ODE_NX_REAL {{ nx_alloc }} /* states in the error norm */
#define ODE_NP {{ np_alloc }}
#define ODE_NOUT {{ nout_alloc }}
#define ODE_NOUT_REAL {{ nout }}
#define ODE_NATOMS {{ natoms_alloc }}
#define ODE_NEVENTS {{ nevents_alloc }}

#if SBMLGPU_DOUBLE
#define ODE_ABS fabs
#define ODE_SQRT sqrt
#define ODE_POW pow
#define ODE_MAX fmax
#define ODE_MIN fmin
#define ODE_CEIL ceil
#define ODE_UROUND 2.220446049250313e-16
#else
#define ODE_ABS fabsf
#define ODE_SQRT sqrtf
#define ODE_POW powf
#define ODE_MAX fmaxf
#define ODE_MIN fminf
#define ODE_CEIL ceilf
#define ODE_UROUND 1.1920928955078125e-07f
#endif
#define ODE_R(v) ((real_t)(v))

{% if scaled_atol %}
/* The absolute tolerance of each state (--scaled-atol, adaptive.cuh's ode_start_atol):
   the member's own, set at its start. ODE_ATOL_V(S): the stepper's array, passed on;
   ODE_ATOL_AT(a, i, cfg): state i's tolerance. */
#define ODE_ATOL_FIELD real_t atol[ODE_NX];
#define ODE_ATOL_V(S) ((S)->atol)
#define ODE_ATOL_AT(a, i, cfg) ((a)[i])
#if SBMLGPU_DOUBLE
#define ODE_ATOL_FLOOR 1e-150  /* (error / weight)^2 stays finite for errors up to 1 */
#else
#define ODE_ATOL_FLOOR 1e-19f
#endif
{% else %}
/* --atol for every state (--no-scaled-atol): no per-member array */
#define ODE_ATOL_FIELD
#define ODE_ATOL_V(S) ((const real_t*)0)
#define ODE_ATOL_AT(a, i, cfg) ((cfg)->atol)
{% endif %}

/* Large models: the right-hand side and the Jacobian are called, not inlined at every
   stage (their arrays live in local memory anyway, and inlining them six times makes
   nvcc take minutes). Small models: inlined, arrays in registers. */
#ifdef __CUDACC__
#define ODE_NOINLINE __noinline__
#else
#define ODE_NOINLINE __attribute__((noinline))
#endif
{% if inline_model %}
#define ODE_MODEL_FN SBMLGPU_HD
{% else %}
#define ODE_MODEL_FN __host__ __device__ ODE_NOINLINE
{% endif %}
{% if inline_events %}
#define ODE_EVENT_FN SBMLGPU_HD
{% else %}
#define ODE_EVENT_FN __host__ __device__ ODE_NOINLINE
{% endif %}

/* NaN and +-inf are the only values for which v - v is not 0. */
SBMLGPU_HD bool ode_finite(real_t v) { return v - v == ODE_R(0); }

/* Settings of one launch (the same for every member). */
typedef struct {
    real_t rtol, atol;
    real_t h0;        /* first step (0: Hairer's heuristic) */
    real_t max_step;  /* largest step (adaptive methods) */
    real_t dt;        /* rk4 step */
    long long max_steps;
    long long max_interval_steps; /* between two output times (0: no limit; limits.cuh) */
    long long time_limit_ns;      /* one member's wall time (0: no limit; limits.cuh) */
    long long times_row;          /* the table's row of each member's output count (-1:
                                     every member to the last time; limits.cuh) */
    unsigned long long seed; /* keys the random tie-break of simultaneous events */
} ode_config;

/* The settings from the scalars a launch passes (entry points take no structs: the
   runtime passes numpy scalars). */
SBMLGPU_HD ode_config ode_make_config(real_t rtol, real_t atol, real_t h0, real_t max_step,
                                      real_t dt, long long max_steps, unsigned long long seed)
{
    ode_config cfg;
    cfg.rtol = rtol; cfg.atol = atol; cfg.h0 = h0; cfg.max_step = max_step; cfg.dt = dt;
    cfg.max_steps = max_steps; cfg.seed = seed;
    cfg.max_interval_steps = 0; cfg.time_limit_ns = 0;  /* set by ode_with_limits */
    cfg.times_row = -1;
    return cfg;
}
{% if watch %}

/* Sign classes of a watched atom g: -1, 0, 1, or ODE_SIGN_NAN (every relation is
   false on NaN except !=, as in the CPU reference). */
#define ODE_SIGN_NAN 2
SBMLGPU_HD signed char ode_sign_class(real_t g)
{
    return g > ODE_R(0) ? 1 : (g < ODE_R(0) ? -1 : (g == ODE_R(0) ? 0 : ODE_SIGN_NAN));
}
{% endif %}
{% if events %}

/* relation codes of sbmlgpu.ode.atoms: GT GE LT LE EQ NE */
SBMLGPU_HD bool ode_truth(int rel, signed char s)
{
    if (s == ODE_SIGN_NAN) return rel == 5;
    switch (rel) {
    case 0: return s > 0;
    case 1: return s >= 0;
    case 2: return s < 0;
    case 3: return s <= 0;
    case 4: return s == 0;
    default: return s != 0;
    }
}
{% endif %}
