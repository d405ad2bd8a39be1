"""Newton's method for the steady state f(x) = 0 of the ODE view: a SteadyState backend."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import sympy as sp

from sbmlgpu.backend import Backend, BackendOptions, Program, option
from sbmlgpu.errors import OptionError, SimulationError
from sbmlgpu.features import unsupported
from sbmlgpu.results import StateDistribution
from sbmlgpu.tasks import SteadyState
from sbmlgpu.views import ode_system

from .euler import REFUSED


@dataclass
class NewtonOptions(BackendOptions):
    max_iterations: int = option(50, "most Newton steps before giving up", minimum=1)


class NewtonBackend(Backend):
    name = "newton"
    description = "steady state by Newton's method on the ODE right-hand side (example)"
    options_class = NewtonOptions
    tasks = (SteadyState,)  # the task kinds this backend answers
    cpu_only = True

    def supports(self, network):
        return unsupported(network, REFUSED)

    def compile(self, network, options, device=None) -> Program:
        return NewtonProgram(ode_system(network), options)


class NewtonProgram(Program):
    def __init__(self, ode, options: NewtonOptions):
        self.ode, self.options, self.sources = ode, options, {}
        args = (ode.x, ode.p, ode.t)
        self.f = sp.lambdify(args, list(ode.rhs), "numpy")
        self.jacobian = sp.lambdify(args, ode.jacobian, "numpy")
        self.x0 = sp.lambdify((ode.p, ode.t), list(ode.x0), "numpy")

    def run(self, task: SteadyState, scheduler=None, profiler=None) -> StateDistribution:
        if task.bounds:
            raise OptionError("bound", "newton finds a deterministic steady state; "
                                       "truncation bounds do not apply")
        ode = self.ode
        p = ode.parameter_vector()
        x = np.array(self.x0(p, 0.0), dtype=float).reshape(-1)
        for sbml_id, value in task.initial.items():  # ids were checked by sbmlgpu
            if sbml_id in ode.state_ids:
                x[ode.state_ids.index(sbml_id)] = value
        for iteration in range(1, self.options.max_iterations + 1):
            J = np.array(self.jacobian(x, p, 0.0), dtype=float)
            f = np.array(self.f(x, p, 0.0), dtype=float)
            try:
                x = x - np.linalg.solve(J, f)
            except np.linalg.LinAlgError:
                raise SimulationError(f"newton: the Jacobian is singular at iteration "
                                      f"{iteration} (a conservation law?)") from None
            residual = float(np.max(np.abs(self.f(x, p, 0.0)), initial=0.0))
            if residual <= task.tol:
                return StateDistribution(ode.state_ids, [x], [1.0],
                                         {"residual": residual, "iterations": iteration,
                                          "solver": "newton"})
        raise SimulationError(f"newton: no steady state within {iteration} iterations "
                              f"(residual {residual:.3g}); raise --max-iterations")
