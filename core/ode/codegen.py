"""The CUDA source of one ensemble kernel, from a KernelModel.

The model's functions (x0, rhs, outputs, Jacobian, atoms, triggers, event values,
priorities) are printed by sbmlgpu.codegen's CudaPrinter after common
subexpression elimination, each assignment commented with the SBML id it computes
(naming.py also writes the table of ids at the top of the kernel). The
integrators, events, output sinks, driver and entry points are templates in
core/ode/templates/; a backend's kernel template composes them (plugins/ode's
kernels/ode.cu is one), and `generate(model, method, template=..., sink=...)`
renders it with `kernel_context(...)`, returning the source text with what the
profiler needs to count work (FLOPs per right-hand side, per step).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import numpy as np
import sympy as sp

from ..codegen.cost import count_block, count_many
from ..codegen.cse import CseBlock, eliminate
from ..codegen.printer import CodegenError, CudaPrinter
from ..codegen.templates import render
from ..errors import OptionError
from ..ir import TIME
from . import naming, sparse_lu
from .atoms import use_symbol
from .kernel_source import HISTORY_GROUP, KernelSource
from .delays import DEFAULT_HISTORY_NODES, KernelPrinter, history_capacity, history_reals
from .model import KernelModel
from .sinks import TrajectorySink

METHODS = ("rk4", "dopri5", "rodas4", "bdf")
#: the methods that solve linear systems with the Jacobian (templates/linear.cuh)
IMPLICIT = ("rodas4", "bdf")
#: largest system whose LU keeps every index a compile-time constant (rodas4)
LU_STATIC_MAX = 12
#: largest system whose right-hand side and Jacobian are inlined at every call
INLINE_MODEL_MAX = 32
#: largest system whose fixed parameters are literals (fixed="auto"); larger ones read
#: them at launch, so that other values reuse the compiled kernel
LITERALS_MAX_STATES = INLINE_MODEL_MAX
#: statements (entries) of one part of a large model's sparse Jacobian: each part is a
#: function, and a translation unit, of its own, so that nvcc compiles the parts in
#: parallel (sbmlgpu.runtime.parallel_build; Chen_MSB2009's 5,861 entries were one
#: function that took 60 % of its kernel's nvcc time, ~1 ms of CPU per statement)
JACOBIAN_PART_ENTRIES = 1000
#: a loop the compilers must not unroll (g++ ignores it; nvcc would otherwise unroll
#: loops of constant trip count by itself)
NO_UNROLL = "#pragma unroll 1"
INDENT = "    "


def model_printer(model: KernelModel, precision: str,
                  fixed_slots: tuple[sp.Symbol, ...] = ()) -> CudaPrinter:
    """The printer of `model`'s expressions: x[i], p[j], literals for fixed parameters
    except those of `fixed_slots` (fixed_slots()), read from p after the varied ones
    (public: the dbn backend's heterogeneous kernel prints parts of the rhs with it)."""
    symbols: dict[sp.Basic, str] = {TIME: "t"}
    symbols.update({x: f"x[{i}]" for i, x in enumerate(model.x)})
    symbols.update({p: f"p[{j}]" for j, p in enumerate(model.p_symbols)})
    symbols.update({use_symbol(k): f"b[{k}]" for k in range(len(model.uses))})
    printer = KernelPrinter(symbols, precision, unmapped="raise")
    for symbol, value in model.literals.items():  # fixed parameters: literals
        text = printer.literal(value)
        printer.symbols[symbol] = f"({text})" if text.startswith("-") else text
    first = len(model.p_symbols)
    printer.symbols.update({s: f"p[{first + k}]" for k, s in enumerate(fixed_slots)})
    return printer


def fixed_slots(model: KernelModel) -> tuple[sp.Symbol, ...]:
    """The fixed parameters (and reciprocals) a kernel of `model` reads at launch
    rather than as literals: those its expressions use, in the view's order. Then
    the source, and so the compile caches' keys, depend on the model's structure and
    not on these values: a run with other values reuses the compiled kernel. Values
    that shape the expressions (0, 1, -1, exponents) stay in the source."""
    used = naming.used_symbols(model)
    return tuple(s for s in model.literals if s in used)


def wants_fixed_slots(model: KernelModel) -> bool:
    """Fixed parameters at launch above LITERALS_MAX_STATES states (a large model's
    compile is what a new value would cost); literals below, where nvcc folds them
    and a compile takes seconds."""
    return model.n_states > LITERALS_MAX_STATES


def _is_trivial(e: sp.Basic) -> bool:
    """A symbol, a number, or minus one: free inside any expression (a negation folds
    into the subtraction or FMA that uses it), not worth a temporary."""
    if e.is_Atom:
        return True
    return bool(e.is_Mul and len(e.args) == 2 and e.args[0] == -1 and e.args[1].is_Atom)


def eliminate_common(exprs) -> CseBlock:
    """sympy's CSE, with trivial temporaries (see _is_trivial) put back in place."""
    block = eliminate(exprs)
    trivial = {}
    temporaries = []
    for symbol, e in block.temporaries:
        e = e.xreplace(trivial) if trivial else e
        if _is_trivial(e):
            trivial[symbol] = e
        else:
            temporaries.append((symbol, e))
    if not trivial:
        return block
    return CseBlock(tuple(temporaries), tuple(o.xreplace(trivial) for o in block.outputs))


def _assign(exprs, targets, printer: CudaPrinter, where: str, comments,
            indent: str = INDENT) -> str:
    """C statements `target = expr; /* comment */` after common subexpression
    elimination."""
    exprs = list(exprs)
    if not exprs:
        return ""
    lines, outputs = eliminate_common(exprs).render(printer, where=where)
    body = [indent + line for line in lines]
    body += [f"{indent}{target} = {value}; /* {note} */"
             for target, value, note in zip(targets, outputs, comments)]
    return "\n".join(body)


def _assign_parts(exprs, targets, printer: CudaPrinter, where: str, comments,
                  part_size: int) -> list[str]:
    """_assign's statements in parts of `part_size` targets, each part with the
    temporaries of one common elimination that its targets use (each value is the
    same expression as in one part: only where it is computed differs)."""
    exprs = list(exprs)
    if len(exprs) <= part_size:
        return [_assign(exprs, targets, printer, where, comments)]
    block = eliminate_common(exprs)
    temporaries = block.temporaries
    position = {symbol: k for k, (symbol, _) in enumerate(temporaries)}

    def uses(e) -> set[int]:
        return {position[s] for s in e.free_symbols if s in position} \
            if isinstance(e, sp.Basic) else set()

    needs = [uses(e) for _, e in temporaries]
    parts = []
    for start in range(0, len(exprs), part_size):
        stop = start + part_size
        wanted, todo = set(), set().union(*(uses(e) for e in block.outputs[start:stop]))
        while todo:  # the temporaries these outputs use, and theirs
            k = todo.pop()
            if k not in wanted:
                wanted.add(k)
                todo |= needs[k] - wanted
        part = CseBlock(tuple(temporaries[k] for k in sorted(wanted)),
                        block.outputs[start:stop])
        lines, outputs = part.render(printer, where=where)
        body = [INDENT + line for line in lines]
        body += [f"{INDENT}{target} = {value}; /* {note} */" for target, value, note
                 in zip(targets[start:stop], outputs, comments[start:stop])]
        parts.append("\n".join(body))
    return parts


def _returning(expr, printer: CudaPrinter, where: str, note: str) -> str:
    """C statements computing `expr` and returning it."""
    lines, (value,) = eliminate_common([expr]).render(printer, where=where)
    return "\n".join([INDENT + line for line in lines]
                     + [f"{INDENT}return {value}; /* {naming.comment(note)} */"])


_USES = {"t": re.compile(r"\bt\b"), "x": re.compile(r"\bx\["), "p": re.compile(r"\bp\["),
         "b": re.compile(r"\bb\["), "A": re.compile(r"\bA\["), "ft": re.compile(r"\bft\[")}
_COMMENT = re.compile(r"/\*.*?\*/", re.S)


def _function(code: str, arguments: tuple[str, ...] = ("t", "x", "p")) -> str:
    """`code` preceded by `(void)a;` for each argument it does not use (compilers
    warn about unused parameters; a used one needs no cast)."""
    statements = _COMMENT.sub("", code)  # a comment may name an SBML id `t` or `x`
    unused = [a for a in arguments if not _USES[a].search(statements)]
    if not unused:
        return code
    voids = INDENT + " ".join(f"(void){a};" for a in unused)
    return voids + ("\n" + code if code else "")


def _add_time_derivatives(model: KernelModel, exprs: list, targets: list, notes: list) -> None:
    """ft[i] = df_i/dt (the non-zero ones) appended to a Jacobian's assignments."""
    if model.rhs_depends_on_time:
        for i, e in enumerate(model.dfdt):
            if e != 0:
                exprs.append(e)
                targets.append(f"ft[{i}]")
                notes.append(naming.time_derivative_comment(model, i))


def jacobian_entries(jacobian: sp.Matrix) -> dict[tuple[int, int], sp.Basic]:
    """The non-zero entries of `jacobian`, (row, column) -> expression, in row-major
    order (a large model's matrix is mostly zeros: looking at each of a 500-state
    model's 250,000 entries cost a second per pass)."""
    return {k: e for k, e in sorted(jacobian.todok().items()) if e != 0}


def _sparse_body(model: KernelModel, plan, printer: CudaPrinter,
                 part_size: int | None = None) -> list[str]:
    """A[e] = -J[i, j] on the plan's entries (non-zeros only) and ft = df/dt: one body,
    or with `part_size` the bodies of parts of that many entries (_assign_parts)."""
    jac = jacobian_entries(model.jacobian)
    exprs, targets, notes = [], [], []
    for (i, j), e in plan.index.items():
        if (i, j) in jac:
            exprs.append(-jac[i, j])
            targets.append(f"A[{e}]")
            notes.append(naming.jacobian_comment(model, i, j, sign="-"))
    _add_time_derivatives(model, exprs, targets, notes)
    parts = _assign_parts(exprs, targets, printer, "Jacobian", notes,
                          part_size if part_size is not None else max(len(exprs), 1))
    if len(parts) == 1:  # the body of model_m_sparse itself (which zeroes A and ft)
        return [_function(parts[0])]
    return [_function(part, ("t", "x", "p", "A", "ft")) for part in parts]


def _dense_jacobian_body(model: KernelModel, printer: CudaPrinter) -> str:
    """J = df/dx (row-major, non-zeros only) and ft = df/dt."""
    nx = model.n_states
    entries, targets, notes = [], [], []
    for (i, j), e in jacobian_entries(model.jacobian).items():
        entries.append(e)
        targets.append(f"J[{i * nx + j}]")
        notes.append(naming.jacobian_comment(model, i, j))
    _add_time_derivatives(model, entries, targets, notes)
    return _function(_assign(entries, targets, printer, "Jacobian", notes))


def _bodies(model: KernelModel, printer: CudaPrinter, jacobian: str, plan=None) -> dict:
    nx = model.n_states
    states = naming.state_comments(model)
    body = {}
    if nx:
        body["x0"] = _function(_assign(model.x0, [f"x[{i}]" for i in range(nx)], printer,
                                       "initial values", states), ("t", "p"))
        body["rhs"] = _function(_assign(model.rhs, [f"dx[{i}]" for i in range(nx)], printer,
                                        "rates", states))
    else:  # a model without states: one dummy state that never moves
        body["x0"] = _function(f"{INDENT}x[0] = {printer.literal(0)}; /* no state */",
                               ("t", "p"))
        body["rhs"] = _function(f"{INDENT}dx[0] = {printer.literal(0)}; /* no state */")
    body["outputs"] = _function(_assign(
        model.output_exprs, [f"y[{j}]" for j in range(len(model.outputs))], printer,
        "outputs", [naming.comment(sid) for sid in model.outputs]))
    body["jacobian"] = None
    body["m_sparse"], body["m_sparse_parts"] = None, []
    if plan is not None:
        # a large model's Jacobian in parts, each a unit that nvcc compiles in parallel
        parts = _sparse_body(model, plan, printer,
                             JACOBIAN_PART_ENTRIES if nx > INLINE_MODEL_MAX else None)
        if len(parts) == 1:
            body["m_sparse"] = parts[0]
        else:
            body["m_sparse_parts"] = parts
            body["m_sparse"] = "\n".join(f"{INDENT}model_m_sparse_{k}(t, x, p, A, ft);"
                                         for k in range(len(parts)))
    if jacobian == "analytic" and nx and plan is None:
        body["jacobian"] = _dense_jacobian_body(model, printer)
    elif jacobian == "analytic" and plan is None:  # no states: J and ft are zero
        body["jacobian"] = _function("")
    if model.atoms:
        body["atoms"] = _function(_assign(
            model.atoms, [f"g[{a}]" for a in range(len(model.atoms))], printer,
            "event triggers", [naming.comment(o) for o in model.atom_table.origins]))
    else:  # events without atoms (fired at t0 only): one dummy atom that stays at zero
        body["atoms"] = _function(f"{INDENT}g[0] = {printer.literal(0)}; /* no watched atom */")
    if model.events:
        lines = []
        for i, e in enumerate(model.events):
            condition = printer.print_condition(e.trigger, where=f"event {e.id}")
            lines.append(f"{INDENT}trig[{i}] = {condition}; /* {naming.comment(e.id)} */")
        body["triggers"] = _function("\n".join(lines), ("t", "x", "p", "b"))
    return body


def _events(model: KernelModel, printer: CudaPrinter) -> list[dict]:
    out = []
    ids = model.ode.state_ids
    for i, e in enumerate(model.events):
        where = f"event {e.id}"
        priority_body = None
        if e.priority is not None:
            priority_body = _function(_returning(e.priority, printer, where,
                                                 f"priority of {e.id}"))
        delay_body = None
        if e.delay is not None:
            delay_body = _function(_returning(e.delay, printer, where, f"delay of {e.id}"))
        out.append({
            "index": i, "id": e.id, "targets": list(e.targets),
            "delay_body": delay_body, "has_delay": e.delay is not None,
            "values_body": _function(_assign(
                e.values, [f"v[{k}]" for k in range(len(e.targets))], printer, where,
                [naming.comment(ids[target]) for target in e.targets])),
            "priority_body": priority_body, "has_priority": e.priority is not None,
            "persistent": e.persistent, "initial_value": e.initial_value,
            "values_at_trigger": e.values_at_trigger,
        })
    return out


def choose_jacobian(model: KernelModel, requested: str, check_printing: bool = True) -> str:
    """'analytic' or 'fd': analytic unless sympy cannot differentiate the model or the
    result cannot be printed (`check_printing=False`: not tried here; the caller prints
    the Jacobian and asks again with the check when that fails, see kernel_context)."""
    if requested == "fd":
        return "fd"
    ok = model.jacobian is not None and model.dfdt is not None
    if ok and check_printing:
        try:  # printable? (e.g. derivatives of functions the printer refuses)
            printer = model_printer(model, "double")
            for e in [*jacobian_entries(model.jacobian).values(), *model.dfdt]:
                if e != 0:
                    printer.doprint(e)
        except CodegenError:
            ok = False
    if not ok and requested == "analytic":
        # the model is fine and so is the code generator: the user asked for what this
        # model does not allow
        raise OptionError("jacobian", f"analytic: sympy cannot differentiate the right-hand "
                                      f"side of model {model.ode.network.id!r} into printable "
                                      f"math; use --jacobian fd or auto")
    return "analytic" if ok else "fd"


def _sparse_plan(model: KernelModel, jac_mode: str) -> sparse_lu.SparsePlan | None:
    """The sparse LU's plan where rodas4 factorises a large analytic Jacobian."""
    if jac_mode == "analytic" and model.n_states > LU_STATIC_MAX:
        return sparse_lu.plan(sparse_lu.jacobian_pattern(model.jacobian), model.n_states)
    return None


def _lu_values(plan) -> dict:
    """The sparse LU's part of the context: straight-line code for a small plan,
    index tables for the loops of a large one (sparse_lu.STRAIGHT_LINE_MAX)."""
    if plan is None:
        return {"lu_tables": None, "lu_code": "", "solve_code": ""}
    if sparse_lu.statement_count(plan) <= sparse_lu.STRAIGHT_LINE_MAX:
        return {"lu_tables": None, "lu_code": sparse_lu.lu_code(plan),
                "solve_code": sparse_lu.solve_code(plan)}
    tables = sparse_lu.tables(plan)
    return {"lu_tables": {name: _c_array(values) for name, values in tables.arrays().items()},
            "lu_index_type": "unsigned short" if plan.nnz < 2**16 else "int",
            "lu_upper_total": len(tables.upper_entry), "lu_code": "", "solve_code": ""}


def _c_array(values, per_line: int = 24) -> str:
    """The initialiser list of a C array (a trailing 0 keeps an empty table legal),
    `per_line` numbers per line, continued with backslashes (it is a macro's body)."""
    values = [*values, 0]
    rows = [", ".join(str(v) for v in values[i:i + per_line])
            for i in range(0, len(values), per_line)]
    return ", \\\n    ".join(rows)


@dataclass(frozen=True)
class KernelContext:
    """What a kernel template renders with (`values`), and what generate() needs to
    describe the kernel."""

    values: dict
    jacobian: str  # "analytic", "fd" or "none"
    plan: sparse_lu.SparsePlan | None
    fixed_values: tuple[float, ...] = ()  # read at launch (KernelSource.fixed_values)


def _delay_context(model: KernelModel, printer: CudaPrinter, history_nodes: int) -> dict:
    """delay.cuh's context: the delayed expressions' bodies (after every other body is
    printed: printing them registers the delays) and the history's size."""
    delayed = model.delayed
    names = naming.sbml_names(model)
    return dict(
        history=bool(delayed),
        history_nodes=history_capacity(history_nodes, model.n_states) if delayed else 0,
        history_group=HISTORY_GROUP,
        shortest_lag=model.shortest_lag if delayed else None,
        # the states some delayed expression reads: only their history is looked up
        # (driver.cuh checks the interpolant of these alone; a stiff state no delay()
        # reads would otherwise hold the steps to its own time scale)
        history_states=[i for i, xi in enumerate(model.x)
                        if any(isinstance(e, sp.Basic) and e.has(xi) for e in delayed)],
        delayed_notes=[naming.comment(naming.sbml_text(e, names)) for e in delayed],
        body_delayed=[_function(_returning(e, printer, "delay()", f"delayed expression {k}"))
                      for k, e in enumerate(delayed)],
        body_delayed_before={k: _function(_returning(e, printer, "delay()",
                                                     f"delayed expression {k} before the start"))
                             for k, e in model.delays.before.items()})


def _fast_bodies(model: KernelModel, printer: CudaPrinter) -> dict:
    """fast.cuh's bodies: the fast reactions' rates and their Jacobian (printed when
    it prints; None: forward differences in the kernel)."""
    if model.fast_rates is None:
        return {"fast": None, "fast_jacobian": None}
    states = naming.state_comments(model)
    nx = model.n_states
    bodies = {"fast": _function(_assign(model.fast_rates, [f"dx[{i}]" for i in range(nx)],
                                        printer, "fast reactions", states)),
              "fast_jacobian": None}
    jac = model.fast_jacobian
    if jac is not None:
        entries = [(i * nx + j, jac[i, j]) for i in range(nx) for j in range(nx)
                   if jac[i, j] != 0]
        try:
            bodies["fast_jacobian"] = _function(_assign(
                [e for _, e in entries], [f"J[{k}]" for k, _ in entries], printer,
                "fast reactions", [naming.jacobian_comment(model, k // nx, k % nx)
                                   for k, _ in entries]))
        except CodegenError:
            pass  # forward differences in the kernel
    return bodies


def kernel_context(model: KernelModel, method: str, precision: str = "double", *,
                   sink=None, block_size: int = 128, jacobian: str = "auto",
                   history_nodes: int = DEFAULT_HISTORY_NODES,
                   fixed: str = "literals", refill: bool = False,
                   scaled_atol: bool = True) -> KernelContext:
    """The context of core/ode/templates for `model` integrated with `method` ('rk4',
    'dopri5', 'rodas4'), writing through `sink` (sinks.py; default: trajectories).
    `fixed`: 'literals' (fixed parameters in the source), 'launch' (read at launch
    from the times argument: KernelSource.launch_times; the engine must pass them)
    or 'auto' (wants_fixed_slots). `refill`: the CUDA entry point is the one whose
    threads take the next member when theirs ends (templates/entry.cuh), where the
    sink and method allow it (templates/kernel.cuh's refill_lanes). `scaled_atol`: a
    state that starts nonzero below atol / rtol is held to rtol x its initial value
    (templates/adaptive.cuh's ode_start_atol; the ode backend's --scaled-atol)."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}")
    if fixed not in ("literals", "launch", "auto"):
        raise ValueError(f"fixed must be 'literals', 'launch' or 'auto', not {fixed!r}")
    sink = sink if sink is not None else TrajectorySink()
    at_launch = fixed == "launch" or (fixed == "auto" and wants_fixed_slots(model))
    slots = fixed_slots(model) if at_launch else ()
    printer = model_printer(model, precision, slots)
    # the analytic Jacobian's printability is found out by printing it once, here,
    # rather than by choose_jacobian's check and then again (seconds on a large model)
    jac_mode = choose_jacobian(model, jacobian, check_printing=False) \
        if method in IMPLICIT else "none"
    plan = _sparse_plan(model, jac_mode)
    try:
        body = _bodies(model, printer, jac_mode, plan)
    except CodegenError:
        if jac_mode != "analytic" or choose_jacobian(model, jacobian) == "analytic":
            raise  # not the Jacobian's printing (or an OptionError above: asked for it)
        jac_mode, printer = "fd", model_printer(model, precision, slots)
        plan = None
        body = _bodies(model, printer, jac_mode, plan)
    events = _events(model, printer)
    delay = _delay_context(model, printer, history_nodes)
    body["delayed"] = delay.pop("body_delayed")
    body["delayed_before"] = delay.pop("body_delayed_before")
    body.update(_fast_bodies(model, printer))
    nx, nout = model.n_states, len(model.outputs)
    needs_rng = sum(1 for e in model.events if e.priority is not None) >= 2
    uses = [(u.atom, u.rel) for u in model.uses]
    values = dict(
        precision=precision, model_id=model.ode.network.id or "model", method=method,
        id_table=naming.id_table(model, slots), varied=list(model.varied), sink=sink,
        nx=nx, nx_alloc=max(nx, 1), np=len(model.varied),
        np_alloc=max(len(model.varied) + len(slots), 1),
        # p[np + k] = the k-th fixed parameter read at launch (after the output times)
        fixed=[(len(model.varied) + k, model.parameters.literal_ids[s])
               for k, s in enumerate(slots)],
        nout=nout, nout_alloc=max(nout, 1), natoms=len(model.atoms),
        natoms_alloc=max(len(model.atoms), 1), nevents_alloc=max(len(model.events), 1),
        time_switches=list(model.time_switches),
        watch=bool(model.atoms or model.events), inline_model=nx <= INLINE_MODEL_MAX,
        # large models' functions are marked as translation units of their own, which
        # nvcc compiles in parallel (sbmlgpu.runtime.parallel_build)
        units=nx > INLINE_MODEL_MAX,
        delayed=any(e.delay is not None for e in model.events),
        inline_events=len(model.atoms) + len(model.events) <= INLINE_MODEL_MAX,
        # loops over states / outputs: unrolled for small models (registers), kept as
        # loops for large ones (code size and nvcc time grow with every unrolled copy;
        # left alone, nvcc unrolls loops of constant trip count by itself: a 94-state
        # rodas4 kernel spent 30 s in nvcc on its unrolled loops)
        unroll="#pragma unroll" if nx <= INLINE_MODEL_MAX else NO_UNROLL,
        unroll_outputs="#pragma unroll" if nout <= INLINE_MODEL_MAX else NO_UNROLL,
        no_unroll=NO_UNROLL if nx > INLINE_MODEL_MAX else "",
        body=body, events=events, uses=uses, uses_eqz=any(rel >= 4 for _, rel in uses),
        rhs_has_time=model.rhs_depends_on_time, lu_static=max(nx, 1) <= LU_STATIC_MAX,
        fd_jacobian=jac_mode == "fd", block_size=block_size, needs_rng=needs_rng,
        draws=model.draws,
        sparse_lu=plan is not None, nnz=plan.nnz if plan else 0,
        diag_entries=[plan.index[(k, k)] for k in range(plan.n)] if plan else [],
        **_lu_values(plan),
        fast=model.fast_rates is not None, refill=refill, scaled_atol=scaled_atol,
        **delay,
    )
    return KernelContext(values, jac_mode, plan,
                         tuple(float(model.literals[s]) for s in slots))


def generate(model: KernelModel, method: str, precision: str = "double", *,
             template: tuple[str, str], sink=None, prefix: str = "ode",
             block_size: int = 128, jacobian: str = "auto",
             history_nodes: int = DEFAULT_HISTORY_NODES,
             fixed: str = "literals", refill: bool = False,
             scaled_atol: bool = True) -> KernelSource:
    """The kernel source of `template` ((package, file): a backend's kernel that
    composes core/ode/templates) for `model` integrated with `method`, writing
    through `sink` (`fixed`, `refill`, `scaled_atol`: see kernel_context). The file name is
    `<prefix>_<model id>_<method>_<precision>_<hash>.cu`."""
    sink = sink if sink is not None else TrajectorySink()
    context = kernel_context(model, method, precision, sink=sink, block_size=block_size,
                             jacobian=jacobian, history_nodes=history_nodes,
                             fixed=fixed, refill=refill, scaled_atol=scaled_atol)
    text = render(*template, **context.values)
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    safe = re.sub(r"[^A-Za-z0-9_]", "_", model.ode.network.id or "model")[:40]
    nx, nout = model.n_states, len(model.outputs)
    rhs_flops = count_block(eliminate_common(list(model.rhs))).flops() if nx else 0.0
    out_flops = count_block(eliminate_common(list(model.output_exprs))).flops() if nout else 0.0
    plan = context.plan
    # the CUDA entry point: the refill kernel where the template generated it
    refills = f"\n{sink.entry}_{method}_refill(" in text
    step = _step_flops(method, max(nx, 1), rhs_flops, model, context.jacobian, plan)
    return KernelSource(
        name=f"{prefix}_{safe}_{method}_{precision}_{digest}.cu", text=text,
        kernel=f"{sink.entry}_{method}" + ("_refill" if refills else ""), method=method,
        precision=precision,
        flops_per_rhs=rhs_flops, flops_per_step=step, flops_per_output=out_flops,
        jacobian=context.jacobian,
        linear_algebra=("none" if method not in IMPLICIT else
                        f"sparse LU ({plan.nnz} entries)" if plan else "dense LU"),
        fixed_values=context.fixed_values,
        history_reals=history_reals(context.values["history_nodes"], nx),
        refills=refills)


def _step_flops(method: str, nx: int, rhs: float, model: KernelModel, jac_mode: str,
                plan=None) -> float:
    """FLOPs of one step (weighted as in sbmlgpu.codegen.cost; an FMA is two). The
    vector arithmetic is counted from the formulas in templates/*.cuh."""
    if method == "rk4":
        # 3 stage arguments (x + c h k: 2 flops per state), the update (7 per state)
        return 4 * rhs + 13 * nx
    if method == "dopri5":
        # 5 stage arguments with 1..5 terms (2 flops per term), the solution (10), the
        # error estimate and its norm (~17)
        return 6 * rhs + (2 + 4 + 6 + 8 + 10 + 10 + 17) * nx
    jac = 0.0
    if jac_mode == "analytic" and model.jacobian is not None:
        jac = count_many(list(jacobian_entries(model.jacobian).values())).flops()
    else:
        jac = nx * (rhs + 2 * nx)
    if plan is not None:
        factor, solve = plan.flops()
    else:
        factor, solve = 2.0 / 3.0 * nx**3, 2.0 * nx**2
    if method == "bdf":
        # ~2 Newton iterations (an f and a solve each), the new f, the prediction and
        # differences (~8 rows); J and M's factorisation only now and then: not counted
        return 3 * rhs + 2 * solve + 60 * nx
    return jac + factor + 6 * solve + 6 * rhs + 70 * nx  # rodas4
