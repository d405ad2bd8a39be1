"""The `ssa` backend: its options, what it supports, and compile() -> SsaProgram.

compile() validates the options and builds the model (model.py); program.py makes
the automatic choices, generates the kernels and runs ensembles. Files of this
folder: README.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sbmlgpu.backend import Backend, BackendOptions

from .options import SsaOptions

if TYPE_CHECKING:  # pragma: no cover - the IR imports sympy: only for annotations
    from sbmlgpu.ir import Network

    from .program import SsaProgram


class SsaBackend(Backend):
    name = "ssa"
    description = ("Gillespie SSA ensembles: direct or optimized direct method, one "
                   "realisation per GPU thread (CPU: compiled or numpy)")
    options_class = SsaOptions

    def supports(self, network: Network) -> list[tuple[str, tuple[str, ...]]]:
        from .model import unsupported  # not at registration: it imports sympy

        return unsupported(network)

    def compile(self, network: Network, options: BackendOptions | None,
                device=None) -> "SsaProgram":
        from .model import build
        from .program import SsaProgram

        options = SsaOptions.coerce(options)
        options.validate()
        return SsaProgram(build(network, options.rate_species), options, device)
