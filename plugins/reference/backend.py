"""The reference backend: options, supports, compile (program.py runs the members).

It loops over ensemble members on the CPU with the CPU reference solver
(`sbmlgpu.reference.simulate`). Slow, but the oracle the GPU backends are checked
against, and the path that always works. It has only a CPU path, so no kernels/
and no cpu.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sbmlgpu.backend import Backend, BackendOptions, Program, option
from sbmlgpu.errors import OptionError

if TYPE_CHECKING:  # pragma: no cover - the IR imports sympy: only for annotations
    from sbmlgpu.ir import Network


# The integrators of sbmlgpu.reference.simulate (its METHODS), listed here so that
# the CLI can offer them without importing scipy at start-up.
METHODS = ("LSODA", "BDF", "Radau", "RK45", "DOP853", "RK23")


@dataclass
class ReferenceOptions(BackendOptions):
    rtol: float = option(1e-8, "relative tolerance of the integrator", minimum=1e-13,
                         maximum=0.1)
    atol: float = option(1e-10, "absolute tolerance of the integrator (in the units of "
                                "each state)", minimum=0.0)
    scaled_atol: bool = option(False, "a state whose initial value is nonzero but below "
                                      "atol / rtol is held to rtol x |its initial value| "
                                      "instead of atol, as the ode backend's --scaled-atol "
                                      "(off by default here: LSODA failed with it on "
                                      "semantic case 01568, a fast reaction that relaxes a "
                                      "species to rounding noise at t0)")
    method: str = option("LSODA", "scipy integrator: LSODA switches between stiff and "
                                  "non-stiff methods; BDF and Radau are implicit; RK45, "
                                  "DOP853, RK23 explicit", choices=METHODS)
    max_step: float | None = option(None, "largest step the integrator may take "
                                           "(default: no limit, as inf)", minimum=0.0,
                                    infinite=True)

    def check(self) -> None:
        if not self.atol > 0:
            raise OptionError("atol", f"{self.atol!r} must be positive")
        if self.max_step is not None and not self.max_step > 0:
            raise OptionError("max-step", f"{self.max_step!r} must be positive")


class ReferenceBackend(Backend):
    name = "reference"
    description = "the scipy CPU reference, one trajectory per parameter set"
    options_class = ReferenceOptions
    cpu_only = True  # never asks for a GPU

    def supports(self, network: Network) -> list[tuple[str, tuple[str, ...]]]:
        from sbmlgpu import reference  # it knows best what it refuses

        return [(feature, tuple(ids)) for feature, ids in reference.unsupported(network)]

    def compile(self, network: Network, options: BackendOptions, device=None) -> Program:
        from sbmlgpu import reference

        options = ReferenceOptions.coerce(options)
        from .program import ReferenceProgram

        # compiled once; every member reuses it with its own parameter values
        return ReferenceProgram(network, reference.compile_model(network), options)
