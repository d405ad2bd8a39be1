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
from ..errors import OptionError, UnsupportedModelError
from ..ir import TIME, Delay, RateOf
from .kernel_source import DEFAULT_HISTORY_NODES  # noqa: F401 (its meaning is below)

#: DEFAULT_HISTORY_NODES, history nodes per member (templates/delay.cuh): 0 = as many as fit in
#: AUTO_HISTORY_BYTES, at most AUTO_HISTORY_NODES. A ring, so only the span of the
#: longest lag must fit (the suite's 01593 holds 100 events, two nodes each, within its
#: lag of 1). The ring is global memory, one buffer per launch of members x
#: history_reals (the engines allocate it; the batch planner counts it per member, so
#: that a large ensemble is split into batches that fit rather than failing).
AUTO_HISTORY_NODES = 1024
AUTO_HISTORY_BYTES = 64 * 1024
#: a member's ring at most: the bound of the time the ring was a GPU thread's local
#: memory (512 KB, less the rest of the frame), kept so that --history-nodes accepts
#: what it accepted; in global memory it still bounds a batch's ring (100,000 members
#: at 448 KB are 45 GB)
MAX_HISTORY_BYTES = 448 * 1024


def node_reals(n_states: int) -> int:
    """Reals of one history node: t, x and dx/dt (ODE_HISTORY_WIDTH; a model without
    states has ODE_NX = 1)."""
    return 1 + 2 * max(n_states, 1)


def history_capacity(requested: int, n_states: int) -> int:
    """The ring's nodes for `requested` (0: automatic) and a model of `n_states`;
    OptionError where a member's ring would exceed MAX_HISTORY_BYTES."""
    per_node = 8 * node_reals(n_states)  # in double
    nodes = int(requested) or max(16, min(AUTO_HISTORY_NODES, AUTO_HISTORY_BYTES // per_node))
    if nodes * per_node > MAX_HISTORY_BYTES:
        raise OptionError("history-nodes", f"{nodes} nodes of {per_node} bytes ({n_states} "
                                           f"states) exceed the {MAX_HISTORY_BYTES // 1024} KB "
                                           f"a member's history may take: at most "
                                           f"{MAX_HISTORY_BYTES // per_node}")
    return nodes


def history_reals(nodes: int, n_states: int) -> int:
    """Reals of one member's ring in the launch's history buffer (0: no delay())."""
    return int(nodes) * node_reals(n_states) if nodes else 0


NEUTRAL = ("delay() of a rateOf whose rates contain that same delay() (a neutral delay "
           "equation: each look-up would need the one a lag earlier)")


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

    def __init__(self, rate_of=None):
        """`rate_of(e)`: (after, before) for a delayed e with rateOf inside, the
        rateOf calls written out for a past time after the start and before it."""
        self.exprs: list[sp.Expr] = []  # e_k, with its own delays replaced
        self.before: dict[int, sp.Expr] = {}  # e_k before the start, where it differs
        self.lags: list[sp.Expr] = []  # every lag met (specialised)
        self._index: dict[sp.Expr, int] = {}
        self._rate_of = rate_of
        self._writing: set[sp.Expr] = set()

    def replace(self, e):
        if not isinstance(e, sp.Basic) or not e.has(Delay):
            return e
        return e.replace(lambda a: isinstance(a, Delay), self._call)

    def _call(self, a: Delay) -> sp.Expr:
        inner, lag = a.args
        self.lags.append(lag)
        key = inner
        if key not in self._index:
            before = None
            if inner.has(RateOf) and self._rate_of is not None:
                if key in self._writing:  # e.g. x' = delay(rateOf(x), 1): a neutral DDE
                    raise UnsupportedModelError({NEUTRAL: (str(inner),)}, who="backend 'ode'")
                self._writing.add(key)
                inner, before = self._rate_of(inner)
                before = self.replace(before)
                self._writing.discard(key)
            inner = self.replace(inner)  # its own delays first: they get lower numbers
            self._index[key] = len(self.exprs)
            if before is not None:
                self.before[len(self.exprs)] = before
            self.exprs.append(inner)
        return DelayCall(sp.Integer(self._index[key]), TIME - lag)

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


def rate_of_after(e: sp.Expr, x, rhs) -> sp.Expr:
    """rateOf(a) inside a delayed e, for a past time after the start: the chain rule
    with the rates there (as the CPU reference, core/reference/model.py)."""
    def d(a):
        inner = a.args[0]
        out = sp.diff(inner, TIME) if inner.has(TIME) else sp.Integer(0)
        for xi, fi in zip(x, rhs):
            if inner.has(xi):
                out += sp.diff(inner, xi) * fi
        return out
    return e.replace(lambda a: isinstance(a, RateOf), d)


def rate_of_before(e: sp.Expr, x, x0) -> sp.Expr:
    """rateOf(a) inside a delayed e, before the start: the time derivative of a on the
    initial-value expressions (zero unless they depend on time)."""
    before = dict(zip(x, x0))
    return e.replace(lambda a: isinstance(a, RateOf),
                     lambda a: sp.diff(a.args[0].xreplace(before), TIME))
