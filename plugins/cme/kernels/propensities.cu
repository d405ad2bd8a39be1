{#
  propensities.cu -- the propensity kernel of the CME backend: one thread per state,
  states (S, n) int32 in, prop (R, n) double out, both species/reaction-major so that
  the threads of a warp (consecutive states) read and write coalesced lines.
  Context: function (model.propensity_function(): propensities.cuh rendered),
           kernel (the kernel's name).
#}
{{ function }}

extern "C" __global__ void {{ kernel }}(const int32_t* __restrict__ states, long n,
                                        double* __restrict__ prop)
{
    const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    cme_propensities(states + i, n, prop + i, n);
}
