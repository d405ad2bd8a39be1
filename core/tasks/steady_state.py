"""SteadyState: the stationary distribution (or state) of a model (`sbmlgpu steady-state`).

The fields here are those every steady-state method needs: initial state,
truncation bounds, tolerance; a method's own choices (which solver, its iteration
limits, the matrix format) are its backend's options (plugins/cme/options.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from ..errors import OptionError
from ..results import StateDistribution
from ..settings import pair, setting, whole
from .base import Task

if TYPE_CHECKING:  # pragma: no cover
    from ..ir import Network


@dataclass
class SteadyState(Task):
    kind: ClassVar[str] = "steady-state"
    command: ClassVar[str] = "steady-state"
    function: ClassVar[str] = "steady_state"
    title: ClassVar[str] = "the steady state of a model (a distribution over its states)"
    description: ClassVar[str] = (
        "Compute the steady state of MODEL: the probability of each reachable state for "
        "a stochastic model (chemical master equation), or the stationary state of a "
        "deterministic one.")
    result_class: ClassVar[type] = StateDistribution
    #: the built-in steady-state method (the chemical master equation); another
    #: installed backend runs with --backend NAME
    default_backend: ClassVar[str | None] = "cme"

    initial: dict[str, float] = setting(
        {}, "initial value of a species (copy number or amount) or other variable, instead "
            "of the model's (repeatable)", parse=pair(float), collect="dict",
        metavar="ID=VALUE")
    bounds: dict[str, int] = setting(
        {}, "truncation: the largest copy number of a species in the enumerated state space "
            "(repeatable; species bounded by a conservation law need none)",
        parse=pair(whole, "N"), collect="dict", metavar="ID=N", flag="bound")
    tol: float = setting(1e-8, "convergence tolerance of the solver, > 0 (cme: the "
                               "normalised residual ||A p||_inf / (||A||_inf ||p||_inf); "
                               "a deterministic state: ||f(x)||_inf)")

    def check(self) -> None:
        if not self.tol > 0:
            raise OptionError("tol", f"{self.tol!r} must be positive")
        if not math.isfinite(self.tol):
            raise OptionError("tol", f"{self.tol!r} is not a finite number")
        self.bounds = dict(self.bounds)
        for sbml_id, bound in self.bounds.items():
            if isinstance(bound, bool) or not isinstance(bound, (int, np.integer)) \
                    or bound < 0:
                raise OptionError("bound", f"{sbml_id}={bound!r}: a bound is a whole number "
                                           f">= 0")
        self.initial = {k: float(v) for k, v in dict(self.initial).items()}
        for sbml_id, value in self.initial.items():
            if not math.isfinite(value):
                raise OptionError("initial", f"{sbml_id}={value!r} is not a finite number")

    def check_network(self, network: "Network") -> None:
        from ..ensemble import check_ids, unknown_id_error

        species = list(network.species_by_id)
        for sbml_id in self.bounds:
            if sbml_id not in network.species_by_id:
                raise unknown_id_error("bound", sbml_id, species, "a species")
        check_ids(network, self.initial, option="initial")
