"""Tiny SBML L3V2 documents written inline, for tests of the importer and the views."""

from __future__ import annotations


def species(sid: str, value: float, *, concentration: bool = False, boundary: bool = False,
            constant: bool = False, hosu: bool = False, compartment: str = "c") -> str:
    init = f'initialConcentration="{value}"' if concentration else f'initialAmount="{value}"'
    return (f'<species id="{sid}" compartment="{compartment}" {init} '
            f'hasOnlySubstanceUnits="{str(hosu).lower()}" boundaryCondition="{str(boundary).lower()}" '
            f'constant="{str(constant).lower()}"/>')


def parameter(pid: str, value: float, *, constant: bool = True) -> str:
    return f'<parameter id="{pid}" value="{value}" constant="{str(constant).lower()}"/>'


def math_apply(op: str, args: str) -> str:
    return f"<apply><{op}/>{args}</apply>"


def reaction(rid: str, reactants, products, law: str) -> str:
    def refs(tag, ids):
        if not ids:
            return ""
        inner = "".join(f'<speciesReference species="{s}" stoichiometry="1" constant="true"/>' for s in ids)
        return f"<{tag}>{inner}</{tag}>"

    return (f'<reaction id="{rid}" reversible="false">'
            + refs("listOfReactants", reactants) + refs("listOfProducts", products)
            + f'<kineticLaw><math xmlns="http://www.w3.org/1998/Math/MathML">{law}</math></kineticLaw>'
            + "</reaction>")


def model(species_xml: str, parameters_xml: str = "", reactions_xml: str = "", *, rules: str = "",
          events: str = "", size: float = 1.0) -> str:
    parts = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        '<sbml xmlns="http://www.sbml.org/sbml/level3/version2/core" level="3" version="2">',
        '<model id="m">',
        f'<listOfCompartments><compartment id="c" size="{size}" constant="true"/></listOfCompartments>',
    ]
    if species_xml:
        parts.append(f"<listOfSpecies>{species_xml}</listOfSpecies>")
    if parameters_xml:
        parts.append(f"<listOfParameters>{parameters_xml}</listOfParameters>")
    if rules:
        parts.append(f"<listOfRules>{rules}</listOfRules>")
    if reactions_xml:
        parts.append(f"<listOfReactions>{reactions_xml}</listOfReactions>")
    if events:
        parts.append(f"<listOfEvents>{events}</listOfEvents>")
    parts += ["</model>", "</sbml>"]
    return "\n".join(parts)


# A -> B at rate k*A*c (c = 1): A(t) = 10 exp(-k t). The model of the CLI and plugin tests.
DECAY_SBML = """<?xml version="1.0" encoding="UTF-8"?>
<sbml xmlns="http://www.sbml.org/sbml/level3/version2/core" level="3" version="2">
  <model id="decay">
    <listOfCompartments><compartment id="c" size="1" constant="true"/></listOfCompartments>
    <listOfSpecies>
      <species id="A" compartment="c" initialConcentration="10" hasOnlySubstanceUnits="false"
               boundaryCondition="false" constant="false"/>
      <species id="B" compartment="c" initialConcentration="0" hasOnlySubstanceUnits="false"
               boundaryCondition="false" constant="false"/>
    </listOfSpecies>
    <listOfParameters><parameter id="k" value="0.5" constant="true"/></listOfParameters>
    <listOfReactions>
      <reaction id="R1" reversible="false">
        <listOfReactants><speciesReference species="A" stoichiometry="1" constant="true"/></listOfReactants>
        <listOfProducts><speciesReference species="B" stoichiometry="1" constant="true"/></listOfProducts>
        <kineticLaw><math xmlns="http://www.w3.org/1998/Math/MathML">
          <apply><times/><ci>k</ci><ci>A</ci><ci>c</ci></apply>
        </math></kineticLaw>
      </reaction>
    </listOfReactions>
  </model>
</sbml>
"""


def write_decay_model(folder) -> "Path":
    """DECAY_SBML written to `folder`/decay.xml; returns the path."""
    from pathlib import Path

    path = Path(folder) / "decay.xml"
    path.write_text(DECAY_SBML)
    return path
