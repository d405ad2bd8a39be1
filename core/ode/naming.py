"""What generated ODE code says about the SBML model: ids next to array elements.

A kernel indexes arrays (x[i], p[j], y[k], g[a]); a reader needs the SBML ids
behind them. `id_table(model)` is the table at the top of every kernel (as AMICI
writes one): states with their kind, varied parameters, outputs, the fixed
parameters printed as literals with their values (or, where the kernel reads them at
launch, the p[j] that holds each), the watched atoms with the
relation and the event or rate each comes from, and the events. The `*_comment`
functions give the trailing comment of each generated assignment
(`dx[0] = ...;  /* prey */`).
"""

from __future__ import annotations

import sympy as sp

from ..ir import TIME
from .atoms import REL_CODE, REL_TEXT
from .model import KernelModel

MAX_EXPRESSION = 100  # characters of an expression shown in the table


def comment(text: str) -> str:
    """`text` made safe inside a C comment."""
    return text.replace("*/", "* /")


def sbml_text(e, names: dict[sp.Symbol, sp.Symbol]) -> str:
    """An expression of the kernel written with SBML ids, shortened to MAX_EXPRESSION."""
    text = sp.sstr(e.xreplace(names), full_prec=False) if isinstance(e, sp.Basic) else str(e)
    if len(text) > MAX_EXPRESSION:
        text = text[:MAX_EXPRESSION - 3] + "..."
    return comment(text)


def sbml_names(model: KernelModel) -> dict[sp.Basic, sp.Symbol]:
    """The kernel's symbols (x@id, p@id, 1/p@id, time) -> symbols named by SBML id."""
    ode = model.ode
    names: dict[sp.Basic, sp.Symbol] = {TIME: sp.Symbol("time")}
    names.update({x: sp.Symbol(sid) for x, sid in zip(ode.x, ode.state_ids)})
    names.update({p: sp.Symbol(pid) for p, pid in zip(ode.p, ode.p_ids)})
    names.update({s: sp.Symbol(sid) for s, sid in model.parameters.literal_ids.items()})
    return names


_LOOKUP = {"species": "species_by_id", "compartment": "compartment_by_id",
           "parameter": "parameter_by_id", "species_reference": "species_reference_by_id"}
# what a parameter of the ODE view is, by the kind of its SBML element
_PARAMETER_ROLE = {"species": "initial value", "compartment": "size",
                   "species_reference": "stoichiometry"}


def _named(model: KernelModel, sid: str) -> str:
    """`sid`, with the element's SBML name in quotes where it has another one."""
    network = model.ode.network
    kind = network.kind_of(sid)
    element = getattr(network, _LOOKUP[kind]).get(sid) if kind in _LOOKUP else None
    name = getattr(element, "name", "") or ""
    return comment(f'{sid} "{name}"') if name and name != sid else sid


def _state_kind(model: KernelModel, i: int) -> str:
    sid = model.ode.state_ids[i]
    kind = (model.ode.network.kind_of(sid) or "variable").replace("_", " ")
    if kind == "species":
        return f"species, {model.ode.state_kinds[i]}"
    return kind


def _parameter(model: KernelModel, pid: str) -> str:
    """A parameter of the ODE view: its id, and what it is when not a constant
    parameter (the initial value of a state, a size, a stoichiometry)."""
    sid = pid.removeprefix("1/")
    role = "initial value" if sid in model.ode.state_ids else \
        _PARAMETER_ROLE.get(model.ode.network.kind_of(sid))
    return f"{pid} ({role})" if role else pid


def _column(label: str, rows: list[str]) -> list[str]:
    return [f"   {label if k == 0 else '':<10}{row}" for k, row in enumerate(rows)]


def id_table(model: KernelModel, fixed_slots: tuple[sp.Symbol, ...] = ()) -> str:
    """The comment lines (no delimiters) naming every array element of the kernel;
    `fixed_slots`: the fixed parameters read at launch as p[varied + k] (their values
    are not in the source, so that it stays the same for other values)."""
    names = sbml_names(model)
    lines = ["   SBML ids of this kernel's arrays:"]
    ode = model.ode
    lines += _column("states", [f"x[{i}] = {_named(model, sid)} ({_state_kind(model, i)})"
                                for i, sid in enumerate(ode.state_ids)] or ["none"])
    lines += _column("varied", [f"p[{j}] = {_parameter(model, pid)}"
                                for j, pid in enumerate(model.varied)]
                     or ["none (every parameter is a literal)"])
    lines += _column("outputs", [f"y[{k}] = {_named(model, sid)}"
                                 for k, sid in enumerate(model.outputs)] or ["none"])
    used = used_symbols(model)
    literal_ids = model.parameters.literal_ids
    lines += _column("literals", [f"{_parameter(model, literal_ids[s])} = {v!r}"
                                  for s, v in model.literals.items()
                                  if s in used and s not in fixed_slots] or ["none"])
    if fixed_slots:
        first = len(model.varied)
        lines += _column("fixed", [f"p[{first + k}] = {_parameter(model, literal_ids[s])} "
                                   f"(value given at launch)"
                                   for k, s in enumerate(fixed_slots)])
    table = model.atom_table
    if table.functions:
        rows = []
        for a, (g, relation, origin) in enumerate(zip(table.functions, table.relations,
                                                      table.origins)):
            rel = REL_TEXT[REL_CODE[type(relation)]] if relation is not None else "?"
            lhs, rhs = relation.args if relation is not None else (g, 0)
            rows.append(f"g[{a}] = {sbml_text(g, names)}  from  "
                        f"{sbml_text(lhs, names)} {rel} {sbml_text(rhs, names)} ({origin})")
        lines += _column("atoms", rows)
    if model.events:
        lines += _column("events", [f"{k} = {e.id}" for k, e in enumerate(model.events)])
    return "\n".join(lines)


def used_symbols(model: KernelModel) -> set[sp.Basic]:
    """Every symbol the kernel's expressions use."""
    exprs = [*model.rhs, *model.x0, *model.output_exprs, *model.atoms]
    for e in model.events:
        exprs += [e.trigger, *e.values, *(v for v in (e.priority, e.delay) if v is not None)]
    used: set[sp.Basic] = set()
    for e in exprs:
        if isinstance(e, sp.Basic):
            used |= e.free_symbols
    return used


def state_comments(model: KernelModel) -> list[str]:
    return [comment(sid) for sid in model.ode.state_ids]


def jacobian_comment(model: KernelModel, i: int, j: int, sign: str = "") -> str:
    ids = model.ode.state_ids
    return comment(f"{sign}d({ids[i]})/d({ids[j]})")


def time_derivative_comment(model: KernelModel, i: int) -> str:
    return comment(f"d({model.ode.state_ids[i]})/dt")


def atom_comments(model: KernelModel) -> list[str]:
    return [comment(f"g[{a}]: {origin}") for a, origin in enumerate(model.atom_table.origins)]

