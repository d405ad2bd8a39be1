"""The stochastic view of a Network: molecule counts, integer stoichiometry,
propensities.

The propensity of a reaction is its kinetic law's value, which SBML gives in
substance per time, with every symbol meaning what SBML says: a species symbol is
a concentration unless the species has only substance units. The DSMTS cases
decide this: 00011 (species X, hasOnlySubstanceUnits false, compartment of size 2,
law Lambda*X) expects the rates halved, i.e. X read as amount / 2.
`species_in_rates="amount"` reads every species symbol as its amount instead (the
convention some tools apply to models written for stochastic simulation).
Rate rules, varying compartments and stoichiometries that are not constant whole
numbers have no meaning for a jump process and are refused. One kind of rate rule
is asked for by name (`clocks=True`, the SSA backend): a CLOCK, a parameter whose
rate is a constant (a number or constant parameters; free of species, time and
other rate-ruled values). Between events its value is exact, v(t0) + c (t - t0),
so a jump process can carry it; `StochasticSystem.clocks` lists them (state index,
rate in p) and the consumer decides how it represents them.

Outputs (`values`, `amounts`, `output(id, kind)`) read the model as SBML does,
whatever `species_in_rates` says: they are the ODE view's, over the same state.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import sympy as sp

from .. import outputs
from ..errors import UnsupportedModelError
from ..ir import TIME, Network
from .cache import memoised
from .ode import AMOUNT, OdeEvent, _Builder, ode_system, resolve_output
from .ode import unsupported as ode_unsupported


@dataclass(frozen=True)
class StochasticSystem:
    network: Network
    x: tuple[sp.Symbol, ...]  # state: species amounts, and values set only by events
    state_ids: tuple[str, ...]
    state_kinds: tuple[str, ...]
    p: tuple[sp.Symbol, ...]
    p_ids: tuple[str, ...]
    p_values: np.ndarray
    reaction_ids: tuple[str, ...]
    propensities: tuple[sp.Expr, ...]  # in x, p, t
    stoichiometry: np.ndarray  # (reactions, states) net change, int64
    reactant_orders: np.ndarray  # (reactions, states) molecules consumed, int64
    x0: tuple[sp.Expr, ...]  # in p and t
    events: tuple[OdeEvent, ...]
    values: dict[str, sp.Expr] = field(repr=False)  # SBML value of every id, in x, p, t
    amounts: dict[str, sp.Expr] = field(repr=False)  # species amounts, in x, p, t
    t: sp.Symbol = TIME
    clocks: tuple[tuple[int, sp.Expr], ...] = ()  # (state index, constant rate in p)

    def value(self, sbml_id: str) -> sp.Expr:
        return self.values[sbml_id]

    def output(self, sbml_id: str, kind: str = "value") -> sp.Expr:
        """kind: 'value', 'amount' or 'concentration', as OdeSystem.output."""
        return resolve_output(self, sbml_id, kind)

    def output_named(self, name: str) -> sp.Expr:
        """The expression of an output name as asked (`S1`, `[S1]`, `amount(S1)`)."""
        return outputs.expression(self, name)

    @property
    def species_state_indices(self) -> tuple[int, ...]:
        species = self.network.species_by_id
        return tuple(i for i, sid in enumerate(self.state_ids) if sid in species)


def clock_rates(network: Network) -> dict[str, sp.Expr]:
    """The rate-ruled parameters whose rate is a constant (in p: free of the state and
    of time), by id, with that rate; {} when the ODE view cannot be built."""
    params = network.parameter_by_id
    candidates = [r.variable for r in network.rate_rules if r.variable in params]
    if not candidates or ode_unsupported(network):
        return {}
    ode = ode_system(network)
    x = set(ode.x)
    index = {sid: i for i, sid in enumerate(ode.state_ids)}
    out = {}
    for pid in candidates:
        if pid not in index:
            continue
        rate = sp.sympify(ode.rhs[index[pid]])
        if not rate.has(TIME) and not (rate.free_symbols & x):
            out[pid] = rate
    return out


def unsupported(network: Network, clocks: bool = False) -> list[tuple[str, tuple[str, ...]]]:
    """What the stochastic view refuses. `clocks`: rate rules that are clocks (see the
    module's doc) are accepted; every other rate rule is still refused by id."""
    out = list(ode_unsupported(network))
    if network.rate_rules:
        accepted = clock_rates(network) if clocks else {}
        refused = tuple(r.variable for r in network.rate_rules if r.variable not in accepted)
        if refused:
            out.append(("rate rule (no meaning in a jump process" +
                        ("; only a parameter whose rate is a constant, a clock, is "
                         "carried" if clocks else "") + ")", refused))
    varying = [c.id for c in network.compartments
               if not c.constant and (c.id in network.assignment_rule_by_variable
                                      or c.id in network.event_assigned)]
    if varying:
        out.append(("compartment whose size changes", tuple(varying)))
    bad_stoich = []
    for r in network.reactions:
        for sr in (*r.reactants, *r.products):
            s = sr.stoichiometry
            if not (s.is_Number and float(s) == int(float(s)) and float(s) >= 0):
                bad_stoich.append(r.id)
                break
    if bad_stoich:
        out.append(("stoichiometry that is not a constant whole number", tuple(bad_stoich)))
    return out


SPECIES_IN_RATES = ("sbml", "amount")


def stochastic_system(network: Network, species_in_rates: str = "sbml",
                      clocks: bool = False) -> StochasticSystem:
    """The stochastic view of `network`, built once per (network, species_in_rates,
    clocks) (views/cache.py); UnsupportedModelError for what a jump process cannot be.
    `clocks`: accept clocks (module doc), listed in the result's `clocks`."""
    if species_in_rates not in SPECIES_IN_RATES:
        raise ValueError(f"species_in_rates must be one of {SPECIES_IN_RATES}")
    return memoised(network, ("stochastic", species_in_rates, bool(clocks)),
                    lambda: _build(network, species_in_rates, bool(clocks)))


def _build(network: Network, species_in_rates: str, clocks: bool) -> StochasticSystem:
    missing = unsupported(network, clocks)
    if missing:
        raise UnsupportedModelError(missing, who="the stochastic view")
    sbml = ode_system(network)  # the SBML reading: outputs, and the rates by default
    ode = sbml if species_in_rates == "sbml" else \
        _Builder(network, species_as_amounts=True).build()
    index = {sid: i for i, sid in enumerate(ode.state_ids)}
    reactions = network.reactions
    stoich = np.zeros((len(reactions), len(ode.state_ids)), dtype=np.int64)
    orders = np.zeros_like(stoich)
    for j, r in enumerate(reactions):
        for sr in r.reactants:
            if sr.species in index and ode.state_kinds[index[sr.species]] == AMOUNT:
                k = int(float(sr.stoichiometry))
                orders[j, index[sr.species]] += k
                if not _fixed(network, sr.species):
                    stoich[j, index[sr.species]] -= k
        for sr in r.products:
            if sr.species in index and not _fixed(network, sr.species):
                stoich[j, index[sr.species]] += int(float(sr.stoichiometry))
    return StochasticSystem(
        network=network, x=ode.x, state_ids=ode.state_ids, state_kinds=ode.state_kinds,
        p=ode.p, p_ids=ode.p_ids, p_values=ode.p_values,
        reaction_ids=tuple(r.id for r in reactions),
        propensities=tuple(ode.values[r.id] for r in reactions),
        stoichiometry=stoich, reactant_orders=orders, x0=ode.x0, events=ode.events,
        values=sbml.values, amounts=sbml.amounts, t=ode.t,
        clocks=tuple((index[pid], rate) for pid, rate in
                     (clock_rates(network) if clocks else {}).items()))


def _fixed(network: Network, species_id: str) -> bool:
    s = network.species_by_id[species_id]
    return s.boundary_condition or s.constant
