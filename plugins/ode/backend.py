"""The `ode` backend: ODE ensembles, one GPU thread per trajectory (plugins/ode/README.md)."""

from __future__ import annotations

from sbmlgpu.backend import Backend, BackendOptions, Program
from sbmlgpu.ir import Network

from .options import OdeOptions


class OdeBackend(Backend):
    name = "ode"
    description = ("ODE ensembles on the GPU, one thread per trajectory: rk4, dopri5, "
                   "rodas4 (stiff), SBML events, step-count bundling; CPU path without GPU")
    options_class = OdeOptions

    def supports(self, network: Network) -> list[tuple[str, tuple[str, ...]]]:
        from .support import unsupported

        return unsupported(network)

    def compile(self, network: Network, options: BackendOptions, device=None) -> Program:
        from .program import program_for

        options = OdeOptions.coerce(options)
        self.check_supported(network)
        return program_for(network, options, device)  # reused for a network run again
