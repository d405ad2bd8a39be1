{#
  entry.cuh -- the entry points of an ODE ensemble kernel, for any output sink:
  ode_member (one member: its varied parameters from the column-major table
  p[j * n + i], so that neighbouring threads read neighbouring addresses; the
  integration; its status and step count), the CUDA kernel
  `<sink.entry>_<method>` (one thread per member) and, with -DSBMLGPU_HOST_ENTRY,
  the C function `<sink.entry>_host` that runs every member on the host (OpenMP
  threads when the compiler has -fopenmp). Both take the same arguments in the same
  order: n, table, times, n_times, the sink's arguments (`sink.params`), status,
  steps, the settings, members (launch index -> member number, or null) and
  first_member. `member` numbers the random stream of event tie-breaks. Fixed
  parameters read at launch (`fixed`, codegen.fixed_slots) follow the n_times output
  times in `times` and go after the varied ones in p. A sink that
  keeps state per member between output times declares it in `sink.locals` (C
  declarations placed before each member's sink is made, which `sink.make` may use).
  Context: `sink` (sbmlgpu.ode.sinks), method, np, block_size, varied, fixed, and
  `limits` where a backend's kernel sets it (the ode backend's): then both entry
  points take the launch's limits after first_member (max_interval_steps,
  time_limit_ns, times_row: the table row of each member's output count, or -1;
  limits.cuh). A model with delay() (`history`) takes one more last:
  `history`, the launch's ring of history nodes in global memory (delay.cuh; the
  engine allocates KernelSource.history_buffer_reals(n) reals).
  Where the context sets `refill` (and kernel.cuh's refill_lanes holds), the CUDA
  entry point is `<sink.entry>_<method>_refill` instead (only one is compiled: nvcc's
  time), with the same arguments then `next` (a zeroed launch index counter): each
  thread a lane that takes the next launch index when its member ends (driver.cuh's
  ode_lane); and the host build gains `<sink.entry>_refill_host`, which runs that
  schedule's lanes in turns on one host thread, for tests without a GPU.
#}
{% from "sbmlgpu.ode:entry_arguments.cuh" import kernel_arguments, kernel_argument_names %}
{% set with_limits = limits is defined and limits %}
{% set ring = ", history" if history else "" %}
{% set make_config %}
{% if with_limits %}
    const ode_config cfg = ode_with_limits(
        ode_make_config(rtol, atol, h0, max_step, dt, max_steps, seed),
        max_interval_steps, time_limit_ns, times_row);
{% else %}
    const ode_config cfg = ode_make_config(rtol, atol, h0, max_step, dt, max_steps, seed);
{% endif %}
{% endset %}
/* ---- entry points ---------------------------------------------------------------- */
/* member i's parameters: its varied values from the column-major table, then the fixed
   ones read at launch (after the output times) */
SBMLGPU_HD void ode_load_parameters(real_t* p, long long i, long long n,
                                    const real_t* __restrict__ table,
                                    const real_t* __restrict__ times, int n_times)
{
{% if not np %}
    (void)i; (void)n; (void)table;
{% endif %}
{% if not fixed %}
    (void)times; (void)n_times;
{% endif %}
{% for j in range(np) %}
    p[{{ j }}] = table[{{ j }}LL * n + i]; /* {{ varied[j] }} */
{% endfor %}
{% if not np %}
    p[0] = ODE_R(0);
{% endif %}
{% for j, sid in fixed %}
    p[{{ j }}] = times[n_times + {{ loop.index0 }}]; /* {{ sid }}: fixed, given at launch */
{% endfor %}
}

SBMLGPU_HD void ode_member(long long i, long long n, const real_t* __restrict__ table,
                           const real_t* __restrict__ times, int n_times, const ode_sink sink,
                           signed char* __restrict__ status, int* __restrict__ steps,
                           const ode_config cfg, unsigned long long member{% if history %},
                           real_t* __restrict__ history{% endif %})
{
{% if history %}
    ode_params_with_history P;  /* p, then where the member's delay() history is (delay.cuh) */
    real_t* p = P.p;
    ode_history_init(&P.history, times[0], history, i);
{% else %}
    real_t p[ODE_NP];
{% endif %}
    ode_load_parameters(p, i, n, table, times, n_times);
    /* a member that ends at an earlier output time (limits.cuh) integrates as a run of
       those times alone; the outputs after it are invalid */
    const int own_times = ode_member_times(&cfg, i, n, table, n_times);
    int taken = 0;
    status[i] = (signed char)ode_solve(p, times, own_times, sink, cfg, &taken, member);
    steps[i] = taken;
    for (int k = own_times; k < n_times; ++k) ode_sink_invalid(&sink, k);
}


{% if refill_lanes %}
/* ---- lanes that take the next member when theirs ends ------------------------------- */
/* The next launch index to integrate (a queue shared by the launch's threads) */
SBMLGPU_HD unsigned long long ode_take_member(unsigned long long* next)
{
#if defined(__CUDA_ARCH__)
    return atomicAdd(next, 1ULL);
#else
    return __atomic_fetch_add(next, 1ULL, __ATOMIC_RELAXED);
#endif
}

/* lane M takes the member at launch index i: its number and parameters (ode_member's) */
SBMLGPU_HD void ode_lane_load(ode_lane* M, long long i, unsigned long long member, long long n,
                              const real_t* __restrict__ table,
                              const real_t* __restrict__ times, int n_times,
                              const ode_config* cfg{% if history %},
                              real_t* __restrict__ history{% endif %})
{
    M->i = i;
    M->member = member;
    M->own_times = ode_member_times(cfg, i, n, table, n_times);
{% if history %}
    ode_history_init(&M->P.history, times[0], history, i);
    ode_load_parameters(M->P.p, i, n, table, times, n_times);
{% else %}
    ode_load_parameters(M->p, i, n, table, times, n_times);
{% endif %}
}

/* One turn of a lane (`live`: it holds a member): without a member it takes the next
   from the queue `next` and starts it; then one step of its member, and the member's
   end where that step ends it. False once the queue is empty and the lane idle. The
   same launch arguments as the kernel's, so that the sink is made as ode_member's. */
SBMLGPU_HD bool ode_lane_turn(ode_lane* M, bool* live, unsigned long long* next,
                              const ode_config cfg,
                              {{ kernel_arguments(sink, with_limits, history) }})
{
{% if with_limits %}
    (void)max_interval_steps; (void)time_limit_ns; (void)times_row;  /* in cfg */
{% endif %}
    (void)rtol; (void)atol; (void)h0; (void)max_step; (void)dt; (void)max_steps; (void)seed;
    if (!*live) {
        const unsigned long long taken = ode_take_member(next);
        if (taken >= (unsigned long long)n) return false;
        const long long i = (long long)taken;
        const unsigned long long member = members ? members[i] : first_member + (unsigned long long)i;
        ode_lane_load(M, i, member, n, table, times, n_times, &cfg{{ ring }});
        M->sink = {{ sink.make }};
        ode_lane_begin(M, times, M->own_times, cfg);
        *live = true;
    }
    /* the member's own output times (ode_member's) */
    if (ode_lane_running(M, M->own_times)) ode_lane_step(M, times, M->own_times, cfg);
    if (!ode_lane_running(M, M->own_times)) {
        ode_lane_end(M, M->own_times, status, steps);
        for (int k = M->own_times; k < n_times; ++k) ode_sink_invalid(&M->sink, k);
        *live = false;
    }
    return true;
}
{% endif %}

#ifdef __CUDACC__
{% if not refill_lanes %}
extern "C" __global__ void __launch_bounds__({{ block_size }})
{{ sink.entry }}_{{ method }}({{ kernel_arguments(sink, with_limits, history) }})
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
{{ make_config -}}
    unsigned long long member = members ? members[i] : first_member + (unsigned long long)i;
{% if sink.locals %}
    {{ sink.locals }}
{% endif %}
    ode_member(i, n, table, times, n_times, {{ sink.make }}, status, steps, cfg, member{{ ring }});
}
{% else %}
/* The members with each thread a lane that takes the next launch index from the
   queue `next` (zeroed before the launch) when its member ends, one step per turn, so
   that a warp's lanes stay busy until the queue runs dry instead of idling until the
   warp's slowest member ends. Launched with as many threads as the GPU holds at once
   (more only wait and find the queue empty). */
extern "C" __global__ void __launch_bounds__({{ block_size }})
{{ sink.entry }}_{{ method }}_refill({{ kernel_arguments(sink, with_limits, history) }},
                         unsigned long long* __restrict__ next)
{
{{ make_config -}}
    ode_lane M;
    bool live = false;
    while (ode_lane_turn(&M, &live, next, cfg, {{ kernel_argument_names(sink, with_limits, history) }})) {}
}
{% endif %}
#endif

#ifdef SBMLGPU_HOST_ENTRY
#ifdef _OPENMP
#include <omp.h>
#endif
/* The same integration on the host, member after member. Returns 0. */
extern "C" int {{ sink.entry }}_host(long long n, const real_t* table, const real_t* times,
                                int n_times, {{ sink.params | replace(" __restrict__", "") }},
                                signed char* status, int* steps,
                                real_t rtol, real_t atol, real_t h0, real_t max_step,
                                real_t dt, long long max_steps, unsigned long long seed,
                                const unsigned long long* members,
                                unsigned long long first_member{% if with_limits %},
                                long long max_interval_steps, long long time_limit_ns,
                                long long times_row{% endif %}{% if history %},
                                real_t* history{% endif %})
{
{{ make_config -}}
#ifdef _OPENMP
    /* Chunks of 16 members keep the queue's atomics rare in a large run; a few
       members (a second pass's hard ones, each of up to 10^6 steps) go one at a
       time, or 16 of 17 would run on one thread while the others idle (issue 13:
       Elowitz_Nature2000's 17 hard members took 2.0 s on 2 threads where the
       slowest alone takes 0.84 s). One member: no team, whose start-up costs more
       than a small run (30 ms for one member on a busy machine). */
    long long chunk = n / (8LL * omp_get_max_threads());
    chunk = chunk < 1 ? 1 : chunk > 16 ? 16 : chunk;
{% if history %}
    /* delay(): neighbouring members' history nodes share cache lines (delay.cuh's
       layout), so a chunk is a whole line's worth of members */
    const long long line = 64 / (long long)sizeof(real_t);
    chunk = (chunk + line - 1) / line * line;
{% endif %}
#pragma omp parallel for schedule(dynamic, chunk) if(n > 1)
#endif
    for (long long i = 0; i < n; ++i) {
        unsigned long long member = members ? members[i] : first_member + (unsigned long long)i;
{% if sink.locals %}
        {{ sink.locals }}
{% endif %}
        ode_member(i, n, table, times, n_times, {{ sink.make }}, status, steps, cfg, member{{ ring }});
    }
    return 0;
}

{% if refill_lanes %}

/* The refill kernel's schedule on the host, for tests of the lanes without a GPU:
   `lanes` lanes (the threads of a launch) take turns in one thread, round robin, each
   turn one step of one lane's member, until the queue `next` (zeroed by the caller)
   runs dry. A member's wall clock (--member-time-limit) also runs during the other
   lanes' turns here. Returns 0, or 1 where the lanes' memory could not be had or
   `lanes` is below 1. */
#include <stdlib.h>
extern "C" int {{ sink.entry }}_refill_host({{ kernel_arguments(sink, with_limits, history) }},
                                   unsigned long long* next, long long lanes)
{
{{ make_config -}}
    if (lanes < 1) return 1;
    ode_lane* M = (ode_lane*)malloc((size_t)lanes * sizeof(ode_lane));
    bool* live = (bool*)calloc((size_t)lanes, sizeof(bool));
    bool* idle = (bool*)calloc((size_t)lanes, sizeof(bool));
    if (!M || !live || !idle) { free(M); free(live); free(idle); return 1; }
    for (long long left = lanes; left > 0;) {
        for (long long l = 0; l < lanes; ++l) {
            if (idle[l]) continue;
            if (!ode_lane_turn(&M[l], &live[l], next, cfg, {{ kernel_argument_names(sink, with_limits, history) }})) {
                idle[l] = true;
                --left;
            }
        }
    }
    free(M); free(live); free(idle);
    return 0;
}
{% endif %}

/* The calling thread's stop request for the members it integrates next (limits.cuh's
   ode_host_stop; NULL: none). */
extern "C" void {{ sink.entry }}_host_stop_on(const volatile int* flag) { ode_host_stop = flag; }

extern "C" int {{ sink.entry }}_host_real_size(void) { return (int)sizeof(real_t); }
extern "C" int {{ sink.entry }}_host_config_size(void) { return (int)sizeof(ode_config); }
#endif
