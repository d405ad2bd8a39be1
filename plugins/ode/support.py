"""What the `ode` backend refuses, with the ids of the elements that use it.

Refused, because the kernel cannot do it correctly (yet):
- whatever the ODE view cannot represent (algebraic rules, fast reactions, reactions
  without rate math, event assignments to variables that are not states, ...);
- delay(): a delay differential equation needs the trajectory's history, which a
  thread does not keep.
- a distrib draw in a rate, rule, trigger, delay or priority (a new random number at
  every evaluation): draws are evaluated in initial values and event assignments,
  each member from its own stream (distrib.cuh).
Math the CUDA printer cannot print is not a refusal but a bug in sbmlgpu (every
function of SBML math that the ODE view leaves should print): `unsupported`
raises the printer's CodegenError, an InternalError naming the construct and the
elements that use it, so that neither a user nor the SBML Test Suite runner
mistakes it for a feature the backend declines.
Everything else of SBML's time-course semantics is supported: assignment and rate
rules, initial assignments (from each member's parameters), varying compartments,
conversion factors, rateOf, piecewise, events with delays, priorities (ties broken
at random as SBML says), persistence, trigger initial values, values from trigger
time, and triggers with == and != (true at their crossing instant, as in the CPU
reference).
"""

from __future__ import annotations

import sympy as sp

from sbmlgpu.codegen.printer import CodegenError, CudaPrinter
from sbmlgpu.features import CONTINUOUS_DRAW, draws_evaluated_continuously
from sbmlgpu.ir import Network
from sbmlgpu.views import ode as ode_view


def unsupported(network: Network) -> list[tuple[str, tuple[str, ...]]]:
    missing = ode_view.unsupported_without_history(network, "the kernel keeps no trajectory "
                                                            "history")
    if missing:
        return missing
    drawn = draws_evaluated_continuously(network)
    if drawn:
        return [(CONTINUOUS_DRAW, drawn)]
    _check_printable(ode_view.ode_system(network))  # only an accepted model must print (delay() itself does not)
    return []


def _check_printable(ode) -> None:
    """CodegenError (a bug to report) for the first construct the CUDA printer
    cannot print, naming every element that uses it; None when all of it prints."""
    printer = CudaPrinter({}, "double", unmapped="mangle")
    found: dict[str, list[str]] = {}

    def check(where: str, e) -> None:
        if not isinstance(e, sp.Basic):
            return
        try:
            printer.doprint(e)
        except CodegenError as exc:
            found.setdefault(exc.construct, []).append(where)

    for sid, f in zip(ode.state_ids, ode.rhs):
        check(sid, f)
    for sid, e in zip(ode.state_ids, ode.x0):
        check(sid, e)
    for sid, e in ode.values.items():
        check(sid, e)
    for e in ode.events:
        for part in (e.trigger, e.priority, *(v for _, v in e.assignments)):
            check(e.id, part)
    if found:
        construct, ids = next(iter(found.items()))
        raise CodegenError(construct, tuple(dict.fromkeys(ids)))
