{#
  sink_bins.cuh -- output sink: bin indices instead of values (what DBN
  approximation counts). Output j has K = ODE_BINS equal bins over its range
  [lo_j, hi_j) (ranges[2j], ranges[2j + 1]); the bin edges are numpy's,
  numpy.linspace(lo_j, hi_j, K + 1), and a value v goes to the bin b with
  edge_b <= v < edge_b+1, as numpy.digitize places it: values below lo_j clamp to
  bin 0, values at or above hi_j to bin K - 1, NaN (and the output times a failed
  member never reached) is ODE_BIN_INVALID. Indices are ode_bin_t (unsigned char for
  K <= 255, unsigned short for larger K; the invalid index is the type's largest
  value), member-major: bins[(i * n_times + k) * ODE_NOUT_REAL + j], so that each
  member's record is contiguous for a kernel or the host that counts joint
  configurations. sbmlgpu.ode.sinks.BinSink is its Python side (sizes, dtype,
  checks of the ranges). Context: `sink` (bins, c_type, invalid).
#}
{% include "sbmlgpu.ode:binning.cuh" %}

/* ---- output sink: bin indices -------------------------------------------------------- */
typedef struct {
    ode_bin_t* __restrict__ bins;       /* this member's record: n_times x ODE_NOUT_REAL */
    const double* __restrict__ ranges;  /* lo, hi per output */
} ode_sink;

SBMLGPU_HD ode_sink ode_bins_sink(ode_bin_t* bins, const double* ranges, long long i, int n_times)
{
    ode_sink sink;
    sink.bins = bins + i * (long long)n_times * ODE_NOUT_REAL;
    sink.ranges = ranges;
    return sink;
}

SBMLGPU_HD void ode_sink_store(const ode_sink* sink, int k, const real_t* y)
{
    ode_bin_t* row = sink->bins + (long long)k * ODE_NOUT_REAL;
{{ unroll_outputs }}
    for (int j = 0; j < ODE_NOUT_REAL; ++j) row[j] = ode_bin(y[j], sink->ranges[2 * j], sink->ranges[2 * j + 1]);
}

SBMLGPU_HD void ode_sink_invalid(const ode_sink* sink, int k)
{
    ode_bin_t* row = sink->bins + (long long)k * ODE_NOUT_REAL;
{{ unroll_outputs }}
    for (int j = 0; j < ODE_NOUT_REAL; ++j) row[j] = (ode_bin_t)ODE_BIN_INVALID;
}
