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
  time_limit_ns; limits.cuh). A model with delay() (`history`) takes one more last:
  `history`, the launch's ring of history nodes in global memory (delay.cuh; the
  engine allocates KernelSource.history_buffer_reals(n) reals).
#}
{% from "sbmlgpu.ode:entry_arguments.cuh" import kernel_arguments %}
{% set with_limits = limits is defined and limits %}
{% set ring = ", history" if history else "" %}
/* ---- entry points ---------------------------------------------------------------- */
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
{% for j in range(np) %}
    p[{{ j }}] = table[{{ j }}LL * n + i]; /* {{ varied[j] }} */
{% endfor %}
{% if not np %}
    p[0] = ODE_R(0); (void)table; (void)n;
{% endif %}
{% for j, sid in fixed %}
    p[{{ j }}] = times[n_times + {{ loop.index0 }}]; /* {{ sid }}: fixed, given at launch */
{% endfor %}
    int taken = 0;
    status[i] = (signed char)ode_solve(p, times, n_times, sink, cfg, &taken, member);
    steps[i] = taken;
}

#ifdef __CUDACC__
extern "C" __global__ void __launch_bounds__({{ block_size }})
{{ sink.entry }}_{{ method }}({{ kernel_arguments(sink, with_limits, history) }})
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
{% if with_limits %}
    const ode_config cfg = ode_with_limits(
        ode_make_config(rtol, atol, h0, max_step, dt, max_steps, seed),
        max_interval_steps, time_limit_ns);
{% else %}
    const ode_config cfg = ode_make_config(rtol, atol, h0, max_step, dt, max_steps, seed);
{% endif %}
    unsigned long long member = members ? members[i] : first_member + (unsigned long long)i;
{% if sink.locals %}
    {{ sink.locals }}
{% endif %}
    ode_member(i, n, table, times, n_times, {{ sink.make }}, status, steps, cfg, member{{ ring }});
}
#endif

#ifdef SBMLGPU_HOST_ENTRY
/* The same integration on the host, member after member. Returns 0. */
extern "C" int {{ sink.entry }}_host(long long n, const real_t* table, const real_t* times,
                                int n_times, {{ sink.params | replace(" __restrict__", "") }},
                                signed char* status, int* steps,
                                real_t rtol, real_t atol, real_t h0, real_t max_step,
                                real_t dt, long long max_steps, unsigned long long seed,
                                const unsigned long long* members,
                                unsigned long long first_member{% if with_limits %},
                                long long max_interval_steps, long long time_limit_ns{% endif %}{% if history %},
                                real_t* history{% endif %})
{
{% if with_limits %}
    const ode_config cfg = ode_with_limits(
        ode_make_config(rtol, atol, h0, max_step, dt, max_steps, seed),
        max_interval_steps, time_limit_ns);
{% else %}
    const ode_config cfg = ode_make_config(rtol, atol, h0, max_step, dt, max_steps, seed);
{% endif %}
#ifdef _OPENMP
// no threads for one chunk of members: the team's start-up and barrier cost more
// than a small run (issue 13: 30 ms for one member on a busy machine)
#pragma omp parallel for schedule(dynamic, 16) if(n > 16)
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

extern "C" int {{ sink.entry }}_host_real_size(void) { return (int)sizeof(real_t); }
extern "C" int {{ sink.entry }}_host_config_size(void) { return (int)sizeof(ode_config); }
#endif
