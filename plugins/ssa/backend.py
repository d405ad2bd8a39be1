"""The `ssa` backend: its options, what it supports, and compile() -> SsaProgram.

compile() validates the options and builds the model (model.py); program.py makes
the automatic choices, generates the kernels and runs ensembles. Files of this
folder: README.md.
"""

from __future__ import annotations

from sbmlgpu.backend import Backend, BackendOptions
from sbmlgpu.ir import Network

from .model import build, unsupported
from .options import SsaOptions
from .program import SsaProgram


class SsaBackend(Backend):
    name = "ssa"
    description = ("Gillespie SSA ensembles: direct or optimized direct method, one "
                   "realisation per GPU thread (CPU: compiled or numpy)")
    options_class = SsaOptions

    def supports(self, network: Network) -> list[tuple[str, tuple[str, ...]]]:
        return unsupported(network)

    def compile(self, network: Network, options: BackendOptions | None,
                device=None) -> "SsaProgram":
        options = SsaOptions.coerce(options)
        options.validate()
        return SsaProgram(build(network, options.rate_species), options, device)
