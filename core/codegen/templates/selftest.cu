{#
  selftest.cu -- small kernels that check the toolchain and the runtime end to end
  (tests, and `sbmlgpu` device checks): the Philox stream on the device against
  codegen/philox.py, and a printed expression block against sympy.
  Context: precision; expressions: C expressions in x, y, z (may be empty).
#}
{% include "common.cuh" %}

/* out[i * per_item + j] = j-th uniform of item (first_item + i) for seed `seed`. */
extern "C" __global__ void sbmlgpu_rng_selftest(real_t* out, unsigned long long seed,
                                                unsigned long long first_item,
                                                int n_items, int per_item)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_items) return;
    sbmlgpu_rng_t rng;
    sbmlgpu_rng_init(&rng, seed, first_item + (unsigned long long)i, 0);
    for (int j = 0; j < per_item; ++j)
        out[(long long)i * per_item + j] = sbmlgpu_rng_uniform(&rng);
}

/* y[i] = a * x[i] + y[i]: the launch, timing and copy checks use it. */
extern "C" __global__ void sbmlgpu_axpy(int n, real_t a, const real_t* x, real_t* y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
{% if expressions %}

/* out[i * n_expr + k] = k-th expression at (x, y, z) = in[3 i .. 3 i + 2]. */
extern "C" __global__ void sbmlgpu_expressions(int n, const real_t* in, real_t* out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const real_t x = in[3 * i], y = in[3 * i + 1], z = in[3 * i + 2];
{% for e in expressions %}
    out[(long long)i * {{ expressions | length }} + {{ loop.index0 }}] = {{ e }};
{% endfor %}
}
{% endif %}
