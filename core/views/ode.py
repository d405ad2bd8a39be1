"""The ODE view of a Network: x' = f(x, p, t), x(t0) = x0(p, t0), with events.

What becomes a state, a parameter, or an expression:

- states `x`: species changed by reactions or events (held as *amounts*, so that a
  compartment whose size changes leaves amounts alone, as SBML says), species in a
  compartment that varies (amount constant, concentration follows the size), and
  every variable with a rate rule or set by events (held as its SBML value);
  a variable whose initial assignment depends on time is a state with x' = 0.
- parameters `p`: every number the file states (parameter values, compartment
  sizes, species' initial amount or concentration *as declared*, stoichiometries
  of species references with ids), unless an initial assignment or a rule
  overrides it. `p_ids` are the SBML ids, so an ensemble varies them by name.
- everything else is an expression in x, p, t: assignment rules, initial
  assignments of constants (as functions of p, so they follow varied
  parameters), reaction rates, concentrations.

rateOf(e) is replaced by the chain rule, grad(e)·f + de/dt. delay(e, d) is kept
as `Delay` for the backends that support it (the CPU reference); `supports()` of
the others refuses it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import sympy as sp

from ..errors import UnsupportedModelError
from ..ir import TIME, Delay, Network, RateOf, sym
from .. import outputs
from .cache import memoised

AMOUNT = "amount"  # state is a species amount; its SBML value may be amount / size
VALUE = "value"  # state is the SBML value itself


# real=True: sympy differentiates Abs(x) of a plain symbol into re/im terms, which no
# C printer can print; states and parameters are real numbers anyway.
def state_symbol(sbml_id: str) -> sp.Symbol:
    return sp.Symbol(f"x@{sbml_id}", real=True)


def parameter_symbol(sbml_id: str) -> sp.Symbol:
    return sp.Symbol(f"p@{sbml_id}", real=True)


@dataclass(frozen=True)
class OdeEvent:
    """An SBML event over the ODE state. All expressions are in x, p, t.

    `assignments`: (state index, new value in the state's own units). The values
    of one event are all computed before any is applied (SBML semantics)."""

    id: str
    trigger: sp.Basic
    assignments: tuple[tuple[int, sp.Expr], ...]
    trigger_initial_value: bool
    persistent: bool
    delay: sp.Expr | None
    priority: sp.Expr | None
    use_values_from_trigger_time: bool


@dataclass(frozen=True)
class OdeSystem:
    network: Network
    x: tuple[sp.Symbol, ...]
    state_ids: tuple[str, ...]
    state_kinds: tuple[str, ...]  # AMOUNT or VALUE, per state
    p: tuple[sp.Symbol, ...]
    p_ids: tuple[str, ...]
    p_values: np.ndarray  # nominal values from the file (nan where the file gives none)
    rhs: tuple[sp.Expr, ...]
    x0: tuple[sp.Expr, ...]  # in p and t (evaluated at t = t0)
    events: tuple[OdeEvent, ...]
    values: dict[str, sp.Expr] = field(repr=False)  # SBML value of every id, in x, p, t
    amounts: dict[str, sp.Expr] = field(repr=False)  # species amounts, in x, p, t
    t: sp.Symbol = TIME

    @property
    def n_states(self) -> int:
        return len(self.x)

    @property
    def n_parameters(self) -> int:
        return len(self.p)

    @cached_property
    def jacobian(self) -> sp.Matrix:
        """df/dx, analytic."""
        return sp.Matrix(self.rhs).jacobian(sp.Matrix(self.x))

    @cached_property
    def has_delays(self) -> bool:
        exprs = [*self.rhs, *self.values.values()]
        for e in self.events:
            exprs += [e.trigger, *(a for _, a in e.assignments)]
        return any(isinstance(e, sp.Basic) and e.has(Delay) for e in exprs)

    def value(self, sbml_id: str) -> sp.Expr:
        """The SBML value of an id (species: concentration unless hasOnlySubstanceUnits)."""
        try:
            return self.values[sbml_id]
        except KeyError:
            raise KeyError(f"{sbml_id!r} is not a variable of model {self.network.id!r}") from None

    def amount(self, species_id: str) -> sp.Expr:
        return self.amounts[species_id]

    def concentration(self, species_id: str) -> sp.Expr:
        return self.output(species_id, outputs.CONCENTRATION)

    def output(self, sbml_id: str, kind: str = outputs.VALUE) -> sp.Expr:
        """kind: 'value', 'amount' or 'concentration' (the last two for species);
        OptionError for what the model cannot report (core/outputs.py)."""
        return resolve_output(self, sbml_id, kind)

    def output_named(self, name: str) -> sp.Expr:
        """The expression of an output name as asked (`S1`, `[S1]`, `amount(S1)`)."""
        return outputs.expression(self, name)

    def parameter_vector(self, overrides: dict[str, float] | None = None) -> np.ndarray:
        """The nominal p with some entries replaced by SBML id."""
        p = self.p_values.copy()
        if overrides:
            index = {pid: i for i, pid in enumerate(self.p_ids)}
            for key, v in overrides.items():
                if key not in index:
                    raise KeyError(key)
                p[index[key]] = v
        return p


def resolve_output(view, sbml_id: str, kind: str) -> sp.Expr:
    """What the ODE and the stochastic view answer for output (id, kind): the SBML
    value, the amount, or amount / compartment size; the rules of what may be asked
    (species only; no concentration in a 0-D compartment) are core/outputs.py's."""
    name = outputs.output_name(sbml_id, kind)  # ValueError for an unknown kind
    outputs.check_output(view.network, outputs.Output(name, sbml_id, kind))
    if kind == outputs.VALUE:
        return view.values[sbml_id]
    if kind == outputs.AMOUNT:
        return view.amounts[sbml_id]
    compartment = view.network.species_by_id[sbml_id].compartment
    return view.amounts[sbml_id] / view.values[compartment]


def unsupported(network: Network) -> list[tuple[str, tuple[str, ...]]]:
    """Features the ODE view cannot represent."""
    out = []
    if network.algebraic_rules:
        out.append(("algebraic rule", tuple(r.id or f"algebraicRule_{i + 1}"
                                            for i, r in enumerate(network.algebraic_rules))))
    no_rate = tuple(r.id for r in network.reactions if r.rate is None)
    if no_rate:
        out.append(("reaction without kinetic law math (its rate is undefined)", no_rate))
    fast = tuple(r.id for r in network.reactions if r.fast)
    if fast:
        out.append(("fast reaction", fast))
    return out


def unsupported_when_built(network: Network) -> list[tuple[str, tuple[str, ...]]]:
    """`unsupported(network)`, and when that is empty what building the system
    finds (an event assignment to a variable with an assignment rule, a circular
    definition, ...): what every backend that integrates the ODE view refuses."""
    missing = list(unsupported(network))
    if missing:
        return missing
    try:
        ode_system(network)
    except UnsupportedModelError as exc:
        return [(feature, tuple(ids)) for feature, ids in exc.features.items()]
    return []


def unsupported_without_history(network: Network, why: str) -> list[tuple[str, tuple[str, ...]]]:
    """`unsupported_when_built(network)`, then delay() anywhere (event priorities and
    delays included, test suite 01521) as refused for `why`: what a backend refuses
    whose kernels integrate the ODE view without keeping a trajectory's history."""
    from ..features import delay_users

    missing = unsupported_when_built(network)
    if missing:
        return missing
    delayed = delay_users(network)
    return [(f"delay() ({why})", delayed)] if delayed else []


def ode_system(network: Network) -> OdeSystem:
    """The ODE view of `network`, built once per network (views/cache.py);
    UnsupportedModelError for what it cannot represent."""
    return memoised(network, ("ode",), lambda: _build(network))


def _build(network: Network) -> OdeSystem:
    missing = unsupported(network)
    if missing:
        raise UnsupportedModelError(missing, who="the ODE view")
    return _Builder(network).build()


class _Builder:
    """`species_as_amounts`: every species symbol in math means its amount (the
    stochastic convention: kinetic laws evaluated in substance units)."""

    def __init__(self, net: Network, species_as_amounts: bool = False):
        self.net = net
        self.species_as_amounts = species_as_amounts
        self.rule_vars = {r.variable for r in net.assignment_rules}
        self.rate_vars = {r.variable for r in net.rate_rules}
        self.ia = {a.variable: a.math for a in net.initial_assignments}
        self.event_vars = set(net.event_assigned)
        self.varying_compartments = {
            c.id for c in net.compartments
            if c.id in self.rule_vars or c.id in self.rate_vars or c.id in self.event_vars
        }
        self.reaction_changed = {
            sr.species
            for r in net.reactions
            for sr in (*r.reactants, *r.products)
            if not net.species_by_id[sr.species].boundary_condition
            and not net.species_by_id[sr.species].constant
        }

    # -- classification ---------------------------------------------------------
    def _valued_ids(self) -> list[str]:
        n = self.net
        ids = [c.id for c in n.compartments] + [s.id for s in n.species]
        ids += [p.id for p in n.parameters] + list(n.species_reference_by_id)
        return ids

    def _state_kind(self, sid: str) -> str | None:
        n = self.net
        if sid in self.rule_vars:
            return None
        if sid in self.rate_vars:
            return VALUE
        if sid in n.species_by_id:
            s = n.species_by_id[sid]
            if sid in self.reaction_changed or sid in self.event_vars:
                return AMOUNT
            # constant or not, its amount stays put while the compartment changes
            # (test suite 01117, 01118: a constant species keeps its amount)
            if s.compartment in self.varying_compartments:
                return AMOUNT
            return None
        if sid in self.event_vars:
            return VALUE
        return None

    def _file_value(self, sid: str) -> float | None:
        n = self.net
        kind = n.kind_of(sid)
        if kind == "compartment":
            return n.compartment_by_id[sid].size
        if kind == "parameter":
            return n.parameter_by_id[sid].value
        if kind == "species_reference":
            return n.species_reference_by_id[sid].value
        if kind == "species":
            s = n.species_by_id[sid]
            return s.initial_amount if s.initial_amount is not None else s.initial_concentration
        return None

    # -- build ------------------------------------------------------------------
    def build(self) -> OdeSystem:
        n = self.net
        ids = self._valued_ids()
        kinds = {sid: self._state_kind(sid) for sid in ids}
        # p: every number the file states that nothing at t0 overrides
        p_ids = [sid for sid in ids if sid not in self.rule_vars and sid not in self.ia]
        p_syms = {sid: parameter_symbol(sid) for sid in p_ids}
        p_values = np.array([_num(self._file_value(sid)) for sid in p_ids], dtype=float)

        init = self._initial_values(ids, p_syms)  # SBML value at t0, in p and t
        # a constant fixed at t0 through time must not follow t afterwards: a state
        for sid in ids:
            if kinds[sid] is None and sid in self.ia and (
                    init.value(sid).has(TIME) or _has_rate_of_placeholder(init.value(sid))):
                kinds[sid] = AMOUNT if sid in n.species_by_id else VALUE

        state_ids = [sid for sid in ids if kinds[sid] is not None]
        xs = {sid: state_symbol(sid) for sid in state_ids}

        # SBML values over time, as expressions in x, p, t
        values = _Resolver(n, self.species_as_amounts)
        for sid in ids:
            if sid in self.rule_vars:
                values.define(sid, n.assignment_rule_by_variable[sid].math)
            elif kinds[sid] == VALUE:
                values.fix(sid, xs[sid])
            elif kinds[sid] == AMOUNT:
                values.define_species_from_amount(sid, xs[sid])
            else:  # constant over time: its value at t0
                values.fix(sid, init.value(sid))
        for r in n.reactions:
            values.define(r.id, r.rate)

        amounts = {}
        for s in n.species:
            if kinds[s.id] == AMOUNT:
                amounts[s.id] = xs[s.id]
            elif values.value_is_amount(s.id):
                amounts[s.id] = values.value(s.id)
            else:
                amounts[s.id] = values.value(s.id) * values.value(s.compartment)

        rhs = [self._derivative(sid, kinds[sid], values) for sid in state_ids]
        x0 = [init.amount(sid) if kinds[sid] == AMOUNT else init.value(sid) for sid in state_ids]

        x_list = [xs[sid] for sid in state_ids]
        rates = _RateOf(x_list, rhs)
        rhs = rates.resolve_all(rhs)
        all_values = {sid: rates.resolve(values.value(sid)) for sid in [*ids, *n.reaction_by_id]}
        amounts = {k: rates.resolve(v) for k, v in amounts.items()}
        x0 = self._rates_at_t0(x0, x_list, values, rates)
        index = {sid: i for i, sid in enumerate(state_ids)}
        events = tuple(self._event(e, values, kinds, index, rates) for e in n.events)
        return OdeSystem(
            network=n,
            x=tuple(x_list),
            state_ids=tuple(state_ids),
            state_kinds=tuple(kinds[s] for s in state_ids),
            p=tuple(p_syms[s] for s in p_ids),
            p_ids=tuple(p_ids),
            p_values=p_values,
            rhs=tuple(rhs),
            x0=tuple(x0),
            events=events,
            values=all_values,
            amounts=amounts,
        )

    def _rates_at_t0(self, x0, x_list, values: "_Resolver", rates: "_RateOf"):
        """Replace rateOf placeholders in x0 by the derivative at t0: the chain-rule
        derivative in x, p, t with x set to x0 (repeated: x0 may use rateOf too)."""
        x0 = [rates.resolve(e) for e in x0]
        for _ in range(_RateOf.MAX_ROUNDS):
            pending = {s for e in x0 for s in e.free_symbols if s.name.startswith("rateOf@")}
            if not pending:
                return x0
            at_t0 = dict(zip(x_list, x0))
            repl = {ph: rates.resolve(RateOf(values.value(ph.name[len("rateOf@"):]))).xreplace(at_t0)
                    for ph in pending}
            x0 = [e.xreplace(repl) for e in x0]
        raise UnsupportedModelError({"rateOf in initial values that depends on itself": ()},
                                    who="the ODE view")

    def _initial_values(self, ids, p_syms) -> "_Resolver":
        """SBML values at t0: file numbers, initial assignments, assignment rules."""
        n = self.net
        init = _Resolver(n, self.species_as_amounts, rate_of_placeholders=True)
        for sid in ids:
            if sid in self.rule_vars:
                init.define(sid, n.assignment_rule_by_variable[sid].math)
            elif sid in self.ia:
                init.define(sid, self.ia[sid])
            elif sid in n.species_by_id:
                s = n.species_by_id[sid]
                if s.initial_amount is not None:
                    init.define_species_from_amount(sid, p_syms[sid])
                else:  # declared as a concentration (or not at all)
                    init.define_species_from_concentration(sid, p_syms[sid])
            else:
                init.fix(sid, p_syms[sid])
        for r in n.reactions:
            init.define(r.id, r.rate)
        return init

    @cached_property
    def _net_stoichiometries(self) -> dict[str, list]:
        """species id -> [(reaction, net stoichiometry != 0)] in reaction order: one
        pass over the reactions (asking every reaction about every species made the
        view quadratic: minutes for 10,000 species)."""
        out: dict[str, list] = {}
        for r in self.net.reactions:
            net: dict[str, sp.Expr] = {}
            for sr in r.products:
                net[sr.species] = net.get(sr.species, sp.Integer(0)) + sr.stoichiometry
            for sr in r.reactants:
                net[sr.species] = net.get(sr.species, sp.Integer(0)) - sr.stoichiometry
            for sid, value in net.items():
                if value != 0:
                    out.setdefault(sid, []).append((r, value))
        return out

    def _derivative(self, sid: str, kind: str, values: "_Resolver") -> sp.Expr:
        n = self.net
        if sid in self.rate_vars:
            return values.resolve(n.rate_rule_by_variable[sid].math)
        if kind != AMOUNT or sid not in self.reaction_changed:
            return sp.Integer(0)
        total = sp.Integer(0)
        for r, net_stoich in self._net_stoichiometries.get(sid, ()):
            total += values.resolve(net_stoich) * values.value(r.id)
        cf = n.species_conversion_factor(sid)
        if cf is not None:
            total = total * values.value(cf)
        return total

    def _event(self, e, values: "_Resolver", kinds, index, rates: "_RateOf") -> OdeEvent:
        n = self.net
        r = lambda expr: rates.resolve(values.resolve(expr))  # noqa: E731
        assignments = []
        for a in e.assignments:
            v = a.variable
            if v not in index:
                raise UnsupportedModelError(
                    {f"event assignment to {n.kind_of(v) or 'unknown'} '{v}' that is not "
                     f"a state (it has an assignment rule or is constant)": (e.id,)},
                    who="the ODE view")
            value = r(a.math)
            if kinds[v] == AMOUNT and not values.value_is_amount(v):
                comp = n.species_by_id[v].compartment
                # the size *before* this event, even if the event also sets it: all
                # assignments are computed from the current state (test suite 01779)
                value = value * values.value(comp)
            assignments.append((index[v], value))
        assignments = self._rescale_concentration_states(e, assignments, values, kinds, index, r)
        return OdeEvent(
            id=e.id,
            trigger=r(e.trigger),
            assignments=tuple(assignments),
            trigger_initial_value=e.trigger_initial_value,
            persistent=e.persistent,
            delay=None if e.delay is None else r(e.delay),
            priority=None if e.priority is None else r(e.priority),
            use_values_from_trigger_time=e.use_values_from_trigger_time,
        )


    def _rescale_concentration_states(self, e, assignments, values, kinds, index, r):
        """A species whose state is its concentration (it has a rate rule) keeps its
        *amount* when an event resizes its compartment (test suite 01506), so its
        concentration scales by old size / new size."""
        n = self.net
        new = dict(assignments)
        resized = {a.variable: r(a.math) for a in e.assignments if a.variable in n.compartment_by_id}
        for s in n.species:
            if s.compartment not in resized or s.id not in index or kinds[s.id] != VALUE:
                continue
            if n.species_value_is_amount(s.id):
                continue
            i = index[s.id]
            conc = new.get(i, values.value(s.id))
            new[i] = conc * values.value(s.compartment) / resized[s.compartment]
        return tuple(new.items())


class _Resolver:
    """Substitutes SBML symbols by their definitions, recursively, with memo and
    cycle detection (SBML forbids cycles; a model that has one gets a clear error)."""

    def __init__(self, net: Network, species_as_amounts: bool = False,
                 rate_of_placeholders: bool = False):
        self.net = net
        self.species_as_amounts = species_as_amounts
        # At t0, rateOf(S) is S's derivative at t0, which needs the right-hand side;
        # keep it as a placeholder symbol until the right-hand side exists.
        self.rate_of_placeholders = rate_of_placeholders
        self.fixed: dict[str, sp.Expr] = {}  # already in final terms
        self.defs: dict[str, sp.Expr] = {}  # in SBML symbols, to resolve
        self.memo: dict[str, sp.Expr] = {}
        self._active: list[str] = []

    def fix(self, sid: str, expr: sp.Expr) -> None:
        self.fixed[sid] = expr

    def define(self, sid: str, expr: sp.Expr) -> None:
        self.defs[sid] = expr

    def value_is_amount(self, sid: str) -> bool:
        return self.species_as_amounts or self.net.species_value_is_amount(sid)

    def define_species_from_amount(self, sid: str, amount: sp.Expr) -> None:
        if self.value_is_amount(sid):
            self.define(sid, amount)
        else:
            self.define(sid, amount / sym(self.net.species_by_id[sid].compartment))

    def define_species_from_concentration(self, sid: str, conc: sp.Expr) -> None:
        if self.value_is_amount(sid):
            self.define(sid, conc * sym(self.net.species_by_id[sid].compartment))
        else:
            self.define(sid, conc)

    def amount(self, sid: str) -> sp.Expr:
        if self.value_is_amount(sid):
            return self.value(sid)
        return self.value(sid) * self.value(self.net.species_by_id[sid].compartment)

    def value(self, sid: str) -> sp.Expr:
        if sid in self.fixed:
            return self.fixed[sid]
        if sid in self.memo:
            return self.memo[sid]
        if sid not in self.defs:
            raise UnsupportedModelError({f"reference to '{sid}', which has no value": ()},
                                        who="the ODE view")
        if sid in self._active:
            cycle = " -> ".join(self._active[self._active.index(sid):] + [sid])
            raise UnsupportedModelError({f"circular definition {cycle}": (sid,)},
                                        who="the ODE view")
        self._active.append(sid)
        try:
            out = self.resolve(self.defs[sid])
        finally:
            self._active.pop()
        self.memo[sid] = out
        return out

    def resolve(self, expr: sp.Basic) -> sp.Basic:
        if not isinstance(expr, sp.Basic):
            return sp.sympify(expr)
        if self.rate_of_placeholders and expr.has(RateOf):
            expr = expr.replace(lambda a: isinstance(a, RateOf),
                                lambda a: rate_of_placeholder(a.args[0].name))
        subs = {}
        for s in expr.free_symbols:
            name = s.name
            if "@" in name:  # csymbols and already-resolved x@/p@ symbols
                continue
            subs[s] = self.value(name)
        return expr.xreplace(subs) if subs else expr


class _RateOf:
    """Replaces rateOf(e) by grad(e)·f + de/dt, repeating while f itself uses rateOf."""

    MAX_ROUNDS = 8

    def __init__(self, x: list[sp.Symbol], rhs: list[sp.Expr]):
        self.x = x
        self.rhs = list(rhs)
        self._resolved = False

    def _derivative(self, e: sp.Expr, rhs) -> sp.Expr:
        d = sp.diff(e, TIME) if e.has(TIME) else sp.Integer(0)
        for xi, fi in zip(self.x, rhs):
            if e.has(xi):
                d += sp.diff(e, xi) * fi
        return d

    @staticmethod
    def _outside_delays(e: sp.Basic):
        """e with every delay(...) that contains rateOf swapped for a placeholder:
        rateOf inside delay() is the *past* derivative (zero before t0), which the
        delay-aware reference evaluates from its history, so it stays as it is."""
        delayed = {d: sp.Dummy() for d in e.atoms(Delay) if d.has(RateOf)}
        return e.xreplace(delayed), {v: k for k, v in delayed.items()}

    def _needs(self, e) -> bool:
        return isinstance(e, sp.Basic) and e.has(RateOf) and self._outside_delays(e)[0].has(RateOf)

    def _replace(self, e: sp.Basic, rhs) -> sp.Basic:
        if not self._needs(e):
            return e
        outside, restore = self._outside_delays(e)
        replaced = outside.replace(lambda a: isinstance(a, RateOf),
                                   lambda a: self._derivative(a.args[0], rhs))
        return replaced.xreplace(restore)

    def resolve_all(self, rhs: list[sp.Expr]) -> list[sp.Expr]:
        current = list(rhs)
        for _ in range(self.MAX_ROUNDS):
            if not any(self._needs(f) for f in current):
                break
            current = [self._replace(f, current) for f in current]
        else:
            raise UnsupportedModelError({"rateOf whose value depends on itself": ()},
                                        who="the ODE view")
        self.rhs = current
        self._resolved = True
        return current

    def resolve(self, e: sp.Basic) -> sp.Basic:
        assert self._resolved, "resolve_all(rhs) first"
        return self._replace(e, self.rhs)


def rate_of_placeholder(sbml_id: str) -> sp.Symbol:
    return sp.Symbol(f"rateOf@{sbml_id}", real=True)


def _has_rate_of_placeholder(e: sp.Basic) -> bool:
    return any(s.name.startswith("rateOf@") for s in e.free_symbols)


def _num(v) -> float:
    return float("nan") if v is None else float(v)
