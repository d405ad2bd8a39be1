"""The `cme` backend: the stationary distribution of the chemical master equation.

compile() checks the model (model.py) and returns a CmeProgram; program.py
enumerates the states, builds the matrix and runs a solver (solvers.py) on the GPU
engine or the CPU engine. README.md beside this file describes the method.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sbmlgpu.backend import Backend, BackendOptions
from sbmlgpu.tasks import SteadyState

from .options import CmeOptions

if TYPE_CHECKING:  # pragma: no cover - the IR imports sympy: only for annotations
    from sbmlgpu.ir import Network


class CmeBackend(Backend):
    name = "cme"
    description = ("chemical master equation steady state: the states reachable under "
                   "copy-number bounds, solved by Jacobi or multilevel aggregation on the "
                   "GPU (CPU: scipy.sparse)")
    options_class = CmeOptions
    tasks = (SteadyState,)

    def supports(self, network: Network) -> list[tuple[str, tuple[str, ...]]]:
        from .model import unsupported

        return unsupported(network)

    def compile(self, network: Network, options: BackendOptions | None,
                device=None) -> "CmeProgram":
        from .model import build
        from .program import CmeProgram

        options = CmeOptions.coerce(options)
        options.validate()
        self.check_supported(network)
        return CmeProgram(build(network), options, device)
