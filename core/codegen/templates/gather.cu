{#
  gather.cu -- a batch's columns of a table that lies on the device
  (sbmlgpu.runtime.resident; used by the ode backend for bundled batches and for the
  ranges of large unbundled runs).

  A (rows, n) table, row-major (table[r * n + m]: row r of member m), is uploaded once;
  a bundled batch holds members in launch order, members[i], and its kernel reads a
  (rows, b) table, out[r * b + i]. Gathering that on the host is a random-access pass
  over the whole table per call (0.2 s for 28 x 8e5 values on the H100's host); here it
  is one pass on the device. An unbundled batch, a range of members, is a strided copy
  on the host (its columns of each row); here too it is one pass, members null.
  Thread i reads members[i] once and copies its rows: the writes are coalesced, the
  reads one per row and member.
  Context: precision.
#}
{% include "common.cuh" %}

extern "C" __global__ void
sbmlgpu_gather_columns(long long b, int rows, long long n,
                       const unsigned long long* __restrict__ members, long long first,
                       const real_t* __restrict__ table, real_t* __restrict__ out)
{
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < b;
         i += (long long)gridDim.x * blockDim.x) {
        /* members null: the batch is the range first .. first + b - 1 */
        const long long m = members ? (long long)members[i] : first + i;
        for (int r = 0; r < rows; ++r)
            out[(long long)r * b + i] = table[(long long)r * n + m];
    }
}
