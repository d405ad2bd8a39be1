{#
  sink_range.cuh -- the dbn backend's first pass where the bin ranges are not given:
  the smallest and largest value of every variable over all slices of all
  trajectories that stay finite. Each member keeps its own min and max (locals of
  the entry point) and, at its last slice, merges them into `extrema` (per variable:
  min then max as order-preserving unsigned 64-bit keys of the double value, so that
  integer atomicMin/atomicMax order them as the doubles). On the GPU a full warp
  reduces by shuffles first (one atomic per warp and variable). A member that fails
  (NaN, or stopped) contributes nothing, as it is not binned either. Where `values`
  is not null, the sink also keeps every value: values[(k * NV + j) * stride + i]
  (neighbouring members at neighbouring addresses; `stride`: the members of the whole
  run, `values` already offset to the launch's first), which the count kernel's
  replay entry points (replay.cuh) bin and count without integrating again.
  Context: `sink` (plugins/dbn/sinks.py RangeSink).
#}
/* ---- output sink: ranges (min and max over all trajectories and slices) -------------- */
#define DBN_NV ODE_NOUT_REAL

typedef struct {
    unsigned long long* __restrict__ extrema;  /* 2 per variable: min key, max key */
    real_t* __restrict__ values;               /* this member's values, or null */
    long long stride;                          /* between its values */
    real_t* lo;                                /* this member's minima */
    real_t* hi;                                /* this member's maxima */
    bool* failed;
    int last;                                  /* the last output time */
} ode_sink;

SBMLGPU_HD ode_sink dbn_range_sink(unsigned long long* extrema, real_t* values,
                                   long long stride, long long i, real_t* lo, real_t* hi,
                                   bool* failed, int n_times)
{
    ode_sink sink;
    sink.extrema = extrema;
    sink.values = values ? values + i : values;
    sink.stride = stride;
    sink.lo = lo;
    sink.hi = hi;
    sink.failed = failed;
    sink.last = n_times - 1;
    *failed = false;
{{ unroll_outputs }}
    for (int j = 0; j < DBN_NV; ++j) { lo[j] = (real_t)INFINITY; hi[j] = -(real_t)INFINITY; }
    return sink;
}

/* a double as an unsigned key with the same order (sign flipped for positives, all
   bits flipped for negatives) */
SBMLGPU_HD unsigned long long dbn_order_key(double v)
{
    union { double d; unsigned long long u; } bits;
    bits.d = v;
    return (bits.u >> 63) ? ~bits.u : (bits.u | 0x8000000000000000ULL);
}

SBMLGPU_HD void dbn_merge(unsigned long long* cell, double v, bool is_max)
{
#ifdef __CUDA_ARCH__
    if (__activemask() == 0xffffffffu) {  /* a full warp: reduce first, one atomic */
        for (int d = 16; d > 0; d >>= 1) {
            const double o = __shfl_xor_sync(0xffffffffu, v, d);
            v = is_max ? fmax(v, o) : fmin(v, o);
        }
        if ((threadIdx.x & 31) != 0) return;
    }
    if (is_max) atomicMax(cell, dbn_order_key(v)); else atomicMin(cell, dbn_order_key(v));
#else
    const unsigned long long key = dbn_order_key(v);
    unsigned long long seen = __atomic_load_n(cell, __ATOMIC_RELAXED);
    while ((is_max ? key > seen : key < seen)
           && !__atomic_compare_exchange_n(cell, &seen, key, true, __ATOMIC_RELAXED,
                                           __ATOMIC_RELAXED)) {}
#endif
}

SBMLGPU_HD void dbn_flush(const ode_sink* sink)
{
    const bool failed = *sink->failed;
{{ unroll_outputs }}
    for (int j = 0; j < DBN_NV; ++j) {
        dbn_merge(sink->extrema + 2 * j, failed ? INFINITY : (double)sink->lo[j], false);
        dbn_merge(sink->extrema + 2 * j + 1, failed ? -INFINITY : (double)sink->hi[j], true);
    }
}

SBMLGPU_HD void ode_sink_store(const ode_sink* sink, int k, const real_t* y)
{
{{ unroll_outputs }}
    for (int j = 0; j < DBN_NV; ++j) {
        if (y[j] != y[j] || y[j] == (real_t)INFINITY || y[j] == -(real_t)INFINITY) *sink->failed = true;
        sink->lo[j] = y[j] < sink->lo[j] ? y[j] : sink->lo[j];
        sink->hi[j] = y[j] > sink->hi[j] ? y[j] : sink->hi[j];
    }
    if (sink->values) {
{{ unroll_outputs }}
        for (int j = 0; j < DBN_NV; ++j)
            sink->values[((long long)k * DBN_NV + j) * sink->stride] = y[j];
    }
    if (k == sink->last) dbn_flush(sink);
}

SBMLGPU_HD void ode_sink_invalid(const ode_sink* sink, int k)
{
    *sink->failed = true;
    if (k == sink->last) dbn_flush(sink);
}
