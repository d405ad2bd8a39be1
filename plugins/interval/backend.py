"""The `interval` backend: SIVIA over guaranteed enclosures of the ODE solutions.

compile() checks the model (support.py) and returns an IntervalProgram; program.py
generates the kernel for the task's interval inputs, and bisects boxes until every
one is feasible, rejected or narrower than epsilon. README.md beside this file
describes the method.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sbmlgpu.backend import Backend, BackendOptions
from sbmlgpu.tasks import Estimation

from .options import IntervalOptions

if TYPE_CHECKING:  # pragma: no cover - the IR imports sympy: only for annotations
    from sbmlgpu.ir import Network


class IntervalBackend(Backend):
    name = "interval"
    description = ("parameter estimation from bounded-error data: a paving of the "
                   "unknowns by set inversion (SIVIA) over guaranteed interval Taylor "
                   "enclosures: on a GPU the whole search in one persistent kernel over "
                   "a device box queue (or one box per thread and launch, --kernel multi); "
                   "CPU: the same enclosures built for the host with directed rounding)")
    options_class = IntervalOptions
    tasks = (Estimation,)

    def supports(self, network: Network) -> list[tuple[str, tuple[str, ...]]]:
        from .support import unsupported

        return unsupported(network)

    def compile(self, network: Network, options: BackendOptions | None,
                device=None) -> "IntervalProgram":
        from sbmlgpu.views.ode import ode_system

        from .program import IntervalProgram

        options = IntervalOptions.coerce(options)
        options.validate()
        self.check_supported(network)
        return IntervalProgram(network, ode_system(network), options, device)
