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

The Jacobian is looked at along one trajectory (the model's right-hand side under
scipy's LSODA, or the CPU reference where the model has events or switches, at the
median parameters, loose tolerances, eleven points over the span): a model can be stiff
only after t0, as Robertson's reaction is; for an ensemble, at the median member and
seven random ones, stiff if any of them is (bounds of a prior can span decades,
and stiff members cost an explicit method millions of steps). `--method` overrides
the choice.

The trajectories are preceded by a screen of up to SCREEN_MEMBERS members at their
initial state, all at once (numpy arrays over members: n + 1 evaluations of f and
one batched eigenvalue call), as many as SCREEN_WORK allows for the model's size
(screen_size; none for a model so large that fewer than SCREEN_MIN would fit): eight
probes miss the stiff
corner of a wide prior (PEtab's Perelson_Science1996, clearance rate c log-uniform
over ten decades: one member in eight has c x span > 1e5, and dopri5 then took a
mean of 18,000 steps per member where rodas4 takes 190), and a stiff member found
here makes the reference trajectories unnecessary. When none is stiff at t0, the
trajectories follow the median and the screened members nearest to stiff there
rather than random ones (a member of Crauste_CellSystems2017 at 8e4 at t0 reaches
2e6 along its trajectory; dopri5 took up to 10^6 steps per member there). The GPU
screens too (it did not before): the PEtab objective of Sneyd_PNAS2002 runs its nine
conditions as one ensemble of 9 x 10^5 members, and the eight probes, whose median
mixes the conditions, found it not stiff (an index just under 1e5) while 18 of 256
screened members were at 4.7e5; dopri5 then took 10.7 s a call on the H100 (the CPU
path at 2,000 sets: 25 s a call with dopri5, 0.88 s with rodas4).
"""

from __future__ import annotations

import logging
from typing import Callable

import numpy as np
import sympy as sp

from sbmlgpu.ode.model import KernelModel

from .numeric import lambdify

log = logging.getLogger("sbmlgpu.ode")
STIFF_SPAN_EIGENVALUE = 1e5
#: members looked at by the initial-state screen (a random choice of larger ensembles)
SCREEN_MEMBERS = 2048
#: members x states^3 the screen may cost (batched eigenvalues, ~2-4 ns per n^3 on one
#: core: about 0.1-0.2 s): 2048 members up to 29 states, 50 at 100, none above 116
SCREEN_WORK = 5e7
#: fewer members than this affordable: no screen (the probes' trajectories decide)
SCREEN_MIN = 32
#: members in the screen's first batched eigenvalue call (it stops at the first stiff
#: chunk); each chunk after it is as large as all before it together (256, 256, 512,
#: 1024): a stiff model is mostly found in the first, and a model that is not stiff
#: pays four calls' numpy overhead for 2,048 members rather than eight
SCREEN_CHUNK = 256
#: LSODA steps a smooth model's probe trajectory may take (else: the reference's)
SMOOTH_MAX_STEPS = 5000
#: states of one LSODA system of several probes at most (_smooth_states_many): a
#: review measured stacked probes of a 32-state model that turns stiff after t0 at 3.1 s
#: with a dense Jacobian against 0.064 s one at a time
STACK_MAX_STATES = 128
#: functions whose jumps LSODA cannot step over (the reference locates them)
_JUMPS = (sp.ceiling, sp.floor, sp.Piecewise, sp.Heaviside, sp.sign, sp.Mod, sp.Min,
          sp.Max, sp.Abs, sp.frac)


class _Probe:
    """What every probed member shares, built once: the lambdified initial state and
    right-hand side, and the CPU reference's compiled model (compiling is most of the
    cost of a probe; the trajectories themselves are short)."""

    def __init__(self, model: KernelModel):
        self.model = model
        self.x0f = lambdify(model, model.x0, with_states=False)
        self.f = lambdify(model, model.rhs)
        self._reference = None
        self._reference_error: Exception | None = None

    def reference(self):
        if self._reference is None and self._reference_error is None:
            try:
                from sbmlgpu import reference

                self._reference = reference.compile_model(self.model.ode)
            except Exception as exc:  # noqa: BLE001 - a heuristic: initial states only then
                self._reference_error = exc
        return self._reference


def _probe_for(model: KernelModel, probes: dict | None) -> _Probe:
    """The model's probe, kept in `probes` (what it depends on: the varied columns and
    the constant values; not the outputs)."""
    if probes is None:
        return _Probe(model)
    key = (model.varied, tuple(sorted(model.fixed_values.items())))
    if key not in probes:
        probes[key] = _Probe(model)
    return probes[key]


def _states_along(probe: _Probe, p_values: np.ndarray, t0: float, span: float,
                  x0: np.ndarray) -> list[tuple[float, np.ndarray]]:
    """(t, x) at the start and at ten points of the nominal trajectory (the CPU
    reference, loose tolerances): a model can turn stiff right after t0 (Robertson's
    reaction is not stiff at its initial state)."""
    points = [(t0, x0)]
    if span > 0 and _is_smooth(probe.model):
        smooth = _smooth_states(probe, p_values, t0, span, x0)
        if smooth is not None:
            return points + smooth
    compiled = probe.reference() if span > 0 else None
    if compiled is None:
        if probe._reference_error is not None:
            log.debug("stiffness check: no trajectory (%s)", probe._reference_error)
        return points
    try:
        from sbmlgpu import reference

        times = np.linspace(t0, t0 + span, 11)
        # the ensemble's constant columns too: they need not be the SBML values
        params = {**{pid: float(v) for pid, v in probe.model.fixed_values.items()},
                  **{pid: float(v) for pid, v in zip(probe.model.varied, p_values)}}
        # a probe of the trajectory's stiffness at loose tolerances, not an answer:
        # atol for every state (the reference's default; --scaled-atol's would only add steps)
        traj = reference.simulate(compiled, times, parameters=params, rtol=1e-6, atol=1e-9)
        reached = len(times) if traj.n_reached < 0 else traj.n_reached
        points += [(float(times[k]), np.asarray(traj.x[k], float)) for k in range(1, reached)
                   if np.all(np.isfinite(traj.x[k]))]
    except Exception as exc:  # noqa: BLE001 - a heuristic: the initial state alone then
        log.debug("stiffness check: no trajectory (%s)", exc)
    return points


def _smooth_states(probe: _Probe, p_values: np.ndarray, t0: float, span: float,
                   x0: np.ndarray) -> list[tuple[float, np.ndarray]] | None:
    """(t, x) at ten points of the trajectory of a smooth model (`_is_smooth`): its
    own right-hand side (the probe's lambdified one, what the kernel integrates)
    under scipy's LSODA at the reference's loose tolerances. Compiling the CPU
    reference's model, most of a first check's cost (~1 s for a 25-state model), is
    then not needed. None when LSODA fails or takes more than SMOOTH_MAX_STEPS steps
    (the reference follows the model then)."""
    p = [float(v) for v in p_values]

    def rhs(t, x):
        return np.asarray(probe.f(t, *x, *p), dtype=float).reshape(-1)

    # LSODA's own Jacobian would call f n times from Fortran
    return _lsoda_points(rhs, lambda t, x: _jacobian(probe.f, t, x, p), t0, span,
                         np.asarray(x0, float), 1)[0]


def _smooth_states_many(probe: _Probe, members: np.ndarray, t0: float, span: float
                        ) -> list[list[tuple[float, np.ndarray]]] | None:
    """_smooth_states of k members ((k, varied) parameter sets) at once: one LSODA
    system of their k x n states, whose right-hand side and (block-diagonal, given as
    a band of n - 1 on each side) Jacobian are one lambdified call over the members,
    so that k probes cost about one probe's Python calls (each call and step of one
    probe costs far more in Python than its arithmetic: Rahman_MBS2016's eight probes,
    900 steps, took 0.1 s). Their error control is shared, so the points differ from k
    solves within the tolerances. None where the members' initial states are not
    finite, something fails, or LSODA takes more than SMOOTH_MAX_STEPS steps (each
    member is then probed alone)."""
    try:
        members = np.atleast_2d(np.asarray(members, dtype=float))
        k, n = members.shape[0], probe.model.n_states
        p = list(members.T)  # one array over members per varied parameter
        with np.errstate(all="ignore"):
            x0 = _over_members(probe.x0f(t0, *p), k).T  # (k, n)
    except Exception as exc:  # noqa: BLE001 - a heuristic: each member alone then
        log.debug("stiffness check: no stacked probes (%s)", exc)
        return None
    if not np.all(np.isfinite(x0)):
        return None
    # LSODA's packed band: J[r, c] at [n - 1 + r - c, c]; member i's block at rows and
    # columns i n .. i n + n - 1
    a, b = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    band_rows = (n - 1 + a - b)[None, :, :]
    band_cols = (np.arange(k)[:, None, None] * n + b[None, :, :])

    def rhs(t, y):
        return _over_members(probe.f(t, *y.reshape(k, n).T, *p), k).T.reshape(-1)

    def jac(t, y):
        out = np.zeros((2 * n - 1, k * n))
        out[np.broadcast_to(band_rows, (k, n, n)), band_cols] = \
            _jacobians(probe.f, np.full(k, t), y.reshape(k, n), p)
        return out

    points = _lsoda_points(rhs, jac, t0, span, x0.reshape(-1), k, band=n - 1)
    return None if points[0] is None else points


def _lsoda_points(rhs, jac, t0: float, span: float, y0: np.ndarray, k: int,
                  band: int | None = None) -> list[list[tuple[float, np.ndarray]]] | list[None]:
    """For each of the k members whose states y0 holds one after another: (t, x) at
    ten points of [t0, t0 + span] where x is finite, from scipy's LSODA at the
    reference's loose tolerances; [None] * k when it fails or takes more than
    SMOOTH_MAX_STEPS steps. `band`: jac returns the packed band of this half-width."""
    from scipy.integrate import LSODA

    times = np.linspace(t0, t0 + span, 11)
    points: list[list[tuple[float, np.ndarray]]] = [[] for _ in range(k)]
    try:
        with np.errstate(all="ignore"):
            solver = LSODA(rhs, t0, y0, t0 + span, rtol=1e-6, atol=1e-9, jac=jac,
                           lband=band, uband=band)
            at = 1
            for _ in range(SMOOTH_MAX_STEPS):
                if solver.status != "running":
                    break
                solver.step()
                if solver.status == "failed":
                    return [None] * k
                dense = solver.dense_output()
                while at < len(times) and times[at] <= solver.t:
                    x = np.asarray(dense(times[at]), dtype=float).reshape(k, -1)
                    for member, row in zip(points, x):
                        if np.all(np.isfinite(row)):
                            member.append((float(times[at]), row))
                    at += 1
            if solver.status == "running":
                return [None] * k
    except Exception as exc:  # noqa: BLE001 - a heuristic: another trajectory then
        log.debug("stiffness check: no smooth trajectory (%s)", exc)
        return [None] * k
    return points


def _is_smooth(model: KernelModel) -> bool:
    """No events, no switches, no functions with jumps in the right-hand side: LSODA
    alone follows it (a jump makes it creep with ever smaller steps)."""
    return not model.events and not model.atoms and not any(
        e.has(*_JUMPS) for e in model.rhs)


def _jacobian(f, t: float, x: np.ndarray, p: list[float]) -> np.ndarray:
    """df/dx at (t, x) by forward differences (step 1e-7 * max(|x_j|, 1e-5)): _jacobians
    at one point."""
    return _jacobians(f, np.array([t], dtype=float), np.asarray(x, dtype=float)[None, :], p)[0]


def _jacobians(f, ts: np.ndarray, xs: np.ndarray, p: list[float]) -> np.ndarray:
    """(k, n, n): df/dx at each of k points (ts[i], xs[i]) by forward differences (step
    1e-7 * max(|x_j|, 1e-5)), in one call of the lambdified f on k (n + 1) columns
    (each x, then x moved along each state) instead of k (n + 1) calls: the cost of a
    large model's stiffness check, and of a probe's eleven points along its trajectory."""
    xs = np.asarray(xs, dtype=float)
    k, n = xs.shape
    delta = 1e-7 * np.maximum(np.abs(xs), 1e-5)  # (k, n)
    columns = np.repeat(xs[:, :, None], n + 1, axis=2)  # (k, n, n + 1)
    columns[:, np.arange(n), np.arange(1, n + 1)] += delta
    columns = columns.transpose(1, 0, 2).reshape(n, k * (n + 1))  # state, (point, column)
    t = np.repeat(np.asarray(ts, dtype=float), n + 1)
    # a parameter per point (an array of k values: _smooth_states_many's members) or one
    p = [np.repeat(v, n + 1) if np.ndim(v) else v for v in p]
    values = _over_members(f(t if k > 1 else float(t[0]), *columns, *p), k * (n + 1))
    values = values.reshape(-1, k, n + 1).transpose(1, 0, 2)  # (k, f row, column)
    return (values[:, :, 1:] - values[:, :, :1]) / delta[:, None, :]


def _along(f, ts: np.ndarray, xs: np.ndarray, p: list[float]) -> np.ndarray:
    """_jacobians at a trajectory's points, in one call where f takes an array of times
    (else, e.g. a function of t that numpy cannot broadcast, one call a point)."""
    try:
        return _jacobians(f, ts, xs, p)
    except Exception:  # noqa: BLE001 - point by point, as f is called elsewhere
        return np.stack([_jacobian(f, t, x, p) for t, x in zip(ts, xs)])


def stiffness_index(model: KernelModel, p_values: np.ndarray, t0: float, span: float,
                    probe: _Probe | None = None,
                    along: list[tuple[float, np.ndarray]] | None = None) -> float:
    """max over the nominal trajectory of max(-Re lambda) * span, lambda the eigenvalues
    of the Jacobian (forward differences); NaN if it cannot be computed. `probe`: the
    shared pieces when several members are probed; `along`: the trajectory's points
    after t0 where they are known already (_smooth_states_many)."""
    if not model.n_states:
        return 0.0
    try:
        probe = probe or _Probe(model)
        x0f, f = probe.x0f, probe.f
        p = [float(v) for v in p_values]
        with np.errstate(all="ignore"):
            x0 = np.asarray(x0f(t0, *p), dtype=float).reshape(-1)
        points = [(t0, x0), *along] if along is not None else \
            _states_along(probe, np.asarray(p), t0, span, x0)
        ts = np.array([t for t, _ in points], dtype=float)
        with np.errstate(all="ignore"):
            J = _along(f, ts, np.stack([x for _, x in points]), p)
        finite = np.all(np.isfinite(J), axis=(1, 2))
        if not finite[0]:  # (at t0; a later point without one is left out)
            return float("nan")
        worst = max(0.0, -float(np.min(np.linalg.eigvals(J[finite]).real)))
    except Exception as exc:  # noqa: BLE001 - a heuristic: fall back to the robust method
        log.debug("stiffness check failed: %s", exc)
        return float("nan")
    return worst * float(span)


def initial_stiffness(model: KernelModel, members: np.ndarray, t0: float, span: float,
                      probe: _Probe | None = None) -> np.ndarray:
    """max(-Re lambda) * span at the initial state of each of `members` ((k, varied)
    parameter sets), lambda the eigenvalues of the Jacobian by the forward differences
    of stiffness_index, every member at once; NaN where it cannot be computed."""
    members = np.atleast_2d(np.asarray(members, dtype=float))
    k, nx = members.shape[0], model.n_states
    if not nx or not k:
        return np.zeros(k)
    probe = probe or _Probe(model)
    p = list(members.T)  # one array over members per varied parameter
    with np.errstate(all="ignore"):
        x = _over_members(probe.x0f(t0, *p), k)  # (states, k)
        fx = _over_members(probe.f(t0, *x, *p), k)
        J = np.empty((k, nx, nx))
        for j in range(nx):
            delta = 1e-7 * np.maximum(np.abs(x[j]), 1e-5)
            y = x.copy()
            y[j] += delta
            J[:, :, j] = ((_over_members(probe.f(t0, *y, *p), k) - fx) / delta).T
    index = np.full(k, np.nan)
    finite = np.all(np.isfinite(J), axis=(1, 2))
    if finite.any():
        index[finite] = -np.min(np.linalg.eigvals(J[finite]).real, axis=1) * float(span)
    return index


def _over_members(values, k: int) -> np.ndarray:
    """(len(values), k) float array of lambdified values (constants broadcast): a row
    assigned at a time (np.broadcast_to per value cost 15 us, most of a probe's
    right-hand side over eight members)."""
    out = np.empty((len(values), k))
    for row, value in zip(out, values):
        row[...] = value
    return out


def screen_size(n_states: int) -> int:
    """How many members the screen looks at for a model of `n_states` states (0: none,
    the model is too large for SCREEN_WORK to cover SCREEN_MIN of them)."""
    count = min(SCREEN_MEMBERS, int(SCREEN_WORK / max(n_states, 1) ** 3))
    return count if count >= SCREEN_MIN else 0


def screen_members(table: np.ndarray, count: int = SCREEN_MEMBERS, seed: int = 0) -> np.ndarray:
    """(k, varied) rows of the (varied, n) `table` for initial_stiffness: every member
    of an ensemble up to `count`, else `count` random ones."""
    n = table.shape[1]
    if n <= count:
        return table.T
    return table[:, np.random.default_rng(seed).choice(n, size=count, replace=False)].T


def _screen(model: KernelModel, screen: np.ndarray, t0: float, span: float,
            probe: _Probe) -> tuple[str | None, np.ndarray]:
    """(why rodas4 when a screened member is stiff at its initial state, else None;
    the screened members' indices, NaN where unknown)."""
    index = np.full(len(screen), np.nan)
    # in chunks: one stiff member decides, and a stiff model has many (Bachmann_MSB2011:
    # 380 of 512), so that the eigenvalues of every member are computed only when needed
    start = 0
    while start < len(screen):
        chunk = slice(start, start + max(SCREEN_CHUNK, start))
        start = chunk.stop
        try:
            index[chunk] = initial_stiffness(model, screen[chunk], t0, span, probe)
        except Exception as exc:  # noqa: BLE001 - a heuristic: the probes decide then
            log.debug("stiffness screen failed: %s", exc)
            return None, np.full(len(screen), np.nan)
        if np.any(index[chunk] > STIFF_SPAN_EIGENVALUE):
            break
    stiff = index[np.isfinite(index) & (index > STIFF_SPAN_EIGENVALUE)]
    if not stiff.size:
        return None, index
    screened = int(np.sum(~np.isnan(index)))
    return (f"stiff: max(-Re eigenvalue) x time span = {stiff.max():.3g} at the initial "
            f"state of {stiff.size} of {screened} screened members "
            f"(> {STIFF_SPAN_EIGENVALUE:g})"), index


def _probed_members(members, n_varied: int) -> np.ndarray:
    """choose_method's `members` as a (k, varied) array (made now where it is a function)."""
    members = np.atleast_2d(np.asarray(members() if callable(members) else members,
                                       dtype=float))
    if members.shape[1] != n_varied:
        members = members.reshape(-1, n_varied)
    return members


def choose_method(model: KernelModel, members: "np.ndarray | Callable[[], np.ndarray]",
                  t0: float, span: float, screen: np.ndarray | None = None,
                  probes: dict | None = None) -> tuple[str, str]:
    """(method, why) for --method auto; `members`: (k, varied) parameter sets to
    probe (a wide ensemble holds stiff and non-stiff members: stiff if any is), or
    a function that makes them, called only where the screen does not decide.
    `screen`: more parameter sets, looked at at their initial state first
    (initial_stiffness); when none is stiff there, the trajectories follow the first
    of `members` (the median) and the screened sets nearest to stiff instead of the
    other `members`. `probes`: where the caller keeps the probes' shared pieces from
    run to run of one model (the lambdified model and the reference's compiled model)."""
    # stiff if any member is: probing stops at the first stiff one (stacked probes,
    # below, are integrated together, then looked at in order)
    try:
        probe = _probe_for(model, probes) if model.n_states else None
    except Exception as exc:  # noqa: BLE001 - a heuristic: fall back to the robust method
        log.debug("stiffness check failed: %s", exc)
        return "rodas4", "the stiffness check could not evaluate the Jacobian: the stiff method"
    if screen is not None and probe is not None and len(screen):
        found, index = _screen(model, screen, t0, span, probe)
        if found is not None:
            return "rodas4", found
    members = _probed_members(members, len(model.varied))
    if screen is not None and probe is not None and len(screen):
        # the trajectories then follow the median and the screened members nearest to
        # stiff at t0 (Crauste_CellSystems2017: 8e4 at t0 becomes 2e6 along the way)
        nearest = np.argsort(-np.nan_to_num(index, nan=-np.inf), kind="stable")
        members = np.vstack([members[:1], screen[nearest[:max(len(members) - 1, 0)]]])
    # the first member (the median) alone, as a stiff one ends the check; a small smooth
    # model's other probes then in one LSODA system (else, or where that fails, each
    # alone): past STACK_MAX_STATES states the system's arithmetic, not Python, costs
    stack = probe is not None and span > 0 and _is_smooth(model) and len(members) > 2 \
        and (len(members) - 1) * model.n_states <= STACK_MAX_STATES
    along = None
    indices = []
    for i, row in enumerate(members):
        if i == 1 and stack:
            along = _smooth_states_many(probe, members[1:], t0, span)
        indices.append(stiffness_index(model, row, t0, span, probe,
                                       along[i - 1] if along is not None and i else None))
        if not np.isfinite(indices[-1]):
            return "rodas4", ("the stiffness check could not evaluate the Jacobian: the "
                              "stiff method")
        if indices[-1] > STIFF_SPAN_EIGENVALUE:
            break
    index = max(indices)
    if index > STIFF_SPAN_EIGENVALUE:
        return "rodas4", (f"stiff: max(-Re eigenvalue) x time span = {index:.3g} along the "
                          f"nominal trajectory (> {STIFF_SPAN_EIGENVALUE:g})")
    return "dopri5", (f"not stiff: max(-Re eigenvalue) x time span = {index:.3g} along the "
                      f"nominal trajectory (<= {STIFF_SPAN_EIGENVALUE:g})")
