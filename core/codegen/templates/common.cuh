{#
  common.cuh -- included by every sbmlgpu kernel (jinja: include "common.cuh").
  Context: precision ("double" or "float").
  Defines real_t, the helpers that CudaPrinter's output calls (sbmlgpu_mod), and the
  Philox4x32-10 counter-based generator keyed by (seed, item index).
  Names here start with sbmlgpu_/SBMLGPU_ (or are real_t): never s_ or cse_, which
  belong to model symbols and temporaries (codegen/names.py).
  The same text compiles as host C++ (g++, or nvcc host code): tests use that to
  check the printer's output and the generator without a GPU.
#}
#ifndef SBMLGPU_COMMON_CUH
#define SBMLGPU_COMMON_CUH

#include <stdint.h>
#include <math.h>

#ifndef __CUDACC__
/* Plain host C++: the CUDA qualifiers mean nothing. */
#define __host__
#define __device__
#define __forceinline__ inline
#endif
#define SBMLGPU_HD __host__ __device__ __forceinline__

{% if precision == "double" %}
typedef double real_t;
#define SBMLGPU_DOUBLE 1
{% elif precision == "float" %}
typedef float real_t;
#define SBMLGPU_DOUBLE 0
{% else %}
{{ fail("common.cuh: precision must be 'double' or 'float', not " ~ precision) }}
{% endif %}

/* Member status codes: written from sbmlgpu.results.Status when this text is rendered
   (a backend's own statuses included), never copied by hand. */
{{ status_defines() }}

/* sympy's Mod(a, b): the result has the sign of b (Python's %). fmod is exact and
   has the sign of a; moving it by b when the signs differ gives sympy's value. */
SBMLGPU_HD double sbmlgpu_mod(double a, double b)
{
    double r = fmod(a, b);
    return (r != 0.0 && ((r < 0.0) != (b < 0.0))) ? r + b : r;
}

SBMLGPU_HD float sbmlgpu_modf(float a, float b)
{
    float r = fmodf(a, b);
    return (r != 0.0f && ((r < 0.0f) != (b < 0.0f))) ? r + b : r;
}

/* ---- Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as
   easy as 1, 2, 3", SC'11; constants as in Random123's philox.h). A pure function
   of a 128-bit counter and a 64-bit key; tests check it against Random123's
   known-answer vectors. */
typedef struct { uint32_t x, y, z, w; } sbmlgpu_u32x4;

#define SBMLGPU_PHILOX_M0 0xD2511F53u
#define SBMLGPU_PHILOX_M1 0xCD9E8D57u
#define SBMLGPU_PHILOX_W0 0x9E3779B9u /* golden ratio */
#define SBMLGPU_PHILOX_W1 0xBB67AE85u /* sqrt(3) - 1 */

SBMLGPU_HD uint32_t sbmlgpu_mulhilo32(uint32_t a, uint32_t b, uint32_t* hi)
{
    /* nvcc turns the 64-bit product into mul.lo/mul.hi, as __umulhi would. */
    uint64_t product = (uint64_t)a * (uint64_t)b;
    *hi = (uint32_t)(product >> 32);
    return (uint32_t)product;
}

SBMLGPU_HD sbmlgpu_u32x4 sbmlgpu_philox4x32_round(sbmlgpu_u32x4 c, uint32_t k0, uint32_t k1)
{
    uint32_t hi0, hi1;
    uint32_t lo0 = sbmlgpu_mulhilo32(SBMLGPU_PHILOX_M0, c.x, &hi0);
    uint32_t lo1 = sbmlgpu_mulhilo32(SBMLGPU_PHILOX_M1, c.z, &hi1);
    sbmlgpu_u32x4 r = {hi1 ^ c.y ^ k0, lo1, hi0 ^ c.w ^ k1, lo0};
    return r;
}

SBMLGPU_HD sbmlgpu_u32x4 sbmlgpu_philox4x32_10(sbmlgpu_u32x4 counter, uint32_t k0, uint32_t k1)
{
#ifdef __CUDACC__
#pragma unroll
#endif
    for (int i = 0; i < 10; ++i) {
        if (i > 0) { k0 += SBMLGPU_PHILOX_W0; k1 += SBMLGPU_PHILOX_W1; }
        counter = sbmlgpu_philox4x32_round(counter, k0, k1);
    }
    return counter;
}

/* One ensemble member's stream: key = seed, counter = (block, item index). Item i
   draws the same numbers whatever the batch size, grid or GPU count, and two items
   never share a counter (no seed + i overlaps; DESIGN.md, "Numbers"). Each block of
   the counter gives four 32-bit words. */
typedef struct {
    uint32_t key0, key1;   /* seed, low and high words */
    uint32_t item0, item1; /* item index, low and high words */
    uint64_t block;        /* next counter block to draw */
    sbmlgpu_u32x4 words;   /* the current block's output */
    int used;              /* words of `words` already handed out (4: none left) */
} sbmlgpu_rng_t;

SBMLGPU_HD void sbmlgpu_rng_init(sbmlgpu_rng_t* rng, uint64_t seed, uint64_t item,
                                 uint64_t first_block)
{
    rng->key0 = (uint32_t)seed;
    rng->key1 = (uint32_t)(seed >> 32);
    rng->item0 = (uint32_t)item;
    rng->item1 = (uint32_t)(item >> 32);
    rng->block = first_block;
    rng->used = 4;
}

SBMLGPU_HD sbmlgpu_u32x4 sbmlgpu_rng_block(const sbmlgpu_rng_t* rng, uint64_t block)
{
    sbmlgpu_u32x4 counter = {(uint32_t)block, (uint32_t)(block >> 32), rng->item0, rng->item1};
    return sbmlgpu_philox4x32_10(counter, rng->key0, rng->key1);
}

SBMLGPU_HD uint32_t sbmlgpu_rng_u32(sbmlgpu_rng_t* rng)
{
    if (rng->used == 4) {
        rng->words = sbmlgpu_rng_block(rng, rng->block);
        rng->block += 1;
        rng->used = 0;
    }
    int k = rng->used++;
    return k == 0 ? rng->words.x : k == 1 ? rng->words.y : k == 2 ? rng->words.z : rng->words.w;
}

/* Uniform in the open interval (0, 1): never 0 (safe for log) and never 1.
   Double: 52 random bits, (n + 1/2) 2^-52; float: 23 bits, (n + 1/2) 2^-23. Both
   are exact in their precision. */
SBMLGPU_HD double sbmlgpu_u01_double(uint32_t hi, uint32_t lo)
{
    uint64_t n = ((uint64_t)(hi >> 12) << 32) | lo; /* 20 + 32 = 52 bits */
    return ((double)n + 0.5) * 2.220446049250313080847e-16; /* 2^-52 */
}

SBMLGPU_HD float sbmlgpu_u01_float(uint32_t w)
{
    return ((float)(w >> 9) + 0.5f) * 1.1920928955078125e-7f; /* 2^-23 */
}

SBMLGPU_HD real_t sbmlgpu_rng_uniform(sbmlgpu_rng_t* rng)
{
#if SBMLGPU_DOUBLE
    uint32_t hi = sbmlgpu_rng_u32(rng);
    uint32_t lo = sbmlgpu_rng_u32(rng);
    return sbmlgpu_u01_double(hi, lo);
#else
    return sbmlgpu_u01_float(sbmlgpu_rng_u32(rng));
#endif
}

/* Standard normal by Box-Muller (one of the pair; the other is dropped to keep the
   stream's position a simple count of draws). */
SBMLGPU_HD real_t sbmlgpu_rng_normal(sbmlgpu_rng_t* rng)
{
    real_t u1 = sbmlgpu_rng_uniform(rng);
    real_t u2 = sbmlgpu_rng_uniform(rng);
#if SBMLGPU_DOUBLE
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
#else
    return sqrtf(-2.0f * logf(u1)) * cosf(6.2831855f * u2);
#endif
}

#endif /* SBMLGPU_COMMON_CUH */
