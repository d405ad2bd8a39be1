{#
  ssa.cu -- Gillespie's direct method, one realisation per thread (Klingbeil et al.,
  IEEE TPDS 2012), generated for one model. The same text compiles as CUDA (nvcc) and
  as host C++ (g++ with OpenMP: the CPU engine `compiled`), so CI runs the very code
  the GPU runs.

  Context (codegen.py builds it):
    precision        "double" | "float"
    layout           "register" (state and propensities in registers),
                     "fat" (in shared memory, one slice per thread),
                     "thin" (in global memory, species-major so that a warp coalesces)
    update           "full" (every propensity after each firing, branch-free update)
                     | "sparse" (only the fired reaction's dependents, by a switch)
    method           "direct" (a0 summed afresh, branch-free selection)
                     | "optimized" (reactions sorted by frequency, early-exit search,
                     a0 updated incrementally and summed afresh every `refresh` firings)
    ns, nr, no, nv   states, reactions, outputs, varied parameters
    model_id, ids    the SBML model's id; the table of SBML ids (rows: C name, id, note)
    varied           each varied parameter (ssa_p<k>): index, SBML id, used by the math
    x0, props, deps, outputs, events, stoich_by_state: rendered C, each value with
                     the SBML id it belongs to (see codegen.py)
    time_events      whether any event fires at a time `time >= T`; an event whose T
                     reads a clock's offset (`moving`) recomputes T after every event
                     firing (model.py: clocks)
    draws            whether initial values or event assignments draw (SBML distrib):
                     then distrib.cuh's samplers, on the realisation's own draw stream
  Random numbers: Philox4x32-10 keyed by (seed, realisation index); firing attempt b
  uses counter block b (two uniforms from its four words), so a realisation draws the
  same numbers whatever the batch, grid or GPU it runs in. distrib draws take their
  own stream of the same key (distrib.cuh: counter blocks from 2^63), so drawing
  never moves the firings' numbers.
#}
/* ---- SBML ids in this kernel: model {{ model_id }} ------------------------------
   Gillespie's {{ method }} method; layout {{ layout }}, update {{ update }}, precision {{ precision }}.
{% for title, rows in ids %}
{% for name, id, note in rows %}
   {{ "%-10s" | format(title if loop.first else "") }} {{ "%-12s" | format(name) }} {{ id }}{{ "   (" ~ note ~ ")" if note else "" }}
{% endfor %}
{% endfor %}
   ------------------------------------------------------------------------------ */
{% include "common.cuh" %}
{% if draws %}
{% include "distrib.cuh" %}
{% endif %}
{% set selects = method != "direct" or nr > 1 %}{# r2 picks a reaction #}

#define SSA_NS {{ ns }}
#define SSA_NR {{ nr }}
#define SSA_NO {{ no }}
#define SSA_NE {{ events | length }}
#define SSA_MAX_EVENT_ROUNDS {{ max_event_rounds }}

/* Outcome of a realisation: a Status code (results.Status) and a detail. */
#define SSA_WHY_NEGATIVE 1 /* a propensity became negative */
#define SSA_WHY_NOT_FINITE 2 /* a propensity became NaN or infinite */
#define SSA_WHY_FIRINGS 3 /* max_firings reached */
#define SSA_WHY_EVENTS 4 /* events kept triggering each other at one instant */
#define SSA_WHY_DRAW 5 /* a distrib draw had invalid arguments (distrib.cuh) */

{% if layout == "register" %}
#define SSA_X(k) ssa_xr[k]
#define SSA_A(j) ssa_ar[j]
{% else %}
/* fat and thin: xs/as point at this realisation's slice, `stride` apart */
#define SSA_X(k) ssa_xs[(long)(k) * ssa_stride]
#define SSA_A(j) ssa_as[(long)(j) * ssa_stride]
{% endif %}

/* Full trajectories: out[(k * SSA_NO + o) * stride + member], member-minor so that
   the threads of a warp that record the same sample write one coalesced line. */
struct SsaTrajectorySink {
    real_t* out;
    long stride;
    long member;
    SBMLGPU_HD void put(int k, int o, real_t v) { out[((long)k * SSA_NO + o) * stride + member] = v; }
    SBMLGPU_HD void lost(int k, int o) { out[((long)k * SSA_NO + o) * stride + member] = (real_t)NAN; }
};

#ifdef __CUDACC__
/* Ensemble statistics on the GPU: sums of (v - shift), their squares, the count, and
   a histogram of B bins plus under/overflow, per (sample, output). The shift (the
   pilot's mean) keeps the variance free of cancellation. */
struct SsaSummarySink {
    const double* shift;
    double* s1;
    double* s2;
    unsigned long long* count;
    const double* lo;
    const double* inv_width;
    int bins;
    unsigned long long* hist;
    __device__ void put(int k, int o, real_t v)
    {
        const int c = k * SSA_NO + o;
        const double value = (double)v;
        if (!isfinite(value)) return;
        const double d = value - shift[c];
        atomicAdd(&s1[c], d);
        atomicAdd(&s2[c], d * d);
        atomicAdd(&count[c], 1ull);
        if (bins > 0) {
            const double pos = (value - lo[c]) * inv_width[c];
            const int b = pos < 0.0 ? 0 : (pos >= (double)bins ? bins + 1 : 1 + (int)pos);
            atomicAdd(&hist[(long)c * (bins + 2) + b], 1ull);
        }
    }
    __device__ void lost(int, int) {} /* statistics count only the samples reached */
};
#endif

/* One realisation, from times[0] to times[K-1]. Returns a Status code; *why says more. */
template <class Sink>
SBMLGPU_HD int ssa_realisation(unsigned long long seed, unsigned long long item,
                               const real_t* ptab, long pstride, long member,
                               const double* times, int K, Sink& sink,
                               real_t* ssa_xs, real_t* ssa_as, long ssa_stride,
                               unsigned long long max_firings,
                               unsigned long long* firings_out, int* why_out)
{
{% for p in varied if p.used %}
    const real_t ssa_p{{ p.index }} = ptab[{{ p.index }} * pstride + member]; /* {{ p.id }} */
{% else %}
    (void)ptab; (void)pstride; (void)member; /* no varied parameter in the model's math */
{% endfor %}
{% if layout == "register" %}
    real_t ssa_xr[SSA_NS > 0 ? SSA_NS : 1];
    real_t ssa_ar[SSA_NR > 0 ? SSA_NR : 1];
    (void)ssa_xs; (void)ssa_as; (void)ssa_stride;
{% endif %}
    sbmlgpu_rng_t ssa_rng;
    sbmlgpu_rng_init(&ssa_rng, seed, item, 0);
{% if draws %}
    sbmlgpu_draws_t ssa_draw_state; /* distrib draws: this realisation's own stream */
    sbmlgpu_draws_init(&ssa_draw_state, seed, item);
    sbmlgpu_draws_t* const sbmlgpu_draws = &ssa_draw_state;
{% endif %}
    unsigned long long ssa_block = 0; /* next Philox counter block = firing attempts so far */
    unsigned long long ssa_firings = 0;
    int why = 0;
    int status = SBMLGPU_STATUS_OK;
    double t = times[0];
    int k = 0;
    double ssa_tsample = K > 0 ? times[0] : (double)INFINITY; /* the next sample time, times[k] */
    real_t a0 = (real_t)0;
{% if update == "sparse" %}
    bool ssa_dirty = true; /* propensities must be recomputed from the state */
{% endif %}
{% if ns %}

    /* initial state: x0(p, t0) */
    {
{% for line in x0.lines %}
        {{ line }}
{% endfor %}
{% for x in x0.exprs %}
        SSA_X({{ loop.index0 }}) = {{ x.value }}; /* {{ x.id }} */
{% endfor %}
    }
{% endif %}
{% if draws %}
    if (sbmlgpu_draws->bad) { status = SBMLGPU_STATUS_FAILED; why = SSA_WHY_DRAW; }
{% endif %}
{% for e in events %}
{% if e.time %}
{% if e.moving %}
    double ssa_T{{ loop.index0 }} = (double)({{ e.threshold }}); /* event {{ e.id }} fires at time >= this (a clock's: recomputed when an event fires) */
{% else %}
    const double ssa_T{{ loop.index0 }} = (double)({{ e.threshold }}); /* event {{ e.id }} fires at time >= this */
{% endif %}
{% endif %}
    bool ssa_ev{{ loop.index0 }} = {{ "true" if e.initial else "false" }}; /* event {{ e.id }}: its trigger's last value */
{% endfor %}
{% macro run_events(indent) %}
{% filter indent(indent, first=true) %}
{   /* events, as SBML orders them: every trigger is evaluated at the current state, the
       first event (document order) whose trigger went from false to true fires, and
       all triggers are evaluated again after its assignments, until none rises. A
       trigger that rose while another event fired stays pending (its last value stays
       false): it fires in a later round if it is still true. Events that keep
       triggering each other fail the realisation after SSA_MAX_EVENT_ROUNDS firings. */
    bool ssa_again = true;
    int ssa_round = 0;
    while (ssa_again && why == 0) {
        ssa_again = false;
        int ssa_fire = -1;
{% for e in events %}
        {
            const bool ssa_now = {{ e.trigger }}; /* event {{ e.id }} */
            if (ssa_now && !ssa_ev{{ loop.index0 }}) {
                if (ssa_fire < 0) { ssa_fire = {{ loop.index0 }}; ssa_ev{{ loop.index0 }} = true; }
            } else {
                ssa_ev{{ loop.index0 }} = ssa_now;
            }
        }
{% endfor %}
        if (ssa_fire < 0) break;
        if (++ssa_round > SSA_MAX_EVENT_ROUNDS) { status = SBMLGPU_STATUS_FAILED; why = SSA_WHY_EVENTS; break; }
        ssa_again = true;
{% if update == "sparse" %}
        ssa_dirty = true;
{% endif %}
{% for e in events %}
        if (ssa_fire == {{ loop.index0 }}) { /* event {{ e.id }} fires */
{% for line in e.lines %}
            {{ line }}
{% endfor %}
{% for v in e.exprs %}
            const real_t ssa_v{{ loop.index0 }} = {{ v.value }}; /* {{ v.id }} */
{% endfor %}
{% for target in e.targets %}
            SSA_X({{ target.value }}) = ssa_v{{ loop.index0 }}; /* {{ target.id }} */
{% endfor %}
{% if draws %}
            if (sbmlgpu_draws->bad) { status = SBMLGPU_STATUS_FAILED; why = SSA_WHY_DRAW; }
{% endif %}
        }
{% endfor %}
{% for e in events if e.moving %}
        ssa_T{{ e.index }} = (double)({{ e.threshold }}); /* event {{ e.id }}: its clock's offset may have changed */
{% endfor %}
    }
}{% endfilter %}
{% endmacro %}
{% if events %}
{{ run_events(4) }}
{% endif %}
{% macro full_propensities(indent) %}
{% filter indent(indent, first=true) %}
{   /* every propensity from the state, then a0 in code order */
{% for line in props.lines %}
    {{ line }}
{% endfor %}
{% for a in props.exprs %}
    SSA_A({{ loop.index0 }}) = {{ a.value }}; /* {{ a.id }} */
{% endfor %}
    bool ssa_negative = false;
{% for j in range(nr) %}
    ssa_negative |= SSA_A({{ j }}) < (real_t)0;
{% endfor %}
    a0 = (real_t)0;
{% for j in range(nr) %}
    a0 += SSA_A({{ j }});
{% endfor %}
    if (ssa_negative) { status = SBMLGPU_STATUS_FAILED; why = SSA_WHY_NEGATIVE; }
    else if (!(a0 < (real_t)INFINITY)) { status = SBMLGPU_STATUS_NON_FINITE; why = SSA_WHY_NOT_FINITE; }
{% if update == "sparse" %}
    ssa_dirty = false;
{% endif %}
}{% endfilter %}
{% endmacro %}

    while (why == 0) {
{% if nr %}
{% if update == "full" %}
{{ full_propensities(8) }}
{% else %}
        if (ssa_dirty) {
{{ full_propensities(12) }}
        }
{% endif %}
        if (why != 0) break;
{% endif %}

        /* the next firing: waiting time from r1, reaction from r2 */
        double ssa_tnew = (double)INFINITY;
{% if selects %}
        real_t ssa_r2 = (real_t)0;
{% endif %}
        if (a0 > (real_t)0) {
            const sbmlgpu_u32x4 ssa_w = sbmlgpu_rng_block(&ssa_rng, ssa_block);
            ++ssa_block;
{% if precision == "double" %}
            const real_t ssa_r1 = sbmlgpu_u01_double(ssa_w.x, ssa_w.y);
{% if selects %}
            ssa_r2 = sbmlgpu_u01_double(ssa_w.z, ssa_w.w);
{% endif %}
            ssa_tnew = t + (-log(ssa_r1) / a0);
{% else %}
            const real_t ssa_r1 = sbmlgpu_u01_float(ssa_w.x);
{% if selects %}
            ssa_r2 = sbmlgpu_u01_float(ssa_w.y);
{% endif %}
            ssa_tnew = t + (double)(-logf(ssa_r1) / a0);
{% endif %}
        }
{% if time_events %}
        /* the next time-triggered event (a firing proposed past it is discarded:
           the waiting time is memoryless, so restarting at the event is exact) */
        double ssa_tevent = (double)INFINITY;
{% for e in events if e.time %}
        if (!ssa_ev{{ e.index }} && ssa_T{{ e.index }} < ssa_tevent) ssa_tevent = ssa_T{{ e.index }};
{% endfor %}
        const double ssa_tlimit = ssa_tevent < ssa_tnew ? ssa_tevent : ssa_tnew;
{% else %}
        const double ssa_tlimit = ssa_tnew;
{% endif %}

        /* samples before the next change of state hold the current state */
        while (ssa_tsample < ssa_tlimit) {
{% if outputs.use_time %}
            const double t_out = ssa_tsample;
{% endif %}
{% for line in outputs.lines %}
            {{ line }}
{% endfor %}
{% for o in outputs.exprs %}
            sink.put(k, {{ loop.index0 }}, {{ o.value }}); /* {{ o.id }} */
{% endfor %}
            ++k;
            ssa_tsample = k < K ? times[k] : (double)INFINITY;
        }
        if (k >= K) break;
{% if time_events %}

        if (ssa_tevent < ssa_tnew) {
            t = ssa_tevent;
{% if events %}
{{ run_events(12) }}
{% endif %}
{% if update == "sparse" %}
            ssa_dirty = true;
{% endif %}
            continue;
        }
{% endif %}

{% if nr > 0 %}
        /* fire: select reaction j with prefix(j-1) <= r2 a0 < prefix(j) */
        t = ssa_tnew;
{% if method == "direct" and nr == 1 %}
        int sel = 0; /* the only reaction */
{% elif method == "direct" %}
        const real_t ssa_target = ssa_r2 * a0;
        int sel = 0;
        {
            real_t ssa_acc = (real_t)0;
{% for j in range(nr - 1) %}
            ssa_acc += SSA_A({{ j }});
            sel += (ssa_acc <= ssa_target);
{% endfor %}
            /* r2 a0 rounded up to a0: fall back on the last reaction that can fire */
            if (sel == SSA_NR - 1 && !(SSA_A(SSA_NR - 1) > (real_t)0)) {
{% for j in range(nr - 2, -1, -1) %}
                {{ "else " if not loop.first else "" }}if (SSA_A({{ j }}) > (real_t)0) sel = {{ j }};
{% endfor %}
            }
        }
{% else %}
        const real_t ssa_target = ssa_r2 * a0;
        int sel = 0;
        {   /* early exit: the frequent reactions come first */
            real_t ssa_acc = (real_t)0;
            sel = -1;
{% for j in range(nr) %}
            ssa_acc += SSA_A({{ j }});
            if (ssa_acc > ssa_target) { sel = {{ j }}; goto ssa_selected; }
{% endfor %}
            /* a0 drifted above the true sum: resum it, take the last that can fire */
            a0 = (real_t)0;
{% for j in range(nr) %}
            a0 += SSA_A({{ j }});
{% endfor %}
{% for j in range(nr - 1, -1, -1) %}
            {{ "else " if not loop.first else "" }}if (SSA_A({{ j }}) > (real_t)0) sel = {{ j }};
{% endfor %}
        ssa_selected:;
        }
{% endif %}
{% if update == "full" %}
        /* branch-free state change: every lane runs the same instructions */
{% for s in stoich_by_state %}
        SSA_X({{ s.state }}) += {{ s.delta }}; /* {{ s.id }} */
{% endfor %}
{% else %}
        {
            bool ssa_negative = false;
            switch (sel) {
{% for r in deps if r.changes or r.updates %}
            case {{ r.index }}: { /* {{ r.id }} fired */
{% for c in r.changes %}
                SSA_X({{ c.state }}) += (real_t){{ c.delta }}; /* {{ c.id }} */
{% endfor %}
{% for line in r.lines %}
                {{ line }}
{% endfor %}
{% for d in r.updates %}
                {
                    const real_t ssa_new = {{ d.value }}; /* {{ d.id }} */
                    ssa_negative |= ssa_new < (real_t)0;
{% if method == "optimized" %}
                    a0 += ssa_new - SSA_A({{ d.reaction }});
{% endif %}
                    SSA_A({{ d.reaction }}) = ssa_new;
                }
{% endfor %}
                break;
            }
{% endfor %}
            default: break;
            }
{% if method == "direct" %}
            a0 = (real_t)0;
{% for j in range(nr) %}
            a0 += SSA_A({{ j }});
{% endfor %}
{% else %}
            if ((ssa_firings & {{ refresh - 1 }}ull) == {{ refresh - 1 }}ull) {
                a0 = (real_t)0; /* bound the drift of the running sum */
{% for j in range(nr) %}
                a0 += SSA_A({{ j }});
{% endfor %}
            }
{% endif %}
            if (ssa_negative) { status = SBMLGPU_STATUS_FAILED; why = SSA_WHY_NEGATIVE; }
            else if (!(a0 < (real_t)INFINITY)) { status = SBMLGPU_STATUS_NON_FINITE; why = SSA_WHY_NOT_FINITE; }
        }
{% endif %}
        ++ssa_firings;
{% endif %}
        if (max_firings && ssa_firings >= max_firings && why == 0) {
            status = SBMLGPU_STATUS_MAX_STEPS; why = SSA_WHY_FIRINGS;
        }
{% if events %}
{{ run_events(8) }}
{% endif %}
    }
{% if no %}
    /* a realisation that stopped early has no values for the samples left */
    for (; k < K; ++k) {
{% for o in range(no) %}
        sink.lost(k, {{ o }});
{% endfor %}
    }
{% endif %}
    *firings_out = ssa_firings;
    *why_out = why;
    return status;
}

#ifdef __CUDACC__
__device__ __forceinline__ void ssa_slices(real_t* scratch, real_t** xs, real_t** as, long* stride)
{
{% if layout == "fat" %}
    extern __shared__ unsigned char ssa_shared_bytes[];
    real_t* ssa_shared = reinterpret_cast<real_t*>(ssa_shared_bytes);
    *stride = blockDim.x;
    *xs = ssa_shared + threadIdx.x;
    *as = *xs + (long)SSA_NS * blockDim.x;
    (void)scratch;
{% elif layout == "thin" %}
    const long gid = (long)blockIdx.x * blockDim.x + threadIdx.x;
    *stride = (long)gridDim.x * blockDim.x;
    *xs = scratch + gid;
    *as = *xs + (long)SSA_NS * (*stride);
{% else %}
    *stride = 0; *xs = scratch; *as = scratch;
{% endif %}
}

/* One thread per realisation: members first_item .. first_item + n - 1. */
extern "C" __global__ void ssa_trajectories(
    unsigned long long seed, unsigned long long first_item, int n,
    const real_t* __restrict__ ptab, const double* __restrict__ times, int K,
    real_t* __restrict__ out, int* __restrict__ status, int* __restrict__ why,
    unsigned long long* __restrict__ firings, unsigned long long max_firings,
    real_t* __restrict__ scratch)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    real_t* xs; real_t* as; long stride;
    ssa_slices(scratch, &xs, &as, &stride);
    if (i >= n) return;
    SsaTrajectorySink sink = {out, (long)n, (long)i};
    status[i] = ssa_realisation(seed, first_item + i, ptab, (long)n, (long)i, times, K, sink,
                                xs, as, stride, max_firings, &firings[i], &why[i]);
}

/* The same, accumulating ensemble statistics instead of writing trajectories. */
extern "C" __global__ void ssa_summary(
    unsigned long long seed, unsigned long long first_item, int n,
    const real_t* __restrict__ ptab, const double* __restrict__ times, int K,
    const double* __restrict__ shift, double* s1, double* s2, unsigned long long* count,
    const double* __restrict__ lo, const double* __restrict__ inv_width, int bins,
    unsigned long long* hist, int* __restrict__ status, int* __restrict__ why,
    unsigned long long* __restrict__ firings, unsigned long long max_firings,
    real_t* __restrict__ scratch)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    real_t* xs; real_t* as; long stride;
    ssa_slices(scratch, &xs, &as, &stride);
    if (i >= n) return;
    SsaSummarySink sink = {shift, s1, s2, count, lo, inv_width, bins, hist};
    status[i] = ssa_realisation(seed, first_item + i, ptab, (long)n, (long)i, times, K, sink,
                                xs, as, stride, max_firings, &firings[i], &why[i]);
}
#else
#ifdef _OPENMP
#include <omp.h>
#endif
/* Host engine: the same realisations on the CPU cores (OpenMP), trajectories only. */
extern "C" int ssa_host_threads(int threads)
{
#ifdef _OPENMP
    if (threads > 0) omp_set_num_threads(threads);
    return omp_get_max_threads();
#else
    (void)threads;
    return 1;
#endif
}

static void ssa_host_one(unsigned long long seed, unsigned long long first_item, long n,
                         const real_t* ptab, const double* times, int K, real_t* out,
                         int* status, int* why, unsigned long long* firings,
                         unsigned long long max_firings, long i)
{
    real_t scratch[(SSA_NS + SSA_NR) > 0 ? (SSA_NS + SSA_NR) : 1];
    SsaTrajectorySink sink = {out, n, i};
    status[i] = ssa_realisation(seed, first_item + (unsigned long long)i, ptab, n, i, times, K,
                                sink, scratch, scratch + SSA_NS, 1, max_firings, &firings[i],
                                &why[i]);
}

/* `parallel` 0 runs on the calling thread only: libgomp cannot start threads in a
   process forked after its parent ran a parallel region (the test-suite workers). */
extern "C" int ssa_host_trajectories(
    unsigned long long seed, unsigned long long first_item, long n, const real_t* ptab,
    const double* times, int K, real_t* out, int* status, int* why,
    unsigned long long* firings, unsigned long long max_firings, int parallel)
{
    if (parallel) {
#pragma omp parallel for schedule(dynamic, 16)
        for (long i = 0; i < n; ++i)
            ssa_host_one(seed, first_item, n, ptab, times, K, out, status, why, firings,
                         max_firings, i);
    } else {
        for (long i = 0; i < n; ++i)
            ssa_host_one(seed, first_item, n, ptab, times, K, out, status, why, firings,
                         max_firings, i);
    }
    return 0;
}
#endif
