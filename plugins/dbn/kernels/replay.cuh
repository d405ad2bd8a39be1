{#
  replay.cuh -- a kernel's second pair of entry points: its sink fed from the values
  a range pass kept (sink_range.cuh's `values`, or the heterogeneous kernel's values
  variant), without integrating again. Member i of the launch reads its values at
  every slice, kept[(k * NV + j) * kept_stride + i] (`kept` offset to the launch's
  first member), and hands them to the sink exactly as the driver would
  (ode_sink_store, slice after slice): the count kernel's replay gives the counts and
  bin records of the integrating pass, the range kernel's the extrema. Members whose
  range-pass status is not OK are skipped: a failed trajectory is never counted and
  adds nothing to the ranges. Included by dbn.cu after the kernel.
#}
/* ---- replay: the sink fed from the values a range pass kept ---------------------- */
SBMLGPU_HD void dbn_replay_member(long long i, const real_t* __restrict__ kept,
                                  long long kept_stride, int n_times, const ode_sink sink)
{
    real_t y[ODE_NOUT_REAL];
    for (int k = 0; k < n_times; ++k) {
        const real_t* at = kept + (long long)k * DBN_NV * kept_stride + i;
{{ unroll_outputs }}
        for (int j = 0; j < DBN_NV; ++j) y[j] = at[(long long)j * kept_stride];
        ode_sink_store(&sink, k, y);
    }
}

#ifdef __CUDACC__
extern "C" __global__ void __launch_bounds__({{ block_size }})
{{ sink.entry }}_replay(long long n, const real_t* __restrict__ kept, long long kept_stride,
                        int n_times, const signed char* __restrict__ status,
                        {{ sink.params }})
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || status[i] != SBMLGPU_STATUS_OK) return;
    {{ sink.locals }}
    dbn_replay_member(i, kept, kept_stride, n_times, {{ sink.make }});
}
#endif

#ifdef SBMLGPU_HOST_ENTRY
extern "C" int {{ sink.entry }}_replay_host(long long n, const real_t* kept, long long kept_stride,
                                        int n_times, const signed char* status,
                                        {{ sink.params | replace(" __restrict__", "") }})
{
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 256) if(n > 256)
#endif
    for (long long i = 0; i < n; ++i) {
        if (status[i] != SBMLGPU_STATUS_OK) continue;
        {{ sink.locals }}
        dbn_replay_member(i, kept, kept_stride, n_times, {{ sink.make }});
    }
    return 0;
}
#endif
