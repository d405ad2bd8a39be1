"""From an OdeSystem to the expressions one ensemble kernel evaluates.

The parameters are specialised (parameters.py: varied ones from the table, fixed
ones as literals); initial values x0(p) stay expressions of the varied parameters,
so initial assignments follow them.

Events: a trigger is a boolean formula over relations `lhs REL rhs`. Each
relation that can change between events (it depends on time or the state)
becomes an *atom* g = lhs - rhs whose sign the integrator watches at every step;
the trigger becomes a formula over the atoms' truth values (symbols `b@k`, one
per (atom, relation) use). Relations inside the right-hand side (piecewise
switches) are watched too, so that the integrator stops at a switch instead of
stepping over it. atoms.py does the splitting for the CPU reference as well, so
both locate the same crossings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import sympy as sp

from ..errors import OptionError
from ..ir import TIME
from ..sbml.distrib import has_draw
from ..views.ode import OdeSystem
from .atoms import AtomTable, AtomUse
from .delays import DelayCall, DelayTable, rate_of_after, rate_of_before
from .parameters import ParameterSpecialisation


@dataclass(frozen=True)
class EventSpec:
    id: str
    trigger: sp.Basic  # boolean in b@k symbols (atom uses), x, p, t
    targets: tuple[int, ...]  # state indices
    values: tuple[sp.Expr, ...]  # new values, in the order of targets
    priority: sp.Expr | None
    persistent: bool
    initial_value: bool
    values_at_trigger: bool
    delay: sp.Expr | None = None  # evaluated at trigger time


@dataclass
class KernelModel:
    """The expressions of one specialised kernel (all in x, varied p, t).

    `varied`: SBML ids read from the parameter table, in column order.
    `outputs`: output names written at each output time (sbmlgpu.outputs)."""

    ode: OdeSystem
    varied: tuple[str, ...]
    outputs: tuple[str, ...]
    fixed_values: dict[str, float] = field(default_factory=dict)

    def __post_init__(self):
        self.parameters = ParameterSpecialisation(self.ode, self.varied, self.fixed_values)
        # delay(e, d) -> DelayCall(k, t - d) in every specialised expression (delays.py)
        self.delays = DelayTable(self._rate_of_in_delay)

    # -- specialisation (parameters.py) ---------------------------------------------
    @property
    def p_symbols(self) -> tuple[sp.Symbol, ...]:
        return self.parameters.p_symbols

    @property
    def literals(self) -> dict[sp.Symbol, float]:
        return self.parameters.literals

    def specialise(self, e) -> sp.Basic:
        return self.delays.replace(self.parameters.specialise(e))

    def numeric(self, e) -> sp.Basic:
        """`e` (specialised) with the literals substituted: for numeric evaluation."""
        return self.parameters.numeric(e)

    @property
    def x(self) -> tuple[sp.Symbol, ...]:
        return self.ode.x

    @property
    def n_states(self) -> int:
        return self.ode.n_states

    @cached_property
    def rhs(self) -> tuple[sp.Expr, ...]:
        return tuple(self.specialise(f) for f in self.ode.rhs)

    @cached_property
    def x0(self) -> tuple[sp.Expr, ...]:
        return tuple(self.specialise(e) for e in self.ode.x0)

    @property
    def draws(self) -> bool:
        """Whether initial values or event assignments draw (SBML distrib): the kernel
        then keeps a draw stream per member (distrib.cuh)."""
        return any(has_draw(e) for e in self.x0) or any(
            has_draw(v) for e in self.events for v in e.values)

    @cached_property
    def output_exprs(self) -> tuple[sp.Expr, ...]:
        # names as asked (S1, [S1], amount(S1)), checked by sbmlgpu.outputs at the edge
        return tuple(self.specialise(self.ode.output_named(name)) for name in self.outputs)

    @cached_property
    def rhs_depends_on_time(self) -> bool:
        return any(isinstance(f, sp.Basic) and f.has(TIME) for f in self.rhs)

    # -- events -----------------------------------------------------------------
    @cached_property
    def _events_and_atoms(self) -> tuple[tuple[EventSpec, ...], AtomTable, frozenset[int]]:
        atoms = AtomTable(set(self.ode.x), also_dynamic=(DelayCall,))
        events = []
        for e in self.ode.events:
            trigger = atoms.split_trigger(self.specialise(e.trigger), f"event {e.id}")
            events.append(EventSpec(
                id=e.id, trigger=trigger,
                targets=tuple(i for i, _ in e.assignments),
                values=tuple(self.specialise(v) for _, v in e.assignments),
                priority=None if e.priority is None else self.specialise(e.priority),
                persistent=bool(e.persistent), initial_value=bool(e.trigger_initial_value),
                values_at_trigger=bool(e.use_values_from_trigger_time),
                delay=None if e.delay is None else self.specialise(e.delay)))
        switches: set[int] = set()
        for sid, f in zip(self.ode.state_ids, self.rhs):
            switches |= atoms.add_switches(f, f"rate of {sid}")
        for k, g in enumerate(list(atoms.functions)):  # a switch inside an atom is watched as well
            atoms.add_switches(g, f"inside g[{k}]")
        return tuple(events), atoms, frozenset(switches)

    @property
    def events(self) -> tuple[EventSpec, ...]:
        return self._events_and_atoms[0]

    @property
    def atoms(self) -> tuple[sp.Expr, ...]:
        return tuple(self._events_and_atoms[1].functions)

    @property
    def atom_table(self) -> AtomTable:
        """The atoms with the relation and the place (event, rate) each comes from."""
        return self._events_and_atoms[1]

    @property
    def switches(self) -> tuple[int, ...]:
        """The atoms of relations inside the right-hand side (piecewise conditions,
        also from assignment rules feeding it): where one changes sign, f jumps."""
        return tuple(sorted(self._events_and_atoms[2]))

    @property
    def time_switches(self) -> tuple[int, ...]:
        """The switches that depend on time and parameters only: their switching
        time is found without integrating, so steps end before them rather than
        crossing them (templates/driver.cuh); switches of the state are located after
        the step, as event triggers are."""
        states = set(self.x)
        return tuple(a for a in self.switches
                     if not (self.atoms[a].free_symbols & states)
                     and not self.atoms[a].has(DelayCall))  # a past state moves too

    @property
    def uses(self) -> tuple[AtomUse, ...]:
        return tuple(self._events_and_atoms[1].uses)

    @property
    def watches_crossings(self) -> bool:
        return bool(self.atoms)

    # -- delay() -----------------------------------------------------------------
    def _rate_of_in_delay(self, e: sp.Expr) -> tuple[sp.Expr, sp.Expr]:
        """rateOf inside delay(e): (after the start, before it), as the reference."""
        specialise = self.parameters.specialise  # not self.specialise: no DelayCall yet
        rhs = [specialise(f) for f in self.ode.rhs]
        x0 = [specialise(v) for v in self.ode.x0]
        return rate_of_after(e, self.x, rhs), rate_of_before(e, self.x, x0)

    @property
    def delayed(self) -> tuple[sp.Expr, ...]:
        """The delayed expressions e_k of every expression specialised so far: build
        the model's expressions (rhs, outputs, events) before reading this."""
        self.rhs, self.output_exprs, self.events  # noqa: B018 - they register the delays
        return tuple(self.delays.exprs)

    @property
    def shortest_lag(self) -> float | None:
        """The shortest lag that is a number once fixed parameters are literals (steps
        are no longer, so that stages look up known history); None without one."""
        lags = self.delays.constant_lags(self.numeric)
        return lags[0] if lags else None

    # -- fast reactions ----------------------------------------------------------
    @cached_property
    def fast_rates(self) -> tuple[sp.Expr, ...] | None:
        """The fast reactions' part of the rates, f_fast = df/dK (the view's rates are
        f_slow + K f_fast: sbmlgpu.reference.fast); None without fast reactions."""
        from ..reference import fast  # here: the reference package imports scipy

        if fast.FACTOR_ID not in self.ode.p_ids:
            return None
        factor = self.ode.p[self.ode.p_ids.index(fast.FACTOR_ID)]
        return tuple(fast.split_rates(self.rhs, factor))

    @cached_property
    def fast_jacobian(self) -> sp.Matrix | None:
        """d f_fast / dx, None where sympy cannot write it (the kernel then takes
        forward differences)."""
        if not self.fast_rates:
            return None
        jac = sp.Matrix(self.fast_rates).jacobian(sp.Matrix(self.x))
        if any(isinstance(e, sp.Basic) and e.has(sp.Derivative, sp.Subs) for e in jac):
            return None
        return jac.applyfunc(_drop_dirac)

    def kernel_only_features(self) -> dict[str, tuple[str, ...]]:
        """{feature: element ids} of what only the generated kernel implements
        (delay.cuh, fast.cuh), not the numeric functions of the model."""
        from ..features import delay_users
        from ..ir import sym
        from ..reference import fast

        out = {}
        if self.delayed:
            out["delay()"] = delay_users(self.ode.network)
        if self.fast_rates is not None:
            factor = sym(fast.FACTOR_ID)
            out["fast reactions"] = tuple(r.id for r in self.ode.network.reactions
                                          if isinstance(r.rate, sp.Basic) and r.rate.has(factor))
        return out

    # -- Jacobian ---------------------------------------------------------------
    @cached_property
    def jacobian(self) -> sp.Matrix | None:
        """df/dx analytic, or None where sympy leaves a derivative unevaluated
        (floor, ceiling, a function it cannot differentiate)."""
        if not self.n_states:
            return sp.zeros(0, 0)
        # only the states each rate names, and of a sum only the terms that name the
        # state (Matrix.jacobian differentiates every pair and every term: the same
        # matrix, ~30x slower for a 500-state model)
        index = {x: j for j, x in enumerate(self.x)}
        # entries in a dict, the matrix built once: looking at 250,000 entries of a
        # 500-state model's dense matrix took seconds, where ~5,000 are non-zero
        entries = {}
        for i, f in enumerate(self.rhs):
            f = sp.sympify(f)
            terms = sp.Add.make_args(f)
            for x in f.free_symbols & index.keys():
                entries[i, index[x]] = sp.Add(*[_term_derivative(a, x) for a in terms
                                                if x in a.free_symbols])
        if any(isinstance(e, sp.Basic) and e.has(sp.Derivative, sp.Subs)
               for e in entries.values()):
            return None
        return sp.Matrix(sp.SparseMatrix(self.n_states, self.n_states,
                                         {k: _drop_dirac(e) for k, e in entries.items()}))

    @cached_property
    def dfdt(self) -> tuple[sp.Expr, ...] | None:
        """df/dt (explicit time dependence), None where it cannot be written."""
        if not self.rhs_depends_on_time:
            return tuple(sp.Integer(0) for _ in self.rhs)
        # only the rates that name t (a large model's others: seconds of sympy for 0)
        out = tuple(sp.diff(f, TIME) if TIME in sp.sympify(f).free_symbols else sp.Integer(0)
                    for f in self.rhs)
        if any(isinstance(e, sp.Basic) and e.has(sp.Derivative, sp.Subs) for e in out):
            return None
        return tuple(_drop_dirac(e) for e in out)


def _term_derivative(term: sp.Basic, x: sp.Symbol) -> sp.Basic:
    """d term / dx. A product with x as one plain factor (mass action, k*x*y) gives the
    product of the other factors, as sympy's product rule does after its zero terms;
    it takes sympy's diff a millisecond to find that out, for thousands of such terms
    in a large model. Anything else is sympy's diff."""
    if term.is_Mul:
        factors = term.args
        if factors.count(x) == 1 and not any(x in f.free_symbols for f in factors
                                             if f is not x and f != x):
            return sp.Mul(*[f for f in factors if f != x])
    return term.diff(x)


def _drop_dirac(e: sp.Basic) -> sp.Basic:
    """Derivatives of Heaviside/sign are DiracDelta: zero except at the switch, which
    the integrator does not step across (switches are watched atoms)."""
    if isinstance(e, sp.Basic) and e.has(sp.DiracDelta):
        return e.replace(lambda a: isinstance(a, sp.DiracDelta), lambda a: sp.Integer(0))
    return e
