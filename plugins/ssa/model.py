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
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import sympy as sp

from sbmlgpu import outputs
from sbmlgpu.errors import UnsupportedModelError
from sbmlgpu.features import draws_evaluated_continuously, network_features
from sbmlgpu.ir import TIME, Network
from sbmlgpu.views import ode_system, stochastic_system
from sbmlgpu.views.stochastic import unsupported as stochastic_unsupported

RATE_SPECIES = ("sbml", "amount")

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
    in p), else None and `trigger` (in x, p) is checked after every state change."""

    id: str
    trigger: sp.Basic
    time_threshold: sp.Expr | None
    assignments: tuple[tuple[int, sp.Expr], ...]  # (state index, value in x, p, t)
    trigger_initial_value: bool


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
        return stochastic_system(self.network, self.rate_species).output_named(name)

    def default_outputs(self) -> tuple[str, ...]:
        """What every backend reports by default (core/outputs.py)."""
        return outputs.default_outputs(self.network)


def unsupported(network: Network) -> list[tuple[str, tuple[str, ...]]]:
    """What the SSA backend refuses, with the ids of the elements that use it."""
    out = list(stochastic_unsupported(network))
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
    mixed = [e.id for e in ode.events if e.trigger.has(TIME) and _time_threshold(e.trigger,
                                                                                  ode.x) is None]
    if mixed:
        out.append(("event trigger that uses time other than as `time >= T` with T free of "
                    "the state (its exact firing time is not computable in the SSA)",
                    tuple(mixed)))
    return out


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
    stochastic = stochastic_system(network, species_in_rates=rate_species)
    ode = ode_system(network)
    if ode.state_ids != stochastic.state_ids or ode.p_ids != stochastic.p_ids:
        raise RuntimeError("the ODE and stochastic views disagree on the state; "
                           "this is a bug in sbmlgpu.views")
    propensities = stochastic.propensities
    events = []
    for e in ode.events:
        threshold = _time_threshold(e.trigger, ode.x) if e.trigger.has(TIME) else None
        events.append(SsaEvent(e.id, e.trigger, threshold, e.assignments,
                               e.trigger_initial_value))
    return SsaModel(
        network=network, state_ids=stochastic.state_ids, x=stochastic.x, p=stochastic.p,
        p_ids=stochastic.p_ids, p_values=np.asarray(stochastic.p_values, dtype=float),
        reaction_ids=stochastic.reaction_ids, propensities=tuple(propensities),
        stoichiometry=np.asarray(stochastic.stoichiometry, dtype=np.int64),
        x0=tuple(ode.x0), events=tuple(events), values=dict(ode.values),
        rate_species=rate_species)
