"""SED-ML targets: the XPath expressions that name a part of an SBML model.

We read the forms that SED-ML files use: a path of steps from the document root,
each `prefix:name` with predicates `[@attr='value']`, optionally ending in `/@attr`
(`/sbml:sbml/sbml:model/sbml:listOfSpecies/sbml:species[@id='S1']/@initialConcentration`).
Any prefix bound to an SBML core namespace means the model's own SBML namespace: SED-ML
files often declare a different level/version than the model they change.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from ..errors import OptionError

SBML_CORE = "http://www.sbml.org/sbml/level"
_STEP = re.compile(r"(?:(?P<prefix>[A-Za-z_][\w.-]*):)?(?P<name>[A-Za-z_][\w.-]*|\*)"
                   r"(?P<predicates>(?:\[[^\]]*\])*)$")
_PREDICATE = re.compile(r"\[\s*@(?:[A-Za-z_][\w.-]*:)?(?P<attr>[A-Za-z_][\w.-]*)\s*=\s*"
                        r"(?P<q>['\"])(?P<value>.*?)(?P=q)\s*\]")
_ID = re.compile(r"\[\s*@(?:[A-Za-z_][\w.-]*:)?id\s*=\s*(['\"])(?P<id>.*?)\1\s*\]")


@dataclass(frozen=True)
class Target:
    text: str
    steps: tuple[tuple[str | None, str, tuple[tuple[str, str], ...]], ...]
    attribute: str | None  # the trailing /@attr, if any

    @property
    def element_id(self) -> str | None:
        """The id the last step selects (`...species[@id='S1']` -> 'S1')."""
        for attr, value in self.steps[-1][2] if self.steps else ():
            if attr == "id":
                return value
        return None

    @property
    def element_name(self) -> str | None:
        return self.steps[-1][1] if self.steps else None


def _split(text: str) -> list[str]:
    """Split at '/' outside brackets and quotes."""
    parts, depth, quote, current = [], 0, None, ""
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "/" and depth == 0:
            parts.append(current)
            current = ""
            continue
        current += ch
    parts.append(current)
    return parts


def parse_target(text: str, where: str) -> Target:
    """The target as steps; OptionError naming `where` (the SED-ML element) otherwise."""
    raw = (text or "").strip()
    if not raw.startswith("/") or raw.startswith("//"):
        raise OptionError("target", f"{where}: {raw!r} is not an absolute XPath to a model "
                                    f"element (/sbml:sbml/sbml:model/...)")
    parts = _split(raw[1:])
    attribute = None
    if parts and parts[-1].startswith("@"):
        attribute = parts.pop()[1:].split(":")[-1]
    steps = []
    for part in parts:
        m = _STEP.match(part.strip())
        if not m:
            raise OptionError("target", f"{where}: cannot read the step {part!r} of {raw!r} "
                                        f"(supported: prefix:name[@attr='value'])")
        predicates = tuple((p["attr"], p["value"])
                           for p in _PREDICATE.finditer(m["predicates"]))
        if m["predicates"] and "".join(p.group(0) for p in _PREDICATE.finditer(
                m["predicates"])).replace(" ", "") != m["predicates"].replace(" ", ""):
            raise OptionError("target", f"{where}: cannot read the predicate "
                                        f"{m['predicates']!r} of {raw!r} (supported: "
                                        f"[@attr='value'])")
        steps.append((m["prefix"], m["name"], predicates))
    if not steps:
        raise OptionError("target", f"{where}: {raw!r} selects no element")
    return Target(raw, tuple(steps), attribute)


def model_id(text: str, where: str) -> str:
    """The SBML id a variable or setValue target names (its last step's @id)."""
    target = parse_target(text, where)
    if target.element_id:
        return target.element_id
    raise OptionError("target", f"{where}: {text!r} does not name a model element by id "
                                f"(...[@id='X'])")


def select(root: ET.Element, target: Target, namespaces: dict[str, str],
           where: str) -> list[ET.Element]:
    """The elements `target` selects in the document `root`."""
    model_ns = root.tag[1:].split("}")[0] if root.tag.startswith("{") else ""

    def tag(prefix, name):
        if name == "*":
            return "*"
        if prefix is None:  # an unprefixed step means the model's own elements
            uri = model_ns
        elif prefix not in namespaces:
            raise OptionError("target", f"{where}: the prefix {prefix!r} of {target.text!r} "
                                        f"is not declared in the SED-ML file")
        else:
            uri = namespaces[prefix]
            if uri.startswith(SBML_CORE):
                uri = model_ns
        return f"{{{uri}}}{name}" if uri else name

    first_prefix, first_name, first_preds = target.steps[0]
    if tag(first_prefix, first_name) not in ("*", root.tag) or not _matches(root, first_preds):
        return []
    path = "/".join(tag(p, n) + "".join(f"[@{a}='{v}']" for a, v in preds)
                    for p, n, preds in target.steps[1:])
    return root.findall("./" + path) if path else [root]


def _matches(element: ET.Element, predicates) -> bool:
    return all(element.get(a) == v for a, v in predicates)
