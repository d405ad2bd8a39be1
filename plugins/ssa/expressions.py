"""The model's math as the generated code evaluates it, shared by the CUDA kernel and
its numpy twin so that both compute every propensity the same way.

Parameters that the run does not vary become literals (substituted before common
subexpression elimination, so that constants fold once, identically for both
printers); varied ones are read from a table. Reactions are put in *code order*
(the optimized direct method sorts them by how often they fire). One CSE block
covers all propensities: the sparse update of a fired reaction's dependents
emits just the temporaries those need, so a propensity is the same arithmetic on
every code path and every layout gives bit-identical propensities.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import sympy as sp

from sbmlgpu.codegen.cse import CseBlock, eliminate, render_block  # noqa: F401 (re-exported)
from sbmlgpu.errors import UnsupportedModelError
from sbmlgpu.ir import TIME
from sbmlgpu.sbml.distrib import has_draw

from .model import SsaModel


@dataclass(frozen=True)
class EventMath:
    id: str
    time_threshold: sp.Expr | None  # in varied p and clock offsets (model.py)
    trigger: sp.Basic  # in x, varied p, t
    assignments: tuple[tuple[int, sp.Expr], ...]
    block: CseBlock  # of the assigned values, in assignment order
    initial: bool

    def threshold_reads_state(self, x) -> bool:
        """Whether T reads a state (a clock's offset): then it is recomputed whenever
        an event fires, since only events change offsets."""
        return self.time_threshold is not None and \
            bool(sp.sympify(self.time_threshold).free_symbols & set(x))


@dataclass(frozen=True)
class Expressions:
    model_id: str  # the SBML model's id ("" when it has none)
    state_ids: tuple[str, ...]  # SBML id of each state
    x: tuple[sp.Symbol, ...]
    varied: tuple[str, ...]
    varied_symbols: tuple[sp.Symbol, ...]
    order: tuple[int, ...]  # model reaction index at each code position
    reaction_ids: tuple[str, ...]  # in code order
    propensities: tuple[sp.Expr, ...]  # in code order
    propensity_block: CseBlock
    stoichiometry: np.ndarray  # (reactions in code order, states)
    dependents: tuple[tuple[int, ...], ...]  # code indices
    x0_block: CseBlock
    outputs: tuple[str, ...]
    output_block: CseBlock
    events: tuple[EventMath, ...]
    # the parameters the kernel reads as literals: (SBML id, value), in model order
    literals: tuple[tuple[str, float], ...] = ()

    @property
    def draws(self) -> bool:
        """Whether initial values or event assignments draw (distrib): the kernel then
        includes distrib.cuh and keeps a draw stream per realisation. (Draws anywhere
        else are refused in supports().)"""
        return any(has_draw(e) for e in self.x0_block.outputs) or \
            any(has_draw(e) for _, e in self.x0_block.temporaries) or \
            any(has_draw(v) for e in self.events for _, v in e.assignments)

    @property
    def n_states(self) -> int:
        return len(self.x)

    @property
    def n_reactions(self) -> int:
        return len(self.propensities)


def prepare(model: SsaModel, varied: Sequence[str], outputs: Sequence[str],
            order: Sequence[int] | None = None,
            values: Mapping[str, float] | None = None) -> Expressions:
    """Substitute the non-varied parameters (nominal values, or `values`), put the
    reactions in `order`, and eliminate common subexpressions."""
    varied = tuple(varied)
    unknown = [v for v in varied if v not in model.p_ids]
    if unknown:
        raise UnsupportedModelError(
            {"varied id that is not a parameter, compartment size or initial value of "
             "this model": tuple(unknown)}, who="backend 'ssa'")
    index = {pid: i for i, pid in enumerate(model.p_ids)}
    nominal = dict(zip(model.p_ids, model.p_values))
    if values:
        nominal.update({k: float(v) for k, v in values.items()})
    subs = {model.p[index[pid]]: sp.Float(float(nominal[pid]))
            for pid in model.p_ids if pid not in varied and not math.isnan(nominal[pid])}
    varied_symbols = tuple(model.p[index[v]] for v in varied)
    missing_value = {model.p[i] for i, pid in enumerate(model.p_ids)
                     if pid not in varied and math.isnan(nominal[pid])}
    used = set()  # the substituted parameters that some expression reads

    def fix(expr, where: str):
        expr = sp.sympify(expr)
        used.update(expr.free_symbols & subs.keys())
        expr = expr.xreplace(subs)
        lacking = sorted(s.name.split("@", 1)[1] for s in expr.free_symbols
                         if s in missing_value)
        if lacking:
            raise UnsupportedModelError(
                {f"{', '.join(lacking)} has no value in the file (needed by {where}); "
                 "give one with --parameters": tuple(lacking)}, who="backend 'ssa'")
        return expr

    n = model.n_reactions
    order = tuple(range(n)) if order is None else tuple(int(j) for j in order)
    if sorted(order) != list(range(n)):
        raise ValueError(f"reaction order {order} is not a permutation of 0..{n - 1}")
    position = {j: k for k, j in enumerate(order)}
    propensities = tuple(fix(model.propensities[j], f"reaction {model.reaction_ids[j]}")
                         for j in order)
    dependents = tuple(tuple(sorted(position[d] for d in model.dependents[j])) for j in order)
    t0_free = [fix(e, f"the initial value of {sid}")
               for e, sid in zip(model.x0, model.state_ids)]
    output_exprs = [fix(model.output_expression(o), f"output {o}") for o in outputs]
    events = []
    for e in model.events:
        assignments = tuple((i, fix(v, f"event {e.id}")) for i, v in e.assignments)
        threshold = None if e.time_threshold is None else fix(e.time_threshold,
                                                              f"event {e.id}")
        trigger = sp.Ge(TIME, threshold) if threshold is not None else fix(e.trigger,
                                                                            f"event {e.id}")
        events.append(EventMath(e.id, threshold, trigger, assignments,
                                eliminate([v for _, v in assignments]),
                                bool(e.trigger_initial_value)))
    return Expressions(
        model_id=model.network.id or "", state_ids=tuple(model.state_ids),
        x=model.x, varied=varied, varied_symbols=varied_symbols, order=order,
        reaction_ids=tuple(model.reaction_ids[j] for j in order),
        propensities=propensities, propensity_block=eliminate(propensities),
        stoichiometry=np.asarray(model.stoichiometry)[list(order)] if n else
        np.zeros((0, model.n_states), np.int64),
        dependents=dependents, x0_block=eliminate(t0_free), outputs=tuple(outputs),
        output_block=eliminate(output_exprs), events=tuple(events),
        literals=tuple((pid, float(nominal[pid])) for pid, p in zip(model.p_ids, model.p)
                       if p in used))
