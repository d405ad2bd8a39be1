"""What the `ode` backend refuses, with the ids of the elements that use it.

Refused, because the kernel cannot do it correctly (yet):
- whatever the ODE view cannot represent (algebraic rules, reactions without rate
  math, event assignments to variables that are not states, ...); fast reactions are
  simulated as the CPU reference does (core/reference/fast.py, templates/fast.cuh);
- rateOf inside delay() (the past derivative, which the history's Hermite nodes do
  not give before the start), delay() in an initial value, and distrib draws in a
  model with delay() (as the CPU reference: the history before the start evaluates
  the initial values again).
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

from sbmlgpu.codegen.printer import CodegenError
from sbmlgpu.features import math_by_element
from sbmlgpu.ir import Delay, Network
from sbmlgpu.ode.delays import DelayTable, KernelPrinter, has_rate_of_inside
from sbmlgpu.reference.fast import with_fast_factor
from sbmlgpu.reference.support import draws_outside_instants
from sbmlgpu.views import ode as ode_view


def unsupported(network: Network) -> list[tuple[str, tuple[str, ...]]]:
    network = with_fast_factor(network)  # fast reactions: as the reference (fast.cuh)
    missing = ode_view.unsupported_when_built(network)
    if missing:
        return missing
    missing = draws_outside_instants(network) or _delays_not_kept(network)
    if missing:
        return missing
    _check_printable(ode_view.ode_system(network))  # only an accepted model must print
    return []


def _delays_not_kept(network: Network) -> list[tuple[str, tuple[str, ...]]]:
    """The uses of delay() that the kernel's history does not serve."""
    out = []
    rate_of = tuple(dict.fromkeys(where for where, e in math_by_element(network)
                                  if has_rate_of_inside(e)))
    if rate_of:
        out.append(("rateOf inside delay() (the kernel's history keeps no past "
                    "derivative before the start)", rate_of))
    ode = ode_view.ode_system(network)
    initial = tuple(sid for sid, e in zip(ode.state_ids, ode.x0)
                    if isinstance(e, sp.Basic) and e.has(Delay))
    if initial:
        out.append(("delay() in an initial value (the history starts after them)", initial))
    return out


def _check_printable(ode) -> None:
    """CodegenError (a bug to report) for the first construct the CUDA printer
    cannot print, naming every element that uses it; None when all of it prints."""
    printer = KernelPrinter({}, "double", unmapped="mangle")
    found: dict[str, list[str]] = {}
    delays = DelayTable()  # delay() as the kernel prints it (sbmlgpu.ode.delays)

    def check(where: str, e) -> None:
        if not isinstance(e, sp.Basic):
            return
        e = delays.replace(e)
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
    for e in delays.exprs:  # registered while the others were checked
        check("delay()", e)
    if found:
        construct, ids = next(iter(found.items()))
        raise CodegenError(construct, tuple(dict.fromkeys(ids)))
