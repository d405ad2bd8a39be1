"""libsbml converters, run before the IR is built (AMICI does the same):
flatten comp submodels, convert to L3V2, inline function definitions, promote
local parameters to global ones (reaction id + '_' + local id; libsbml renames on
a clash). Every step that fails becomes a typed error naming the step.
"""

from __future__ import annotations

import libsbml

from ..errors import SBMLImportError, UnsupportedModelError
from .read import problems

# Packages whose content changes the math of a model and that we do not handle.
# (layout, render, groups only annotate; fbc's flux bounds do not enter time courses;
# comp is flattened below; distrib's draws in the math are read by math.py and
# distrib.py; its uncertainty annotations on elements do not change the math.)
UNSUPPORTED_PACKAGES = {
    "multi": "multistate species (multi)",
    "spatial": "spatial geometry (spatial)",
    "qual": "qualitative models (qual)",
    "arrays": "arrays",
    "dyn": "dynamic structures (dyn)",
}


def _convert(doc: libsbml.SBMLDocument, name: str, step: str, **options) -> None:
    doc.getErrorLog().clearLog()  # so a failure reports this step's messages only
    props = libsbml.ConversionProperties()
    for key, value in options.items():
        props.addOption(key.replace("_", " ") if key == "flatten_comp" else key, value)
    status = doc.convert(props)
    if status != libsbml.LIBSBML_OPERATION_SUCCESS:
        found = problems(doc)
        raise SBMLImportError(name, f"libsbml could not {step} (status {status})", found)


def check_packages(doc: libsbml.SBMLDocument) -> None:
    used = []
    for i in range(doc.getNumPlugins()):
        prefix = doc.getPlugin(i).getPackageName()
        if prefix in UNSUPPORTED_PACKAGES and doc.isPackageEnabled(prefix):
            used.append(UNSUPPORTED_PACKAGES[prefix])
    if used:
        raise UnsupportedModelError({f"SBML package: {u}": () for u in used}, who="the SBML importer")


def flatten_comp(doc: libsbml.SBMLDocument, name: str) -> bool:
    """Flatten hierarchical models; True if there was anything to flatten."""
    if not doc.isPackageEnabled("comp"):
        return False
    _convert(doc, name, "flatten comp submodels", flatten_comp=True, leavePorts=False)
    return True


def to_l3v2(doc: libsbml.SBMLDocument, name: str) -> None:
    if (doc.getLevel(), doc.getVersion()) == (3, 2):
        return
    doc.getErrorLog().clearLog()
    props = libsbml.ConversionProperties()
    props.setTargetNamespaces(libsbml.SBMLNamespaces(3, 2))
    props.addOption("strict", False)
    props.addOption("setLevelAndVersion", True)
    status = doc.convert(props)
    if status != libsbml.LIBSBML_OPERATION_SUCCESS:
        raise SBMLImportError(name, f"libsbml could not convert level {doc.getLevel()} "
                              f"version {doc.getVersion()} to L3V2", problems(doc))


def inline_functions(doc: libsbml.SBMLDocument, name: str) -> None:
    if doc.getModel().getNumFunctionDefinitions():
        _convert(doc, name, "inline function definitions", expandFunctionDefinitions=True)


def promote_local_parameters(doc: libsbml.SBMLDocument, name: str) -> None:
    m = doc.getModel()
    # L2 keeps them as <parameter> inside the kinetic law, L3 as <localParameter>
    if any(r.isSetKineticLaw() and (r.getKineticLaw().getNumParameters()
                                    or r.getKineticLaw().getNumLocalParameters())
           for r in m.getListOfReactions()):
        _convert(doc, name, "promote local parameters", promoteLocalParameters=True)
