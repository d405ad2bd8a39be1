"""`sbmlgpu.load`: SBML (any level and version) -> ir.Network."""

from __future__ import annotations

from dataclasses import replace

import libsbml

from ..errors import SBMLImportError
from ..ir import Network
from . import convert
from .algebraic import solve_algebraic_rules
from .build import NetworkBuilder, check_delay_lags, order_assignment_rules
from .read import check_consistency, check_read, read_document


def load(source, *, validate: bool = True) -> Network:
    """Load an SBML model from a path, an SBML string or a libsbml.SBMLDocument.

    Raises SBMLImportError when the input is not valid SBML (with libsbml's
    messages and line numbers) and UnsupportedModelError for valid SBML that the
    importer cannot represent (e.g. the multi package). The document passed in
    is not modified: conversions run on a copy."""
    doc, name, _ = read_document(source)
    if isinstance(source, libsbml.SBMLDocument):
        doc = source.clone()
    check_read(doc, name)
    level, version = doc.getLevel(), doc.getVersion()
    warnings = check_consistency(doc, name) if validate else ()
    convert.check_packages(doc)
    flattened = convert.flatten_comp(doc, name)
    # L3V2 has no 'fast' attribute: read it before converting
    fast = {r.getId() for r in doc.getModel().getListOfReactions() if r.isSetFast() and r.getFast()}
    # functions and local parameters first: a local parameter that shadows a
    # species is legal in L2 and L3V1 but not in L3V2, and promotion renames it
    convert.inline_functions(doc, name)
    convert.promote_local_parameters(doc, name)
    convert.to_l3v2(doc, name)
    model = doc.getModel()
    if model is None:
        raise SBMLImportError(name, "the document has no <model>")
    builder = NetworkBuilder(model, name, level, version)
    net = builder.build()
    if fast:
        net = replace(net, reactions=tuple(replace(r, fast=r.id in fast) for r in net.reactions))
    net = replace(net, assignment_rules=order_assignment_rules(net))
    net = solve_algebraic_rules(net)
    net = replace(net, assignment_rules=order_assignment_rules(net))
    check_delay_lags(net, name)
    notes = list(builder.notes)
    if flattened:
        notes.append("comp submodels flattened by libsbml")
    notes += [f"libsbml {w.severity}: {w}" for w in warnings[:50]]
    return replace(net, notes=net.notes + tuple(notes))
