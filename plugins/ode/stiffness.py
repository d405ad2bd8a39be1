"""`--method auto`: a stiff method where the model is stiff over the time span.

Explicit methods (dopri5) are stable only while h |lambda| stays within their
stability region (about 3.3 for DOPRI5 on the negative real axis), lambda the
Jacobian's eigenvalues; an implicit method (rodas4) has no such limit. So where the
most negative real part of an eigenvalue, times the time span, is large, an
explicit method needs at least that many / 3.3 steps just to stay stable, whatever
the tolerance: then rodas4 is chosen. The threshold (STIFF_SPAN_EIGENVALUE = 1e5,
some 30,000 stability-bound explicit steps) is high because an explicit step is
much cheaper than a Rosenbrock step (one Jacobian, one LU, six solves and six
right-hand sides) and stiff eigenvalues often matter for part of the span only: on
the BioModels we ship, dopri5 at rtol 1e-9 was faster (CPU path) than rodas4 up to
an index of ~3e5 (BIOMD0000000035), while a Robertson-type problem (> 1e6) needs
rodas4.

The Jacobian is looked at along one trajectory (the CPU reference at the median
parameters, loose tolerances, eleven points over the span): a model can be stiff
only after t0, as Robertson's reaction is; for an ensemble, at the median member and
seven random ones, stiff if any of them is (bounds of a prior can span decades,
and stiff members cost an explicit method millions of steps). `--method` overrides
the choice.
"""

from __future__ import annotations

import logging

import numpy as np

from .model import KernelModel
from .numeric import lambdify

log = logging.getLogger("sbmlgpu.ode")
STIFF_SPAN_EIGENVALUE = 1e5


def _states_along(model: KernelModel, p_values: np.ndarray, t0: float, span: float,
                  x0: np.ndarray) -> list[tuple[float, np.ndarray]]:
    """(t, x) at the start and at ten points of the nominal trajectory (the CPU
    reference, loose tolerances): a model can turn stiff right after t0 (Robertson's
    reaction is not stiff at its initial state)."""
    points = [(t0, x0)]
    if span <= 0:
        return points
    try:
        from sbmlgpu import reference

        times = np.linspace(t0, t0 + span, 11)
        params = {pid: float(v) for pid, v in zip(model.varied, p_values)}
        traj = reference.simulate(model.ode, times, parameters=params, rtol=1e-6, atol=1e-9)
        reached = len(times) if traj.n_reached < 0 else traj.n_reached
        points += [(float(times[k]), np.asarray(traj.x[k], float)) for k in range(1, reached)
                   if np.all(np.isfinite(traj.x[k]))]
    except Exception as exc:  # noqa: BLE001 - a heuristic: the initial state alone then
        log.debug("stiffness check: no trajectory (%s)", exc)
    return points


def stiffness_index(model: KernelModel, p_values: np.ndarray, t0: float, span: float) -> float:
    """max over the nominal trajectory of max(-Re lambda) * span, lambda the eigenvalues
    of the Jacobian (forward differences); NaN if it cannot be computed."""
    if not model.n_states:
        return 0.0
    try:
        x0f = lambdify(model, model.x0, with_states=False)
        f = lambdify(model, model.rhs)
        p = [float(v) for v in p_values]
        with np.errstate(all="ignore"):
            x0 = np.asarray(x0f(t0, *p), dtype=float).reshape(-1)
        worst = 0.0
        for t, x in _states_along(model, np.asarray(p), t0, span, x0):
            with np.errstate(all="ignore"):
                fx = np.asarray(f(t, *x, *p), dtype=float).reshape(-1)
                # forward differences: n + 1 evaluations of f, cheap for any model size
                J = np.empty((model.n_states, model.n_states))
                for j in range(model.n_states):
                    delta = 1e-7 * max(abs(x[j]), 1e-5)
                    y = x.copy()
                    y[j] += delta
                    J[:, j] = (np.asarray(f(t, *y, *p), dtype=float).reshape(-1) - fx) / delta
            if not np.all(np.isfinite(J)):
                if t == t0:
                    return float("nan")
                continue
            eig = np.linalg.eigvals(J)
            worst = max(worst, -float(np.min(eig.real)))
    except Exception as exc:  # noqa: BLE001 - a heuristic: fall back to the robust method
        log.debug("stiffness check failed: %s", exc)
        return float("nan")
    return worst * float(span)


def choose_method(model: KernelModel, members: np.ndarray, t0: float,
                  span: float) -> tuple[str, str]:
    """(method, why) for --method auto; `members`: (k, varied) parameter sets to
    probe (a wide ensemble holds stiff and non-stiff members: stiff if any is)."""
    members = np.atleast_2d(np.asarray(members, dtype=float))
    if members.shape[1] != len(model.varied):
        members = members.reshape(-1, len(model.varied))
    indices = [stiffness_index(model, row, t0, span) for row in members]
    if not all(np.isfinite(indices)):
        return "rodas4", "the stiffness check could not evaluate the Jacobian: the stiff method"
    index = max(indices)
    if index > STIFF_SPAN_EIGENVALUE:
        return "rodas4", (f"stiff: max(-Re eigenvalue) x time span = {index:.3g} along the "
                          f"nominal trajectory (> {STIFF_SPAN_EIGENVALUE:g})")
    return "dopri5", (f"not stiff: max(-Re eigenvalue) x time span = {index:.3g} along the "
                      f"nominal trajectory (<= {STIFF_SPAN_EIGENVALUE:g})")
