{#
  limits.cuh -- the limits that stop one member early so that it cannot hold its warp
  (and the ensemble) for long: the steps between two output times
  (cfg.max_interval_steps, as CVODE's mxstep; status max_steps_per_interval) and the
  member's wall time (cfg.time_limit_ns; status time_limit). Zero turns a limit off;
  ode_make_config leaves both off, and an entry point given a launch's limits sets
  them with ode_with_limits. The driver asks ode_limits_check before each step.

  The same launch arguments end a member at its own last output time
  (TimeCourse.member_ends): `times_row` >= 0 names the table row that holds each
  member's count c of output times; the member integrates to times[c - 1], as a run
  with only those times would, and its later outputs are invalid (NaN), so that a
  PEtab condition measured until t = 10 does not integrate to another's t = 360.
  -1: every member to the last time.

  The clock is the GPU's global timer (nanoseconds) in a kernel and a steady clock on
  the host build; the time is checked every ODE_CLOCK_EVERY steps only, as reading it
  costs about as much as a few flops and a member past its limit may run a few steps
  more without harm.

  The host build also stops a member when asked (ode_host_stop, status time_limit,
  checked as often as the clock): the host's second pass runs a member's rodas4 retry
  on an idle core while its bdf attempt still runs, and stops the retry where bdf
  finishes the member after all (plugins/ode/host_pass.py). The pointer is the calling
  thread's own (set through the entry point's _host_stop_on), so that it concerns one
  member call in one thread; a kernel on the device has none.
#}
#ifndef __CUDACC__
#include <chrono>
#endif

#define ODE_CLOCK_EVERY 8 /* steps between two readings of the clock (a power of 2) */

#if !defined(__CUDACC__)
/* nonzero: stop the member this thread integrates (NULL: nothing asks) */
static thread_local const volatile int* ode_host_stop = 0;
#endif

/* The settings with a launch's limits (0: none). */
SBMLGPU_HD ode_config ode_with_limits(ode_config cfg, long long max_interval_steps,
                                      long long time_limit_ns, long long times_row)
{
    cfg.max_interval_steps = max_interval_steps > 0 ? max_interval_steps : 0;
    cfg.time_limit_ns = time_limit_ns > 0 ? time_limit_ns : 0;
    cfg.times_row = times_row >= 0 ? times_row : -1;
    return cfg;
}

/* How many of the n_times output times member i (launch index) integrates to: all, or
   where the launch names a row of member counts (cfg.times_row), its count, read from
   the table as the parameters are (a count below 1, past n_times or NaN: all). */
SBMLGPU_HD int ode_member_times(const ode_config* cfg, long long i, long long n,
                                const real_t* __restrict__ table, int n_times)
{
    if (cfg->times_row < 0) return n_times;
    const real_t c = table[cfg->times_row * n + i];
    return c >= ODE_R(1) && c < (real_t)n_times ? (int)c : n_times;
}

/* Nanoseconds on a clock that never goes back (only differences are used). */
SBMLGPU_HD unsigned long long ode_clock_ns(void)
{
#if defined(__CUDA_ARCH__)
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    return now;
#elif !defined(__CUDACC__)
    return (unsigned long long)std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now().time_since_epoch()).count();
#else
    return 0ULL; /* the host side of an nvcc build: it never integrates a member */
#endif
}

/* One member's position against its limits. */
typedef struct {
    int k;                         /* the output time the current interval leads to */
    long long interval_steps;      /* steps taken toward output k */
    unsigned long long start_ns;   /* when the member started (with a time limit) */
} ode_limit_state;

SBMLGPU_HD void ode_limits_start(ode_limit_state* L, const ode_config* cfg)
{
    L->k = 0;
    L->interval_steps = 0;
    L->start_ns = cfg->time_limit_ns > 0 ? ode_clock_ns() : 0ULL;
}

/* Past the member's wall-time limit? (reads the clock) */
SBMLGPU_HD bool ode_past_time_limit(const ode_limit_state* L, const ode_config* cfg)
{
    return cfg->time_limit_ns > 0 &&
           ode_clock_ns() - L->start_ns > (unsigned long long)cfg->time_limit_ns;
}

/* Before a step toward output time k: the status that stops the member here, or
   SBMLGPU_STATUS_OK (and the step is counted against the interval). */
SBMLGPU_HD int ode_limits_check(ode_limit_state* L, const ode_config* cfg, int k,
                                long long steps)
{
    if (k != L->k) { L->k = k; L->interval_steps = 0; }
    if (cfg->max_interval_steps > 0 && L->interval_steps >= cfg->max_interval_steps)
        return SBMLGPU_STATUS_MAX_STEPS_PER_INTERVAL;
    ++L->interval_steps;
    if (cfg->time_limit_ns > 0 && (steps & (ODE_CLOCK_EVERY - 1)) == 0 &&
        ode_past_time_limit(L, cfg))
        return SBMLGPU_STATUS_TIME_LIMIT;
#if !defined(__CUDACC__)
    if (ode_host_stop != 0 && (steps & (ODE_CLOCK_EVERY - 1)) == 0 && *ode_host_stop)
        return SBMLGPU_STATUS_TIME_LIMIT;
#endif
    return SBMLGPU_STATUS_OK;
}
