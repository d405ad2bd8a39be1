"""delay(e, d) in a kernel: each distinct delayed expression e becomes a C function
of the past state, looked up in the member's history (templates/delay.cuh).

The kernel keeps, per member, the Hermite nodes (t, x, f) of its accepted steps and
of both sides of every jump (events): delay(e, d) at time t is e evaluated at time
t - d on the state interpolated there (cubic Hermite between nodes; before the start
the initial-value expressions evaluated at that time, as the CPU reference does,
core/reference/history.py; beyond the last node, i.e. a stage inside the step being
taken when the lag is shorter than the step, linear between the last node and the
stage's own state, as the reference does).

`DelayTable.replace` turns every delay(e, d) of a specialised expression into
`DelayCall(k, t - d)`, which KernelPrinter prints as `ode_delayed_<k>(p, t - d, t, x)`:
every model function that has (t, x, p) can call it. A delayed expression that contains delay() itself refers to
other entries only, so the functions are printed callee first (no recursion, which
would leave the device stack size to the driver's small default).
"""

from __future__ import annotations

import sympy as sp

from ..codegen.printer import CudaPrinter
from ..ir import TIME, Delay, RateOf

#: Hermite nodes kept per member by default (templates/delay.cuh): a ring, so only
#: the span of the longest lag must fit (the suite's 01593 holds 100 events, two
#: nodes each, within its lag of 1); 8 (1 + 2 states) bytes per node
DEFAULT_HISTORY_NODES = 1024


class DelayCall(sp.Function):
    """delay number k looked up at time tau: DelayCall(k, tau)."""

    nargs = 2


class KernelPrinter(CudaPrinter):
    """CudaPrinter that also prints the kernel's delay look-ups."""

    def _print_DelayCall(self, expr):
        k, tau = expr.args
        return f"ode_delayed_{int(k)}(p, {self._print(tau)}, t, x)"


class DelayTable:
    """The distinct delayed expressions of one kernel, by number."""

    def __init__(self):
        self.exprs: list[sp.Expr] = []  # e_k, with its own delays replaced
        self.lags: list[sp.Expr] = []  # every lag met (specialised)
        self._index: dict[sp.Expr, int] = {}

    def replace(self, e):
        if not isinstance(e, sp.Basic) or not e.has(Delay):
            return e
        return e.replace(lambda a: isinstance(a, Delay), self._call)

    def _call(self, a: Delay) -> sp.Expr:
        inner, lag = a.args
        inner = self.replace(inner)  # its own delays first: they get lower numbers
        if inner not in self._index:
            self._index[inner] = len(self.exprs)
            self.exprs.append(inner)
        self.lags.append(lag)
        return DelayCall(sp.Integer(self._index[inner]), TIME - lag)

    def constant_lags(self, numeric) -> list[float]:
        """The lags that are numbers once fixed parameters are literals (`numeric`
        substitutes them): steps no longer than the shortest keep every stage's
        look-up inside the known history."""
        out = []
        for lag in self.lags:
            value = numeric(lag)
            if isinstance(value, sp.Basic) and value.is_number:
                try:
                    v = float(value)
                except TypeError:
                    continue
                if v > 0:
                    out.append(v)
        return sorted(set(out))


def has_rate_of_inside(e) -> bool:
    """rateOf inside delay(): the past derivative (the reference evaluates it from its
    history and, before the start, from the initial values' time derivative); the
    kernel refuses it."""
    return isinstance(e, sp.Basic) and any(a.has(RateOf) for a in e.atoms(Delay))
