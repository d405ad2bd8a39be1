"""The models of a SED-ML file: each model's SBML text, read from the archive (or
derived from another model of the same file) with its changes applied.

Changes edit the SBML text before it is loaded: changeAttribute, computeChange,
changeXML, addXML and removeXML, through ElementTree (xpath.py selects).
"""

from __future__ import annotations

import copy
import xml.etree.ElementTree as ET
from pathlib import Path

from ..errors import OptionError, UnsupportedModelError
from .archive import inside
from .mathexpr import evaluate_math
from .xpath import SBML_CORE, parse_target, select

#: the attribute holding an element's value, where a target names no attribute
VALUE_ATTRIBUTES = {"parameter": ("value",), "compartment": ("size",),
                    "species": ("initialConcentration", "initialAmount"),
                    "speciesReference": ("stoichiometry",)}
LANGUAGE = "urn:sedml:language:sbml"


def document_namespaces(text: str) -> dict[str, str]:
    """{prefix: uri} declared anywhere in a SED-ML file, read from its text (not through
    libsedml's XMLNamespaces: libraries.py says why)."""
    import io

    out: dict[str, str] = {}
    try:
        for _, (prefix, uri) in ET.iterparse(io.BytesIO(text.encode("utf-8")),
                                             events=("start-ns",)):
            out.setdefault(prefix, uri)
    except ET.ParseError:
        pass  # libsedml reports the file's XML errors
    return out


class ModelSources:
    """The SBML text of each model id of one SED-ML document, changes applied."""

    def __init__(self, doc, sedml_path: Path, archive_folder: Path, sedml_location: str):
        self.doc = doc
        text = sedml_path.read_text(encoding="utf-8", errors="replace")
        self.ns = document_namespaces(text)
        self.sedml_root = ET.fromstring(text.encode("utf-8"))
        self.folder = sedml_path.parent
        self.archive_folder = archive_folder
        self.where = sedml_location
        self._text: dict[str, str] = {}
        self._busy: set[str] = set()

    def text(self, model_id: str) -> str:
        if model_id not in self._text:
            self._text[model_id] = self._build(model_id)
        return self._text[model_id]

    def _build(self, model_id: str) -> str:
        model = self.doc.getModel(model_id)
        where = f"{self.where}, model {model_id!r}"
        if model is None:
            raise OptionError("model", f"{self.where}: no model with id {model_id!r}")
        language = model.getLanguage() or LANGUAGE
        if not language.startswith(LANGUAGE):
            raise UnsupportedModelError({f"model language {language}": (model_id,)},
                                        who="sbmlgpu omex")
        if model_id in self._busy:
            raise OptionError("model", f"{where}: its source refers back to itself")
        self._busy.add(model_id)
        try:
            text = self._source(model.getSource(), where)
            return apply_changes(text, model, self, where)
        finally:
            self._busy.discard(model_id)

    def _source(self, source: str, where: str) -> str:
        source = (source or "").strip()
        other = source[1:] if source.startswith("#") else source
        if self.doc.getModel(other) is not None:  # derived from another model of this file
            return self.text(other)
        if ":" in source.split("/")[0]:
            raise OptionError("model", f"{where}: source {source!r} is not a file in the "
                                       f"archive (URNs and URLs are not fetched)")
        # relative to the SED-ML file (SED-ML's rule); some archives mean the archive root
        for base in (self.folder, self.archive_folder):
            path = inside(self.archive_folder, str(base / source), where)
            if path.is_file():
                break
        else:
            raise OptionError("model", f"{where}: source {source!r} is not in the archive")
        return path.read_text(encoding="utf-8", errors="replace")


def apply_changes(text: str, model, sources: "ModelSources", where: str) -> str:
    if model.getNumChanges() == 0:
        return text
    try:
        root = ET.fromstring(text.encode("utf-8"))
    except ET.ParseError as exc:
        raise OptionError("model", f"{where}: the model is not well-formed XML ({exc}), so "
                                   f"its changes cannot be applied") from None
    changes = sedml_changes(sources.sedml_root, model.getId())
    for k in range(model.getNumChanges()):
        change = model.getChange(k)
        new_xml = changes[k].find(f"{{{sedml_ns(sources.sedml_root)}}}newXML") \
            if k < len(changes) else None
        apply_change(root, change, sources.ns, new_xml, f"{where}, change {k + 1} "
                                                        f"({change.getElementName()})")
    return ET.tostring(root, encoding="unicode")


def sedml_ns(sedml_root: ET.Element) -> str:
    return sedml_root.tag[1:].split("}")[0] if sedml_root.tag.startswith("{") else ""


def sedml_changes(sedml_root: ET.Element, model_id: str) -> list[ET.Element]:
    """The change elements of a model, in order, from the SED-ML file's own XML."""
    ns = sedml_ns(sedml_root)
    q = (lambda name: f"{{{ns}}}{name}") if ns else (lambda name: name)
    for m in sedml_root.iter(q("model")):
        if m.get("id") == model_id:
            changes = m.find(q("listOfChanges"))
            return list(changes) if changes is not None else []
    return []


def apply_change(root: ET.Element, change, ns: dict[str, str], new_xml, where: str) -> None:
    kind = change.getElementName()
    target = parse_target(change.getTarget(), where)
    elements = select(root, target, ns, where)
    if not elements:
        raise OptionError("target", f"{where}: {target.text!r} selects nothing in the model")
    if kind == "changeAttribute":
        for e in elements:
            set_value(e, target, change.getNewValue(), where)
    elif kind == "computeChange":
        values = {p.getId(): p.getValue() for p in change.getListOfParameters()}
        for v in change.getListOfVariables():
            values[v.getId()] = read_value(root, v, ns, where)
        value = float(evaluate_math(change.getMath(), values, where))
        for e in elements:
            set_value(e, target, repr(value), where)
    elif kind in ("changeXML", "addXML"):
        if target.attribute:
            raise OptionError("target", f"{where}: {kind} needs an element, not an attribute")
        new = fragment(new_xml, root, where)
        for e in elements:
            if kind == "addXML":
                e.extend(new)
            else:
                replace(root, e, new, where)
    elif kind == "removeXML":
        for e in elements:
            replace(root, e, [], where)
    else:
        raise UnsupportedModelError({f"SED-ML change {kind}": (where,)}, who="sbmlgpu omex")


def set_value(element: ET.Element, target, value: str, where: str) -> None:
    attribute = target.attribute or value_attribute(element, where)
    element.set(attribute, str(value).strip())


def value_attribute(element: ET.Element, where: str) -> str:
    name = element.tag.split("}")[-1]
    choices = VALUE_ATTRIBUTES.get(name)
    if not choices:
        raise OptionError("target", f"{where}: a {name} has no value to change; name the "
                                    f"attribute (.../@attr)")
    return next((c for c in choices if element.get(c) is not None), choices[0])


def read_value(root: ET.Element, variable, ns: dict[str, str], where: str) -> float:
    target = parse_target(variable.getTarget(), f"{where}, variable {variable.getId()!r}")
    found = select(root, target, ns, where)
    if len(found) != 1:
        raise OptionError("target", f"{where}, variable {variable.getId()!r}: "
                                    f"{target.text!r} selects {len(found)} elements, not one")
    attribute = target.attribute or value_attribute(found[0], where)
    text = found[0].get(attribute)
    try:
        return float(text)
    except (TypeError, ValueError):
        raise OptionError("target", f"{where}, variable {variable.getId()!r}: "
                                    f"{target.text!r} has no number ({text!r})") from None


def fragment(new_xml: ET.Element | None, root: ET.Element, where: str) -> list:
    """A change's newXML content as model elements. Elements in the SED-ML namespace (an
    unprefixed fragment inherits it) or in another SBML level's namespace move into
    the model's namespace."""
    if new_xml is None or len(new_xml) == 0:
        raise OptionError("newXML", f"{where}: no newXML content")
    model_ns = root.tag[1:].split("}")[0] if root.tag.startswith("{") else ""
    copied = [copy.deepcopy(e) for e in new_xml]
    for top in copied:
        for e in top.iter():
            uri = e.tag[1:].split("}")[0] if e.tag.startswith("{") else ""
            if uri.startswith("http://sed-ml.org/") or uri.startswith(SBML_CORE) or not uri:
                e.tag = f"{{{model_ns}}}{e.tag.split('}')[-1]}" if model_ns else \
                    e.tag.split("}")[-1]
    return copied


def replace(root: ET.Element, element: ET.Element, new: list, where: str) -> None:
    parent = next((p for p in root.iter() if element in list(p)), None)
    if parent is None:
        raise OptionError("target", f"{where}: cannot replace or remove the document root")
    index = list(parent).index(element)
    parent.remove(element)
    for offset, e in enumerate(new):
        parent.insert(index + offset, e)
