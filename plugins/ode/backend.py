"""The `ode` backend: ODE ensembles, one GPU thread per trajectory (plugins/ode/README.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sbmlgpu.backend import Backend, BackendOptions, Program

from .options import OdeOptions

if TYPE_CHECKING:  # pragma: no cover - the IR imports sympy: only for annotations
    from sbmlgpu.ir import Network


class OdeBackend(Backend):
    name = "ode"
    description = ("ODE ensembles on the GPU, one thread per trajectory: rk4, dopri5, "
                   "rodas4 (stiff), SBML events, step-count bundling; CPU path without GPU")
    options_class = OdeOptions
    #: a one-member run costs ~0.3 ms on a core and ~2 ms as a GPU launch (issue 13)
    few_members_on_cpu = True

    def supports(self, network: Network) -> list[tuple[str, tuple[str, ...]]]:
        from .support import unsupported

        return unsupported(network)

    def compile(self, network: Network, options: BackendOptions, device=None) -> Program:
        from sbmlgpu.reference.fast import with_fast_factor
        from sbmlgpu.views.ode import ode_system

        from .program import OdeProgram

        options = OdeOptions.coerce(options)
        self.check_supported(network)
        # fast reactions: rates scaled by a large factor, relaxed at jumps (fast.cuh)
        return OdeProgram(network, ode_system(with_fast_factor(network)), options, device)

    def restore(self, state: dict, options: BackendOptions, device=None) -> Program:
        """A program from the model cache's state (sbmlgpu.model_cache; warm.py)."""
        from .warm import WarmOdeProgram

        return WarmOdeProgram(state, OdeOptions.coerce(options), device)
