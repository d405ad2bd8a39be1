{#
  driver.cuh -- one trajectory from times[0] to times[n_times - 1]: steps, outputs,
  watched atoms and events, status.

  The outputs y (model_outputs) at output time k go to the member's sink:
  ode_sink_store(&sink, k, y), and ode_sink_invalid(&sink, k) for the output times
  a failed member never reached. The sink (type ode_sink) comes from an output-sink
  template included before this one (sink_trajectory.cuh: the values; sink_bins.cuh:
  their bin indices).

  Adaptive methods never step onto an output time: outputs inside a step come from
  the method's continuous extension (the end time is the integration's end, so the
  last step ends there). rk4 splits each output interval into equal steps.

  Atoms are checked at the end of every accepted step; where one changed sign, the
  crossing is located by bisection on the continuous extension to the last
  representable time, the state there is taken from the extension (so the root
  finder and the state agree), the events' instant runs, and the method restarts
  from there. With atoms, adaptive steps are at most 1/max(n_times - 1, 50) of the
  time span (as in the CPU reference), so that a trigger that turns on and off
  within one step is still seen.

  Switches of f in time alone (atoms of piecewise conditions of time and parameters
  inside the right-hand side, context `time_switches`) are where f jumps at a time
  known without integrating: a step across one has stages on both sides, its error
  estimate sees the jump, and the step size shrinks until it underflows (a stiff
  system switched on mid-step). So a step never crosses one: before each step the
  switch is searched in (t, t + h] by bisection on the atoms, and the step ends at
  the last time on the old side; the next "step" moves t to the switch and the
  crossing restarts the method there, as after an event. Switches that depend on the
  state are located after the step on its extension, as event triggers are.

  Before each step the limits are checked: --max-steps over the whole integration,
  then limits.cuh's steps per output interval and wall time (rk4 without atoms: the
  wall time once per output interval).
#}
{# a few atoms: loops over them unrolled (registers); many: loops #}
{% set adaptive = method != "rk4" %}
{% set UNROLL_ATOMS = "#pragma unroll" if natoms <= 8 else "" %}
{% include "sbmlgpu.ode:limits.cuh" %}

/* ---- the driver ---------------------------------------------------------------------- */

/* the outputs at (t, x) as output time k */
{{ "SBMLGPU_HD" if unroll_outputs else "__host__ __device__ ODE_NOINLINE" }} void ode_write(real_t t, const real_t* x, const real_t* p,
                          const ode_sink sink, int k)
{
    real_t y[ODE_NOUT];
    model_outputs(t, x, p, y);
    ode_sink_store(&sink, k, y);
}

SBMLGPU_HD bool ode_all_finite(const real_t* x)
{
    bool ok = true;
{{ unroll }}
    for (int i = 0; i < ODE_NX; ++i) ok = ok && ode_finite(x[i]);
    return ok;
}
{% if history and adaptive and history_states %}

/* delay(): how far the history's cubic Hermite interpolant of the step just taken
   (delay.cuh keeps its nodes (t, x, f)) is from the method's own continuous
   extension at the step's midpoint, in units of the tolerance (the error norm's),
   over the states some delayed expression reads (`history_states`: a stiff state
   that no look-up reads would hold the steps to its own time scale for nothing). The
   method's error estimate says nothing of the interpolant: on a solution it finds
   smooth (a polynomial piece, as x' = -x(t - tau) has) steps grow long, and look-ups
   between the nodes of such a step were off by 1e-3 at rtol 1e-8 after five lags. The
   driver rejects a step whose interpolant is off by more than the tolerance, as the
   method rejects one whose error is. One point, the midpoint, where a cubic's and a
   quartic's difference of this form is largest: an estimate, not a bound. */
SBMLGPU_HD real_t ode_history_error(const ode_stepper* S, real_t h, const ode_config* cfg)
{
    const int history_state[{{ history_states | length }}] = { {{ history_states | join(", ") }} };
    real_t y[ODE_NX];
    ode_dense(S, ODE_R(0.5), h, y);
    real_t err = ODE_R(0);
{{ unroll }}
    for (int q = 0; q < {{ history_states | length }}; ++q) {
        const int i = history_state[q];
        const real_t hermite = ODE_R(0.5) * (S->x[i] + S->xn[i])
                             + ODE_R(0.125) * h * (S->f[i] - S->fn[i]);
        const real_t sk = ODE_ATOL_AT(S->atol, i, cfg)
                         + cfg->rtol * ODE_MAX(ODE_ABS(S->x[i]), ODE_ABS(S->xn[i]));
        const real_t d = (y[i] - hermite) / sk;
        err += d * d;
    }
    return ODE_SQRT(err / ODE_R({{ history_states | length }}));
}
{% endif %}

{% if tight_rk4 %}
/* rk4 without atoms: the tight loop (as a hand-written kernel would be). NaN and inf
   propagate, so a non-finite state is checked once per output interval. */
SBMLGPU_HD int ode_solve(const real_t* p, const real_t* __restrict__ times, int n_times,
                         const ode_sink sink, const ode_config cfg, int* steps_taken,
                         unsigned long long member)
{
    (void)member;
    ode_limit_state L;
    ode_limits_start(&L, &cfg);
    ode_stepper S;
    real_t t = times[0];
{% if draws %}
    sbmlgpu_draws_t D; /* distrib draws: the member's own stream (distrib.cuh) */
    sbmlgpu_draws_init(&D, cfg.seed, member);
{% endif %}
    model_x0(t, p, S.x ODE_DRAWS(&D));
    int status = ode_all_finite(S.x) ? SBMLGPU_STATUS_OK : SBMLGPU_STATUS_NON_FINITE;
{% if draws %}
    if (D.bad) status = SBMLGPU_STATUS_FAILED;  /* a draw with invalid arguments */
{% endif %}
    long long steps = 0;
    int k = 0;
    while (k < n_times && times[k] <= t) { ode_write(t, S.x, p, sink, k); ++k; }
    if (status == SBMLGPU_STATUS_OK && k < n_times) ode_start(&S, t, p, &cfg, times[n_times - 1]);
    for (; status == SBMLGPU_STATUS_OK && k < n_times; ++k) {
        const real_t T = times[k];
        if (T > t) {
            const real_t span = T - t;
            real_t count = ODE_CEIL(span / cfg.dt * (ODE_R(1) - ODE_R(16) * ODE_UROUND));
            const int n = count < ODE_R(1) ? 1 : (int)count;
            if (!(count < ODE_R(2147483647)) || steps + n > cfg.max_steps) {
                status = SBMLGPU_STATUS_MAX_STEPS;
                break;
            }
            /* the wall-time limit, once per output interval (its steps are known) */
            if (ode_past_time_limit(&L, &cfg)) { status = SBMLGPU_STATUS_TIME_LIMIT; break; }
            const real_t h = span / (real_t)n;
            const real_t t_start = t;
            for (int m = 0; m < n; ++m) {
                ode_step(&S, t_start + (real_t)m * h, h, p, &cfg, false);
                ode_accept(&S);
            }
            t = T;
            steps += n;
            if (!ode_all_finite(S.x)) { status = SBMLGPU_STATUS_NON_FINITE; break; }
        }
        ode_write(t, S.x, p, sink, k);
    }
    for (; k < n_times; ++k) ode_sink_invalid(&sink, k);
    *steps_taken = steps > 2147483647LL ? 2147483647 : (int)steps;
    return status;
}
{% else %}
{#
  The general driver in pieces, so that it runs either as one call per member
  (ode_solve) or a step at a time on a lane that takes the next member when its own
  ends (the ode_lane functions below, with `refill`): the member's state between
  steps (`lane_state`: one list, declared as locals or as the lane's fields), its
  start (`solve_begin`), one pass of the stepping loop (`solve_step`: `break` leaves
  with a status other than OK, `continue` goes on with the next step) and its end.
#}
{% set lane_state = [
    ("ode_limit_state", "L", true), ("ode_stepper", "S", true), ("real_t", "t", true),
    ("real_t", "t_end", true), ("sbmlgpu_draws_t", "D", draws), ("int", "status", true),
    ("long long", "steps", true), ("int", "k", true), ("ode_watch", "W", watch),
    ("ode_events", "E", events), ("real_t", "t_due", delayed), ("real_t", "hmax", adaptive),
    ("int", "grid_n", not adaptive), ("int", "grid_m", not adaptive),
    ("real_t", "grid_h", not adaptive), ("real_t", "grid_start", not adaptive),
    ("real_t", "grid_end", not adaptive)] %}
{% set solve_begin %}
    ode_limits_start(&L, &cfg);
    t = times[0];
    t_end = times[n_times - 1];
{% if draws %}
    sbmlgpu_draws_init(&D, cfg.seed, member); /* distrib draws: the member's own stream (distrib.cuh) */
{% endif %}
    model_x0(t, p, S.x ODE_DRAWS(&D));
    status = ode_all_finite(S.x) ? SBMLGPU_STATUS_OK : SBMLGPU_STATUS_NON_FINITE;
{% if draws %}
    if (D.bad) status = SBMLGPU_STATUS_FAILED;  /* a draw with invalid arguments */
{% endif %}
{% if fast %}
    if (status == SBMLGPU_STATUS_OK) status = ode_relax(t, S.x, p, &cfg);  /* fast reactions */
{% endif %}
    steps = 0;
    k = 0;
{% if watch %}
{{ UNROLL_ATOMS }}
    for (int a = 0; a < ODE_NATOMS; ++a) {
        W.forced[a] = ODE_NO_OVERRIDE; W.g_at[a] = ODE_R(0); W.crossed[a] = false;
    }
{% if events %}
    ode_events_init(&E, &cfg, member);
{% if draws %}
    E.draws = &D;
{% endif %}
    if (status == SBMLGPU_STATUS_OK) status = ode_instant(&E, &W, t, S.x, p);  /* triggers at t0 */
{% if fast %}
    if (status == SBMLGPU_STATUS_OK) status = ode_relax(t, S.x, p, &cfg);
{% endif %}
    if (status == SBMLGPU_STATUS_OK && !ode_all_finite(S.x)) status = SBMLGPU_STATUS_NON_FINITE;
{% endif %}
{% if delayed %}
    t_due = ode_next_due(&E);  /* the next delayed execution (INFINITY: none) */
{% endif %}
    ode_watch_signs(&W, t, S.x, p, W.s);
{% endif %}
    if (status == SBMLGPU_STATUS_OK) {
        while (k < n_times && times[k] <= t) { ode_write(t, S.x, p, sink, k); ++k; }
        if (k < n_times) ode_start(&S, t, p, &cfg, t_end);
{% if history %}
        ode_history_add(p, t, S.x, S.f);  /* delay(): the first node */
{% endif %}
    }
{% if adaptive %}
    hmax = t_end - t;
    if (cfg.max_step > ODE_R(0)) hmax = ODE_MIN(hmax, cfg.max_step);
{% if natoms %}
    hmax = ODE_MIN(hmax, (t_end - t) / (real_t)(n_times - 1 > 50 ? n_times - 1 : 50));
{% endif %}
{% if shortest_lag %}
    hmax = ODE_MIN(hmax, ODE_R({{ shortest_lag | float }}));  /* stages look up known history */
{% endif %}
{% else %}
    grid_n = 0; grid_m = 0;
    grid_h = ODE_R(0); grid_start = t; grid_end = t;
{% endif %}
{% endset %}
{% set solve_end %}
    for (; k < n_times; ++k) ode_sink_invalid(&sink, k);
    *steps_taken = steps > 2147483647LL ? 2147483647 : (int)steps;
{% endset %}
{% set solve_step %}
        real_t t_new, h;
{% if adaptive %}
        h = ODE_MIN(S.h, hmax);
        real_t t_stop = t_end;
{% if delayed %}
        if (t_due < t_stop) t_stop = t_due;  /* stop exactly where a delayed event is due */
{% endif %}
        t_new = (t + ODE_R(1.01) * h >= t_stop) ? t_stop : t + h;
        h = t_new - t;
        if (!(ODE_R(0.1) * h > ODE_ABS(t) * ODE_UROUND)) { status = SBMLGPU_STATUS_STEP_SIZE_UNDERFLOW; break; }
{% else %}
        if (grid_m == grid_n) {  /* a new interval: from t to the next output time */
            grid_end = times[k];
{% if delayed %}
            if (t_due < grid_end) grid_end = t_due;  /* ... or to a delayed event */
{% endif %}
            const real_t span = grid_end - t;
            real_t count = ODE_CEIL(span / cfg.dt * (ODE_R(1) - ODE_R(16) * ODE_UROUND));
            if (!(count < ODE_R(2147483647))) { status = SBMLGPU_STATUS_MAX_STEPS; break; }
            grid_n = count < ODE_R(1) ? 1 : (int)count;
            grid_h = span / (real_t)grid_n;
            grid_start = t;
            grid_m = 0;
        }
        ++grid_m;
        t_new = grid_m == grid_n ? grid_end : grid_start + (real_t)grid_m * grid_h;
        h = t_new - t;
{% endif %}
        if (steps >= cfg.max_steps) { status = SBMLGPU_STATUS_MAX_STEPS; break; }
        status = ode_limits_check(&L, &cfg, k, steps);  /* per interval, wall time */
        if (status != SBMLGPU_STATUS_OK) break;
        ++steps;
{% if time_switches %}
        /* a switch of f in time alone inside (t, t_new]: the step ends at the last time
           before it, so that no stage sees f's other side (a step across it is
           rejected again and again until the step size underflows). Where the switch
           is at the very next representable time, the "step" only moves t there, and
           the crossing below restarts the method on the new side. */
        bool at_switch = false;
        {
            const int time_switch[{{ time_switches | length }}] = { {{ time_switches | join(", ") }} };
            real_t g_end[ODE_NATOMS], g[ODE_NATOMS];
            model_atoms(t_new, S.x, p, g_end);  /* these atoms do not depend on x */
            bool found = false;
            real_t lo_first = t, hi_first = t_new;  /* the earliest crossing's bracket */
            for (int q = 0; q < {{ time_switches | length }}; ++q) {
                const int a = time_switch[q];
                /* a switch exactly at the end of the integration (g = 0 at t_end, e.g.
                   a dose that stops at the last output time): nothing lies beyond it,
                   so the step ends there as it is (cutting it would leave a step of
                   length zero at t_end, which reads as an underflow) */
                if (ode_sign_class(g_end[a]) == W.s[a] ||
                    (g_end[a] == ODE_R(0) && t_new == t_end)) continue;
                real_t lo = t, hi = t_new;
                for (int it = 0; it < 2100; ++it) {
                    const real_t mid = lo + ODE_R(0.5) * (hi - lo);
                    if (!(mid > lo && mid < hi)) break;
                    model_atoms(mid, S.x, p, g);
                    if (ode_sign_class(g[a]) == W.s[a]) lo = mid; else hi = mid;
                }
                if (!found || hi < hi_first) { lo_first = lo; hi_first = hi; }
                found = true;
            }
            if (found) {
                if (lo_first > t) {
                    t_new = lo_first;
{% if not adaptive %}
                    grid_m = grid_n;  /* then a new grid from here to the next output */
{% endif %}
                } else {
                    t_new = hi_first;
                    at_switch = true;
                }
                h = t_new - t;
            }
        }
        if (at_switch) {
{{ unroll }}
            for (int i = 0; i < ODE_NX; ++i) { S.xn[i] = S.x[i]; S.fn[i] = S.f[i]; }
        } else
{% endif %}
        if (ode_step(&S, t, h, p, &cfg, false) != 1) {
            if (!(ODE_R(0.1) * S.h > ODE_ABS(t) * ODE_UROUND)) {
                status = S.nonfinite ? SBMLGPU_STATUS_NON_FINITE : SBMLGPU_STATUS_STEP_SIZE_UNDERFLOW;
                break;
            }
            continue;
        }
{% if history and adaptive and history_states %}
{% if time_switches %}
        if (!at_switch)
{% endif %}
        {
            /* the history's interpolant of this step within the tolerance, else the
               step again shorter (its error is O(h^4)); where it passes, the next
               step grows no further than the interpolant allows */
            const real_t e = ode_history_error(&S, h, &cfg);
            if (!(e <= ODE_R(1))) {  /* NaN too: a much smaller step, as the method's */
                S.nonfinite = !ode_finite(e);
                S.h = h * ODE_MAX(ODE_R(0.2), ODE_R(0.9) * ODE_POW(e, ODE_R(-0.25)));
                S.reject = true;
                if (!(ODE_R(0.1) * S.h > ODE_ABS(t) * ODE_UROUND)) {
                    status = S.nonfinite ? SBMLGPU_STATUS_NON_FINITE : SBMLGPU_STATUS_STEP_SIZE_UNDERFLOW;
                    break;
                }
                continue;
            }
            S.h = ODE_MIN(S.h, h * ODE_MIN(ODE_R(10), ODE_R(0.9) * ODE_POW(e, ODE_R(-0.25))));
        }
{% endif %}
{% if natoms %}
        {
            real_t g[ODE_NATOMS];
            signed char s_new[ODE_NATOMS];
            bool crossed = false;
            model_atoms(t_new, S.xn, p, g);
{{ UNROLL_ATOMS }}
            for (int a = 0; a < ODE_NATOMS; ++a) {
                s_new[a] = ode_watch_sign(&W, a, g[a]);
                crossed = crossed || s_new[a] != W.s[a];
            }
            if (crossed) {
                /* the earliest crossing, by bisection on the continuous extension */
                real_t root[ODE_NATOMS];
                real_t tau = t_new;
                real_t y[ODE_NX], gy[ODE_NATOMS];
{{ UNROLL_ATOMS }}
                for (int a = 0; a < ODE_NATOMS; ++a) {
                    root[a] = t_new;
                    if (s_new[a] == W.s[a]) continue;
                    real_t lo = t, hi = t_new;
                    for (int it = 0; it < 2100; ++it) {
                        const real_t mid = lo + ODE_R(0.5) * (hi - lo);
                        if (!(mid > lo && mid < hi)) break;
                        ode_dense(&S, (mid - t) / h, h, y);
                        model_atoms(mid, y, p, gy);
                        if (ode_sign_class(gy[a]) == W.s[a]) lo = mid; else hi = mid;
                    }
                    root[a] = hi;
                    if (hi < tau) tau = hi;
                }
                /* outputs before the crossing, from the extension */
                while (k < n_times && times[k] < tau) {
                    ode_dense(&S, (times[k] - t) / h, h, y);
                    ode_write(times[k], y, p, sink, k);
                    ++k;
                }
                if (tau < t_new) ode_dense(&S, (tau - t) / h, h, y);
                else {
{{ unroll }}
                    for (int i = 0; i < ODE_NX; ++i) y[i] = S.xn[i];
                }
{{ unroll }}
                for (int i = 0; i < ODE_NX; ++i) S.x[i] = y[i];
                t = tau;
{% if history %}
                { real_t fy[ODE_NX]; model_rhs(t, S.x, p, fy); ode_history_add(p, t, S.x, fy); }
{% endif %}
                /* atoms that crossed here are on their new side at this instant */
                model_atoms(t, S.x, p, gy);
{{ UNROLL_ATOMS }}
                for (int a = 0; a < ODE_NATOMS; ++a) {
                    W.crossed[a] = s_new[a] != W.s[a] && root[a] == tau;
                    if (W.crossed[a]) {
                        W.forced[a] = s_new[a];
                        W.g_at[a] = gy[a];
                    }
                }
{% if events %}
                status = ode_instant(&E, &W, t, S.x, p);
{% if fast %}
                if (status == SBMLGPU_STATUS_OK) status = ode_relax(t, S.x, p, &cfg);
{% endif %}
{{ UNROLL_ATOMS }}
                for (int a = 0; a < ODE_NATOMS; ++a) W.crossed[a] = false;
                if (status != SBMLGPU_STATUS_OK) break;
{% endif %}
                if (!ode_all_finite(S.x)) { status = SBMLGPU_STATUS_NON_FINITE; break; }
{% if delayed %}
                t_due = ode_next_due(&E);
{% endif %}
                ode_watch_signs(&W, t, S.x, p, W.s);
                ode_restart(&S, t, p);
{% if history %}
                ode_history_add(p, t, S.x, S.f);  /* the side after the jump */
{% endif %}
                while (k < n_times && times[k] <= t) { ode_write(t, S.x, p, sink, k); ++k; }
{% if not adaptive %}
                grid_m = grid_n;  /* a new grid from the crossing to the next output */
{% endif %}
                continue;
            }
{{ UNROLL_ATOMS }}
            for (int a = 0; a < ODE_NATOMS; ++a) W.s[a] = s_new[a];
        }
{% endif %}
{% if delayed %}
        const bool at_due = t_new >= t_due;  /* a delayed event executes at the step's end */
        /* outputs in (t, t_new]: the step's end itself, or its extension; at a due
           event, outputs at t_new come after its instant */
        while (k < n_times && (times[k] < t_new || (times[k] == t_new && !at_due))) {
{% else %}
        /* outputs in (t, t_new]: the step's end itself, or its extension */
        while (k < n_times && times[k] <= t_new) {
{% endif %}
            if (times[k] == t_new) {
                ode_write(t_new, S.xn, p, sink, k);
            } else {
                real_t y[ODE_NX];
                ode_dense(&S, (times[k] - t) / h, h, y);
                ode_write(times[k], y, p, sink, k);
            }
            ++k;
        }
        t = t_new;
{% if history %}
        ode_history_add(p, t, S.xn, S.fn);
        if (ode_history_of(p)->lost) { status = SBMLGPU_STATUS_FAILED; break; }  /* ring too short */
{% endif %}
        ode_accept(&S);
{% if not adaptive %}
        if (grid_m == grid_n && !ode_all_finite(S.x)) { status = SBMLGPU_STATUS_NON_FINITE; break; }
{% endif %}
{% if delayed %}
        if (at_due) {
            status = ode_instant(&E, &W, t, S.x, p);
{% if fast %}
            if (status == SBMLGPU_STATUS_OK) status = ode_relax(t, S.x, p, &cfg);
{% endif %}
            if (status != SBMLGPU_STATUS_OK) break;
            if (!ode_all_finite(S.x)) { status = SBMLGPU_STATUS_NON_FINITE; break; }
            t_due = ode_next_due(&E);
            ode_watch_signs(&W, t, S.x, p, W.s);
            ode_restart(&S, t, p);
{% if history %}
            ode_history_add(p, t, S.x, S.f);  /* the side after the jump */
{% endif %}
            while (k < n_times && times[k] <= t) { ode_write(t, S.x, p, sink, k); ++k; }
{% if not adaptive %}
            grid_m = grid_n;
{% endif %}
        }
{% endif %}
{% endset %}
SBMLGPU_HD int ode_solve(const real_t* p, const real_t* __restrict__ times, int n_times,
                         const ode_sink sink, const ode_config cfg, int* steps_taken,
                         unsigned long long member)
{
{% if not events and not draws %}
    (void)member;
{% endif %}
{% for type, name, on in lane_state if on %}
    {{ type }} {{ name }};
{% endfor %}
{{ solve_begin -}}
    while (status == SBMLGPU_STATUS_OK && k < n_times) {
{{ solve_step -}}
    }
{{ solve_end -}}
    return status;
}
{% endif %}
{% if refill_lanes %}

/* ---- a lane that takes one member after another --------------------------------------- */
/* Everything a member's integration keeps from one step to the next, so that a thread
   can step it one pass of the loop at a time and start the next member as soon as this
   one ends (entry.cuh's refill kernel), instead of idling until its warp's slowest
   member ends. The fields are ode_solve's locals (`lane_state`). */
typedef struct {
    long long i;                 /* launch index: where status and steps go */
    unsigned long long member;   /* the member's number (event tie-breaks, draws) */
    int own_times;               /* its output times (limits.cuh's ode_member_times) */
    ode_sink sink;
{% if history %}
    ode_params_with_history P;   /* p, then the member's delay() history (delay.cuh) */
{% else %}
    real_t p[ODE_NP];
{% endif %}
{% for type, name, on in lane_state if on %}
    {{ type }} {{ name }};
{% endfor %}
} ode_lane;

{# ode_solve's names for the lane's fields, so that its pieces read them unchanged #}
{% set lane_view %}
    [[maybe_unused]] const real_t* p = M->{{ "P.p" if history else "p" }};
    [[maybe_unused]] const ode_sink sink = M->sink;
{% for type, name, on in lane_state if on %}
    [[maybe_unused]] {{ type }}& {{ name }} = M->{{ name }};
{% endfor %}
{% endset %}
SBMLGPU_HD bool ode_lane_running(const ode_lane* M, int n_times)
{
    return M->status == SBMLGPU_STATUS_OK && M->k < n_times;
}

/* the member's start (M->i, member, sink and p set: entry.cuh's ode_lane_load) */
SBMLGPU_HD void ode_lane_begin(ode_lane* M, const real_t* __restrict__ times, int n_times,
                               const ode_config cfg)
{
    [[maybe_unused]] const unsigned long long member = M->member;
{{ lane_view -}}
{{ solve_begin -}}
}

/* one pass of ode_solve's stepping loop (while ode_lane_running) */
SBMLGPU_HD void ode_lane_step(ode_lane* M, const real_t* __restrict__ times, int n_times,
                              const ode_config cfg)
{
{{ lane_view -}}
    do {
{{ solve_step -}}
    } while (0);
}

/* the member's end: outputs it never reached, then its status and steps */
SBMLGPU_HD void ode_lane_end(ode_lane* M, int n_times, signed char* __restrict__ status_out,
                             int* __restrict__ steps_out)
{
{{ lane_view -}}
    int taken = 0;
    int* steps_taken = &taken;
{{ solve_end -}}
    status_out[M->i] = (signed char)status;
    steps_out[M->i] = taken;
}
{% endif %}
