{#
  binning.cuh -- K = ODE_BINS equal bins over a range [lo, hi), as numpy places values
  in them: the edges are numpy.linspace(lo, hi, K + 1), and a value v goes to the bin
  b with edge_b <= v < edge_b+1 (numpy.digitize); values below lo clamp to bin 0,
  values at or above hi to bin K - 1, NaN is ODE_BIN_INVALID. Indices are ode_bin_t
  (unsigned char for K <= 255, unsigned short for larger K; the invalid index is the
  type's largest value). Shared by the output sinks that bin (sink_bins.cuh here, the
  dbn backend's CPT sink). Context: `sink` (bins, c_type, invalid).
#}
/* ---- binning: K equal bins of a range ------------------------------------------------ */
#define ODE_BINS {{ sink.bins }}
#define ODE_BIN_INVALID {{ sink.invalid }}
typedef {{ sink.c_type }} ode_bin_t;

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
