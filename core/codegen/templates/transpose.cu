{#
  transpose.cu -- a batch's time courses from a kernel's layout to the caller's
  (sbmlgpu.runtime.layout.member_major; used by the ode and ssa backends).

  One-thread-per-member kernels write out[c * n + i] (column c = k * n_outputs + j:
  time k, output j; member i), so that neighbouring threads write neighbouring
  addresses. The caller wants (member, time, output), i.e. dst[i * n_cols + c]. Transposing on the host
  costs a strided pass over the whole array (seconds for a gigabyte); here it is one
  pass at memory bandwidth, after which the copy to the host is one contiguous block
  straight into the result.

  Tiles of TILE x TILE through shared memory (one padding column against bank
  conflicts), both global reads and writes coalesced. Grid: x over members, y over
  columns (chunks of 65535 tiles in y at most, looped).
  Context: precision.
#}
{% include "common.cuh" %}

#define TILE 32
#define ROWS 8

extern "C" __global__ void __launch_bounds__(TILE * ROWS)
sbmlgpu_member_major(long long n, int n_cols, const real_t* __restrict__ src,
                         real_t* __restrict__ dst)
{
    __shared__ real_t tile[TILE][TILE + 1];
    const long long i0 = (long long)blockIdx.x * TILE;  /* first member of the tile */
    for (long long c0 = (long long)blockIdx.y * TILE; c0 < n_cols;
         c0 += (long long)gridDim.y * TILE) {
        /* read: columns c0.., members i0.. (consecutive threads, consecutive members) */
        for (int r = threadIdx.y; r < TILE; r += ROWS) {
            const long long c = c0 + r, i = i0 + threadIdx.x;
            if (c < n_cols && i < n) tile[r][threadIdx.x] = src[c * n + i];
        }
        __syncthreads();
        /* write: members i0.., columns c0.. (consecutive threads, consecutive columns) */
        for (int r = threadIdx.y; r < TILE; r += ROWS) {
            const long long i = i0 + r, c = c0 + threadIdx.x;
            if (c < n_cols && i < n) dst[i * n_cols + c] = tile[threadIdx.x][r];
        }
        __syncthreads();
    }
}
