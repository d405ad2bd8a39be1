"""The CPU path of the `ode` backend: which engine runs the kernel when there is no GPU.

`cpu_engine(...)` chooses (--cpu-engine): `native` (the generated kernel itself,
compiled for the host by g++ with OpenMP: native.py, run by sbmlgpu.ode's
HostEngine; the GPU's own code, so preferred whenever a compiler exists) or `numpy`
(NumpyEngine below, for machines without a C++ compiler).

NumpyEngine: rk4 and dopri5 without watched atoms (no events, no piecewise switches
in the rates) run as the kernels do, with the same formulas, step control and dense
output, on arrays of shape (states, members): every member has its own time and
step size. Everything else (rodas4, bdf, events) runs member by member through the CPU
reference (sbmlgpu.reference.simulate, scipy): Radau for rodas4, BDF for bdf (implicit,
stiff), RK45 (scipy's Dormand-Prince 5(4)) otherwise, with the same tolerances.
"""

from __future__ import annotations

import numpy as np

from sbmlgpu.errors import SimulationError, UnsupportedModelError
from sbmlgpu.features import network_features
from sbmlgpu.ode.codegen import KernelSource
from sbmlgpu.ode.engines import BatchOutput, HostEngine
from sbmlgpu.ode.model import KernelModel
from sbmlgpu.ode.tolerances import start_atol
from sbmlgpu.results import Status

from .numeric import lambdify
from .options import OdeOptions


def cpu_engine(source: KernelSource, model: KernelModel, method: str, options: OdeOptions):
    """The engine of the CPU path for --cpu-engine (auto: native if a C++ compiler is
    found, else numpy)."""
    from .native import host_compiler, host_kernel

    choice = options.cpu_engine
    if choice == "auto":
        choice = "native" if host_compiler() is not None else "numpy"
    if choice == "native":
        return HostEngine(source, host_kernel(source))
    only = model.kernel_only_features()
    if only:
        raise UnsupportedModelError(
            {f"{name} on the numpy CPU engine (the generated kernel does it: use the native "
             f"engine, which needs a C++ compiler, or a GPU)": ids for name, ids in only.items()},
            who="backend 'ode'")
    if model.draws:
        raise UnsupportedModelError(
            {"distrib draw on the numpy CPU engine (its samplers are the kernel's, "
             "distrib.cuh: use the native engine, which needs a C++ compiler, or a GPU)":
             tuple(network_features(model.ode.network).get("distrib draws", ()))},
            who="backend 'ode'")
    return NumpyEngine(model, method, options)


# Dormand-Prince 5(4) (as sbmlgpu.ode's templates/dopri5.cuh)
_C = (0.2, 0.3, 0.8, 8.0 / 9.0, 1.0)
_A = ((0.2,), (3 / 40, 9 / 40), (44 / 45, -56 / 15, 32 / 9),
      (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
      (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656))
_B = (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84)
_E = (71 / 57600, 0.0, -71 / 16695, 71 / 1920, -17253 / 339200, 22 / 525, -1 / 40)
_D = (-12715105075 / 11282082432, 0.0, 87487479700 / 32700410799, -10690763975 / 1880347072,
      701980252875 / 199316789632, -1453857185 / 822651844, 69997945 / 29380423)


class NumpyEngine:
    name = "numpy"

    def __init__(self, model: KernelModel, method: str, options):
        self.model = model
        self.method = method
        self.options = options
        self.dtype = np.float64
        # events (even those whose triggers hold no atoms, e.g. a number) need the
        # reference's event loop: the vectorised steppers have none
        self.vectorised = method in ("rk4", "dopri5") and not model.atoms and not model.events
        self._rhs = lambdify(model, model.rhs)
        self._x0 = lambdify(model, model.x0, with_states=False)
        self._out = lambdify(model, model.output_exprs)
        self._compiled = None

    # -- vectorised pieces ----------------------------------------------------------
    @staticmethod
    def _stack(values, shape) -> np.ndarray:
        return np.stack([np.broadcast_to(np.asarray(v, dtype=float), shape) for v in values]) \
            if values else np.zeros((0,) + shape)

    # A model without states integrates one dummy state row (as the kernel does); the
    # generated functions take only the model's own states.
    def f(self, t, x, p) -> np.ndarray:
        if not self.model.n_states:
            return np.zeros_like(x)
        with np.errstate(all="ignore"):
            return self._stack(self._rhs(t, *x, *p), x.shape[1:])

    def outputs(self, t, x, p) -> np.ndarray:
        with np.errstate(all="ignore"):
            return self._stack(self._out(t, *x[:self.model.n_states], *p), x.shape[1:])

    # -- run ----------------------------------------------------------------------
    def run(self, device, table: np.ndarray, times: np.ndarray, n_outputs: int, config,
            members=None, first_member: int = 0, profiler=None,
            destination=None) -> BatchOutput:
        """(b, times, outputs) time courses (a view); the caller's copy transposes."""
        table = np.asarray(table, dtype=float)
        if self.vectorised:
            solve = self._rk4 if self.method == "rk4" else self._dopri5
            out, status, steps = solve(table, np.asarray(times, float), n_outputs, config)
        else:
            out, status, steps = self._reference(table, np.asarray(times, float), n_outputs,
                                                 config, members, first_member)
        return BatchOutput(status, steps, np.moveaxis(out, -1, 0))

    def _start(self, table, times, n_outputs):
        b = table.shape[1]
        with np.errstate(all="ignore"):
            x = self._stack(self._x0(times[0], *table), (b,))
        if not self.model.n_states:
            x = np.zeros((1, b))
        out = np.full((len(times), n_outputs, b), np.nan)
        return x, out

    def _rk4(self, table, times, n_outputs, config):
        p = table
        x, out = self._start(table, times, n_outputs)
        b = x.shape[1]
        status = np.where(np.all(np.isfinite(x), axis=0), Status.ok, Status.non_finite).astype(np.int8)
        steps = np.zeros(b, np.int64)
        t = times[0]
        f = self.f(t, x, p) if self.model.n_states else np.zeros_like(x)
        for k, T in enumerate(times):
            if T > t:
                span = T - t
                n = max(1, int(np.ceil(span / config.dt * (1 - 16 * np.finfo(float).eps))))
                if steps[0] + n > config.max_steps:
                    status[status == Status.ok] = Status.max_steps
                    break
                h = span / n
                for m in range(n):
                    tm = t + m * h
                    k2 = self.f(tm + h / 2, x + h / 2 * f, p)
                    k3 = self.f(tm + h / 2, x + h / 2 * k2, p)
                    k4 = self.f(tm + h, x + h * k3, p)
                    x = x + h / 6 * (f + 2 * k2 + 2 * k3 + k4)
                    f = self.f(tm + h, x, p)
                t = T
                steps += n
                bad = ~np.all(np.isfinite(x), axis=0) & (status == Status.ok)
                status[bad] = Status.non_finite
            ok = status == Status.ok
            out[k][:, ok] = self.outputs(t, x, p)[:, ok]
        return out, status, steps.astype(np.int32)

    def _dopri5(self, table, times, n_outputs, config):
        p_all = table
        x, out = self._start(table, times, n_outputs)
        nx, b = x.shape
        t0, t_end = times[0], times[-1]
        t = np.full(b, t0)
        status = np.where(np.all(np.isfinite(x), axis=0), Status.ok, Status.non_finite).astype(np.int8)
        steps = np.zeros(b, np.int64)
        k_next = np.zeros(b, np.int64)
        ok0 = status == Status.ok
        first = self.outputs(t0, x, p_all)
        while True:  # outputs at t0
            due = ok0 & (k_next < len(times))
            due &= times[np.minimum(k_next, len(times) - 1)] <= t0
            if not due.any():
                break
            out[k_next[due], :, np.flatnonzero(due)] = first[:, due].T
            k_next[due] += 1
        f = self.f(t, x, p_all)
        # (states, members): --scaled-atol's tolerances from the initial state
        atol = start_atol(x, config.rtol, config.atol) if config.scaled_atol \
            else np.full_like(x, config.atol)
        h = np.full(b, config.h0) if config.h0 > 0 \
            else self._initial_step(t, x, f, p_all, config, t_end, atol)
        facold = np.full(b, 1e-4)
        reject = np.zeros(b, bool)
        hmax = t_end - t0 if config.max_step <= 0 else min(config.max_step, t_end - t0)
        uround = np.finfo(float).eps
        active = (status == Status.ok) & (k_next < len(times))
        while active.any():
            i = np.flatnonzero(active)
            over = steps[i] >= config.max_steps
            status[i[over]] = Status.max_steps
            i = i[~over]
            if not i.size:
                break
            ti, xi, fi, pi = t[i], x[:, i], f[:, i], p_all[:, i]
            hi = np.minimum(h[i], hmax)
            t_new = np.where(ti + 1.01 * hi >= t_end, t_end, ti + hi)
            hi = t_new - ti
            tiny = ~(0.1 * hi > np.abs(ti) * uround)
            status[i[tiny]] = Status.step_size_underflow
            steps[i] += 1
            k = [fi]
            for s, row in enumerate(_A):
                y = xi + hi * sum(a * kk for a, kk in zip(row, k))
                k.append(self.f(ti + _C[s] * hi, y, pi))
            xn = xi + hi * sum(bb * kk for bb, kk in zip(_B, k) if bb)
            fn = self.f(t_new, xn, pi)
            k.append(fn)
            e = hi * sum(ee * kk for ee, kk in zip(_E, k) if ee)
            sk = atol[:, i] + config.rtol * np.maximum(np.abs(xi), np.abs(xn))
            with np.errstate(all="ignore"):
                err = np.sqrt(np.sum((e / sk) ** 2, axis=0) / nx)
            finite = np.isfinite(err)
            accepted = finite & (err <= 1.0) & ~tiny
            with np.errstate(all="ignore"):
                fac11 = np.where(finite, err, 1.0) ** (0.2 - 0.04 * 0.75)
                fac = np.clip(fac11 / facold[i] ** 0.04 / 0.9, 0.1, 5.0)
                h_acc = hi / fac
                h_acc = np.where(reject[i], np.minimum(h_acc, hi), h_acc)
                h_rej = np.where(finite, hi / np.minimum(5.0, fac11 / 0.9), hi * 0.1)
            h[i] = np.where(accepted, h_acc, h_rej)
            facold[i] = np.where(accepted, np.maximum(err, 1e-4), facold[i])
            reject[i] = ~accepted
            small = ~accepted & ~(0.1 * h[i] > np.abs(ti) * uround) & ~tiny
            status[i[small]] = np.where(finite[small], Status.step_size_underflow,
                                        Status.non_finite)
            # outputs inside accepted steps: the step's end or the continuous extension
            a = np.flatnonzero(accepted)
            if a.size:
                ydiff = xn[:, a] - xi[:, a]
                bspl = hi[a] * fi[:, a] - ydiff
                r4 = ydiff - hi[a] * fn[:, a] - bspl
                r5 = hi[a] * sum(d * kk[:, a] for d, kk in zip(_D, k) if d)
                members = i[a]
                while True:
                    kn = k_next[members]
                    due = (kn < len(times))
                    due &= times[np.minimum(kn, len(times) - 1)] <= t_new[a]
                    if not due.any():
                        break
                    d = np.flatnonzero(due)
                    T = times[kn[d]]
                    theta = np.where(T == t_new[a][d], 1.0, (T - ti[a][d]) / hi[a][d])
                    s1 = 1 - theta
                    y = xi[:, a][:, d] + theta * (ydiff[:, d] + s1 * (bspl[:, d] + theta * (
                        r4[:, d] + s1 * r5[:, d])))
                    y = np.where(T == t_new[a][d], xn[:, a][:, d], y)
                    values = self.outputs(T, y, pi[:, a][:, d])
                    out[kn[d], :, members[d]] = values.T
                    k_next[members[d]] += 1
                t[members] = t_new[a]
                x[:, members] = xn[:, a]
                f[:, members] = fn[:, a]
            active = (status == Status.ok) & (k_next < len(times))
        return out, status, steps.astype(np.int32)

    def _initial_step(self, t, x, f, p, config, t_end, atol):
        """Hairer's starting step (as templates/adaptive.cuh), per member (`atol`:
        (states, members))."""
        sk = atol + config.rtol * np.abs(x)
        dnf = np.sum((f / sk) ** 2, axis=0)
        dny = np.sum((x / sk) ** 2, axis=0)
        span = t_end - t
        hmax = span if config.max_step <= 0 else np.minimum(config.max_step, span)
        with np.errstate(all="ignore"):
            h = np.where((dnf <= 1e-10) | (dny <= 1e-10), 1e-6, np.sqrt(dny / dnf) * 0.01)
            h = np.minimum(h, hmax)
            f1 = self.f(t + h, x + h * f, p)
            der2 = np.sqrt(np.sum(((f1 - f) / sk) ** 2, axis=0)) / h
            der12 = np.maximum(np.abs(der2), np.sqrt(dnf))
            h1 = np.where(der12 <= 1e-15, np.maximum(1e-6, h * 1e-3), (0.01 / der12) ** 0.2)
            h = np.minimum(np.minimum(100 * h, h1), hmax)
        return np.where(np.isfinite(h) & (h > 0), h, 1e-6 * np.maximum(span, 1.0))

    # -- member by member, through the CPU reference -------------------------------
    def _reference(self, table, times, n_outputs, config, members, first_member):
        from sbmlgpu import reference

        if self._compiled is None:
            self._compiled = reference.compile_model(self.model.ode)
        method = {"rodas4": "Radau", "bdf": "BDF"}.get(self.method, "RK45")
        b = table.shape[1]
        out = np.full((len(times), n_outputs, b), np.nan)
        status = np.zeros(b, np.int8)
        steps = np.zeros(b, np.int32)
        for m in range(b):
            # the columns alike over the ensemble are literals of the kernel model
            # (fixed_values), not table rows: the reference needs both
            params = {**self.model.fixed_values,
                      **{pid: float(table[j, m]) for j, pid in enumerate(self.model.varied)}}
            seed = int(members[m]) if members is not None else first_member + m
            try:
                traj = reference.simulate(self._compiled, times, parameters=params,
                                          rtol=config.rtol, atol=config.atol, method=method,
                                          scaled_atol=config.scaled_atol,
                                          seed=(config.seed * 1_000_003 + seed) % 2**32)
            except SimulationError:
                status[m] = Status.failed
                continue
            status[m] = Status.parse(traj.status)
            # the outputs from the trajectory's states (the same OdeSystem, so the same
            # state order) by this engine's own output functions: the names as asked,
            # amount(S1) and [S1] too, which the reference's evaluate does not read
            reached = len(times) if traj.n_reached < 0 else traj.n_reached
            if reached:
                out[:reached, :, m] = self.outputs(times[:reached], traj.x[:reached].T,
                                                   table[:, m]).T
        return out, status, steps
