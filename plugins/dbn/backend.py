"""The `dbn` backend: a dynamic Bayesian network approximating an ODE model
(Liu et al. 2009), its trajectories and CPT counts on the GPU (Hagiescu et al. 2013).

compile() checks the model (support.py) and returns a DbnProgram; program.py samples,
integrates, counts and infers. README.md beside this file describes the method.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sbmlgpu.backend import Backend, BackendOptions
from sbmlgpu.tasks import DbnApproximation

from .options import DbnOptions

if TYPE_CHECKING:  # pragma: no cover - the IR imports sympy: only for annotations
    from sbmlgpu.ir import Network


class DbnBackend(Backend):
    name = "dbn"
    description = ("dynamic Bayesian network approximation: sampled trajectories by "
                   "fixed-step RK4, binned and counted into conditional probability "
                   "tables on the GPU (CPU: the same kernel built for the host)")
    options_class = DbnOptions
    tasks = (DbnApproximation,)

    def supports(self, network: Network) -> list[tuple[str, tuple[str, ...]]]:
        from .support import unsupported

        return unsupported(network)

    def compile(self, network: Network, options: BackendOptions | None,
                device=None) -> "DbnProgram":
        from sbmlgpu.views.ode import ode_system

        from .program import DbnProgram

        options = DbnOptions.coerce(options)
        options.validate()
        self.check_supported(network)
        return DbnProgram(network, ode_system(network), options, device)
