"""From the prepared math (expressions.py) to the kernel source (kernels/ssa.cu).

`Variant` is the part of the generated text that the program chooses: layout,
update, method, precision; the prepared Expressions bring the rest (which
parameters are read from the table, the outputs, the reaction order).
`kernel_source(exprs, variant)` renders it; `source_name(...)` names it after the
model for --keep-source. The kernel opens with a table of the SBML ids it uses
(states, varied parameters, literals with their values, reactions in code order,
outputs, events), and every generated line that computes a propensity, an output,
an initial value or an assignment ends with the SBML id it belongs to.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import sympy as sp

from sbmlgpu.codegen.printer import CudaPrinter
from sbmlgpu.codegen.templates import render
from sbmlgpu.ir import TIME

from . import tuning
from .choices import LAYOUTS, METHODS, UPDATES  # noqa: F401 (re-exported)
from .expressions import Expressions, render_block

PACKAGE = "sbmlgpu.plugins.ssa"


@dataclass(frozen=True)
class Variant:
    layout: str
    update: str
    method: str
    precision: str = "double"
    refresh: int = tuning.OPTIMIZED_REFRESH
    max_event_rounds: int = tuning.MAX_EVENT_ROUNDS

    def __post_init__(self):
        if self.layout not in LAYOUTS or self.update not in UPDATES \
                or self.method not in METHODS:
            raise ValueError(f"bad variant {self}")
        if self.refresh < 1 or self.refresh & (self.refresh - 1):
            raise ValueError(f"refresh {self.refresh} is not a power of two")

    @property
    def real_bytes(self) -> int:
        return 8 if self.precision == "double" else 4


def _printer(exprs: Expressions, precision: str, time_name: str) -> CudaPrinter:
    symbols = {x: f"SSA_X({i})" for i, x in enumerate(exprs.x)}
    symbols.update({p: f"ssa_p{k}" for k, p in enumerate(exprs.varied_symbols)})
    symbols[TIME] = time_name
    return CudaPrinter(symbols, precision, unmapped="raise")


def _comment(text: str) -> str:
    """`text` safe inside a C comment (SBML ids are, an output name may not be)."""
    return str(text).replace("*/", "* /").replace("\n", " ")


def _event_name(e, index: int) -> str:
    return _comment(e.id) if e.id else f"#{index}"


def _ids(exprs: Expressions, printer: CudaPrinter) -> list[tuple[str, list[tuple]]]:
    """The table of SBML ids at the top of the kernel: (title, rows), each row (C
    name or SBML id, SBML id or value, note)."""
    states = set(exprs.state_ids)
    return [
        ("states", [(f"SSA_X({i})", _comment(sid), "") for i, sid in enumerate(exprs.state_ids)]),
        ("varied", [(f"ssa_p{k}", _comment(pid), "from the parameter table")
                    for k, pid in enumerate(exprs.varied)]),
        ("literals", [(_comment(pid), "= " + printer.literal(value),
                       "initial value" if pid in states else "")
                      for pid, value in exprs.literals]),
        ("reactions", [(f"SSA_A({k})", _comment(rid),
                        "" if j == k else f"reaction {j} in the file (from 0)")
                       for k, (j, rid) in enumerate(zip(exprs.order, exprs.reaction_ids))]),
        ("outputs", [(f"output {o}", _comment(oid), "") for o, oid in enumerate(exprs.outputs)]),
        ("events", [(f"ssa_ev{k}", _event_name(e, k),
                     ("state trigger" if e.time_threshold is None else
                      f"time >= ssa_T{k}; reads a clock: recomputed when an event fires"
                      if e.threshold_reads_state(exprs.x) else f"time >= ssa_T{k}"))
                    for k, e in enumerate(exprs.events)]),
    ]


def _symbols(block) -> set:
    """The free symbols of a CSE block (its temporaries' and its outputs')."""
    return set().union(*(sp.sympify(e).free_symbols for e in
                         (*(v for _, v in block.temporaries), *block.outputs)))


def _rows(values: list[str], ids) -> list[dict]:
    return [{"value": v, "id": _comment(i)} for v, i in zip(values, ids)]


def context(exprs: Expressions, variant: Variant) -> dict:
    """The template context of `kernels/ssa.cu`."""
    state = _printer(exprs, variant.precision, "t")
    sample = _printer(exprs, variant.precision, "t_out")
    x0_lines, x0_values = render_block(exprs.x0_block, state, prefix="x0_")
    prop_lines, prop_values = render_block(exprs.propensity_block, state, prefix="a_")
    out_lines, out_values = render_block(exprs.output_block, sample, prefix="o_")
    real = state.real_type
    reaction_ids, state_ids = exprs.reaction_ids, exprs.state_ids
    deps = []
    for j, dependents in enumerate(exprs.dependents):
        lines, values = render_block(exprs.propensity_block, state, dependents, prefix="a_")
        changes = [{"state": int(s), "delta": state.literal(int(exprs.stoichiometry[j, s])),
                    "id": _comment(state_ids[s])}
                   for s in range(exprs.n_states) if exprs.stoichiometry[j, s]]
        deps.append({"index": j, "id": _comment(reaction_ids[j]), "changes": changes, "lines": lines,
                     "updates": [{"reaction": d, "value": v, "id": _comment(reaction_ids[d])}
                                 for d, v in zip(dependents, values)]})
    stoich_by_state = []
    for s in range(exprs.n_states):
        column = [(j, int(exprs.stoichiometry[j, s])) for j in range(exprs.n_reactions)
                  if exprs.stoichiometry[j, s]]
        if not column:
            continue
        delta = f"({real})0"
        for j, v in reversed(column):
            delta = f"(sel == {j} ? ({real}){state.literal(v)} : {delta})"
        stoich_by_state.append({"state": s, "delta": delta, "id": _comment(state_ids[s])})
    events = []
    for e_index, e in enumerate(exprs.events):
        lines, values = render_block(e.block, state, prefix=f"e{e_index}_")
        targets = [i for i, _ in e.assignments]
        events.append({
            "index": e_index, "id": _event_name(e, e_index), "time": e.time_threshold is not None,
            "moving": e.threshold_reads_state(exprs.x),
            "threshold": None if e.time_threshold is None else state.doprint(e.time_threshold),
            "trigger": (f"(t >= ssa_T{e_index})" if e.time_threshold is not None
                        else state.print_condition(e.trigger, where=f"event {e.id}")),
            "lines": lines, "exprs": _rows(values, [f"new {state_ids[i]}" for i in targets]),
            "targets": _rows([str(i) for i in targets], [state_ids[i] for i in targets]),
            "initial": e.initial})
    output_symbols = _symbols(exprs.output_block)
    used = set().union(output_symbols, _symbols(exprs.propensity_block), _symbols(exprs.x0_block),
                       *(_symbols(e.block) | sp.sympify(e.trigger).free_symbols
                         for e in exprs.events))
    return dict(
        model_id=_comment(exprs.model_id or "(no id)"),
        precision=variant.precision, layout=variant.layout, update=variant.update,
        method=variant.method, refresh=variant.refresh,
        max_event_rounds=variant.max_event_rounds,
        ns=exprs.n_states, nr=exprs.n_reactions, no=len(exprs.outputs),
        nv=len(exprs.varied), ids=_ids(exprs, state),
        varied=[{"index": k, "id": _comment(v), "used": symbol in used}
                for k, (v, symbol) in enumerate(zip(exprs.varied, exprs.varied_symbols))],
        x0={"lines": x0_lines, "exprs": _rows(x0_values, state_ids)},
        props={"lines": prop_lines, "exprs": _rows(prop_values, reaction_ids)},
        outputs={"lines": out_lines, "exprs": _rows(out_values, exprs.outputs),
                 "use_time": TIME in output_symbols},
        deps=deps, stoich_by_state=stoich_by_state, events=events, draws=exprs.draws,
        time_events=any(e["time"] for e in events))


def kernel_source(exprs: Expressions, variant: Variant) -> str:
    return render(PACKAGE, "ssa.cu", **context(exprs, variant))


def source_name(exprs: Expressions, variant: Variant, text: str) -> str:
    """`ssa_<model>_<method>_<precision>_<hash of the text>.cu`, for --keep-source."""
    model = re.sub(r"[^A-Za-z0-9_]", "_", exprs.model_id or "model")[:40]
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    return f"ssa_{model}_{variant.method}_{variant.precision}_{digest}.cu"


def shared_bytes_per_thread(exprs: Expressions, variant: Variant) -> int:
    """Dynamic shared memory one thread of the fat layout needs."""
    if variant.layout != "fat":
        return 0
    return (exprs.n_states + exprs.n_reactions) * variant.real_bytes


def scratch_bytes_per_thread(exprs: Expressions, variant: Variant) -> int:
    """Global memory one thread of the thin layout needs."""
    if variant.layout != "thin":
        return 0
    return (exprs.n_states + exprs.n_reactions) * variant.real_bytes


