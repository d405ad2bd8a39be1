{#
  ode.cu -- one ensemble kernel of the `ode` backend: one thread integrates one
  trajectory (one parameter set) with the method `method`, writes the requested
  outputs at every output time, its status and its step count.

  Context (plugins/ode/codegen.py builds it): precision, fast math flag, model
  sizes and the generated model functions (model.cuh), method ("rk4", "dopri5",
  "rodas4"), events. The same text compiles as CUDA (nvcc: the kernel) and as
  host C++ (g++ -DSBMLGPU_HOST_ENTRY: a C function over all members, used by the
  CPU path and by the tests that check the integrators without a GPU).
#}
{% include "common.cuh" %}
/* sbmlgpu ode kernel: model {{ model_id }}, method {{ method }}, {{ precision }}
   states {{ nx }}, varied parameters {{ np }}, outputs {{ nout }}, atoms {{ natoms }},
   events {{ events | length }} */

#define ODE_NX {{ nx_alloc }}
#define ODE_NX_REAL {{ nx_alloc }} /* states in the error norm */
#define ODE_NP {{ np_alloc }}
#define ODE_NOUT {{ nout_alloc }}
#define ODE_NATOMS {{ natoms_alloc }}
#define ODE_NEVENTS {{ nevents_alloc }}
#define ODE_WATCH {{ 1 if watch else 0 }}  /* atoms or events: the event machinery */
#define ODE_HAS_ATOMS {{ 1 if natoms else 0 }}  /* atoms to check at every step */
#define ODE_EVENTS {{ 1 if events else 0 }}
#define ODE_DELAYED {{ 1 if delayed else 0 }}  /* events with a delay */

/* Status codes: the values of sbmlgpu.results.Status. */
#define ODE_OK 0
#define ODE_MAX_STEPS 1
#define ODE_STEP_UNDERFLOW 2
#define ODE_NON_FINITE 3
#define ODE_FAILED 4

#if SBMLGPU_DOUBLE
#define ODE_ABS fabs
#define ODE_SQRT sqrt
#define ODE_POW pow
#define ODE_MAX fmax
#define ODE_MIN fmin
#define ODE_CEIL ceil
#define ODE_UROUND 2.220446049250313e-16
#define ODE_HUGE 1.0e300
#else
#define ODE_ABS fabsf
#define ODE_SQRT sqrtf
#define ODE_POW powf
#define ODE_MAX fmaxf
#define ODE_MIN fminf
#define ODE_CEIL ceilf
#define ODE_UROUND 1.1920928955078125e-07f
#define ODE_HUGE 1.0e30f
#endif
#define ODE_R(v) ((real_t)(v))

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
    unsigned long long seed; /* keys the random tie-break of simultaneous events */
} ode_config;

/* Sign classes of a watched atom g: -1, 0, 1, or ODE_SIGN_NAN (every relation is
   false on NaN except !=, as in the CPU reference). */
#define ODE_SIGN_NAN 2
SBMLGPU_HD signed char ode_sign_class(real_t g)
{
    return g > ODE_R(0) ? 1 : (g < ODE_R(0) ? -1 : (g == ODE_R(0) ? 0 : ODE_SIGN_NAN));
}

/* relation codes of plugins/ode/model.py: GT GE LT LE EQ NE */
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

{% include "sbmlgpu.plugins.ode:model.cuh" %}

{% if method == "rk4" %}
{% include "sbmlgpu.plugins.ode:rk4.cuh" %}
{% elif method == "dopri5" %}
{% include "sbmlgpu.plugins.ode:dopri5.cuh" %}
{% elif method == "rodas4" %}
{% include "sbmlgpu.plugins.ode:rodas4.cuh" %}
{% else %}
{{ fail("ode.cu: unknown method " ~ method) }}
{% endif %}
{% if watch %}
{% include "sbmlgpu.plugins.ode:events.cuh" %}
{% endif %}
{% include "sbmlgpu.plugins.ode:driver.cuh" %}

/* One member: load its varied parameters (column-major table: p[j * n + i], so that
   neighbouring threads read neighbouring addresses), integrate, write status and
   steps. `member` numbers the random stream of event tie-breaks. */
SBMLGPU_HD void ode_member(long long i, long long n, const real_t* __restrict__ table,
                           const real_t* __restrict__ times, int n_times,
                           real_t* __restrict__ out, signed char* __restrict__ status,
                           int* __restrict__ steps, const ode_config cfg,
                           unsigned long long member)
{
    real_t p[ODE_NP];
{% for j in range(np) %}
    p[{{ j }}] = table[{{ j }}LL * n + i];
{% endfor %}
{% if not np %}
    p[0] = ODE_R(0); (void)table;
{% endif %}
    int taken = 0;
    status[i] = (signed char)ode_solve(p, times, n_times, out + i, n, cfg, &taken, member);
    steps[i] = taken;
}

#ifdef __CUDACC__
extern "C" __global__ void __launch_bounds__({{ block_size }})
sbmlgpu_ode_{{ method }}(long long n, const real_t* __restrict__ table,
                         const real_t* __restrict__ times, int n_times,
                         real_t* __restrict__ out, signed char* __restrict__ status,
                         int* __restrict__ steps, real_t rtol, real_t atol, real_t h0,
                         real_t max_step, real_t dt, long long max_steps,
                         unsigned long long seed,
                         const unsigned long long* __restrict__ members,
                         unsigned long long first_member)
{
    /* the settings come as plain scalars: the runtime passes numpy scalars, not structs */
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    ode_config cfg;
    cfg.rtol = rtol; cfg.atol = atol; cfg.h0 = h0; cfg.max_step = max_step; cfg.dt = dt;
    cfg.max_steps = max_steps; cfg.seed = seed;
    unsigned long long member = members ? members[i] : first_member + (unsigned long long)i;
    ode_member(i, n, table, times, n_times, out, status, steps, cfg, member);
}
#endif

#ifdef SBMLGPU_HOST_ENTRY
/* The same integration on the host, member after member (OpenMP threads when the
   compiler has -fopenmp). Returns 0. */
extern "C" int sbmlgpu_ode_host(long long n, const real_t* table, const real_t* times,
                                int n_times, real_t* out, signed char* status, int* steps,
                                real_t rtol, real_t atol, real_t h0, real_t max_step,
                                real_t dt, long long max_steps, unsigned long long seed,
                                const unsigned long long* members,
                                unsigned long long first_member)
{
    ode_config cfg;
    cfg.rtol = rtol; cfg.atol = atol; cfg.h0 = h0; cfg.max_step = max_step; cfg.dt = dt;
    cfg.max_steps = max_steps; cfg.seed = seed;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 16)
#endif
    for (long long i = 0; i < n; ++i) {
        unsigned long long member = members ? members[i] : first_member + (unsigned long long)i;
        ode_member(i, n, table, times, n_times, out, status, steps, cfg, member);
    }
    return 0;
}

extern "C" int sbmlgpu_ode_host_real_size(void) { return (int)sizeof(real_t); }
extern "C" int sbmlgpu_ode_host_config_size(void) { return (int)sizeof(ode_config); }
#endif
