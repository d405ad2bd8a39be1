{#
  sink_cpt.cuh -- the dbn backend's output sink: the conditional probability tables
  counted where the trajectories are computed. At slice k every variable's value is
  binned (sbmlgpu.ode's binning.cuh: K equal bins of its range); from slice 1 on,
  every variable v with a dense table adds `weight` to one cell of its CPT of
  transition k-1: the row is its parents' bins at slice k-1 (in parents order, the
  first most significant: numpy.ravel_multi_index), the column its own bin at slice
  k. A variable's tables start at its base (structure.py) times the launch's
  transitions (n_times - 1), so that the text does not depend on the slices. Counts
  are unsigned 32-bit (weight 0xffffffff takes a member back out, modulo
  2^32). On the GPU the lanes of a warp that hit the same cell add once for all
  (__match_any_sync), so that trajectories that agree (the common case) cost one
  atomic per warp. A transition with a NaN bin (a failed member) is not counted.
  Variables whose tables are too large to store densely are counted on the host from
  the bin records (`records`, member-major: records[(i * n_times + k) * NV + j]),
  written only when such a variable exists.
  Context: `sink` (plugins/dbn/sinks.py CptSink: bins, c_type, invalid, counting,
  records).
#}
{% include "sbmlgpu.ode:binning.cuh" %}

/* ---- output sink: CPT counts ------------------------------------------------------- */
#define DBN_NV ODE_NOUT_REAL

typedef struct {
    unsigned int* __restrict__ counts;    /* every dense CPT, one after another */
    ode_bin_t* __restrict__ records;      /* this member's bins (or null): n_times x NV */
    const double* __restrict__ ranges;    /* lo, hi per variable */
    ode_bin_t* prev;                      /* this member's bins at the previous slice */
    unsigned int weight;                  /* 1, or 0xffffffff (-1) to take counts back */
    long long transitions;                /* n_times - 1: the tables of one variable */
} ode_sink;

SBMLGPU_HD ode_sink dbn_cpt_sink(unsigned int* counts, ode_bin_t* records, const double* ranges,
                                 unsigned int weight, long long i, int n_times, ode_bin_t* prev)
{
    ode_sink sink;
    sink.counts = counts;
    sink.records = records ? records + i * (long long)n_times * DBN_NV : records;
    sink.ranges = ranges;
    sink.prev = prev;
    sink.weight = weight;
    sink.transitions = (long long)n_times - 1;
    return sink;
}

/* one count: lanes of a warp on the same cell add together */
SBMLGPU_HD void dbn_count(unsigned int* cell, unsigned int weight)
{
#ifdef __CUDA_ARCH__
    const unsigned int active = __activemask();
    const unsigned int peers = __match_any_sync(active, (unsigned long long)cell);
    if ((int)(threadIdx.x & 31) == __ffs(peers) - 1) atomicAdd(cell, weight * (unsigned int)__popc(peers));
#else
    __atomic_fetch_add(cell, weight, __ATOMIC_RELAXED);
#endif
}

SBMLGPU_HD void ode_sink_store(const ode_sink* sink, int k, const real_t* y)
{
    ode_bin_t now[DBN_NV];
{{ unroll_outputs }}
    for (int j = 0; j < DBN_NV; ++j) now[j] = ode_bin(y[j], sink->ranges[2 * j], sink->ranges[2 * j + 1]);
    if (sink->records) {
        ode_bin_t* row = sink->records + (long long)k * DBN_NV;
{{ unroll_outputs }}
        for (int j = 0; j < DBN_NV; ++j) row[j] = now[j];
    }
    if (k > 0) {
        const ode_bin_t* prev = sink->prev;
        unsigned int* table = sink->counts;
        const long long transition = k - 1;
{{ sink.counting }}
    }
{{ unroll_outputs }}
    for (int j = 0; j < DBN_NV; ++j) sink->prev[j] = now[j];
}

SBMLGPU_HD void ode_sink_invalid(const ode_sink* sink, int k)
{
    if (sink->records) {
        ode_bin_t* row = sink->records + (long long)k * DBN_NV;
{{ unroll_outputs }}
        for (int j = 0; j < DBN_NV; ++j) row[j] = (ode_bin_t)ODE_BIN_INVALID;
    }
{{ unroll_outputs }}
    for (int j = 0; j < DBN_NV; ++j) sink->prev[j] = (ode_bin_t)ODE_BIN_INVALID;
}
