{#
  events.cuh -- watched atoms and SBML events (L3V2 sec. 4.11) at one instant, the
  same rules as the CPU reference (core/reference/events.py). Included where the
  model watches atoms or has events (context `watch`); the parts for features the
  model lacks (delays, priorities, values from trigger time, non-persistent
  triggers) are left out:

  1. Every trigger is evaluated. An event whose trigger went from false to true gets
     a pending instance, due at t + its delay (evaluated now; a negative or NaN delay
     fails the member), with its assignment values fixed now if
     useValuesFromTriggerTime; the pending instances of a non-persistent event whose
     trigger is now false are dropped.
  2. While instances are due (due time <= t): execute the one with the highest
     priority (NaN counts as -infinity; equal priorities are broken at random from
     the member's Philox stream, keyed by (seed, member)); events without a priority
     come after, in the order they were triggered; then go back to 1.
  The driver stops the integration exactly at the next due time (`ode_next_due`).

  A trigger that stays true never fires again. An atom keeps the side it crossed to
  while its value stays exactly where the crossing left it (`time > 5` is true at
  t = 5 once crossed), as in the reference.
#}
/* ---- watched atoms ------------------------------------------------------------------- */
#define ODE_NO_OVERRIDE 3
#define ODE_MAX_EVENTS_PER_INSTANT 100000

typedef struct {
    signed char s[ODE_NATOMS];       /* sign classes at the current point */
    signed char forced[ODE_NATOMS];  /* side crossed to (ODE_NO_OVERRIDE: none) ... */
    real_t g_at[ODE_NATOMS];         /* ... while the atom's value is still this */
    bool crossed[ODE_NATOMS];        /* crossed zero at the current instant */
} ode_watch;

SBMLGPU_HD signed char ode_watch_sign(ode_watch* W, int a, real_t g)
{
    if (W->forced[a] != ODE_NO_OVERRIDE) {
        if (g == W->g_at[a] || (g != g && W->g_at[a] != W->g_at[a])) return W->forced[a];
        W->forced[a] = ODE_NO_OVERRIDE;
    }
    return ode_sign_class(g);
}

SBMLGPU_HD void ode_watch_signs(ode_watch* W, real_t t, const real_t* x, const real_t* p,
                                signed char* s)
{
    real_t g[ODE_NATOMS];
    model_atoms(t, x, p, g);
{{ "#pragma unroll" if natoms <= 8 else "" }}
    for (int a = 0; a < ODE_NATOMS; ++a) s[a] = ode_watch_sign(W, a, g[a]);
}
{% if events %}

/* ---- events -------------------------------------------------------------------------- */
/* An event can be triggered again while it is still pending (test suite 00978): each
   triggering is a pending instance, kept oldest first, at most ODE_PENDING_MAX per event
   (more is reported as a failure, never dropped silently). The per-event code is a
   switch; everything else loops over tables, so that models with hundreds of events
   compile quickly. */
#define ODE_PENDING_MAX {{ 16 if events | selectattr("has_delay") | list else 8 }}
{% set uvftt = events | selectattr("values_at_trigger") | selectattr("targets") | list %}
{% set prioritised = events | selectattr("has_priority") | list %}
{% set transient = events | rejectattr("persistent") | list %}
{% set ns = namespace(offset=0) %}

typedef struct {
    bool prev[ODE_NEVENTS];              /* trigger values after the last instant */
    int count[ODE_NEVENTS];              /* pending instances */
    int seq[ODE_NEVENTS][ODE_PENDING_MAX]; /* order of triggering of each instance */
{% if delayed %}
    real_t due[ODE_NEVENTS][ODE_PENDING_MAX]; /* when each instance executes */
{% endif %}
    int next_seq;
    bool overflow;
    bool bad_delay;
{% if uvftt %}
    real_t v[{{ (uvftt | map(attribute="targets") | map("length") | sum) * 8 }}]; /* values fixed at trigger time, per instance */
{% endif %}
{% if needs_rng %}
    sbmlgpu_rng_t rng;
    bool rng_ready;
    unsigned long long seed, member;
{% endif %}
{% if draws %}
    sbmlgpu_draws_t* draws; /* the member's distrib draws (ode_solve's) */
{% endif %}
} ode_events;

{% if uvftt %}
/* where event e keeps the values of its pending instances in E->v (-1: none) */
SBMLGPU_HD int ode_value_offset(int e)
{
    switch (e) {
{% for e in uvftt %}
    case {{ e.index }}: return {{ ns.offset }};  /* {{ e.id }} */
{% set ns.offset = ns.offset + (e.targets | length) * 8 %}
{% endfor %}
    default: return -1;
    }
}

SBMLGPU_HD int ode_event_size(int e)
{
    switch (e) {
{% for e in events if e.targets %}
    case {{ e.index }}: return {{ e.targets | length }};
{% endfor %}
    default: return 0;
    }
}
{% endif %}

{% if transient %}
SBMLGPU_HD bool ode_event_persistent(int e)
{
    switch (e) {
{% for e in transient %}
    case {{ e.index }}:  /* {{ e.id }} */
{% endfor %}
        return false;
    default: return true;
    }
}
{% endif %}

/* the new values of event e at (t, x) into v */
SBMLGPU_HD void ode_event_values(int e, real_t t, const real_t* x, const real_t* p, real_t* v
                                 ODE_DRAWS_PARAM)
{
    switch (e) {
{% for e in events if e.targets %}
    case {{ e.index }}: model_event_values_{{ e.index }}(t, x, p, v ODE_DRAWS(sbmlgpu_draws)); break;  /* {{ e.id }} */
{% endfor %}
    default: break;
    }
}

{% if prioritised %}

/* 1 and the priority of event e in *value, or 0 for an event without priority */
SBMLGPU_HD int ode_event_priority(int e, real_t t, const real_t* x, const real_t* p, real_t* value)
{
    switch (e) {
{% for e in prioritised %}
    case {{ e.index }}: *value = model_event_priority_{{ e.index }}(t, x, p); return 1;  /* {{ e.id }} */
{% endfor %}
    default: return 0;
    }
}
{% endif %}
{% if delayed %}

/* 1 and event e's delay at (t, x) in *value, or 0 for an event without delay */
SBMLGPU_HD int ode_event_delay(int e, real_t t, const real_t* x, const real_t* p, real_t* value)
{
    switch (e) {
{% for e in events if e.has_delay %}
    case {{ e.index }}: *value = model_event_delay_{{ e.index }}(t, x, p); return 1;  /* {{ e.id }} */
{% endfor %}
    default: return 0;
    }
}
{% endif %}

/* is instance `slot` of event e due at t? */
SBMLGPU_HD bool ode_is_due(const ode_events* E, int e, int slot, real_t t)
{
{% if delayed %}
    return E->due[e][slot] <= t;
{% else %}
    (void)E; (void)e; (void)slot; (void)t;
    return true;
{% endif %}
}

{% if delayed %}

/* the earliest due time of a pending instance (INFINITY: none) */
SBMLGPU_HD real_t ode_next_due(const ode_events* E)
{
    real_t next = INFINITY;
    for (int e = 0; e < ODE_NEVENTS; ++e)
        for (int k = 0; k < E->count[e]; ++k) next = ODE_MIN(next, E->due[e][k]);
    return next;
}
{% endif %}

SBMLGPU_HD void ode_events_init(ode_events* E, const ode_config* cfg, unsigned long long member)
{
{% if not needs_rng %}
    (void)cfg; (void)member;
{% endif %}
    for (int e = 0; e < ODE_NEVENTS; ++e) { E->prev[e] = false; E->count[e] = 0; }
{% for e in events if e.initial_value %}
    E->prev[{{ e.index }}] = true;  /* {{ e.id }} */
{% endfor %}
    E->next_seq = 0;
    E->overflow = false;
    E->bad_delay = false;
{% if needs_rng %}
    E->rng_ready = false;
    E->seed = cfg->seed;
    E->member = member;
{% endif %}
}

/* Triggers at (t, x). `at_crossing`: during the instant of a crossing, == and != of
   the atoms that crossed see them at zero (as the CPU reference does); after the
   instant they see their true side. */
SBMLGPU_HD void ode_triggers(ode_watch* W, real_t t, const real_t* x, const real_t* p,
                             bool* trig, bool at_crossing)
{
    signed char s[ODE_NATOMS];
    bool eqz[ODE_NATOMS];
    ode_watch_signs(W, t, x, p, s);
    for (int a = 0; a < ODE_NATOMS; ++a)
        eqz[a] = at_crossing && W->crossed[a] && W->forced[a] != ODE_NO_OVERRIDE;
    bool b[{{ [uses | length, 1] | max }}];
    model_uses(s, eqz, b);
    model_triggers(t, x, p, b, trig);
}

SBMLGPU_HD void ode_transitions(ode_events* E, const bool* trig, real_t t, const real_t* x,
                                const real_t* p)
{
    for (int e = 0; e < ODE_NEVENTS; ++e) {
        if (trig[e] && !E->prev[e]) {
            const int slot = E->count[e];
            if (slot == ODE_PENDING_MAX) {
                E->overflow = true;
            } else {
                E->seq[e][slot] = E->next_seq++;
{% if delayed %}
                real_t delay = ODE_R(0);
                if (ode_event_delay(e, t, x, p, &delay) && !(delay >= ODE_R(0)))
                    E->bad_delay = true;  /* SBML requires a delay >= 0 */
                E->due[e][slot] = t + delay;
{% endif %}
{% if uvftt %}
                const int offset = ode_value_offset(e);
                if (offset >= 0)
                    ode_event_values(e, t, x, p, E->v + offset + slot * ode_event_size(e) ODE_DRAWS(E->draws));
{% endif %}
                E->count[e] = slot + 1;
            }
        }
        E->prev[e] = trig[e];
{% if transient %}
        if (!trig[e] && !ode_event_persistent(e)) E->count[e] = 0;
{% endif %}
    }
}

/* The pending instance to execute next: event (return value, -1: none) and slot. */
SBMLGPU_HD int ode_choose(ode_events* E, real_t t, const real_t* x, const real_t* p, int* slot)
{
    int best = -1;
    *slot = 0;
{% if prioritised %}
    real_t best_priority = ODE_R(0);
    real_t priority[ODE_NEVENTS];
    bool prioritised[ODE_NEVENTS];
    int n_due[ODE_NEVENTS];
    for (int e = 0; e < ODE_NEVENTS; ++e) {
        prioritised[e] = false;
        n_due[e] = 0;
        for (int k = 0; k < E->count[e]; ++k) n_due[e] += ode_is_due(E, e, k, t) ? 1 : 0;
        if (n_due[e] == 0) continue;
        real_t v;
        if (!ode_event_priority(e, t, x, p, &v)) continue;
        if (v != v) v = -INFINITY;
        prioritised[e] = true;
        priority[e] = v;
        if (best < 0 || v > best_priority) { best = e; best_priority = v; }
    }
    if (best >= 0) {
        int n_tied = 0;
        for (int e = 0; e < ODE_NEVENTS; ++e)
            if (prioritised[e] && priority[e] == best_priority) n_tied += n_due[e];
        if (n_tied > 1) {
            /* SBML: equal priorities execute in random order. The tied instances in the
               order they were triggered; one drawn from the member's stream. */
{% if needs_rng %}
            if (!E->rng_ready) {
                sbmlgpu_rng_init(&E->rng, E->seed, E->member, 0);
                E->rng_ready = true;
            }
            const uint32_t u = sbmlgpu_rng_u32(&E->rng);
            const int pick = (int)(((uint64_t)u * (uint64_t)n_tied) >> 32);
{% else %}
            const int pick = 0;
{% endif %}
            /* the pick-th smallest sequence number among the tied instances */
            int last = -1;
            for (int r = 0; r <= pick; ++r) {
                int next = -1;
                for (int e = 0; e < ODE_NEVENTS; ++e) {
                    if (!prioritised[e] || priority[e] != best_priority) continue;
                    for (int k = 0; k < E->count[e]; ++k) {
                        if (!ode_is_due(E, e, k, t)) continue;
                        const int s = E->seq[e][k];
                        if (s > last && (next < 0 || s < next)) { next = s; best = e; *slot = k; }
                    }
                }
                last = next;
            }
        }
        if (n_tied == 1) {  /* the one due instance of `best` */
            for (int k = 0; k < E->count[best]; ++k)
                if (ode_is_due(E, best, k, t)) { *slot = k; break; }
        }
        return best;
    }
{% else %}
    (void)x; (void)p;
{% endif %}
    /* no prioritised event due: the earliest triggered due instance */
    int best_seq = 0;
    for (int e = 0; e < ODE_NEVENTS; ++e) {
        for (int k = 0; k < E->count[e]; ++k) {
            if (ode_is_due(E, e, k, t) && (best < 0 || E->seq[e][k] < best_seq)) {
                best = e; best_seq = E->seq[e][k]; *slot = k;
            }
        }
    }
    return best;
}

/* Execute instance `slot` of event e (all its values are computed before any is
   assigned) and remove it from the pending ones. */
SBMLGPU_HD void ode_execute(ode_events* E, int e, int slot, real_t t, real_t* x, const real_t* p)
{
    real_t v[{{ [events | map(attribute="targets") | map("length") | max, 1] | max }}];
{% if uvftt %}
    const int size = ode_event_size(e);
    const int offset = ode_value_offset(e);
    if (offset >= 0) {
        real_t* stored = E->v + offset;
        for (int k = 0; k < size; ++k) v[k] = stored[slot * size + k];
        for (int q = slot; q + 1 < E->count[e]; ++q)
            for (int k = 0; k < size; ++k) stored[q * size + k] = stored[(q + 1) * size + k];
    } else {
        ode_event_values(e, t, x, p, v ODE_DRAWS(E->draws));
    }
{% else %}
    ode_event_values(e, t, x, p, v ODE_DRAWS(E->draws));
{% endif %}
    switch (e) {
{% for e in events if e.targets %}
    case {{ e.index }}:  /* {{ e.id }} */
{% for target in e.targets %}
        x[{{ target }}] = v[{{ loop.index0 }}];
{% endfor %}
        break;
{% endfor %}
    default:
        break;
    }
    for (int q = slot; q + 1 < E->count[e]; ++q) {
        E->seq[e][q] = E->seq[e][q + 1];
{% if delayed %}
        E->due[e][q] = E->due[e][q + 1];
{% endif %}
    }
    E->count[e] -= 1;
}

/* The instant at time t (see the top of this file). Returns a status. Not inlined:
   it is called at t0 and at every crossing, and can be large. */
__host__ __device__ ODE_NOINLINE
int ode_instant(ode_events* E, ode_watch* W, real_t t, real_t* x, const real_t* p)
{
    bool trig[ODE_NEVENTS];
    bool at_crossing = false;
    for (int a = 0; a < ODE_NATOMS; ++a) at_crossing = at_crossing || W->crossed[a];
    ode_triggers(W, t, x, p, trig, at_crossing);
    ode_transitions(E, trig, t, x, p);
    for (int count = 0;; ++count) {
        if (E->overflow || E->bad_delay) return SBMLGPU_STATUS_FAILED;  /* too many pending instances, or a negative delay */
{% if draws %}
        if (E->draws->bad) return SBMLGPU_STATUS_FAILED;  /* a distrib draw with invalid arguments */
{% endif %}
        int slot;
        const int e = ode_choose(E, t, x, p, &slot);
        if (e < 0) {
            if (!at_crossing) return SBMLGPU_STATUS_OK;
            /* nothing more is due: the triggers as they stand after the instant */
            at_crossing = false;
            ode_triggers(W, t, x, p, trig, false);
            ode_transitions(E, trig, t, x, p);
            continue;
        }
        if (count >= ODE_MAX_EVENTS_PER_INSTANT) return SBMLGPU_STATUS_FAILED;  /* events trigger each other without end */
        ode_execute(E, e, slot, t, x, p);
        ode_triggers(W, t, x, p, trig, at_crossing);
        ode_transitions(E, trig, t, x, p);
    }
}
{% endif %}
