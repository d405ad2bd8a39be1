"""sbmlgpu: ensemble analyses of SBML models on GPUs."""

from __future__ import annotations

__version__ = "0.1.0"

from .errors import (  # noqa: E402
    DeviceError,
    OptionError,
    SBMLImportError,
    SbmlGpuError,
    SimulationError,
    UnsupportedModelError,
)
from .ir import Network  # noqa: E402


def load(source, *, validate: bool = True) -> Network:
    """Load an SBML model from a path, an SBML string or a libsbml document."""
    from .sbml.load import load as _load

    return _load(source, validate=validate)


from .api import run  # noqa: E402


__all__ = [
    "load",
    "run",
    "Network",
    "SbmlGpuError",
    "SBMLImportError",
    "UnsupportedModelError",
    "OptionError",
    "DeviceError",
    "SimulationError",
    "__version__",
]
