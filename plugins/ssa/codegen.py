"""From the prepared math (expressions.py) to the kernel source (kernels/ssa.cu).

`Variant` is everything that changes the generated text: layout, update, method,
precision, which parameters are read from the table, the outputs and the
reaction order. `kernel_source(model, variant)` renders it.
"""

from __future__ import annotations

from dataclasses import dataclass


from sbmlgpu.codegen.printer import CudaPrinter
from sbmlgpu.codegen.templates import render
from sbmlgpu.ir import TIME

from . import tuning
from .expressions import Expressions, render_block

PACKAGE = "sbmlgpu.plugins.ssa"
LAYOUTS = ("register", "fat", "thin")
UPDATES = ("full", "sparse")
METHODS = ("direct", "optimized")


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


def context(exprs: Expressions, variant: Variant) -> dict:
    """The template context of `kernels/ssa.cu`."""
    state = _printer(exprs, variant.precision, "t")
    sample = _printer(exprs, variant.precision, "t_out")
    x0_lines, x0_values = render_block(exprs.x0_block, state, prefix="x0_")
    prop_lines, prop_values = render_block(exprs.propensity_block, state, prefix="a_")
    out_lines, out_values = render_block(exprs.output_block, sample, prefix="o_")
    real = state.real_type
    deps = []
    for j, dependents in enumerate(exprs.dependents):
        lines, values = render_block(exprs.propensity_block, state, dependents, prefix="a_")
        changes = [{"state": int(s), "delta": state.literal(int(exprs.stoichiometry[j, s]))}
                   for s in range(exprs.n_states) if exprs.stoichiometry[j, s]]
        deps.append({"changes": changes, "lines": lines,
                     "updates": [{"reaction": d, "value": v} for d, v in zip(dependents, values)]})
    stoich_by_state = []
    for s in range(exprs.n_states):
        column = [(j, int(exprs.stoichiometry[j, s])) for j in range(exprs.n_reactions)
                  if exprs.stoichiometry[j, s]]
        if not column:
            continue
        delta = f"({real})0"
        for j, v in reversed(column):
            delta = f"(sel == {j} ? ({real}){state.literal(v)} : {delta})"
        stoich_by_state.append({"state": s, "delta": delta})
    events = []
    for e_index, e in enumerate(exprs.events):
        lines, values = render_block(e.block, state, prefix=f"e{e_index}_")
        events.append({
            "index": e_index, "time": e.time_threshold is not None,
            "threshold": None if e.time_threshold is None else state.doprint(e.time_threshold),
            "trigger": (f"(t >= ssa_T{e_index})" if e.time_threshold is not None
                        else state.print_condition(e.trigger, where=f"event {e.id}")),
            "lines": lines, "exprs": values, "targets": [i for i, _ in e.assignments],
            "initial": e.initial})
    return dict(
        precision=variant.precision, layout=variant.layout, update=variant.update,
        method=variant.method, refresh=variant.refresh,
        max_event_rounds=variant.max_event_rounds,
        ns=exprs.n_states, nr=exprs.n_reactions, no=len(exprs.outputs),
        nv=len(exprs.varied),
        x0={"lines": x0_lines, "exprs": x0_values},
        props={"lines": prop_lines, "exprs": prop_values},
        outputs={"lines": out_lines, "exprs": out_values},
        deps=deps, stoich_by_state=stoich_by_state, events=events)


def kernel_source(exprs: Expressions, variant: Variant) -> str:
    return render(PACKAGE, "ssa.cu", **context(exprs, variant))


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


