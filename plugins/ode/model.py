"""From an OdeSystem to the expressions one ensemble kernel evaluates.

A kernel is specialised to one ensemble: the parameters the ensemble varies are
read per trajectory from a table; every other parameter becomes a literal in the
generated code (as in a hand-written kernel, where constants are literals, and nvcc
folds what it can). The literals are attached at printing time (`literals`, a map
from the parameter's symbol to its value), not substituted into the sympy
expressions: sympy distributes a number over a sum (10*(y - x) becomes -10*x + 10*y,
one more multiplication at every evaluation), which the model as written avoids.
Three exceptions are substituted: parameters equal to 0, 1 or -1 (they simplify the
expressions exactly); exponents (x**n with n fixed becomes x*x*..., and its
derivative n*x**(n-1) rather than n*x**n/x, which is NaN at x = 0); and divisions by
a fixed parameter, which become multiplications by its reciprocal (a multiplication
is several times cheaper than a division in fp64; the result differs by at most one
rounding). Initial values x0(p)
stay expressions of the varied parameters, so initial assignments follow them.

Events: a trigger is a boolean formula over relations `lhs REL rhs`. Each
relation that can change between events (it depends on time or the state)
becomes an *atom* g = lhs - rhs whose sign the integrator watches at every step;
the trigger becomes a formula over the atoms' truth values (symbols `b@k`, one
per (atom, relation) use). Relations inside the right-hand side (piecewise
switches) are watched too, so that the integrator stops at a switch instead of
stepping over it. This mirrors the CPU reference (core/reference/atoms.py), so
both locate the same crossings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import sympy as sp
from sympy.core.relational import Relational
from sympy.logic.boolalg import BooleanAtom, BooleanFunction

from sbmlgpu.errors import OptionError
from sbmlgpu.ir import TIME
from sbmlgpu.views.ode import OdeSystem

# relation codes, shared with the kernels (kernels/events.cuh: ode_truth)
GT, GE, LT, LE, EQ, NE = range(6)
REL_CODE = {sp.StrictGreaterThan: GT, sp.GreaterThan: GE, sp.StrictLessThan: LT,
            sp.LessThan: LE, sp.Equality: EQ, sp.Unequality: NE}


@dataclass(frozen=True)
class AtomUse:
    """A relation of a trigger: atom `atom` compared with `rel` to zero."""

    atom: int
    rel: int


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


def use_symbol(k: int) -> sp.Symbol:
    return sp.Symbol(f"b@{k}")


def number(value: float) -> sp.Expr:
    """A file value as a sympy number: integers exactly (so that `1 * x` folds away),
    everything else as the exact binary double."""
    value = float(value)
    if math.isnan(value):
        return sp.nan
    if math.isinf(value):
        return sp.oo if value > 0 else -sp.oo
    if value.is_integer() and abs(value) < 2**53:
        return sp.Integer(int(value))
    return sp.Float(value, precision=53)


class _Atoms:
    def __init__(self, states: set[sp.Symbol]):
        self.states = states
        self.functions: list[sp.Expr] = []
        self._index: dict[sp.Expr, int] = {}
        self.uses: list[AtomUse] = []
        self._use_index: dict[AtomUse, int] = {}

    def is_dynamic(self, e: sp.Basic) -> bool:
        return bool(e.has(TIME) or (e.free_symbols & self.states))

    def atom(self, g: sp.Expr) -> int:
        if g not in self._index:
            self._index[g] = len(self.functions)
            self.functions.append(g)
        return self._index[g]

    def split_trigger(self, trigger: sp.Basic) -> sp.Basic:
        if isinstance(trigger, Relational) and type(trigger) in REL_CODE:
            if not self.is_dynamic(trigger):
                return trigger
            lhs, rhs = trigger.args
            i = self.atom(lhs - rhs)
            self.add_switches(lhs)
            self.add_switches(rhs)
            use = AtomUse(i, REL_CODE[type(trigger)])
            if use not in self._use_index:
                self._use_index[use] = len(self.uses)
                self.uses.append(use)
            return use_symbol(self._use_index[use])
        if isinstance(trigger, BooleanFunction):
            return trigger.func(*[self.split_trigger(a) for a in trigger.args])
        if isinstance(trigger, BooleanAtom):
            return trigger
        self.add_switches(trigger)
        return trigger

    def add_switches(self, e: sp.Basic) -> None:
        if not isinstance(e, sp.Basic):
            return
        for r in e.atoms(Relational):
            if type(r) in REL_CODE and self.is_dynamic(r):
                lhs, rhs = r.args
                self.atom(lhs - rhs)


@dataclass
class KernelModel:
    """The expressions of one specialised kernel (all in x, varied p, t).

    `varied`: SBML ids read from the parameter table, in column order.
    `outputs`: SBML ids written at each output time (their SBML values)."""

    ode: OdeSystem
    varied: tuple[str, ...]
    outputs: tuple[str, ...]
    fixed_values: dict[str, float] = field(default_factory=dict)

    def __post_init__(self):
        index = {pid: i for i, pid in enumerate(self.ode.p_ids)}
        unknown = [v for v in self.varied if v not in index]
        if unknown:
            raise OptionError("parameters", f"{unknown[0]!r} is not a parameter, initial "
                                            f"value, compartment size or stoichiometry of "
                                            f"model {self.ode.network.id!r} that the ODE "
                                            f"view leaves free (known: "
                                            f"{', '.join(self.ode.p_ids[:15])} ...)")
        if len(set(self.varied)) != len(self.varied):
            raise OptionError("parameters", f"a parameter is varied twice: {self.varied}")
        values = {pid: float(v) for pid, v in zip(self.ode.p_ids, self.ode.p_values)}
        values.update({k: float(v) for k, v in self.fixed_values.items()})
        varied = set(self.varied)
        self.p_symbols = tuple(self.ode.p[index[v]] for v in self.varied)
        self._fixed: dict[sp.Basic, sp.Basic] = {}
        #: symbol -> number, printed as a literal (fixed parameters and reciprocals)
        self.literals: dict[sp.Symbol, float] = {}
        for pid, v in values.items():
            if pid in varied:
                continue
            symbol = self.ode.p[index[pid]]
            if v in (0.0, 1.0, -1.0):
                self._fixed[symbol] = sp.Integer(int(v))
                continue
            self.literals[symbol] = v
            inverse = sp.Symbol(f"1/{symbol.name}", real=True)
            self._fixed[sp.Pow(symbol, -1)] = inverse
            self.literals[inverse] = _reciprocal(v)

    # -- specialisation ---------------------------------------------------------
    def specialise(self, e) -> sp.Basic:
        e = sp.sympify(e)
        if not self._fixed:
            return e
        e = e.xreplace(self._fixed)
        if self.literals and e.has(sp.Pow):
            # exponents as numbers: x**2 is x*x, and d(x**n)/dx = n*x**(n-1), not the
            # n*x**n/x that a symbolic n gives (NaN at x = 0)
            literal = set(self.literals)
            e = e.replace(lambda a: isinstance(a, sp.Pow) and bool(a.exp.free_symbols & literal),
                          lambda a: sp.Pow(a.base, self.numeric(a.exp)))
        return e

    def numeric(self, e) -> sp.Basic:
        """`e` (specialised) with the literals substituted: for numeric evaluation."""
        e = sp.sympify(e)
        if not self.literals:
            return e
        return e.xreplace({s: number(v) for s, v in self.literals.items()})

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

    @cached_property
    def output_exprs(self) -> tuple[sp.Expr, ...]:
        out = []
        for sid in self.outputs:
            try:
                out.append(self.specialise(self.ode.output_named(sid)))
            except KeyError:
                raise OptionError("outputs", f"{sid!r} is not a variable of model "
                                             f"{self.ode.network.id!r}") from None
        return tuple(out)

    @cached_property
    def rhs_depends_on_time(self) -> bool:
        return any(isinstance(f, sp.Basic) and f.has(TIME) for f in self.rhs)

    # -- events -----------------------------------------------------------------
    @cached_property
    def _events_and_atoms(self) -> tuple[tuple[EventSpec, ...], _Atoms]:
        atoms = _Atoms(set(self.ode.x))
        events = []
        for e in self.ode.events:
            trigger = atoms.split_trigger(self.specialise(e.trigger))
            events.append(EventSpec(
                id=e.id, trigger=trigger,
                targets=tuple(i for i, _ in e.assignments),
                values=tuple(self.specialise(v) for _, v in e.assignments),
                priority=None if e.priority is None else self.specialise(e.priority),
                persistent=bool(e.persistent), initial_value=bool(e.trigger_initial_value),
                values_at_trigger=bool(e.use_values_from_trigger_time),
                delay=None if e.delay is None else self.specialise(e.delay)))
        for f in self.rhs:
            atoms.add_switches(f)
        for g in list(atoms.functions):  # a switch inside an atom is watched as well
            atoms.add_switches(g)
        return tuple(events), atoms

    @property
    def events(self) -> tuple[EventSpec, ...]:
        return self._events_and_atoms[0]

    @property
    def atoms(self) -> tuple[sp.Expr, ...]:
        return tuple(self._events_and_atoms[1].functions)

    @property
    def uses(self) -> tuple[AtomUse, ...]:
        return tuple(self._events_and_atoms[1].uses)

    @property
    def watches_crossings(self) -> bool:
        return bool(self.atoms)

    # -- Jacobian ---------------------------------------------------------------
    @cached_property
    def jacobian(self) -> sp.Matrix | None:
        """df/dx analytic, or None where sympy leaves a derivative unevaluated
        (floor, ceiling, a function it cannot differentiate)."""
        if not self.n_states:
            return sp.zeros(0, 0)
        jac = sp.Matrix(self.rhs).jacobian(sp.Matrix(self.x))
        if any(isinstance(e, sp.Basic) and e.has(sp.Derivative, sp.Subs) for e in jac):
            return None
        return jac.applyfunc(_drop_dirac)

    @cached_property
    def dfdt(self) -> tuple[sp.Expr, ...] | None:
        """df/dt (explicit time dependence), None where it cannot be written."""
        if not self.rhs_depends_on_time:
            return tuple(sp.Integer(0) for _ in self.rhs)
        out = tuple(sp.diff(f, TIME) for f in self.rhs)
        if any(isinstance(e, sp.Basic) and e.has(sp.Derivative, sp.Subs) for e in out):
            return None
        return tuple(_drop_dirac(e) for e in out)


def _reciprocal(v: float) -> float:
    """1/v as IEEE division gives it (NaN stays NaN, +-inf gives 0)."""
    if math.isnan(v):
        return v
    if math.isinf(v):
        return 0.0
    return 1.0 / v


def _drop_dirac(e: sp.Basic) -> sp.Basic:
    """Derivatives of Heaviside/sign are DiracDelta: zero except at the switch, which
    the integrator does not step across (switches are watched atoms)."""
    if isinstance(e, sp.Basic) and e.has(sp.DiracDelta):
        return e.replace(lambda a: isinstance(a, sp.DiracDelta), lambda a: sp.Integer(0))
    return e
