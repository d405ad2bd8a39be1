"""Explicit Euler with a fixed step over the ODE view: x_{k+1} = x_k + h f(x_k, p, t_k)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import sympy as sp

from sbmlgpu.backend import Backend, BackendOptions, Program, option
from sbmlgpu.errors import OptionError
from sbmlgpu.features import unsupported
from sbmlgpu.results import Status, TimeCourseResult
from sbmlgpu.tasks import TimeCourse
from sbmlgpu.views import ode_system


@dataclass
class EulerOptions(BackendOptions):
    step: float = option(1e-3, "fixed step size, in model time units", minimum=0.0)
    max_steps: int = option(10_000_000, "most steps per member before giving up", minimum=1)

    def check(self) -> None:
        if not self.step > 0:
            raise OptionError("step", f"{self.step!r} must be positive")


# What a plain right-hand side f(x, p, t) cannot express: discontinuities and constraints.
REFUSED = ("events", "delay()", "algebraic rules", "fast reactions",
           "reactions without rate math")


class EulerBackend(Backend):
    name = "euler"
    description = "explicit Euler with a fixed step, on the CPU (example third-party plugin)"
    options_class = EulerOptions
    cpu_only = True

    def supports(self, network):
        return unsupported(network, REFUSED)

    def compile(self, network, options, device=None) -> Program:
        return EulerProgram(ode_system(network), options)


class EulerProgram(Program):
    def __init__(self, ode, options: EulerOptions):
        self.ode, self.options, self.sources = ode, options, {}
        args = (ode.x, ode.p, ode.t)
        self.f = sp.lambdify(args, list(ode.rhs), "numpy")
        self.x0 = sp.lambdify((ode.p, ode.t), list(ode.x0), "numpy")
        self.args = args

    def _parameters(self, task: TimeCourse, i: int) -> np.ndarray:
        overrides = {k: float(v[i]) for k, v in (task.parameters or {}).items()}
        try:
            return self.ode.parameter_vector(overrides)
        except KeyError as exc:
            raise OptionError("parameters", f"euler can vary the values the model file "
                                            f"states; {exc} is not one") from None

    def _member(self, p: np.ndarray, times: np.ndarray, output) -> tuple[np.ndarray, Status]:
        x = np.asarray(self.x0(p, times[0]), dtype=float)
        t, steps = float(times[0]), 0
        rows = [output(x, p, t)]
        for t_next in times[1:]:
            n = max(1, math.ceil((t_next - t) / self.options.step - 1e-9))
            h = (t_next - t) / n
            for _ in range(n):
                x = x + h * np.asarray(self.f(x, p, t), dtype=float)
                t += h
            t, steps = float(t_next), steps + n
            rows.append(output(x, p, t))
            if not np.all(np.isfinite(x)):
                return _pad(rows, len(times)), Status.non_finite
            if steps > self.options.max_steps:
                return _pad(rows, len(times)), Status.max_steps
        return np.array(rows, dtype=float), Status.ok

    def run(self, task: TimeCourse, scheduler=None, profiler=None) -> TimeCourseResult:
        ode = self.ode
        outputs = tuple(task.outputs or (s.id for s in ode.network.species))
        values = sp.lambdify(self.args, [ode.output(i) for i in outputs], "numpy")
        output = lambda x, p, t: np.broadcast_to(  # noqa: E731 - constants come back as scalars
            np.asarray(values(x, p, t), dtype=float), (len(outputs),))
        n = task.ensemble_size
        data = np.empty((n, len(task.times), len(outputs)))
        status = np.empty(n, np.int8)
        for i in range(n):
            data[i], status[i] = self._member(self._parameters(task, i), task.times, output)
        result = TimeCourseResult(task.times, outputs, data, status,
                                  metadata={"device": "cpu", "options": asdict(self.options)})
        return result.with_summary(keep_members=False) if task.summary else result


def _pad(rows: list, length: int) -> np.ndarray:
    out = np.full((length, len(rows[0])), np.nan)
    out[: len(rows)] = rows
    return out
