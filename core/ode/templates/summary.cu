{#
  summary.cu -- ensemble statistics of one batch on the GPU, over the members whose
  status is ok, for `--summary` (the batch's time courses never leave the device).

  Layout of the kernel's output: out[c * n + i], column c = k * n_outputs + j
  (time k, output j), member i. Per column:
  - sbmlgpu_ode_moments (one block per column): count of ok members, count of
    non-finite values among them, mean and M2 = sum (y - mean)^2 in two passes over
    the column (exact; batches are merged on the host with Chan et al.'s formula),
    min and max of the finite values.
  - sbmlgpu_ode_histogram (blocks over columns x chunks of members): counts of the finite values
    in `bins` equal bins over [lo_c, hi_c) (values outside go to the end bins), in
    shared memory first, then added to the global histogram; quantiles come from it.
  Context: precision.
#}
{% include "common.cuh" %}

#define SUM_THREADS 256

__device__ __forceinline__ double sum_block(double v, double* scratch)
{
    scratch[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) scratch[threadIdx.x] += scratch[threadIdx.x + s];
        __syncthreads();
    }
    const double total = scratch[0];
    __syncthreads();
    return total;
}

__device__ __forceinline__ double min_block(double v, double* scratch)
{
    scratch[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) scratch[threadIdx.x] = fmin(scratch[threadIdx.x], scratch[threadIdx.x + s]);
        __syncthreads();
    }
    const double total = scratch[0];
    __syncthreads();
    return total;
}

__device__ __forceinline__ double max_block(double v, double* scratch)
{
    scratch[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) scratch[threadIdx.x] = fmax(scratch[threadIdx.x], scratch[threadIdx.x + s]);
        __syncthreads();
    }
    const double total = scratch[0];
    __syncthreads();
    return total;
}

/* stats[c * 6 + ...] = count, nonfinite, mean, m2, min, max (double) */
extern "C" __global__ void __launch_bounds__(SUM_THREADS)
sbmlgpu_ode_moments(long long n, int n_cols, const real_t* __restrict__ out,
                    const signed char* __restrict__ status, double* __restrict__ stats)
{
    __shared__ double scratch[SUM_THREADS];
    const int c = blockIdx.x;
    if (c >= n_cols) return;
    const real_t* col = out + (long long)c * n;
    double count = 0.0, bad = 0.0, sum = 0.0;
    for (long long i = threadIdx.x; i < n; i += blockDim.x) {
        if (status[i] != 0) continue;
        const double y = (double)col[i];
        count += 1.0;
        sum += y;
        if (!(y - y == 0.0)) bad += 1.0;
    }
    count = sum_block(count, scratch);
    bad = sum_block(bad, scratch);
    sum = sum_block(sum, scratch);
    const double mean = count > 0.0 ? sum / count : 0.0;
    double m2 = 0.0, lo = INFINITY, hi = -INFINITY;
    for (long long i = threadIdx.x; i < n; i += blockDim.x) {
        if (status[i] != 0) continue;
        const double y = (double)col[i];
        m2 += (y - mean) * (y - mean);
        if (y - y == 0.0) { lo = fmin(lo, y); hi = fmax(hi, y); }
    }
    m2 = sum_block(m2, scratch);
    lo = min_block(lo, scratch);
    hi = max_block(hi, scratch);
    if (threadIdx.x == 0) {
        double* s = stats + (long long)c * 6;
        s[0] = count; s[1] = bad; s[2] = mean; s[3] = m2; s[4] = lo; s[5] = hi;
    }
}

/* hist[c * bins + b] += members of column c in bin b; ranges[2c], ranges[2c+1] = lo, hi.
   Dynamic shared memory: bins * 4 bytes. */
extern "C" __global__ void __launch_bounds__(SUM_THREADS)
sbmlgpu_ode_histogram(long long n, int n_cols, const real_t* __restrict__ out,
                      const signed char* __restrict__ status, const double* __restrict__ ranges,
                      int bins, long long per_block, unsigned int* __restrict__ hist)
{
    extern __shared__ unsigned int local[];
    const int c = blockIdx.x;  /* columns in x (up to 2^31), chunks in y (up to 65535) */
    if (c >= n_cols) return;
    for (int b = threadIdx.x; b < bins; b += blockDim.x) local[b] = 0u;
    __syncthreads();
    const double lo = ranges[2 * c], hi = ranges[2 * c + 1];
    const double scale = (double)bins / (hi - lo);
    const real_t* col = out + (long long)c * n;
    const long long first = (long long)blockIdx.y * per_block;
    const long long last = first + per_block < n ? first + per_block : n;
    for (long long i = first + threadIdx.x; i < last; i += blockDim.x) {
        if (status[i] != 0) continue;
        const double y = (double)col[i];
        if (!(y - y == 0.0)) continue;
        double position = (y - lo) * scale;
        int b = position < 0.0 ? 0 : (position >= (double)bins ? bins - 1 : (int)position);
        atomicAdd(&local[b], 1u);
    }
    __syncthreads();
    unsigned int* global = hist + (long long)c * bins;
    for (int b = threadIdx.x; b < bins; b += blockDim.x)
        if (local[b]) atomicAdd(&global[b], local[b]);
}
