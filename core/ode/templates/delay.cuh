{#
  delay.cuh -- delay(e, d): the member's history and the delayed expressions
  (sbmlgpu.ode.delays). Included by model.cuh after model_x0, only for models with
  delay(). Context: `history_nodes` (ring capacity), `body.delayed` (one C body per
  delayed expression e_k, over its own (t, x, p): t is the past time),
  `body.delayed_before` ({k: body} of e_k before the start where it differs: rateOf
  inside delay() is the initial values' time derivative there).

  The history is a ring of Hermite nodes (t, x, f): the start, the end of every
  accepted step, and both sides of every jump (event), so that at a jump time the
  look-up sees the value after it (as the CPU reference does). The nodes live in
  global memory, in one buffer per launch that the engine allocates with the
  launch's other buffers (the entry points' last argument, `history`:
  KernelSource.history_buffer_reals), so that memory is taken for the launch's
  members only (a per-thread array is local memory, which the driver reserves for
  every thread that could be resident on the GPU, in every process). Layout: blocks
  of ODE_HISTORY_GROUP members (a warp), members innermost in a block: real j of
  node s of the member at launch index i is
      history[(i / G) * G * NODES * WIDTH + (s * WIDTH + j) * G + i % G],
  G = ODE_HISTORY_GROUP, so that a warp's lanes touching the same node and real read
  one contiguous run (256 bytes in double: coalesced), and one member's nodes stay within its
  block (G * NODES * WIDTH reals) rather than spread at the stride of the whole
  launch (pages and cache lines a member reuses; on the host, OpenMP's chunks are a
  multiple of a 64-byte line's members: entry.cuh).
  The member's parameters keep only where its nodes are and the ring's indices
  (ode_params_with_history): every function that gets p reaches them, so no
  signature of the model or of the methods changes. Where a look-up needs a node
  the ring has already overwritten, the member fails (`lost`, read by the driver
  after each step): a larger --history-nodes helps.
#}
/* ---- delay(): the member's history of Hermite nodes ------------------------------------ */
#define ODE_HISTORY_NODES {{ history_nodes }}
/* reals of one node: t, then x[0..NX), then f[0..NX) = x'(t) (delays.history_reals) */
#define ODE_HISTORY_WIDTH (1 + 2 * ODE_NX)
/* members per block of the history buffer (a warp; kernel_source.HISTORY_GROUP) */
#define ODE_HISTORY_GROUP {{ history_group }}

typedef struct {
    real_t* ring;      /* the member's first real in the launch's history buffer */
    real_t t0;         /* the start: before it, the initial values at that time */
    int first;         /* ring index of the oldest node */
    int count;         /* nodes held */
    bool lost;         /* a look-up needed a node older than the oldest kept */
} ode_history;

/* p must be the first member: the model's functions get p and find the history
   after it (ode_history_of), so their signatures stay those of models without delay() */
typedef struct {
    real_t p[ODE_NP];
    ode_history history;
} ode_params_with_history;

SBMLGPU_HD ode_history* ode_history_of(const real_t* p)
{
    return &((ode_params_with_history*)p)->history;
}

/* the member at launch index i, its nodes in the launch's `history` (entry.cuh) */
SBMLGPU_HD void ode_history_init(ode_history* H, real_t t0, real_t* history, long long i)
{
    H->ring = history + (i / ODE_HISTORY_GROUP) * ((long long)ODE_HISTORY_GROUP
                                                   * ODE_HISTORY_NODES * ODE_HISTORY_WIDTH)
              + i % ODE_HISTORY_GROUP;
    H->t0 = t0;
    H->first = 0;
    H->count = 0;
    H->lost = false;
}

/* real j of ring slot s: 0 its time, 1 + k its x[k], 1 + ODE_NX + k its f[k] */
SBMLGPU_HD real_t* ode_history_real(const ode_history* H, int s, int j)
{
    return H->ring + (s * ODE_HISTORY_WIDTH + j) * ODE_HISTORY_GROUP;
}

SBMLGPU_HD real_t ode_history_t(const ode_history* H, int s) { return *ode_history_real(H, s, 0); }
SBMLGPU_HD real_t ode_history_x(const ode_history* H, int s, int k) { return *ode_history_real(H, s, 1 + k); }
SBMLGPU_HD real_t ode_history_f(const ode_history* H, int s, int k) { return *ode_history_real(H, s, 1 + ODE_NX + k); }

/* a node (t, x, f = x'(t)); the oldest is overwritten when the ring is full */
SBMLGPU_HD void ode_history_add(const real_t* p, real_t t, const real_t* x, const real_t* f)
{
    ode_history* H = ode_history_of(p);
    int slot;
    if (H->count < ODE_HISTORY_NODES) {
        slot = (H->first + H->count) % ODE_HISTORY_NODES;
        ++H->count;
    } else {
        slot = H->first;
        H->first = (H->first + 1) % ODE_HISTORY_NODES;
    }
    *ode_history_real(H, slot, 0) = t;
    for (int i = 0; i < ODE_NX; ++i) {
        *ode_history_real(H, slot, 1 + i) = x[i];
        *ode_history_real(H, slot, 1 + ODE_NX + i) = f[i];
    }
}

/* y = the state at tau <= t_now, (t_now, x_now) being where the caller is */
SBMLGPU_HD void ode_history_state(const real_t* p, real_t tau, real_t t_now,
                                  const real_t* x_now, real_t* y)
{
    ode_history* H = ode_history_of(p);
    if (tau < H->t0) {  /* before the start: the initial values at tau (SBML) */
        model_x0(tau, p, y);
        return;
    }
    if (tau >= t_now || H->count == 0) {
        for (int i = 0; i < ODE_NX; ++i) y[i] = x_now[i];
        return;
    }
    const int last = (H->first + H->count - 1) % ODE_HISTORY_NODES;
    const real_t t_last = ode_history_t(H, last);
    if (tau >= t_last) {  /* inside the step being taken: linear to its stage */
        const real_t span = t_now - t_last;
        const real_t w = span > ODE_R(0) ? (tau - t_last) / span : ODE_R(0);
        for (int i = 0; i < ODE_NX; ++i) {
            const real_t xl = ode_history_x(H, last, i);
            y[i] = xl + w * (x_now[i] - xl);
        }
        return;
    }
    if (tau < ode_history_t(H, H->first)) {  /* overwritten: the ring is too short for this lag */
        H->lost = true;
        for (int i = 0; i < ODE_NX; ++i) y[i] = ode_history_x(H, H->first, i);
        return;
    }
    /* the last node at or before tau (at a jump: the node after it), by bisection
       over the ring's order: t[lo] <= tau < t[hi] */
    int lo = 0, hi = H->count - 1;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (ode_history_t(H, (H->first + mid) % ODE_HISTORY_NODES) <= tau) lo = mid; else hi = mid;
    }
    const int a = (H->first + lo) % ODE_HISTORY_NODES, b = (H->first + hi) % ODE_HISTORY_NODES;
    const real_t t_a = ode_history_t(H, a);
    const real_t h = ode_history_t(H, b) - t_a;
    const real_t s = (tau - t_a) / h;
    /* cubic Hermite basis */
    const real_t h00 = (ODE_R(1) + ODE_R(2) * s) * (ODE_R(1) - s) * (ODE_R(1) - s);
    const real_t h10 = s * (ODE_R(1) - s) * (ODE_R(1) - s);
    const real_t h01 = s * s * (ODE_R(3) - ODE_R(2) * s);
    const real_t h11 = s * s * (s - ODE_R(1));
    for (int i = 0; i < ODE_NX; ++i)
        y[i] = h00 * ode_history_x(H, a, i) + h10 * h * ode_history_f(H, a, i)
             + h01 * ode_history_x(H, b, i) + h11 * h * ode_history_f(H, b, i);
}
{% for code in body.delayed %}
{% set k = loop.index0 %}

/* delayed expression {{ k }}: {{ delayed_notes[k] }}, at the past time t */
SBMLGPU_HD real_t model_delayed_{{ k }}(const real_t t, const real_t* __restrict__ x,
                                     const real_t* __restrict__ p)
{
{{ code }}
}
{% if k in body.delayed_before %}

/* delayed expression {{ k }} before the start (its rateOf on the initial values) */
SBMLGPU_HD real_t model_delayed_{{ k }}_before(const real_t t, const real_t* __restrict__ x,
                                            const real_t* __restrict__ p)
{
{{ body.delayed_before[k] }}
}
{% endif %}

/* delay(e_{{ k }}, t_now - tau) seen from (t_now, x_now) */
SBMLGPU_HD real_t ode_delayed_{{ k }}(const real_t* p, real_t tau, real_t t_now,
                                             const real_t* x_now)
{
    real_t y[ODE_NX];
    ode_history_state(p, tau, t_now, x_now, y);
{% if k in body.delayed_before %}
    if (tau < ode_history_of(p)->t0) return model_delayed_{{ k }}_before(tau, y, p);
{% endif %}
    return model_delayed_{{ k }}(tau, y, p);
}
{% endfor %}
