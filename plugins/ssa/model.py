"""What the SSA kernels simulate: a Network reduced to a jump process.

`SsaModel` is built once per compile from the views (core/views):

- the state `x`, the integer stoichiometry and the refusals come from the
  stochastic view (species amounts, plus values that only events set);
- the propensities are the kinetic laws. SBML's own reading of a kinetic law
  (species symbols are concentrations unless hasOnlySubstanceUnits; the law is in
  substance per time) already *is* a propensity in molecules per time; the SBML
  Test Suite's DSMTS case 00011 (hasOnlySubstanceUnits false, compartment size 2,
  expected rates halved) checks exactly that. So `rate_species="sbml"` (default)
  takes the rates of the ODE view, which reads the laws that way and holds the
  same state symbols. `rate_species="amount"` takes the stochastic view's
  propensities (every species symbol is its amount), the convention of tools that
  ignore compartment sizes in stochastic mode; the two agree whenever species have
  only substance units or live in compartments of size 1.
- outputs, event triggers and event assignments are SBML values (the ODE view's),
  so an event that sets a concentration sets amount = value * size.

Events: a trigger that does not involve time changes only when the state does,
i.e. at a firing or at another event: it is checked after each of those, which is
exact. A trigger `time >= T` (or `>`, `<=`/`<` reversed) with T free of the
state fires exactly at T: the exponential waiting time is memoryless, so a firing
proposed past T is discarded and the clock restarts at T with the same
propensities, which leaves the process unchanged. Triggers that mix time with the
state, delays and priorities are refused with a reason.

Clocks: a parameter whose rate rule has a constant rate c (core/views/stochastic.py)
is exact between events: v = c * time + offset. Its state slot holds the OFFSET,
so nothing changes it between events: every expression reads v as
`c * time + offset`, the initial value is v0 - c * t0, and an event that assigns V
stores V - c * time. A trigger on clocks, `f >= 0` (or `>`, or reversed) with f
affine in time, f = a * time + b, a > 0 free of the state and b free of every
state but clock offsets, becomes the time threshold T = -b / a: it fires exactly at
T like `time >= T`, and T is recomputed whenever an event changes an offset. A
trigger that time makes false (a < 0 at the nominal values), propensities that
read a clock, and any other rate rule are refused by name; a varied rate that
makes a < 0 is refused when the run starts (`check_rising`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import sympy as sp

from sbmlgpu import outputs
from sbmlgpu.errors import OptionError, UnsupportedModelError
from sbmlgpu.features import draws_evaluated_continuously, network_features
from sbmlgpu.ir import TIME, Network
from sbmlgpu.views import ode_system, stochastic_system
from sbmlgpu.views.stochastic import unsupported as stochastic_unsupported

from .choices import RATE_SPECIES  # noqa: F401 (re-exported)

# Feature names (as core/features.py spells them) the SSA refuses, and why.
_REFUSED_FEATURES = {
    "events with delay": "event delay (not implemented in the SSA backend)",
    "event priorities": "event priority (not implemented in the SSA backend; "
                        "simultaneous events run in document order)",
    "delay()": "delay() (a jump process has no history to read)",
    "rateOf": "rateOf() (a jump process has no time derivative)",
}


@dataclass(frozen=True)
class SsaEvent:
    """One event. `time_threshold` is T for a trigger `time >= T` (an expression
    in p and clock offsets), else None and `trigger` (in x, p) is checked after
    every state change. `rising`: for a trigger on clocks, the coefficient of time
    (in p) that must stay positive for T to be its firing time."""

    id: str
    trigger: sp.Basic
    time_threshold: sp.Expr | None
    assignments: tuple[tuple[int, sp.Expr], ...]  # (state index, value in x, p, t)
    trigger_initial_value: bool
    rising: sp.Expr | None = None


@dataclass(frozen=True)
class SsaModel:
    network: Network
    state_ids: tuple[str, ...]
    x: tuple[sp.Symbol, ...]
    p: tuple[sp.Symbol, ...]
    p_ids: tuple[str, ...]
    p_values: np.ndarray
    reaction_ids: tuple[str, ...]
    propensities: tuple[sp.Expr, ...]  # in x and p
    stoichiometry: np.ndarray  # (reactions, states) int64
    x0: tuple[sp.Expr, ...]  # in p and t (t = the first output time)
    events: tuple[SsaEvent, ...]
    values: dict  # SBML id -> SBML value in x, p, t
    rate_species: str = "sbml"
    # clocks: (state index, rate in p); their states hold offsets (module doc)
    clocks: tuple[tuple[int, sp.Expr], ...] = ()

    @property
    def n_states(self) -> int:
        return len(self.x)

    @property
    def n_reactions(self) -> int:
        return len(self.reaction_ids)

    @cached_property
    def changed_states(self) -> tuple[tuple[int, ...], ...]:
        """For each reaction, the states its firing changes."""
        return tuple(tuple(int(s) for s in np.flatnonzero(row)) for row in self.stoichiometry)

    @cached_property
    def dependents(self) -> tuple[tuple[int, ...], ...]:
        """For each reaction j, the reactions whose propensity reads a state that j
        changes (the dependency graph of Gibson and Bruck 2000), in index order."""
        reads = [{self.x.index(s) for s in a.free_symbols if s in self._x_set}
                 for a in self.propensities]
        return tuple(tuple(d for d in range(self.n_reactions) if reads[d] & set(changed))
                     for changed in self.changed_states)

    @cached_property
    def _x_set(self) -> frozenset:
        return frozenset(self.x)

    def output_expression(self, name: str) -> sp.Expr:
        """The expression of output `name` (`S1`, `[S1]`, `amount(S1)`: core/outputs.py),
        from the stochastic view; OptionError naming a name the model cannot report."""
        view = stochastic_system(self.network, self.rate_species, clocks=True)
        return sp.sympify(view.output_named(name)).xreplace(clock_reading(self.x, self.clocks))

    def default_outputs(self) -> tuple[str, ...]:
        """What every backend reports by default (core/outputs.py)."""
        return outputs.default_outputs(self.network)


def unsupported(network: Network) -> list[tuple[str, tuple[str, ...]]]:
    """What the SSA backend refuses, with the ids of the elements that use it."""
    out = list(stochastic_unsupported(network, clocks=True))
    present = network_features(network)
    for feature, reason in _REFUSED_FEATURES.items():
        if feature in present:
            out.append((reason, present[feature]))
    drawn = draws_evaluated_continuously(network)
    if drawn:
        out.append(("distrib draw evaluated continuously: in a propensity, rule or "
                    "trigger, or the initial assignment of a value that nothing changes, "
                    "which is read wherever it is used (a new random number at every "
                    "evaluation is no jump process; draw in an initial or event assignment "
                    "of a variable that a reaction, rule or event changes)", drawn))
    changed = {sr.species for r in network.reactions for sr in (*r.reactants, *r.products)}
    converted = [s for s in sorted(changed) if s in network.species_by_id
                 and network.species_conversion_factor(s) is not None]
    if converted:
        out.append(("conversion factor on a species that reactions change (a firing must "
                    "change counts by whole numbers)", tuple(converted)))
    if out:
        return out
    # Past the view's own refusals: what depends on the resolved math.
    try:
        ode = ode_system(network)
    except UnsupportedModelError as exc:  # pragma: no cover -- the view refused above
        return [(str(exc), ())]
    timed = [r.id for r in network.reactions if ode.values[r.id].has(TIME)]
    if timed:
        out.append(("propensity that depends on time (the direct method needs constant "
                    "propensities between firings)", tuple(timed)))
    clocks = stochastic_system(network, clocks=True).clocks
    reading = clock_reading(ode.x, clocks)
    clocked = [r.id for r in network.reactions if r.id not in timed
               and sp.sympify(ode.values[r.id]).xreplace(reading).has(TIME)]
    if clocked:
        out.append(("propensity that reads a clock (a rate-ruled value: it changes between "
                    "firings)", tuple(clocked)))
    mixed, falling = [], []
    for e in ode.events:
        trigger = sp.sympify(e.trigger).xreplace(reading)
        if not trigger.has(TIME):
            continue
        found = _clock_threshold(trigger, ode.x, clocks)
        if found is None:
            mixed.append(e.id)
        elif found[1] is not None and not _nominally_positive(found[1], ode):
            falling.append(e.id)
    if mixed:
        out.append(("event trigger that uses time other than as `time >= T` with T free of "
                    "the state, or a clock other than as `a * clock + b >= 0` (its exact "
                    "firing time is not computable in the SSA)", tuple(mixed)))
    if falling:
        out.append(("event trigger on a clock that time makes false, or whose clock "
                    "stands still (only a trigger that time makes true has an exact "
                    "firing time here)", tuple(falling)))
    return out


def clock_reading(x, clocks) -> dict:
    """The substitution that reads each clock state (an offset) as its value,
    offset + rate * time."""
    return {x[i]: x[i] + rate * TIME for i, rate in clocks}


def _clock_threshold(trigger: sp.Basic, x, clocks) -> tuple[sp.Expr, sp.Expr | None] | None:
    """(T, a) for a trigger that is `time >= T` as _time_threshold reads it (a None),
    or, with the clocks read as values, `f >= 0` or `f > 0` (either way round) with
    f = a * time + b, a free of the state and T = -b / a free of every state but
    clock offsets; else None."""
    plain = _time_threshold(trigger, x)
    if plain is not None:
        return plain, None
    if not isinstance(trigger, sp.core.relational.Relational) or not clocks:
        return None
    op = trigger.rel_op
    if op in (">=", ">"):
        f = trigger.lhs - trigger.rhs
    elif op in ("<=", "<"):
        f = trigger.rhs - trigger.lhs
    else:
        return None
    a = sp.diff(f, TIME)
    if a.has(TIME) or any(a.has(s) for s in x) or a == 0:
        return None
    b = f.subs(TIME, 0)
    if sp.simplify(f - (a * TIME + b)) != 0:
        return None
    offsets = {x[i] for i, _ in clocks}
    if b.has(TIME) or any(b.has(s) for s in x if s not in offsets):
        return None
    return -b / a, a


def _nominally_positive(a: sp.Expr, ode) -> bool:
    nominal = {p: float(v) for p, v in zip(ode.p, ode.p_values)}
    try:
        return float(sp.sympify(a).xreplace(nominal)) > 0
    except (TypeError, ValueError):
        return False


def check_rising(model: "SsaModel", varied: tuple[str, ...], table: np.ndarray) -> None:
    """OptionError when a varied parameter makes the time coefficient of a trigger on
    clocks non-positive: that trigger's time threshold (kernel: ssa_T) would be wrong."""
    index = {pid: i for i, pid in enumerate(model.p_ids)}
    nominal = {p: float(v) for p, v in zip(model.p, model.p_values)}
    for e in model.events:
        if e.rising is None:
            continue
        symbols = [model.p[index[v]] for v in varied]
        used = [k for k, s in enumerate(symbols) if e.rising.has(s)]
        if not used:
            continue
        rest = {p: v for p, v in nominal.items() if p not in symbols}
        f = sp.lambdify([symbols[k] for k in used], e.rising.xreplace(rest), "numpy")
        values = np.broadcast_to(np.asarray(f(*(table[k] for k in used)), float),
                                 table.shape[1:])
        bad = np.flatnonzero(~(values > 0))
        if bad.size:
            names = ", ".join(varied[k] for k in used)
            raise OptionError("parameters", f"{names} in member {int(bad[0])} stops or "
                              f"reverses a clock that event {e.id}'s trigger reads (the SSA "
                              "fires it where time makes it true; its rate must keep the "
                              "sign of the file's value)")


def _time_threshold(trigger: sp.Basic, x) -> sp.Expr | None:
    """T if `trigger` is time >= T, time > T, T <= time or T < time with T free of
    time and of the state; else None."""
    if not isinstance(trigger, sp.core.relational.Relational):
        return None
    lhs, rhs, op = trigger.lhs, trigger.rhs, trigger.rel_op
    if lhs == TIME and op in (">=", ">"):
        threshold = rhs
    elif rhs == TIME and op in ("<=", "<"):
        threshold = lhs
    else:
        return None
    if threshold.has(TIME) or any(threshold.has(s) for s in x):
        return None
    return threshold


def build(network: Network, rate_species: str = "sbml") -> SsaModel:
    """The SsaModel of `network`; UnsupportedModelError naming what it refuses."""
    if rate_species not in RATE_SPECIES:
        raise ValueError(f"rate_species must be one of {RATE_SPECIES}, not {rate_species!r}")
    missing = unsupported(network)
    if missing:
        raise UnsupportedModelError(missing, who="backend 'ssa'")
    stochastic = stochastic_system(network, species_in_rates=rate_species, clocks=True)
    ode = ode_system(network)
    if ode.state_ids != stochastic.state_ids or ode.p_ids != stochastic.p_ids:
        raise RuntimeError("the ODE and stochastic views disagree on the state; "
                           "this is a bug in sbmlgpu.views")
    clocks = stochastic.clocks
    reading = clock_reading(ode.x, clocks)
    rate_of = dict(clocks)

    def read(expr):
        return sp.sympify(expr).xreplace(reading) if clocks else expr

    def stored(i: int, value):  # what a clock's state slot holds: the offset
        return value - rate_of[i] * TIME if i in rate_of else value

    propensities = stochastic.propensities  # free of clocks (unsupported() refuses)
    events = []
    for e in ode.events:
        trigger = read(e.trigger)
        threshold, rising = (_clock_threshold(trigger, ode.x, clocks)
                             if trigger.has(TIME) else (None, None))
        assignments = tuple((i, stored(i, read(v))) for i, v in e.assignments)
        events.append(SsaEvent(e.id, trigger, threshold, assignments,
                               e.trigger_initial_value, rising))
    return SsaModel(
        network=network, state_ids=stochastic.state_ids, x=stochastic.x, p=stochastic.p,
        p_ids=stochastic.p_ids, p_values=np.asarray(stochastic.p_values, dtype=float),
        reaction_ids=stochastic.reaction_ids, propensities=tuple(propensities),
        stoichiometry=np.asarray(stochastic.stoichiometry, dtype=np.int64),
        x0=tuple(stored(i, v) for i, v in enumerate(ode.x0)), events=tuple(events),
        values={k: read(v) for k, v in ode.values.items()}, rate_species=rate_species,
        clocks=clocks)
