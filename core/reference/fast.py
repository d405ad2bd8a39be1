"""Fast reactions (SBML L2 / L3V1 `fast="true"`): at equilibrium at every instant.

The ODE view has no notion of them, so the reference rewrites the network
before the view sees it: every fast reaction's rate is multiplied by a factor
parameter K. The view's right-hand side is then linear in K,

    f(x) = f_slow(x) + K f_fast(x),

and the reference (1) simulates it with K = FAST_SCALE, large enough that the
fast reactions track their equilibrium within far less than the test suite's
tolerances while the slow ones move (a stiff problem: LSODA and the implicit
methods handle it), and (2) wherever the state jumps (at the start, after
events), first relaxes the state onto the fast equilibrium by integrating
x' = f_fast(x) in a pseudo-time at fixed t, so that outputs at that instant
already show the equilibrium, as the suite expects.

A fast subsystem without an equilibrium (it grows forever) is an error of the
model; the relaxation reports it.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import sympy as sp
from scipy.integrate import solve_ivp

from ..ir import Network, Parameter, sym

# An id no SBML model uses in practice (SBML ids cannot contain '.', so a
# collision needs a model that spells this exact name).
FACTOR_ID = "__sbmlgpu_fast_factor"
FAST_SCALE = 1e9
MAX_RATE_EVALUATIONS = 200_000  # per relaxation; the suite's cases need < 2,000


def has_fast(network: Network) -> bool:
    return any(r.fast for r in network.reactions)


def with_fast_factor(network: Network) -> Network:
    """The network with fast reactions as ordinary ones, their rates times K."""
    if not has_fast(network):
        return network
    k = sym(FACTOR_ID)
    reactions = tuple(replace(r, fast=False, rate=k * r.rate) if r.fast else r
                      for r in network.reactions)
    return replace(network, reactions=reactions,
                   parameters=network.parameters + (Parameter(FACTOR_ID, FAST_SCALE),),
                   notes=network.notes + (
                       "fast reactions: simulated as ordinary reactions whose rates are "
                       f"scaled by {FAST_SCALE:g}, with the state relaxed to their "
                       "equilibrium at the start and after events",))


def split_rates(rhs, factor: sp.Symbol) -> list[sp.Expr]:
    """f_fast = df/dK of each rate (the rates are linear in K)."""
    return [sp.diff(f, factor) if isinstance(f, sp.Basic) and f.has(factor) else sp.Integer(0)
            for f in rhs]


class RelaxationFailed(Exception):
    pass


def relax(fast_rates, t: float, x: np.ndarray, p: np.ndarray, *, rtol: float,
          atol: float) -> np.ndarray:
    """The equilibrium of x' = f_fast(t, x) reached from x (t held fixed)."""
    x = np.asarray(x, dtype=float)
    if not len(x):
        return x

    calls = [0]

    def f(_tau, y):
        # a bound on the work: rates of 1e300 (a huge conversion factor) make LSODA
        # take steps so small that the relaxation would run for hours
        calls[0] += 1
        if calls[0] > MAX_RATE_EVALUATIONS:
            raise RelaxationFailed(f"fast reactions: no equilibrium after "
                                   f"{MAX_RATE_EVALUATIONS} rate evaluations at t = {t!r} "
                                   f"(rates too large or too stiff to relax)")
        return fast_rates(t, y, p)

    def settled(y) -> bool:
        rate = np.abs(np.asarray(f(0.0, y), dtype=float))
        return bool(np.all(rate <= 1e3 * (atol + rtol * np.abs(y))))

    if not np.all(np.isfinite(x)):  # an INF or NaN amount: no equilibrium to relax to
        raise RelaxationFailed(f"fast reactions: the state at t = {t!r} is not finite "
                               f"(an initial value of INF or NaN?), so they have no equilibrium")
    if settled(x):
        return x
    y = x
    # pseudo-time spans growing by 1e3: one for a fast subsystem with rates ~ 1,
    # more for slower "fast" reactions; an implicit method strides once settled
    for span in (1e2, 1e5, 1e8):
        sol = solve_ivp(f, (0.0, span), y, method="LSODA", rtol=min(rtol, 1e-10),
                        atol=atol * 1e-3)
        if not sol.success:
            raise RelaxationFailed(f"fast reactions: relaxing to their equilibrium at "
                                   f"t = {t!r} failed: {sol.message}")
        y = sol.y[:, -1]
        if settled(y):
            return y
    raise RelaxationFailed(f"fast reactions reach no equilibrium from the state at t = {t!r}")
