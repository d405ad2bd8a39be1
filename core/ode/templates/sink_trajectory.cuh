{#
  sink_trajectory.cuh -- output sink: the values. Output time k of member i goes to
  out[(k * ODE_NOUT_REAL + j) * n + i] (times, outputs, members: neighbouring threads
  write neighbouring addresses); the output times a failed member never reached
  are NaN. sbmlgpu.ode.sinks.TrajectorySink is its Python side (the launch
  arguments; the engines turn the layout into (members, times, outputs)).
#}
/* ---- output sink: trajectories ------------------------------------------------------- */
typedef struct {
    real_t* __restrict__ out;  /* out + i: this member's first value */
    long long stride;          /* members in the launch */
} ode_sink;

SBMLGPU_HD ode_sink ode_trajectory_sink(real_t* out, long long i, long long n)
{
    ode_sink sink;
    sink.out = out + i;
    sink.stride = n;
    return sink;
}

SBMLGPU_HD void ode_sink_store(const ode_sink* sink, int k, const real_t* y)
{
{{ unroll_outputs }}
    for (int j = 0; j < ODE_NOUT_REAL; ++j) sink->out[((long long)k * ODE_NOUT_REAL + j) * sink->stride] = y[j];
}

SBMLGPU_HD void ode_sink_invalid(const ode_sink* sink, int k)
{
{{ unroll_outputs }}
    for (int j = 0; j < ODE_NOUT_REAL; ++j) sink->out[((long long)k * ODE_NOUT_REAL + j) * sink->stride] = (real_t)NAN;
}
