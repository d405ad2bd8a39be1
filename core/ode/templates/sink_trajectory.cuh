{#
  sink_trajectory.cuh -- output sink: the values. Output time k of the member in
  column c goes to out[(k * ODE_NOUT_REAL + j) * n + c] (times, outputs, members:
  neighbouring threads write neighbouring addresses); the output times a failed
  member never reached are NaN. The column is the launch index i, except in a
  bundled launch (members given) whose members are first_member ..
  first_member + n - 1 in some order: there it is member - first_member, so that the
  columns come out in member order and the rows of the result need no scatter
  (first_member ODE_LAUNCH_ORDER keeps launch order for other bundled launches).
  sbmlgpu.ode.sinks.TrajectorySink is its Python side (the launch arguments; the
  engines turn the layout into (members, times, outputs)).
#}
/* ---- output sink: trajectories ------------------------------------------------------- */
typedef struct {
    real_t* __restrict__ out;  /* out + i: this member's first value */
    long long stride;          /* members in the launch */
} ode_sink;

/* first_member of a bundled launch written in launch order (sinks.LAUNCH_ORDER) */
#define ODE_LAUNCH_ORDER 0xFFFFFFFFFFFFFFFFULL

SBMLGPU_HD long long ode_sink_column(long long i, const unsigned long long* members,
                                     unsigned long long member, unsigned long long first_member)
{
    return (members && first_member != ODE_LAUNCH_ORDER) ? (long long)(member - first_member) : i;
}

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
