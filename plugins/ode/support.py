"""What the `ode` backend refuses, with the ids of the elements that use it.

Refused, because the kernel cannot do it correctly (yet):
- whatever the ODE view cannot represent (algebraic rules, reactions without rate
  math, event assignments to variables that are not states, ...); fast reactions are
  simulated as the CPU reference does (core/reference/fast.py, templates/fast.cuh);
- delay() in an initial value, rateOf inside delay() whose rates contain that
  delay() (a neutral delay equation; at kernel generation), and distrib draws in a
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
from sbmlgpu.errors import UnsupportedModelError
from sbmlgpu.ir import Delay, Network
from sbmlgpu.ode.delays import NEUTRAL, DelayTable, KernelPrinter, rate_of_after, rate_of_before
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
    ode = ode_view.ode_system(network)
    initial = tuple(sid for sid, e in zip(ode.state_ids, ode.x0)
                    if isinstance(e, sp.Basic) and e.has(Delay))
    if initial:
        out.append(("delay() in an initial value (the history starts after them)", initial))
    neutral = []
    for where, e in _math(ode):
        try:
            _delay_table(ode).replace(e)
        except UnsupportedModelError:
            neutral.append(where)
    if neutral:
        out.append((NEUTRAL, tuple(dict.fromkeys(neutral))))
    return out


def _delay_table(ode) -> DelayTable:
    """delay() as the kernel prints it (sbmlgpu.ode.delays), rateOf inside it written out."""
    return DelayTable(lambda e: (rate_of_after(e, ode.x, ode.rhs),
                                 rate_of_before(e, ode.x, ode.x0)))


def _math(ode):
    """(element id, expression) of every expression a kernel evaluates."""
    yield from zip(ode.state_ids, ode.rhs)
    yield from zip(ode.state_ids, ode.x0)
    yield from ode.values.items()
    for e in ode.events:
        for part in (e.trigger, e.priority, *(v for _, v in e.assignments)):
            yield e.id, part


def _check_printable(ode) -> None:
    """CodegenError (a bug to report) for the first construct the CUDA printer
    cannot print, naming every element that uses it; None when all of it prints."""
    printer = KernelPrinter({}, "double", unmapped="mangle")
    found: dict[str, list[str]] = {}
    delays = _delay_table(ode)

    def check(where: str, e) -> None:
        if not isinstance(e, sp.Basic):
            return
        e = delays.replace(e)
        try:
            printer.doprint(e)
        except CodegenError as exc:
            found.setdefault(exc.construct, []).append(where)

    for where, e in _math(ode):
        check(where, e)
    for e in delays.exprs:  # registered while the others were checked
        check("delay()", e)
    if found:
        construct, ids = next(iter(found.items()))
        raise CodegenError(construct, tuple(dict.fromkeys(ids)))
