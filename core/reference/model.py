"""An OdeSystem compiled to Python functions: what one simulation needs.

Built once per model (`compile_model`) and reused for any number of simulations
(parameter sets): the expensive work (CSE, code generation, the analytic
Jacobian) happens here and nowhere in the time loop.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import sympy as sp

from ..errors import UnsupportedModelError
from ..ir import TIME, Delay, Network, RateOf
from ..views.ode import OdeSystem, ode_system
from . import fast
from ..ode.atoms import AtomTable, AtomUse
from .codegen import (CompiledFunction, DelayCall, SymbolNames, bind_delay, bind_draws,
                      generate)


@dataclass
class CompiledEvent:
    id: str
    targets: np.ndarray  # state indices the assignments set
    values: CompiledFunction  # (t, x, p) -> new values, in the order of targets
    delay: CompiledFunction | None
    priority: CompiledFunction | None
    trigger_initial_value: bool
    persistent: bool
    use_values_from_trigger_time: bool


class _Delays:
    """delay(e, d) -> DelayCall(k, t - d); e_k compiled once per distinct e."""

    def __init__(self):
        self.exprs: list[sp.Expr] = []
        self.index: dict[sp.Expr, int] = {}
        self.constant_lags: list[float] = []

    def replace(self, e: sp.Basic) -> sp.Basic:
        if not isinstance(e, sp.Basic) or not e.has(Delay):
            return e
        return e.replace(lambda a: isinstance(a, Delay), self._call)

    def _call(self, a: Delay) -> sp.Expr:
        inner, lag = a.args
        if inner not in self.index:
            self.index[inner] = len(self.exprs)
            self.exprs.append(inner)
        if lag.is_number:
            try:
                self.constant_lags.append(float(lag))
            except TypeError:
                pass
        return DelayCall(sp.Integer(self.index[inner]), TIME - lag)


@dataclass
class CompiledModel:
    ode: OdeSystem
    rhs: CompiledFunction
    fast_rates: CompiledFunction | None  # f_fast(t, x, p) when there are fast reactions
    use_jacobian: bool  # give implicit integrators the analytic df/dx (built on first use)
    x0: CompiledFunction  # (t, x_unused, p) -> initial state
    atoms: list[CompiledFunction]  # atom k: g_k(t, x, p)
    atom_vector: CompiledFunction | None  # all g at once
    atom_exprs: list[sp.Expr]
    uses: list[AtomUse]
    atom_moves: list[bool]  # atom k depends on a state that changes between events
    trigger_atoms: frozenset[int]
    triggers: CompiledFunction | None  # (t, x, p, b) -> [bool per event]
    events: list[CompiledEvent]
    delayed: list[CompiledFunction]  # delay number k: e_k(t, x, p)
    delayed_before: dict[int, CompiledFunction]  # e_k before the start, where it differs
    constant_lags: list[float]
    names: SymbolNames
    _outputs: dict = field(default_factory=dict, repr=False)
    _functions: list = field(default_factory=list, repr=False)
    _delays: _Delays | None = field(default=None, repr=False)
    _jac: object = field(default=None, repr=False)  # None: not built yet; False: none
    _fd_seconds: float = field(default=0.0, repr=False)

    @property
    def n_states(self) -> int:
        return self.ode.n_states

    @property
    def has_delays(self) -> bool:
        return bool(self.delayed)

    def parameter_vector(self, overrides: dict[str, float] | None = None) -> np.ndarray:
        try:
            return self.ode.parameter_vector(overrides)
        except KeyError as exc:
            from ..errors import OptionError

            raise OptionError("parameters", f"{exc.args[0]!r} is not a parameter of model "
                                            f"{self.ode.network.id!r}; known: "
                                            + ", ".join(self.ode.p_ids)) from None

    def output_function(self, ids: tuple[str, ...], kind: str) -> CompiledFunction:
        key = (ids, kind)
        if key not in self._outputs:
            exprs = []
            for sid in ids:
                try:
                    exprs.append(self.ode.output(sid, kind))
                except KeyError:
                    from ..errors import OptionError

                    raise OptionError("outputs", f"{sid!r} is not a variable of model "
                                                 f"{self.ode.network.id!r}") from None
            exprs = [self._delays.replace(e) for e in exprs]
            f = generate("outputs", exprs, self.names, where="outputs", shape="vector")
            self._outputs[key] = f
            self._functions.append(f)
            self._compile_delayed()
        return self._outputs[key]

    def _compile_delayed(self) -> None:
        """Compile the delayed expressions registered so far (nested ones included).

        rateOf inside delay() looks into the past: after the start it is the chain
        rule with the rates at that time; before the start it is the time
        derivative of the initial-value expressions (zero, unless they depend on
        time), so that version is compiled separately."""
        while len(self.delayed) < len(self._delays.exprs):
            k = len(self.delayed)
            e = self._delays.replace(self._delays.exprs[k])
            if e.has(RateOf):
                self.delayed_before[k] = self._gen(f"delayed{k}_before",
                                                   _rate_of_before_start(e, self.ode))
                e = _rate_of_by_chain_rule(e, self.ode)
            self.delayed.append(self._gen(f"delayed{k}", e))
        self.constant_lags[:] = sorted({v for v in self._delays.constant_lags if v > 0})

    def _gen(self, name: str, e: sp.Expr) -> CompiledFunction:
        f = generate(name, [e], self.names, where="delay()", shape="scalar")
        self._functions.append(f)
        return f

    def bind_delay(self, delay: Callable) -> None:
        bind_delay(self._functions, delay)

    def bind_draws(self, draw: Callable) -> None:
        """The `_draw` of this run's distrib draws (draws.Draws)."""
        bind_draws(self._functions, draw)

    def jacobian(self, t: float, x: np.ndarray, p: np.ndarray) -> np.ndarray:
        """df/dx at (t, x, p). The analytic one is compiled on demand: at once for a
        small model; for a large one (sympy takes seconds to differentiate it) only
        after finite differences have cost about as much, so that a single
        simulation stays quick and an ensemble gets the fast exact Jacobian (the
        ski-rental rule: never more than twice the better choice's cost). Finite
        differences where there is none (delay(), functions without a usable
        derivative)."""
        if self._jac is None and self.use_jacobian and (
                self.n_states <= self.SMALL
                or self._fd_seconds > self.COMPILE_SECONDS_PER_STATE * self.n_states):
            f = _jacobian(self.ode, self.names, self._functions)
            self._jac = f if f is not None else False
        if self._jac:
            return self._jac(t, x, p)
        start = time.perf_counter()
        J = self._finite_differences(t, x, p)
        self._fd_seconds += time.perf_counter() - start
        return J

    SMALL = 40  # states: below this the analytic Jacobian compiles in a moment
    COMPILE_SECONDS_PER_STATE = 0.02  # about what sympy takes (500 states: 10 s)

    def _finite_differences(self, t, x, p) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        f0 = self.rhs(t, x, p)
        J = np.empty((len(x), len(x)))
        for j in range(len(x)):
            h = 1.49e-8 * max(abs(x[j]), 1e-6)  # sqrt(eps), relative
            xj = x.copy()
            xj[j] += h
            J[:, j] = (self.rhs(t, xj, p) - f0) / h
        return J


def compile_model(model: Network | OdeSystem, *, jacobian: bool = True) -> CompiledModel:
    """Compile a Network (or its OdeSystem) for `simulate`. Fast reactions are
    taken care of here (see fast.py), so pass the Network for models that have them."""
    ode = model if isinstance(model, OdeSystem) else ode_system(fast.with_fast_factor(model))
    leftover = [where for where, e in _all_exprs(ode) if _has_rate_of_outside_delay(e)]
    if leftover:
        raise UnsupportedModelError({"rateOf that the ODE view left unresolved": tuple(leftover)},
                                    who="the CPU reference")
    names = SymbolNames(ode.t, ode.x, ode.p)
    delays = _Delays()
    functions: list[CompiledFunction] = []

    def gen(name, exprs, **kw):
        f = generate(name, [delays.replace(e) for e in exprs], names, **kw)
        functions.append(f)
        return f

    rhs = gen("rhs", list(ode.rhs), where="rates", shape="vector")
    fast_rates = None
    if fast.FACTOR_ID in ode.p_ids:
        factor = ode.p[ode.p_ids.index(fast.FACTOR_ID)]
        fast_rates = gen("fast_rates", fast.split_rates(ode.rhs, factor), where="fast reactions",
                         shape="vector")
    x0 = gen("x0", list(ode.x0), where="initial values", shape="vector")

    atoms = AtomTable(set(ode.x), also_dynamic=(Delay, DelayCall),
                      symbol=lambda k: sp.Symbol(f"b_{k}"))
    split = [atoms.split_trigger(delays.replace(e.trigger)) for e in ode.events]
    for f in ode.rhs:
        atoms.add_switches(delays.replace(f))
    for g in list(atoms.functions):
        atoms.add_switches(g)
    triggers = None
    if ode.events:
        triggers = gen("triggers", split, where="event triggers", shape="list",
                       with_b=len(atoms.uses), use_cse=False)
    atom_funcs = [gen(f"atom{k}", [g], where="event triggers", shape="scalar", use_cse=False)
                  for k, g in enumerate(atoms.functions)]
    atom_vector = gen("atoms", atoms.functions, where="event triggers",
                      shape="vector") if atoms.functions else None

    events = []
    for e in ode.events:
        where = f"event {e.id}"
        targets = np.array([i for i, _ in e.assignments], dtype=int)
        values = gen("values", [v for _, v in e.assignments], where=where, shape="vector")
        delay = None if e.delay is None else gen("delay", [e.delay], where=where, shape="scalar")
        priority = None if e.priority is None else gen("priority", [e.priority], where=where,
                                                       shape="scalar")
        events.append(CompiledEvent(e.id, targets, values, delay, priority,
                                    bool(e.trigger_initial_value), bool(e.persistent),
                                    bool(e.use_values_from_trigger_time)))

    # every value a delay() may be needed for later (outputs) is registered now,
    # so that the simulation keeps the history they need
    for e in [*ode.values.values(), *ode.amounts.values()]:
        delays.replace(e)

    model_ = CompiledModel(
        ode=ode, rhs=rhs, fast_rates=fast_rates,
        use_jacobian=bool(jacobian and ode.n_states and not ode.has_delays),
        x0=x0, atoms=atom_funcs, atom_vector=atom_vector,
        atom_exprs=list(atoms.functions), uses=list(atoms.uses),
        atom_moves=_moving_atoms(ode, atoms.functions),
        trigger_atoms=frozenset(atoms.in_trigger), triggers=triggers, events=events,
        delayed=[], delayed_before={}, constant_lags=[], names=names)
    model_._functions = functions
    model_._delays = delays
    model_._compile_delayed()
    return model_


def _moving_atoms(ode: OdeSystem, functions) -> list[bool]:
    """Whether each atom depends on a state whose rate is not identically zero
    (or on delay(), which looks into a past that moves with time)."""
    moving = {x for x, f in zip(ode.x, ode.rhs) if not (isinstance(f, sp.Basic) and f == 0)}
    return [bool(g.has(DelayCall) or (g.free_symbols & moving)) for g in functions]


def _jacobian(ode: OdeSystem, names: SymbolNames, functions: list) -> CompiledFunction | None:
    """The analytic df/dx as a dense-matrix function; None where sympy cannot
    differentiate everything (then the integrator uses finite differences)."""
    entries, exprs = [], []
    try:
        for i, f in enumerate(ode.rhs):
            if not isinstance(f, sp.Basic):
                continue
            present = f.free_symbols & set(ode.x)
            for j, xj in enumerate(ode.x):
                if xj not in present:
                    continue
                d = sp.diff(f, xj)
                if d == 0:
                    continue
                if d.has(sp.Derivative, sp.Subs, sp.DiracDelta):
                    return None
                entries.append((i, j))
                exprs.append(d)
        f = generate("jac", exprs, names, where="Jacobian", shape="matrix",
                     n_rows=ode.n_states, n_cols=ode.n_states, entries=entries)
    except (UnsupportedModelError, TypeError, ValueError, NotImplementedError):
        return None
    functions.append(f)
    return f


def _has_rate_of_outside_delay(e) -> bool:
    if not isinstance(e, sp.Basic) or not e.has(RateOf):
        return False
    return e.replace(lambda a: isinstance(a, Delay), lambda a: sp.Integer(0)).has(RateOf)


def _rate_of_by_chain_rule(e: sp.Expr, ode: OdeSystem) -> sp.Expr:
    def d(a):
        inner = a.args[0]
        out = sp.diff(inner, TIME) if inner.has(TIME) else sp.Integer(0)
        for xi, fi in zip(ode.x, ode.rhs):
            if inner.has(xi):
                out += sp.diff(inner, xi) * fi
        return out
    return e.replace(lambda a: isinstance(a, RateOf), d)


def _rate_of_before_start(e: sp.Expr, ode: OdeSystem) -> sp.Expr:
    before = dict(zip(ode.x, ode.x0))
    return e.replace(lambda a: isinstance(a, RateOf),
                     lambda a: sp.diff(a.args[0].xreplace(before), TIME))


def _all_exprs(ode: OdeSystem):
    for i, f in enumerate(ode.rhs):
        yield f"rate of {ode.state_ids[i]}", f
    for e in ode.events:
        yield f"event {e.id}", e.trigger
        for _, v in e.assignments:
            yield f"event {e.id}", v
        if e.delay is not None:
            yield f"event {e.id}", e.delay
        if e.priority is not None:
            yield f"event {e.id}", e.priority
