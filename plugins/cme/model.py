"""What the CME backend solves: a Network reduced to a finite-state jump process.

`CmeModel` is built once per compile from the stochastic view (core/views), read as
the SSA backend reads it (`species_in_rates="sbml"`): a kinetic law, with species
symbols meaning what SBML says, *is* the propensity in molecules per time (DSMTS
00011 checks that reading). What the chemical master equation needs beyond that:

- the state columns are the species that reactions change (fixed species, i.e.
  boundaryCondition or constant ones, are literals inside the laws);
- every parameter becomes a literal (constant folding before common subexpression
  elimination): the steady state is solved for one parameter set, and a literal
  lets the compiler fold what the model multiplies out;
- one `__host__ __device__` function (kernels/propensities.cuh) computes all R
  propensities from the integer copy numbers; the host enumerator (statespace.py)
  and the CUDA kernel (kernels/propensities.cu) include the same text, so the
  states the enumerator finds and the rates the GPU fills agree;
- the initial state is the model's initial amounts, which must be whole numbers.

Refused by name before anything runs (`unsupported`): what the stochastic view
refuses (rate rules, algebraic rules, fast reactions, compartments that change,
stoichiometry that is not a constant whole number), and events, delay(), rateOf(),
stoichiometry that can change, conversion factors and propensities that depend on
time: none of them has a stationary distribution on a fixed set of states.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Mapping

import numpy as np
import sympy as sp

from sbmlgpu.codegen.cse import CseBlock, eliminate
from sbmlgpu.codegen.names import mangle
from sbmlgpu.codegen.printer import CudaPrinter
from sbmlgpu.codegen.templates import render
from sbmlgpu.errors import OptionError, UnsupportedModelError
from sbmlgpu.features import network_features
from sbmlgpu.ir import TIME, Network
from sbmlgpu.views import stochastic_system
from sbmlgpu.views.ode import AMOUNT
from sbmlgpu.views.stochastic import unsupported as stochastic_unsupported

PACKAGE = "sbmlgpu.plugins.cme"
WHO = "backend 'cme'"
#: The CUDA kernel of kernels/propensities.cu (one thread per state).
PROPENSITY_KERNEL = "cme_propensity_kernel"

# Feature names (as core/features.py spells them) the CME refuses, and why.
_REFUSED_FEATURES = {
    "events": "event (the chemical master equation here has no discontinuities; "
              "its stationary distribution is that of the reactions alone)",
    "delay()": "delay() (a Markov jump process has no history to read)",
    "rateOf": "rateOf() (a jump process has no time derivative)",
    "variable stoichiometry": "stoichiometry that can change (a transition needs a fixed "
                              "jump)",
    "conversion factors": "conversion factor (a firing must change counts by whole "
                          "numbers)",
    "distrib draws": "distrib draw (random initial values are not a fixed initial state)",
}


def unsupported(network: Network) -> list[tuple[str, tuple[str, ...]]]:
    """What the CME backend refuses, with the ids of the elements that use it."""
    out = list(stochastic_unsupported(network))
    present = network_features(network)
    out += [(reason, present[f]) for f, reason in _REFUSED_FEATURES.items() if f in present]
    if out:
        return out
    # Past the structural refusals: what depends on the resolved math.
    try:
        view = stochastic_system(network, species_in_rates="sbml")
    except UnsupportedModelError as exc:  # pragma: no cover -- refused above
        return [(str(exc), ())]
    timed = [rid for rid, a in zip(view.reaction_ids, view.propensities) if a.has(TIME)]
    if timed:
        out.append(("propensity that depends on time (a stationary distribution needs "
                    "time-invariant rates)", tuple(timed)))
    return out


@dataclass(frozen=True)
class CmeModel:
    """The jump process: S species columns, R reactions, propensities in x only."""

    network: Network
    species: tuple[str, ...]  # SBML ids of the state columns
    x: tuple[sp.Symbol, ...]  # their symbols (the view's state symbols)
    reaction_ids: tuple[str, ...]  # model order
    propensities: tuple[sp.Expr, ...]  # in x only: every parameter folded in
    stoichiometry: np.ndarray  # (R, S) int64 net change
    x0: tuple[float, ...]  # the model's initial amounts (NaN: the file gives none)
    literals: tuple[tuple[str, float], ...]  # (SBML id, value) the laws read, model order

    @property
    def n_species(self) -> int:
        return len(self.species)

    @property
    def n_reactions(self) -> int:
        return len(self.reaction_ids)

    @property
    def model_id(self) -> str:
        return self.network.id or ""

    # -- the initial state ------------------------------------------------------------
    def initial_state(self, overrides: Mapping[str, float] | None = None) -> np.ndarray:
        """(S,) int64 copy numbers: the model's initial amounts, with `overrides`
        {species id: copy number}. OptionError naming an id that is no state column
        or a value that is not a whole number >= 0."""
        overrides = dict(overrides or {})
        index = {sid: k for k, sid in enumerate(self.species)}
        alien = [sid for sid in overrides if sid not in index]
        if alien:
            raise OptionError("initial", f"{', '.join(alien)}: the chemical master equation "
                                         f"takes initial copy numbers of the species that "
                                         f"reactions change ({', '.join(self.species)})")
        state = np.zeros(self.n_species, dtype=np.int64)
        for k, sid in enumerate(self.species):
            given = sid in overrides
            value = float(overrides[sid]) if given else self.x0[k]
            where = f"--initial {sid}={value:g}" if given else \
                f"the model's initial amount of {sid} ({value:g} molecules)"
            if math.isnan(value):
                raise OptionError("initial", f"the model gives no initial amount of {sid}: "
                                             f"give --initial {sid}=N")
            whole = round(value)
            # amounts computed as concentration * size carry the rounding of a product
            if not math.isfinite(value) or abs(value - whole) > 1e-9 * max(1.0, abs(value)):
                raise OptionError("initial", f"{where} is not a whole number of molecules; "
                                             f"give --initial {sid}=N")
            if whole < 0 or whole > np.iinfo(np.int32).max:
                raise OptionError("initial", f"{where}: a copy number is a whole number "
                                             f"from 0 to {np.iinfo(np.int32).max}")
            state[k] = whole
        return state

    # -- generated code ---------------------------------------------------------------
    @cached_property
    def propensity_block(self) -> CseBlock:
        return eliminate(self.propensities)

    def _printer(self) -> CudaPrinter:
        return CudaPrinter({x: mangle(sid) for x, sid in zip(self.x, self.species)},
                           "double", unmapped="raise")

    def _context(self) -> dict:
        printer = self._printer()
        lines, values = self.propensity_block.render(printer)
        used = set().union(*(sp.sympify(e).free_symbols for e in
                             (*(v for _, v in self.propensity_block.temporaries),
                              *self.propensity_block.outputs)))
        return dict(
            model_id=_comment(self.model_id or "(no id)"), precision="double",
            ns=self.n_species,
            nr=self.n_reactions,
            species=[{"index": k, "name": mangle(sid), "id": _comment(sid),
                      "used": x in used} for k, (x, sid) in enumerate(zip(self.x, self.species))],
            literals=[{"id": _comment(pid), "value": printer.literal(v)}
                      for pid, v in self.literals],
            lines=lines,
            reactions=[{"index": r, "id": _comment(rid), "value": value}
                       for r, (rid, value) in enumerate(zip(self.reaction_ids, values))])

    def propensity_function(self) -> str:
        """The `__host__ __device__` function `cme_propensities` (kernels/propensities.cuh),
        with common.cuh: the text both the host enumerator and the CUDA kernel include."""
        return render(PACKAGE, "propensities.cuh", **self._context())

    def propensity_source(self) -> str:
        """The whole CUDA source of the propensity kernel `cme_propensity_kernel`
        (kernels/propensities.cu): states (S, n) int32 in, prop (R, n) double out."""
        return render(PACKAGE, "propensities.cu", function=self.propensity_function(),
                      kernel=PROPENSITY_KERNEL)

    def source_name(self, what: str, text: str, suffix: str = ".cu") -> str:
        """`cme_<model>_<what>_<hash of the text><suffix>`, for --keep-source and caches."""
        model = re.sub(r"[^A-Za-z0-9_]", "_", self.model_id or "model")[:40]
        digest = hashlib.sha256(text.encode()).hexdigest()[:12]
        return f"cme_{model}_{what}_{digest}{suffix}"


def _comment(text: str) -> str:
    """`text` safe inside a C comment."""
    return str(text).replace("*/", "* /").replace("\n", " ")


def build(network: Network) -> CmeModel:
    """The CmeModel of `network`; UnsupportedModelError naming what it refuses."""
    missing = unsupported(network)
    if missing:
        raise UnsupportedModelError(missing, who=WHO)
    view = stochastic_system(network, species_in_rates="sbml")
    columns = [k for k, (sid, kind) in enumerate(zip(view.state_ids, view.state_kinds))
               if kind == AMOUNT and sid in network.species_by_id]
    values = dict(zip(view.p, (float(v) for v in view.p_values)))
    known = {p: sp.Float(v) for p, v in values.items() if not math.isnan(v)}
    # A state that is no species column is a value that only a time-dependent initial
    # assignment made a state (events and rate rules are refused): constant from t = 0.
    others = {view.x[k]: view.x0[k].xreplace(known).subs(TIME, 0)
              for k in range(len(view.x)) if k not in columns}
    x = tuple(view.x[k] for k in columns)
    no_value = {p for p, v in values.items() if math.isnan(v)}
    name_of = dict(zip(view.p, view.p_ids))
    used: set = set()

    def fold(expr: sp.Expr, where: str) -> sp.Expr:
        expr = sp.sympify(expr)
        used.update(expr.free_symbols & known.keys())
        expr = expr.xreplace(others).xreplace(known)
        lacking = sorted(name_of[s] for s in expr.free_symbols if s in no_value)
        if lacking:
            raise UnsupportedModelError(
                {f"{', '.join(lacking)} has no value in the file (needed by {where})":
                 tuple(lacking)}, who=WHO)
        stray = sorted(str(s) for s in expr.free_symbols if s not in x)
        if stray:  # pragma: no cover -- the view resolves every id into x and p
            raise UnsupportedModelError({f"{where} reads {', '.join(stray)}, which is no "
                                         f"species count": (where,)}, who=WHO)
        return expr

    propensities = tuple(fold(a, f"reaction {rid}")
                         for rid, a in zip(view.reaction_ids, view.propensities))
    x0 = []
    for k in columns:
        value = view.x0[k].xreplace(others).xreplace(known).subs(TIME, 0)
        x0.append(float(value) if value.is_Number else math.nan)
    stoichiometry = np.asarray(view.stoichiometry, dtype=np.int64)[:, columns] \
        if len(view.reaction_ids) else np.zeros((0, len(columns)), np.int64)
    return CmeModel(
        network=network, species=tuple(view.state_ids[k] for k in columns), x=x,
        reaction_ids=tuple(view.reaction_ids), propensities=propensities,
        stoichiometry=stoichiometry.reshape(len(view.reaction_ids), len(columns)),
        x0=tuple(x0),
        literals=tuple((pid, float(v)) for p, pid, v in zip(view.p, view.p_ids,
                                                            view.p_values) if p in used))
