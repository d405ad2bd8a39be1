"""SBML import: read and validate with libsbml, convert, and build the IR."""

# libsedml must load before libsbml when both are used (sbmlgpu.combine.libraries says why)
from ..combine.libraries import preload as _preload_sedml

_preload_sedml()
