"""What the interval kernels compute, in sympy, for one model and one choice of
interval inputs.

- `states`: the ODE view's state variables x (n of them).
- `constants`: every parameter of the view, as an interval c[j]: a point from the
  file, or an interval for the unknowns and the initial values given as intervals.
- `varied`: the parameters whose value is an interval (unknowns, then initial
  intervals); with the states they make the vector z = (x, q) of dimension
  D = n + len(varied) whose flow's Jacobian the mean-value (Lohner) form needs.
- `rhs`: x' = f(x, c, t); `variational`: V' = (df/dx) V + [0 | df/dq] for the
  n x D matrix V = dz(t)/dz(t0) restricted to its x rows (the q rows are 0 | I).
- `outputs`: the SBML value of each measured id, in x, c, t; `initial`: x(0) in c.

The Taylor functions are generated from these by sbmlgpu.codegen.taylor.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import sympy as sp

from sbmlgpu.errors import OptionError, UnsupportedModelError
from sbmlgpu.ir import TIME
from sbmlgpu.views.ode import OdeSystem


@dataclass(frozen=True)
class IntervalModel:
    ode: OdeSystem
    unknown: tuple[str, ...]  # parameter ids searched
    initial: tuple[str, ...]  # parameter ids known only as intervals
    measured: tuple[str, ...]  # ids whose value the data bound

    @classmethod
    def of(cls, ode: OdeSystem, unknown, initial, measured) -> "IntervalModel":
        for option, ids in (("unknown", unknown), ("initial", initial)):
            for sbml_id in ids:
                if sbml_id not in ode.p_ids:
                    raise OptionError(option, _not_a_parameter(ode, sbml_id))
        for sbml_id in measured:
            try:
                ode.value(sbml_id)
            except KeyError:
                raise OptionError("data", f"{sbml_id!r} has no value in model "
                                          f"{ode.network.id!r}") from None
        return cls(ode, tuple(unknown), tuple(initial), tuple(measured))

    @property
    def n(self) -> int:
        return self.ode.n_states

    @property
    def varied(self) -> tuple[str, ...]:
        return self.unknown + self.initial

    @property
    def dim(self) -> int:
        """D: states and varied parameters (the mean-value form's dimension)."""
        return self.n + len(self.varied)

    @property
    def varied_index(self) -> tuple[int, ...]:
        """The index in c (the parameter vector) of each varied parameter."""
        return tuple(self.ode.p_ids.index(v) for v in self.varied)

    @property
    def constants(self) -> dict[sp.Symbol, str]:
        return {p: f"c[{j}]" for j, p in enumerate(self.ode.p)}

    @property
    def rhs(self) -> tuple[sp.Expr, ...]:
        return self.ode.rhs

    @cached_property
    def v_symbols(self) -> tuple[sp.Symbol, ...]:
        """V[i][j] row-major: d x_i / d z_j."""
        return tuple(sp.Symbol(f"V@{i}@{j}", real=True) for i in range(self.n)
                     for j in range(self.dim))

    @cached_property
    def variational(self) -> tuple[sp.Expr, ...]:
        """The rhs of (x, V): x' = f, V' = J_x V + [0 | J_q]."""
        n, d = self.n, self.dim
        f = sp.Matrix(self.rhs)
        jx = f.jacobian(sp.Matrix(self.ode.x))
        q = [self.ode.p[j] for j in self.varied_index]
        jq = f.jacobian(sp.Matrix(q)) if q else sp.zeros(n, 0)
        v = sp.Matrix(n, d, self.v_symbols)
        dv = jx * v
        for i in range(n):
            for j in range(len(q)):
                dv[i, n + j] += jq[i, j]
        return tuple(self.rhs) + tuple(dv[i, j] for i in range(n) for j in range(d))

    @property
    def variational_states(self) -> tuple[sp.Symbol, ...]:
        return tuple(self.ode.x) + self.v_symbols

    @property
    def variational_labels(self) -> tuple[str, ...]:
        z = [*self.ode.state_ids, *self.varied]
        return tuple(self.ode.state_ids) + tuple(
            f"d {self.ode.state_ids[i]} / d {z[j]}(0)" for i in range(self.n)
            for j in range(self.dim))

    @property
    def outputs(self) -> tuple[sp.Expr, ...]:
        return tuple(self.ode.value(sbml_id) for sbml_id in self.measured)

    @property
    def initial_values(self) -> tuple[sp.Expr, ...]:
        return tuple(sp.sympify(e).subs(TIME, 0) for e in self.ode.x0)

    def point_values(self) -> np.ndarray:
        """c at the file's values (nan where the file gives none and nothing is set)."""
        return np.asarray(self.ode.p_values, dtype=np.float64)


def _not_a_parameter(ode: OdeSystem, sbml_id: str) -> str:
    if sbml_id in ode.state_ids and sbml_id not in ode.p_ids:
        return (f"{sbml_id!r} is a state variable whose initial value is computed; only "
                f"numbers the model file states can be intervals")
    if sbml_id not in ode.network.species_by_id and sbml_id not in ode.network.parameter_by_id \
            and sbml_id not in ode.network.compartment_by_id:
        return f"{sbml_id!r} is not an id of model {ode.network.id!r}"
    return (f"{sbml_id!r} is set by a rule or an initial assignment in model "
            f"{ode.network.id!r}; only numbers the model file states can be intervals")


def unsupported_expression(error, model: IntervalModel) -> UnsupportedModelError:
    """A TaylorError as the model feature it is."""
    return UnsupportedModelError([(f"{error.construct} (no Taylor expansion: interval "
                                   f"enclosures need smooth right-hand sides)",
                                   (error.where or model.ode.network.id,))])
