{#
  heterogeneous.cu -- the dbn backend's heterogeneous counting kernel (Hagiescu et al.
  2013): the same inputs and the same counts as dbn.cu with the CPT sink, computed by
  a block of C compute warps and M memory warps that share T trajectories in shared
  memory (plugins/dbn/heterogeneous.py explains the design, the partition of the
  equations and why the numbers equal the homogeneous kernel's).

  Compute warp c evaluates the equations of group c (dbn_rhs_group_c: the temporaries
  they need from the CSE block of model_rhs, then their dx) for every trajectory of the
  block, lane l taking trajectories l, l + 32, ... Each fixed RK4 step is four stages;
  after each, the compute warps meet at the named barrier DBN_BAR_COMPUTE:

    stage 0: k2 = f(ya)   acc = f + 2 k2          yb = x + h/2 k2
    stage 1: k3 = f(yb)   acc = acc + 2 k3        ya = x + h k3
    stage 2: k4 = f(ya)   x = x + h/6 (acc + k4)  yb = x
    stage 3: f = f(yb)                            ya = x + h/2 f (not after a slice's
                                                  last step: the next slice's first
                                                  step starts with ya = x + h/2 f)

  (rk4.cuh's step, with its sum f + 2 k2 + 2 k3 + k4 accumulated in the same order.)
  A group writes only its own variables, and reads the stage argument that the other
  groups finished before the barrier; the two stage arguments alternate, so one
  barrier per stage suffices.

  At slice k the compute warps check and bin their trajectories (warp c: tiles c,
  c + C, ...) into slot k % 3 and arrive at DBN_BAR_FULL(slot); the memory warps wait
  there, count transition k - 1 from slots (k - 1) % 3 and k % 3 with the CPT sink's
  generated counting (sink.counting, the code ode_sink_store runs) and arrive at
  DBN_BAR_EMPTY of the older slot, on which the compute warps wait before they write
  that slot again (slice k + 2). Each barrier has at most one phase outstanding. Where
  some variable is counted on the host (sink.records), the memory warps also copy each
  slice's bins to the bin records, member-major as the CPT sink writes them.

  The values variant (het.values_variant: the range pass of a run whose values are kept) is
  the same integration without memory warps' work and without bins: at every slice
  the compute warps write each trajectory's outputs to `values`
  ((k * NV + v) * stride + i, as the range sink keeps them) and its status; the
  extrema and the counts are then made from those values by the range and count
  kernels' replay entry points. Its memory warps return at once.

  The kernel is CUDA only (the host build of the DBN is the homogeneous kernel); the
  equation groups before it also compile as host C++ (tests compare them with
  model_rhs there). Context:
  sbmlgpu.ode.codegen.kernel_context's (with the CPT sink) and `het` (heterogeneous.py:
  trajectories, compute_warps, memory_warps, shared_bytes, slots, entry, groups).
#}
{% from "sbmlgpu.ode:entry_arguments.cuh" import kernel_arguments %}
{% if method != "rk4" %}
{{ fail("heterogeneous.cu: the DBN approximation integrates with fixed-step rk4, not " ~ method) }}
{% endif %}
{% if watch %}
{{ fail("heterogeneous.cu: the heterogeneous kernel integrates without events or watched atoms") }}
{% endif %}
{% include "common.cuh" %}
{% include "sbmlgpu.ode:prelude.cuh" %}

{% include "sbmlgpu.ode:model.cuh" %}

{% include sink.template %}

/* ---- heterogeneous kernel: the equation groups ----------------------------------- */
#define DBN_T {{ het.trajectories }}      /* trajectories per block (a multiple of 32) */
{% for g in het.groups %}

/* group {{ g.index }} (compute warp {{ g.index }}): {{ g.equations | length }} equation(s), {{ g.flops }} weighted FLOPs a stage
   x, p: the trajectory's column of the stage argument and of the parameters */
SBMLGPU_HD void dbn_rhs_group_{{ g.index }}(const real_t t, const real_t* __restrict__ x,
                                  const real_t* __restrict__ p, real_t* __restrict__ dx)
{
    (void)t; (void)x; (void)p;
{{ g.body }}
}
{% endfor %}

#ifdef __CUDACC__
/* ---- heterogeneous kernel: the block ---------------------------------------------- */
#define DBN_C {{ het.compute_warps }}      /* compute warps: one group of equations each */
#define DBN_M {{ het.memory_warps }}      /* memory warps: the counts */
#define DBN_THREADS ((DBN_C + DBN_M) * 32)
#define DBN_SLOTS {{ het.slots }}
#define DBN_SHARED_BYTES {{ het.shared_bytes }}

/* named barriers (0 is __syncthreads, never used here: the warps have different roles) */
#define DBN_BAR_COMPUTE 1                      /* the compute warps, after each stage */
#define DBN_BAR_FULL(slot) (2 + (slot))        /* slot written (compute -> memory) */
#define DBN_BAR_EMPTY(slot) (2 + DBN_SLOTS + (slot))  /* slot counted (memory -> compute) */

/* the working set of the block, each array [variable][trajectory] */
typedef struct {
    real_t x[ODE_NX * DBN_T];     /* state at the step's start */
    real_t f[ODE_NX * DBN_T];     /* f(t, x) */
    real_t acc[ODE_NX * DBN_T];   /* f + 2 k2 (+ 2 k3) */
    real_t ya[ODE_NX * DBN_T];    /* stage arguments, alternating */
    real_t yb[ODE_NX * DBN_T];
    real_t p[ODE_NP * DBN_T];     /* varied parameters */
    int steps[DBN_T];             /* steps taken (as the driver counts them) */
    ode_bin_t bins[DBN_SLOTS][DBN_NV * DBN_T];
    signed char status[DBN_T];
} dbn_shared;
static_assert(sizeof(dbn_shared) == DBN_SHARED_BYTES,
              "heterogeneous.py's bytes_per_trajectory disagrees with dbn_shared");

__device__ __forceinline__ void dbn_bar_sync(int id, int threads)
{
    asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ void dbn_bar_arrive(int id, int threads)
{
    asm volatile("bar.arrive %0, %1;" :: "r"(id), "r"(threads) : "memory");
}

/* one RK4 step's sizes (rk4.cuh's ode_step: half = 0.5 h, sixth = h / 6) */
typedef struct {
    real_t h, half, sixth;
    bool last;  /* the slice's last step */
} dbn_step;

#define DBN_PRESTAGE (-1)

/* the stage update of variable element a (= i * DBN_T + j) from its derivative k */
__device__ __forceinline__ void dbn_update(dbn_shared* S, int stage, int a, real_t k,
                                           const dbn_step st)
{
    switch (stage) {
    case 0:
        S->acc[a] = S->f[a] + ODE_R(2) * k;
        S->yb[a] = S->x[a] + st.half * k;
        break;
    case 1:
        S->acc[a] = S->acc[a] + ODE_R(2) * k;
        S->ya[a] = S->x[a] + st.h * k;
        break;
    case 2: {
        const real_t xn = S->x[a] + st.sixth * (S->acc[a] + k);
        S->x[a] = xn;
        S->yb[a] = xn;
        break;
    }
    default:
        S->f[a] = k;
        if (!st.last) S->ya[a] = S->x[a] + st.half * k;
        break;
    }
}
{% for g in het.groups %}

/* compute warp {{ g.index }}: one stage of group {{ g.index }} for trajectory j */
__device__ __forceinline__ void dbn_group_{{ g.index }}(dbn_shared* S, int stage, real_t t,
                                           const real_t* __restrict__ in, int j, const dbn_step st)
{
    if (stage == DBN_PRESTAGE) {  /* the first stage argument of a slice */
{% for e in g.equations %}
        S->ya[{{ e.state }} * DBN_T + j] = S->x[{{ e.state }} * DBN_T + j] + st.half * S->f[{{ e.state }} * DBN_T + j]; /* {{ e.id }} */
{% endfor %}
        return;
    }
    real_t dx[{{ g.equations | length }}];
    dbn_rhs_group_{{ g.index }}(t, in + j, S->p + j, dx);
{% for e in g.equations %}
    dbn_update(S, stage, {{ e.state }} * DBN_T + j, dx[{{ e.slot }}], st); /* {{ e.id }} */
{% endfor %}
}
{% endfor %}

/* one stage of compute warp `group` for all `count` trajectories of the block */
__device__ __forceinline__ void dbn_stage(int group, int stage, real_t t, const real_t* in,
                                          dbn_shared* S, int count, int lane, const dbn_step st)
{
    switch (group) {
{% for g in het.groups %}
    case {{ g.index }}:
        for (int j = lane; j < count; j += 32) dbn_group_{{ g.index }}(S, stage, t, in, j, st);
        break;
{% endfor %}
    default:
        break;
    }
}

__device__ __forceinline__ bool dbn_all_finite(const real_t* x)
{
    bool ok = true;
#pragma unroll
    for (int i = 0; i < ODE_NX; ++i) ok = ok && ode_finite(x[i]);
    return ok;
}

/* slice output of trajectory j at time t into bin slot `slot`: the driver's tight
   loop checks the state after a slice's steps (n_steps > 0) and stops a member that
   is not finite; a member that failed or stopped has invalid bins (never counted) */
__device__ __forceinline__ void dbn_slice(dbn_shared* S, int j, int slot, real_t t, int n_steps,
                                          bool stopped, const double* __restrict__ ranges,
                                          real_t* __restrict__ values, long long stride, int k)
{
    ode_bin_t* out = S->bins[slot];
    (void)out; (void)ranges; (void)values; (void)stride; (void)k;
    bool valid = S->status[j] == SBMLGPU_STATUS_OK;
    if (valid && stopped) {
        S->status[j] = SBMLGPU_STATUS_MAX_STEPS;
        valid = false;
    }
    real_t x[ODE_NX], p[ODE_NP];
    if (valid) {
#pragma unroll
        for (int i = 0; i < ODE_NX; ++i) x[i] = S->x[i * DBN_T + j];
#pragma unroll
        for (int i = 0; i < ODE_NP; ++i) p[i] = S->p[i * DBN_T + j];
        if (n_steps > 0) {
            S->steps[j] += n_steps;
            if (!dbn_all_finite(x)) {
                S->status[j] = SBMLGPU_STATUS_NON_FINITE;
                valid = false;
            }
        }
    }
{% if het.values_variant %}
    if (valid) {  /* the outputs themselves (a failed member's are never read) */
        real_t y[ODE_NOUT];
        model_outputs(t, x, p, y);
{{ unroll_outputs }}
        for (int v = 0; v < DBN_NV; ++v) values[((long long)k * DBN_NV + v) * stride + j] = y[v];
    }
{% else %}
    if (valid) {
        real_t y[ODE_NOUT];
        model_outputs(t, x, p, y);
{{ unroll_outputs }}
        for (int v = 0; v < DBN_NV; ++v)
            out[v * DBN_T + j] = ode_bin(y[v], ranges[2 * v], ranges[2 * v + 1]);
    } else {
{{ unroll_outputs }}
        for (int v = 0; v < DBN_NV; ++v) out[v * DBN_T + j] = (ode_bin_t)ODE_BIN_INVALID;
    }
{% endif %}
}

/* the counts of one transition of one trajectory: the CPT sink's generated counting */
__device__ __forceinline__ void dbn_count_transition(const ode_sink* sink, const ode_bin_t* prev,
                                                     const ode_bin_t* now, long long transition)
{
    unsigned int* table = sink->counts;
{{ sink.counting }}
}

/* memory warp w: transition k - 1 once slice k is binned, for trajectories of tiles
   w, w + M, ...; and slice k's bin records where `records` is not null (the CPT sink's
   layout: records[(member * n_times + k) * NV + v]) */
__device__ void dbn_memory_warp(int w, int lane, dbn_shared* S, long long first, int count,
                                int n_times, unsigned int* __restrict__ counts,
                                ode_bin_t* __restrict__ records,
                                const double* __restrict__ ranges, unsigned int weight)
{
    const ode_sink sink = dbn_cpt_sink(counts, (ode_bin_t*)0, ranges, weight, 0, n_times,
                                       (ode_bin_t*)0);
    for (int k = 0; k < n_times; ++k) {
        const int slot = k % DBN_SLOTS;
        dbn_bar_sync(DBN_BAR_FULL(slot), DBN_THREADS);
{% if sink.records %}
        if (records) {
            for (int j = w * 32 + lane; j < count; j += DBN_M * 32) {
                ode_bin_t* row = records + ((first + j) * n_times + k) * DBN_NV;
{{ unroll_outputs }}
                for (int v = 0; v < DBN_NV; ++v) row[v] = S->bins[slot][v * DBN_T + j];
            }
        }
{% endif %}
        if (k == 0) continue;
        const int before = (k - 1) % DBN_SLOTS;
        for (int j = w * 32 + lane; j < count; j += DBN_M * 32) {
            ode_bin_t prev[DBN_NV], now[DBN_NV];
{{ unroll_outputs }}
            for (int v = 0; v < DBN_NV; ++v) {
                prev[v] = S->bins[before][v * DBN_T + j];
                now[v] = S->bins[slot][v * DBN_T + j];
            }
            dbn_count_transition(&sink, prev, now, k - 1);
        }
        /* slice k - 1 is counted; the compute warps reuse its slot for slice k + 2 */
        if (k - 1 + DBN_SLOTS < n_times) dbn_bar_arrive(DBN_BAR_EMPTY(before), DBN_THREADS);
    }
}

/* compute warp `group`: the block's trajectories from times[0] to times[n_times - 1] */
__device__ void dbn_compute_warp(int group, int lane, dbn_shared* S, long long first, int count,
                                 long long n, const real_t* __restrict__ table,
                                 const real_t* __restrict__ times, int n_times,
                                 const double* __restrict__ ranges,
                                 signed char* __restrict__ status, int* __restrict__ steps,
                                 real_t dt, long long max_steps, real_t* __restrict__ values,
                                 long long stride)
{
    /* the block's first member's values (the values variant) */
    values = values ? values + first : values;
    real_t t = times[0];
    /* this warp's trajectories: parameters, x0, f(t0, x0) (as the driver's ode_start),
       slice 0 */
    for (int j = group * 32 + lane; j < count; j += DBN_C * 32) {
        real_t p[ODE_NP], x[ODE_NX], f[ODE_NX];
{% for q in range(np) %}
        p[{{ q }}] = table[{{ q }}LL * n + first + j]; /* {{ varied[q] }} */
{% endfor %}
{% if not np %}
        p[0] = ODE_R(0); (void)table; (void)n;
{% endif %}
        model_x0(t, p, x);
        model_rhs(t, x, p, f);
#pragma unroll
        for (int i = 0; i < ODE_NP; ++i) S->p[i * DBN_T + j] = p[i];
#pragma unroll
        for (int i = 0; i < ODE_NX; ++i) {
            S->x[i * DBN_T + j] = x[i];
            S->f[i * DBN_T + j] = f[i];
        }
        S->status[j] = dbn_all_finite(x) ? SBMLGPU_STATUS_OK : SBMLGPU_STATUS_NON_FINITE;
        S->steps[j] = 0;
        dbn_slice(S, j, 0, t, 0, false, ranges, values, stride, 0);
    }
{% if not het.values_variant %}
    dbn_bar_arrive(DBN_BAR_FULL(0), DBN_THREADS);
{% endif %}
    dbn_bar_sync(DBN_BAR_COMPUTE, DBN_C * 32);  /* every x, f and p in place */

    long long done = 0;   /* steps of the members still running (the same for all) */
    bool stopped = false; /* the step budget ran out: the rest is MAX_STEPS */
    for (int k = 1; k < n_times; ++k) {
        const real_t T = times[k];
        int n_steps = 0;
        if (!stopped && T > t) {
            /* the driver's grid: ceil(span / dt) equal steps ending on T */
            const real_t span = T - t;
            real_t c = ODE_CEIL(span / dt * (ODE_R(1) - ODE_R(16) * ODE_UROUND));
            n_steps = c < ODE_R(1) ? 1 : (int)c;
            if (!(c < ODE_R(2147483647)) || done + n_steps > max_steps) {
                stopped = true;
                n_steps = 0;
            } else {
                dbn_step st;
                st.h = span / (real_t)n_steps;
                st.half = ODE_R(0.5) * st.h;
                st.sixth = st.h / ODE_R(6);
                const real_t t_start = t;
                for (int m = 0; m < n_steps; ++m) {
                    const real_t tm = t_start + (real_t)m * st.h;
                    st.last = m == n_steps - 1;
                    if (m == 0) {
                        dbn_stage(group, DBN_PRESTAGE, tm, S->ya, S, count, lane, st);
                        dbn_bar_sync(DBN_BAR_COMPUTE, DBN_C * 32);
                    }
                    dbn_stage(group, 0, tm + st.half, S->ya, S, count, lane, st);
                    dbn_bar_sync(DBN_BAR_COMPUTE, DBN_C * 32);
                    dbn_stage(group, 1, tm + st.half, S->yb, S, count, lane, st);
                    dbn_bar_sync(DBN_BAR_COMPUTE, DBN_C * 32);
                    dbn_stage(group, 2, tm + st.h, S->ya, S, count, lane, st);
                    dbn_bar_sync(DBN_BAR_COMPUTE, DBN_C * 32);
                    dbn_stage(group, 3, tm + st.h, S->yb, S, count, lane, st);
                    dbn_bar_sync(DBN_BAR_COMPUTE, DBN_C * 32);
                }
                t = T;
                done += n_steps;
            }
        }
        const int slot = k % DBN_SLOTS;
{% if het.values_variant %}
        for (int j = group * 32 + lane; j < count; j += DBN_C * 32)
            dbn_slice(S, j, slot, t, n_steps, stopped, ranges, values, stride, k);
{% else %}
        if (k >= DBN_SLOTS) dbn_bar_sync(DBN_BAR_EMPTY(slot), DBN_THREADS);  /* slice k - 3 counted */
        for (int j = group * 32 + lane; j < count; j += DBN_C * 32)
            dbn_slice(S, j, slot, t, n_steps, stopped, ranges, values, stride, k);
        dbn_bar_arrive(DBN_BAR_FULL(slot), DBN_THREADS);
{% endif %}
    }
    for (int j = group * 32 + lane; j < count; j += DBN_C * 32) {
        status[first + j] = S->status[j];
        steps[first + j] = S->steps[j];
    }
}

{% if het.values_variant %}
/* The values variant's entry point: one block per DBN_T members as the count
   kernel's; values[(k * NV + v) * stride + i] of the launch's members (offset to its
   first), their status and steps. The memory warps have nothing to do. */
extern "C" __global__ void __launch_bounds__({{ (het.compute_warps + het.memory_warps) * 32 }}, {{ het.min_blocks }})
{{ het.entry }}(long long n, const real_t* __restrict__ table, const real_t* __restrict__ times,
          int n_times, real_t* __restrict__ values, long long stride,
          signed char* __restrict__ status, int* __restrict__ steps, real_t dt,
          long long max_steps)
{
    extern __shared__ __align__(16) unsigned char dbn_memory[];
    dbn_shared* S = (dbn_shared*)dbn_memory;
    const long long first = (long long)blockIdx.x * DBN_T;
    const int count = (int)(n - first < (long long)DBN_T ? n - first : (long long)DBN_T);
    const int warp = (int)(threadIdx.x >> 5), lane = (int)(threadIdx.x & 31);
    if (warp >= DBN_C) return;
    dbn_compute_warp(warp, lane, S, first, count, n, table, times, n_times, (const double*)0,
                     status, steps, dt, max_steps, values, stride);
}
{% else %}
/* The entry point: the homogeneous count kernel's arguments (entry.cuh), one block per
   DBN_T members, DBN_THREADS threads, DBN_SHARED_BYTES of dynamic shared memory. The
   second launch bound is the blocks per SM the cost model assumes. The
   tolerances, seed and member numbers are unused (fixed steps, no events). */
extern "C" __global__ void __launch_bounds__({{ (het.compute_warps + het.memory_warps) * 32 }}, {{ het.min_blocks }})
{{ het.entry }}({{ kernel_arguments(sink) }})
{
    (void)rtol; (void)atol; (void)h0; (void)max_step; (void)seed;
    (void)members; (void)first_member;
    extern __shared__ __align__(16) unsigned char dbn_memory[];
    dbn_shared* S = (dbn_shared*)dbn_memory;
    const long long first = (long long)blockIdx.x * DBN_T;
    const int count = (int)(n - first < (long long)DBN_T ? n - first : (long long)DBN_T);
    const int warp = (int)(threadIdx.x >> 5), lane = (int)(threadIdx.x & 31);
    if (warp >= DBN_C)
        dbn_memory_warp(warp - DBN_C, lane, S, first, count, n_times, counts, records, ranges,
                        weight);
    else
        dbn_compute_warp(warp, lane, S, first, count, n, table, times, n_times, ranges,
                         status, steps, dt, max_steps, (real_t*)0, 0);
}
{% endif %}
#endif
