{#
  delay.cuh -- delay(e, d): the member's history and the delayed expressions
  (sbmlgpu.ode.delays). Included by model.cuh after model_x0, only for models with
  delay(). Context: `history_nodes` (ring capacity), `body.delayed` (one C body per
  delayed expression e_k, over its own (t, x, p): t is the past time),
  `body.delayed_before` ({k: body} of e_k before the start where it differs: rateOf
  inside delay() is the initial values' time derivative there).

  The history is a ring of Hermite nodes (t, x, f): the start, the end of every
  accepted step, and both sides of every jump (event), so that at a jump time the
  look-up sees the value after it (as the CPU reference does). It lives with the
  member's parameters (ode_params_with_history, entry.cuh): every function that
  gets p reaches it, so no signature of the model or of the methods changes. Where
  a look-up needs a node the ring has already overwritten, the member fails
  (`lost`, read by the driver after each step): a larger --history-nodes helps.
#}
/* ---- delay(): the member's history of Hermite nodes ------------------------------------ */
#define ODE_HISTORY_NODES {{ history_nodes }}

typedef struct {
    real_t t0;    /* the start: before it, the initial values at that time */
    int first;    /* ring index of the oldest node */
    int count;    /* nodes held */
    bool lost;    /* a look-up needed a node older than the oldest kept */
    real_t t[ODE_HISTORY_NODES];
    real_t x[ODE_HISTORY_NODES][ODE_NX];
    real_t f[ODE_HISTORY_NODES][ODE_NX];
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

SBMLGPU_HD void ode_history_init(ode_history* H, real_t t0)
{
    H->t0 = t0;
    H->first = 0;
    H->count = 0;
    H->lost = false;
}

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
    H->t[slot] = t;
    for (int i = 0; i < ODE_NX; ++i) { H->x[slot][i] = x[i]; H->f[slot][i] = f[i]; }
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
    if (tau >= H->t[last]) {  /* inside the step being taken: linear to its stage */
        const real_t span = t_now - H->t[last];
        const real_t w = span > ODE_R(0) ? (tau - H->t[last]) / span : ODE_R(0);
        for (int i = 0; i < ODE_NX; ++i) y[i] = H->x[last][i] + w * (x_now[i] - H->x[last][i]);
        return;
    }
    if (tau < H->t[H->first]) {  /* overwritten: the ring is too short for this lag */
        H->lost = true;
        for (int i = 0; i < ODE_NX; ++i) y[i] = H->x[H->first][i];
        return;
    }
    /* the last node at or before tau (at a jump: the node after it), by bisection
       over the ring's order: t[lo] <= tau < t[hi] */
    int lo = 0, hi = H->count - 1;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (H->t[(H->first + mid) % ODE_HISTORY_NODES] <= tau) lo = mid; else hi = mid;
    }
    const int a = (H->first + lo) % ODE_HISTORY_NODES, b = (H->first + hi) % ODE_HISTORY_NODES;
    const real_t h = H->t[b] - H->t[a];
    const real_t s = (tau - H->t[a]) / h;
    /* cubic Hermite basis */
    const real_t h00 = (ODE_R(1) + ODE_R(2) * s) * (ODE_R(1) - s) * (ODE_R(1) - s);
    const real_t h10 = s * (ODE_R(1) - s) * (ODE_R(1) - s);
    const real_t h01 = s * s * (ODE_R(3) - ODE_R(2) * s);
    const real_t h11 = s * s * (s - ODE_R(1));
    for (int i = 0; i < ODE_NX; ++i)
        y[i] = h00 * H->x[a][i] + h10 * h * H->f[a][i] + h01 * H->x[b][i] + h11 * h * H->f[b][i];
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
