"""`simulate()`: one time course of an OdeSystem on the CPU, with SBML events.

The integrator (scipy's LSODA by default: it switches between Adams and BDF as
the problem turns stiff or not) is driven one step at a time. After every step
the signs of the watched atoms (see sbmlgpu.ode.atoms) are compared with those at the
step's start; where one changed, the crossing is located on the step's dense
output to the last representable time, the integrator stops there, and the
event machinery (events.py) runs the instant. The integrator is restarted after
every stop, so discontinuities in the right-hand side are never stepped over.
Output times are filled from the dense output; an output at a stop time gets
the state after the instant's events.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import sympy as sp
from scipy.integrate import BDF, DOP853, LSODA, RK23, RK45, Radau
from scipy.optimize import brentq

from ..errors import OptionError
from ..ir import Network
from ..views.ode import OdeSystem
from . import trajectory as tr
from . import fast
from .draws import Draws, InvalidDraw
from ..ode.atoms import EQ, NAN_SIGN, NE, sign_class, sign_classes, truths
from ..ode.tolerances import start_atol
from .events import EventError, EventQueue
from .history import History
from .model import CompiledModel, compile_model
from .trajectory import Trajectory

METHODS = {"LSODA": LSODA, "BDF": BDF, "Radau": Radau, "RK45": RK45, "DOP853": DOP853,
           "RK23": RK23}
_TAKES_JACOBIAN = {"LSODA", "BDF", "Radau"}


class _StillSolver:
    """The integrator of a system whose state does not move between events: the
    same interface as scipy's OdeSolver (step, dense_output), in steps of at most
    max_step so that crossings of time-dependent atoms are still found."""

    def __init__(self, t: float, y: np.ndarray, t_bound: float, max_step: float):
        self.t = self.t_old = t
        self.y = np.array(y, dtype=float)
        self.t_bound = t_bound
        self.max_step = max_step
        self.status = "running"

    def step(self):
        self.t_old = self.t
        self.t = min(self.t_bound, self.t + self.max_step)
        if self.t >= self.t_bound:
            self.status = "finished"

    def dense_output(self):
        y = self.y
        return lambda tau: y


class _IntegratorFailed(Exception):
    pass


class _TooManyStops(Exception):
    pass


class _TooManySteps(Exception):
    pass


class _NonFinite(Exception):
    pass


def simulate(model: Network | OdeSystem | CompiledModel, times, *,
             parameters: dict[str, float] | None = None, rtol: float = 1e-8,
             atol: float = 1e-10, max_step: float | None = None, method: str = "LSODA",
             seed: int = 0, max_stops: int = 1_000_000,
             max_steps: int = 100_000, member: int = 0,
             scaled_atol: bool = False) -> Trajectory:
    """Simulate from times[0] to times[-1]; the state at every output time.

    `model`: a Network, its OdeSystem, or a CompiledModel (`compile_model`; reuse
    it to simulate many parameter sets without compiling again). `parameters`:
    {SBML id: value} overriding the nominal values (initial values computed from
    them follow). `method`: one of LSODA (default; stiff/non-stiff switching),
    BDF, Radau (implicit), RK45, DOP853, RK23 (explicit). `seed`: the order of
    simultaneous events with equal priority, and with `member` (the ensemble member's
    index) the stream of distrib draws (draws.py). `scaled_atol`: a state that starts
    nonzero below atol / rtol is held to rtol x its initial value (the ode backend's
    --scaled-atol, sbmlgpu.ode.tolerances; off by default: the oracle keeps atol for
    every state, as scipy's LSODA failed with it on semantic case 01568, whose fast
    reaction relaxes S1 to rounding noise at t0). `max_steps`: integrator steps allowed
    between two output times; `max_stops`: event and switch instants allowed in
    all. Integration failures do not raise:
    they come back as `status` and `message` with the rows not reached left NaN."""
    if method not in METHODS:
        raise OptionError("method", f"{method!r} is not one of: {', '.join(METHODS)}")
    for name, v in (("rtol", rtol), ("atol", atol)):
        if not (isinstance(v, (int, float)) and v > 0 and math.isfinite(v)):
            raise OptionError(name, f"{v!r}: need a positive number")
    for name, v in (("max_steps", max_steps), ("max_stops", max_stops)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise OptionError(name, f"{v!r}: need a positive integer")
    if max_step is not None and not max_step > 0:
        raise OptionError("max_step", f"{max_step!r}: need a positive number")
    times = np.asarray(times, dtype=float)
    if times.ndim != 1 or times.size < 1:
        raise OptionError("times", "need a one-dimensional array of at least one time")
    if not np.all(np.isfinite(times)) or np.any(np.diff(times) < 0):
        raise OptionError("times", "output times must be finite and non-decreasing")
    cm = model if isinstance(model, CompiledModel) else compile_model(model)
    p = cm.parameter_vector(parameters)
    cm.bind_draws(Draws(seed, member))
    return _Run(cm, p, times, rtol, atol, max_step, method, seed, max_stops,
                max_steps, scaled_atol).execute()


class _Run:
    MAX_STUCK = 10_000
    MUTE_AFTER = 50
    MAX_TINY_STEPS = 2_000

    def __init__(self, cm: CompiledModel, p, times, rtol, atol, max_step, method, seed,
                 max_stops, max_steps, scaled_atol=False):
        self.cm, self.p, self.times = cm, p, times
        self.scaled_atol = scaled_atol
        self.rtol, self.atol, self.method = rtol, atol, method
        self.atol_scalar = atol
        self.max_stops = max_stops
        self.max_steps = max_steps
        self.n = cm.n_states
        self.t0, self.t_end = float(times[0]), float(times[-1])
        self.X = np.full((len(times), self.n), np.nan)
        self.k = 0  # next output row to fill
        self.queue = EventQueue(cm, p, np.random.default_rng(seed))
        self.overrides: dict[int, tuple[float, int]] = {}  # atom -> (g at the crossing, sign after)
        self.just_crossed: set[int] = set()  # atoms that crossed at the current instant
        self.last_crossed: set[int] = set()  # atoms of the last stop at a crossing
        self.muted: dict[int, float] = {}  # rate-only atoms not watched until a time
        self.tiny_steps = 0
        self.steps_since_output = 0
        self.relaxed_start = False
        self.has_eq_uses = any(u.rel in (EQ, NE) for u in cm.uses)
        self.use_atom = np.array([u.atom for u in cm.uses], dtype=int)
        self.use_rel = np.array([u.rel for u in cm.uses], dtype=int)
        self.stops = 0
        self.max_step = np.inf if max_step is None else float(max_step)
        if cm.constant_lags:
            self.max_step = min(self.max_step, min(cm.constant_lags))
        self.breakpoints: list[float] = []
        # nothing moves between events (no states, or every rate is zero): no integrator
        self.still = all(isinstance(f, sp.Basic) and f == 0 for f in cm.ode.rhs)
        self.history = None
        self.delay = None
        if cm.has_delays:
            empty = np.zeros(self.n)
            self.history = History(self.t0, lambda tau: np.asarray(cm.x0(tau, empty, p), float))
            self.delay = self._delay
            cm.bind_delay(self.delay)
            for lag in cm.constant_lags:
                self.breakpoints += [self.t0 + m * lag for m in (1, 2, 3)]
        if cm.atoms:
            # Crossings are found by comparing signs at step ends, so a step must not
            # hold a crossing and its return: where the state hardly moves (or there
            # is none) the integrator's steps grow without bound. No step longer than
            # the output spacing (at most 1/50 of the span) keeps such pairs apart.
            span = max(self.t_end - self.t0, 1e-300)
            self.max_step = min(self.max_step, span / max(len(times) - 1, 50))

    # -- delay() ----------------------------------------------------------------
    def _delay(self, k: int, tau: float, t: float, x: np.ndarray) -> float:
        xs = self.history.state(float(tau), float(t), np.asarray(x, dtype=float)[: self.n])
        if tau < self.t0 and k in self.cm.delayed_before:
            return self.cm.delayed_before[k](float(tau), xs, self.p)
        return self.cm.delayed[k](float(tau), xs, self.p)

    # -- atoms and triggers -------------------------------------------------------
    def _atom_values(self, t: float, x: np.ndarray) -> np.ndarray:
        if self.cm.atom_vector is None:
            return np.zeros(0)
        return np.asarray(self.cm.atom_vector(t, x, self.p), dtype=float)

    def _signs(self, g: np.ndarray) -> np.ndarray:
        """Sign classes of the atoms. An atom still exactly at the value it had
        where it crossed zero keeps the side it crossed to (`time > 5.5` is true
        at 5.5 once crossed; an S that lands on its threshold and stays there does
        not chatter). Once its value moves, the crossing is forgotten."""
        s = sign_classes(g)
        for k, (g_at, s_post) in list(self.overrides.items()):
            if g[k] == g_at or (g[k] != g[k] and g_at != g_at):
                s[k] = s_post
            else:
                del self.overrides[k]
        return s

    def _trigger_values(self, t: float, x: np.ndarray, after: bool) -> list[bool]:
        cm = self.cm
        s_use = self._signs(self._atom_values(t, x))[self.use_atom]
        if not after and self.just_crossed and self.has_eq_uses:
            for i, use in enumerate(cm.uses):
                if use.rel in (EQ, NE) and use.atom in self.just_crossed \
                        and use.atom in self.overrides:
                    s_use[i] = 0  # == holds at the crossing instant itself
        b = truths(self.use_rel, s_use)
        return [bool(v) for v in cm.triggers(t, x, self.p, b)]

    def _relax(self, t: float, x: np.ndarray) -> np.ndarray:
        try:
            # the scalar atol, as the kernels' fast.cuh (not --scaled-atol's per-state ones)
            return fast.relax(self.cm.fast_rates, t, x, self.p, rtol=self.rtol,
                              atol=self.atol_scalar)
        except fast.RelaxationFailed as exc:
            raise EventError(str(exc)) from None

    def _instant(self, t: float, x: np.ndarray) -> np.ndarray:
        if self.cm.fast_rates is None:
            return self._events(t, x)
        # fast reactions are at equilibrium whenever time moves on: from the start
        # and after every event (whose new equilibrium may trigger more events)
        if t == self.t0 and not self.relaxed_start:
            x = self._relax(t, x)
            self.relaxed_start = True
        for _ in range(100):
            before = len(self.queue.executed)
            x = self._events(t, x)
            if len(self.queue.executed) == before:
                return x
            x = self._relax(t, x)
        raise EventError(f"fast reactions and events keep changing each other at t = {t!r}")

    def _events(self, t: float, x: np.ndarray) -> np.ndarray:
        if not self.cm.events:
            return x
        final = None
        if self.has_eq_uses and self.just_crossed:
            final = lambda tt, xx: self._trigger_values(tt, xx, True)  # noqa: E731
        before = len(self.queue.executed)
        x = self.queue.process(t, x, lambda tt, xx: self._trigger_values(tt, xx, False), final)
        if self.history is not None and len(self.queue.executed) > before:
            # a jump now is a jump one lag later in every delay(): restart there
            for lag in self.cm.constant_lags:
                self.breakpoints.append(t + lag)
        return x

    # -- outputs ------------------------------------------------------------------
    def _record_interp(self, sol, t_limit: float, inclusive: bool, x_limit=None) -> None:
        times = self.times
        while self.k < len(times) and (times[self.k] < t_limit
                                       or (inclusive and times[self.k] == t_limit)):
            T = times[self.k]
            self.X[self.k] = x_limit if (T == t_limit and x_limit is not None) else sol(T)[: self.n]
            self.k += 1
            self.steps_since_output = 0

    def _record_at(self, t: float, x: np.ndarray) -> None:
        while self.k < len(self.times) and self.times[self.k] <= t:
            self.X[self.k] = x[: self.n]
            self.k += 1
            self.steps_since_output = 0

    # -- the time loop ---------------------------------------------------------------
    def execute(self) -> Trajectory:
        cm = self.cm
        status, message = tr.OK, ""
        t = self.t0
        x = np.full(self.n, np.nan)
        try:
            x = np.asarray(cm.x0(t, np.zeros(self.n), self.p), dtype=float).reshape(self.n)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                x = self._instant(t, x)
                if self.scaled_atol:  # from the state after the events at t0
                    self.atol = start_atol(x, self.rtol, self.atol)
                if self.history is not None:
                    self.history.add_point(t, x)
                self._record_at(t, x)
                stuck = 0
                while t < self.t_end:
                    t_stop = min(self.t_end, self.queue.next_time(t), self._next_breakpoint(t))
                    t_before = t
                    t, x = self._integrate(t, x, t_stop)
                    # Zeno: stop after stop without time moving on (a condition that
                    # flips back and forth at one point)
                    stuck = stuck + 1 if t - t_before <= 1e-12 * max(1.0, abs(t)) else 0
                    if stuck > self.MAX_STUCK:
                        raise _TooManyStops(f"{self.MAX_STUCK} stops in a row without time "
                                            f"moving on")
                    if stuck > self.MUTE_AFTER and self.last_crossed \
                            and not (self.last_crossed & self.cm.trigger_atoms):
                        # a switch of the rates only (no event hangs on it) that flips
                        # at one point, e.g. sliding along x = 0 for x' = -sign(x):
                        # let the integrator's step control handle it for a while
                        until = t + (self.t_end - self.t0) / 100
                        self.muted.update({k: until for k in self.last_crossed})
                        stuck = 0
                    x = self._instant(t, x)
                    if self.history is not None:
                        self.history.add_point(t, x)
                    self._record_at(t, x)
                    self.stops += 1
                    if self.stops > self.max_stops:
                        raise _TooManyStops(f"more than {self.max_stops} event or switch "
                                            f"instants")
        except _IntegratorFailed as exc:
            status = tr.INTEGRATOR_FAILED
            message = (f"the {self.method} integrator failed {exc}. Try method='Radau' or "
                       f"'BDF', looser rtol/atol, or a smaller max_step")
        except _NonFinite as exc:
            status, message = tr.NONFINITE, str(exc)
        except _TooManyStops as exc:
            status = tr.TOO_MANY_EVENTS
            message = (f"{exc} before t = {t!r}: the model chatters (a trigger or "
                       f"piecewise condition flips back and forth); raise max_stops if "
                       f"that many events are intended")
        except _TooManySteps as exc:
            status = tr.MAX_STEPS
            message = (f"{exc}: the model is stiff (try method='Radau' or 'BDF'), its "
                       f"rates switch back and forth, or it needs more steps (max_steps)")
        except EventError as exc:
            status, message = tr.EVENT_ERROR, str(exc)
        except InvalidDraw as exc:
            status, message = tr.INVALID_DRAW, f"{exc} (at t = {t!r})"
        return Trajectory(times=self.times.copy(), x=self.X, p=self.p.copy(), status=status,
                          message=message, state_ids=cm.ode.state_ids,
                          events=list(self.queue.executed), n_reached=self.k,
                          _model=cm, _delay=self.delay)

    def _next_breakpoint(self, t: float) -> float:
        if not self.breakpoints:
            return np.inf
        self.breakpoints = [b for b in self.breakpoints if b > t]
        return min(self.breakpoints) if self.breakpoints else np.inf

    def _solver(self, t: float, y: np.ndarray, t_stop: float):
        cm = self.cm
        n = self.n
        p = self.p
        if self.still:
            return _StillSolver(t, y, t_stop, self.max_step)
        rhs = cm.rhs
        fun = lambda tt, yy: rhs(tt, yy, p)  # noqa: E731
        kwargs = dict(rtol=self.rtol, atol=self.atol, max_step=self.max_step)
        if self.method in _TAKES_JACOBIAN and cm.use_jacobian and n:
            kwargs["jac"] = self._jacobian
        return METHODS[self.method](fun, t, y, t_stop, **kwargs)

    def _integrate(self, t: float, x: np.ndarray, t_stop: float):
        """Integrate from (t, x) towards t_stop; stop early at the first crossing.
        Returns the time and state where it stopped."""
        if t_stop - t <= 4 * np.spacing(max(abs(t), abs(t_stop), 1.0)):
            # nothing to integrate: the same instant, crossings still in force
            return t_stop, x
        self.just_crossed = set()
        self.last_crossed = set()
        y = x if self.n else np.zeros(1)
        if not np.all(np.isfinite(y)):
            bad = [sid for sid, v in zip(self.cm.ode.state_ids, y) if not np.isfinite(v)]
            raise _NonFinite(f"{', '.join(bad[:8])}{' ...' if len(bad) > 8 else ''} "
                             f"{'is' if len(bad) == 1 else 'are'} not finite at t = {t!r}, so "
                             f"the integration cannot go on (a value the file does not give, "
                             f"or an initial assignment or event that computes NaN or inf)")
        g0 = self._atom_values(t, x)
        s0 = self._signs(g0)
        solver = self._solver(t, y, t_stop)
        while True:
            message = solver.step()
            if solver.status == "failed":
                raise _IntegratorFailed(f"at t = {float(solver.t)!r}: {message or 'step failed'}")
            t_old, t_new = float(solver.t_old), float(solver.t)
            self.steps_since_output += 1
            if self.steps_since_output > self.max_steps:
                raise _TooManySteps(f"more than {self.max_steps} steps between two output "
                                    f"times (at t = {t_new!r})")
            if t_new - t_old <= 1e-13 * max(1.0, abs(t_new)):
                self.tiny_steps += 1
                if self.tiny_steps > self.MAX_TINY_STEPS:
                    raise _IntegratorFailed(
                        f"at t = {t_new!r}: {self.MAX_TINY_STEPS} steps in a row shorter than "
                        f"1e-13 (relative): the rates are singular (a blow-up?) or switch back "
                        f"and forth here")
            else:
                self.tiny_steps = 0
            sol = solver.dense_output()
            y_new = solver.y
            hit, s_new = self._find_crossing(sol, t_old, t_new, y_new, s0)
            if hit is not None:
                t_hit, crossed = hit
                x_hit = np.asarray(sol(t_hit), dtype=float)[: self.n] if t_hit != t_new \
                    else np.array(y_new[: self.n], dtype=float)
                self._record_interp(sol, t_hit, inclusive=False)
                if self.history is not None:
                    self.history.add_segment(t_old, t_hit, sol, x_hit)
                g_hit = self._atom_values(t_hit, x_hit)
                self.overrides.update({k: (g_hit[k], s_post) for k, s_post in crossed.items()})
                self.just_crossed = set(crossed)
                self.last_crossed = set(crossed)
                return t_hit, x_hit
            if self.history is not None:
                self.history.add_segment(t_old, t_new, sol, y_new[: self.n])
            if solver.status == "finished" or t_new >= t_stop:
                self._record_interp(sol, t_stop, inclusive=False)
                return t_stop, np.array(y_new[: self.n], dtype=float)
            self._record_interp(sol, t_new, inclusive=True, x_limit=np.array(y_new[: self.n]))
            s0 = s_new

    def _jacobian(self, t, y):
        return self.cm.jacobian(t, y, self.p)

    # -- crossings --------------------------------------------------------------------
    def _find_crossing(self, sol, t_old, t_new, y_new, s0):
        if self.cm.atom_vector is None:
            return None, s0
        x_new = y_new[: self.n]
        g_new = self._atom_values(t_new, x_new)
        s_new = self._signs(g_new)
        changed = np.flatnonzero(s_new != s0).tolist()
        if self.muted:
            self.muted = {k: until for k, until in self.muted.items() if until > t_old}
            changed = [k for k in changed if k not in self.muted]
        if not changed:
            return None, s_new
        best, crossed = np.inf, {}
        for k in changed:
            t_k, s_post = self._locate(k, sol, t_old, t_new, s0[k], g_new[k], y_new)
            if t_k < best:
                best, crossed = t_k, {k: s_post}
            elif t_k == best:
                crossed[k] = s_post
        return (best, crossed), s_new

    def _locate(self, k: int, sol, a: float, b: float, s_a: int, g_b: float, x_b):
        """The earliest time in (a, b] at which atom k's sign class differs from
        s_a, to the last representable time; and the sign just after it.

        Brent's method finds the root to a few ulps; a bracket of adjacent
        doubles around it is then made by stepping out from the root and
        bisecting. Where the sign classes do not allow Brent (the start on the
        boundary, NaN), bisection alone."""
        n, p, g = self.n, self.p, self.cm.atoms[k]
        if self.cm.atom_moves[k]:
            def f(tau):
                return float(g(tau, np.asarray(sol(tau), dtype=float)[:n], p))
        else:  # depends on time and on states that do not move between events
            x_const = np.asarray(x_b, dtype=float)[:n]

            def f(tau):
                return float(g(tau, x_const, p))

        def differs(v):
            return sign_class(v) != s_a

        lo, hi, f_hi = a, b, g_b
        if s_a in (-1, 1) and sign_class(g_b) != NAN_SIGN and math.isfinite(g_b):
            f_lo = f(a)
            if sign_class(f_lo) == s_a and math.isfinite(f_lo):
                try:
                    r = brentq(f, a, b, xtol=1e-300, rtol=4 * np.finfo(float).eps,
                               maxiter=200)
                except (ValueError, RuntimeError):
                    r = None
                if r is not None and a < r <= b:
                    lo, hi, f_hi = self._bracket(f, differs, a, b, r)
        for _ in range(1100):  # bisection on the sign class to adjacent doubles
            mid = lo + (hi - lo) / 2
            if mid <= lo or mid >= hi:
                break
            f_m = f(mid)
            if differs(f_m):
                hi, f_hi = mid, f_m
            else:
                lo = mid
        s_hi = sign_class(f_hi) if hi != b else sign_class(g_b)
        if s_hi == 0:
            s_post = -s_a if s_a in (-1, 1) else 0
        else:
            s_post = s_hi
        return hi, s_post

    @staticmethod
    def _bracket(f, differs, a, b, r):
        """(lo, hi, f(hi)) with lo < hi close around r: f(lo) on the start's side,
        f(hi) not; stepping out from r by growing multiples of its ulp."""
        f_r = f(r)
        if differs(f_r):
            hi, f_hi = r, f_r
            step = np.spacing(max(abs(r), 1e-300))
            lo = r
            while True:
                lo = max(a, r - step)
                if lo == a or not differs(f(lo)):
                    return lo, hi, f_hi
                hi, f_hi = lo, f(lo)
                step *= 4
        lo = r
        step = np.spacing(max(abs(r), 1e-300))
        while True:
            hi = min(b, r + step)
            f_hi = f(hi)
            if hi == b or differs(f_hi):
                return lo, hi, f_hi
            lo = hi
            step *= 4
