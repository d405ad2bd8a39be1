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
/* ---- output sink: bin indices -------------------------------------------------------- */
#define ODE_BINS {{ sink.bins }}
#define ODE_BIN_INVALID {{ sink.invalid }}
typedef {{ sink.c_type }} ode_bin_t;

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

/* numpy.linspace(lo, hi, ODE_BINS + 1)[b]: b * step + lo, each operation rounded on its
   own (on the GPU by intrinsics that nvcc never fuses into an FMA; on the host as g++
   compiles it unless told to contract, e.g. -ffp-contract=fast), and hi itself last */
SBMLGPU_HD double ode_bin_edge(int b, double lo, double hi, double step)
{
    if (b >= ODE_BINS) return hi;
#ifdef __CUDA_ARCH__
    return __dadd_rn(__dmul_rn((double)b, step), lo);
#else
    return (double)b * step + lo;
#endif
}

SBMLGPU_HD ode_bin_t ode_bin(real_t value, double lo, double hi)
{
    const double v = (double)value;
    if (v != v) return (ode_bin_t)ODE_BIN_INVALID;
    const double step = (hi - lo) / (double)ODE_BINS;
    const double position = (v - lo) / step;
    int b = position < 0.0 ? 0 : (position >= (double)ODE_BINS ? ODE_BINS - 1 : (int)position);
    /* the quotient can be one bin off next to an edge: the edges decide */
    if (b > 0 && v < ode_bin_edge(b, lo, hi, step)) --b;
    else if (b < ODE_BINS - 1 && v >= ode_bin_edge(b + 1, lo, hi, step)) ++b;
    return (ode_bin_t)b;
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
