"""SBML import: sources, conversions, math, typed errors on broken input."""

from __future__ import annotations

from pathlib import Path

import libsbml
import numpy as np
import pytest
import sympy as sp

import sbmlgpu
from sbmlgpu import ir
from sbmlgpu.errors import SBMLImportError, UnsupportedModelError
from sbmlgpu.views import ode_system

from .sbml_strings import model, species, parameter, reaction, math_apply
from .shared_data import SEMANTIC, needs_semantic


def suite_case(case: str) -> Path:
    """The case's SBML file (the one file of an older level, else the L3V2 one)."""
    return sorted((SEMANTIC / case).glob(f"{case}-sbml-*.xml"))[0]


SIMPLE = model(
    species("A", 10) + species("B", 0),
    parameter("k", 0.5),
    reaction("R1", ["A"], ["B"], math_apply("times", "<ci> k </ci><ci> A </ci>")),
)


# -- sources -------------------------------------------------------------------------
def test_load_from_path_string_and_document(tmp_path):
    f = tmp_path / "m.xml"
    f.write_text(SIMPLE)
    from_path = sbmlgpu.load(f)
    from_str_path = sbmlgpu.load(str(f))
    from_string = sbmlgpu.load(SIMPLE)
    doc = libsbml.readSBMLFromString(SIMPLE)
    from_doc = sbmlgpu.load(doc)
    for net in (from_path, from_str_path, from_string, from_doc):
        assert [s.id for s in net.species] == ["A", "B"]
        assert net.reactions[0].rate == sp.Symbol("k") * sp.Symbol("A")
    # the caller's document is not converted in place
    assert doc.getModel().getNumReactions() == 1


@needs_semantic
def test_older_levels_are_converted():
    for case in ("00068",):  # an L2V5 file with stoichiometryMath
        net = sbmlgpu.load(suite_case(case))
        assert (net.level, net.version) == (2, 5)
        # stoichiometryMath became a species reference id set by an assignment rule
        assert any(sr.id for r in net.reactions for sr in r.products)
        assert net.assignment_rules


@needs_semantic
def test_local_parameters_promoted_with_unique_names():
    net = sbmlgpu.load(suite_case("00027"))
    ids = {p.id for p in net.parameters}
    assert "reaction1_k" in ids


@needs_semantic
def test_comp_model_is_flattened():
    net = sbmlgpu.load(suite_case("01124"))
    assert any("flattened" in n for n in net.notes)


@needs_semantic
def test_fast_attribute_survives_conversion_to_l3v2():
    net = sbmlgpu.load(suite_case("00871"))
    assert any(r.fast for r in net.reactions)
    with pytest.raises(UnsupportedModelError, match="fast reaction"):
        ode_system(net)


def test_solvable_algebraic_rule_becomes_assignment_rule():
    doc = model(
        species("A", 10) + species("B", 0, boundary=True, constant=False),
        parameter("T", 12),
        reaction("R1", ["A"], [], "<ci> A </ci>"),
        rules='<algebraicRule><math xmlns="http://www.w3.org/1998/Math/MathML">'
              '<apply><minus/><apply><plus/><ci>A</ci><ci>B</ci></apply><ci>T</ci></apply>'
              '</math></algebraicRule>',
    )
    net = sbmlgpu.load(doc)
    assert not net.algebraic_rules
    (rule,) = net.assignment_rules
    assert rule.variable == "B"
    assert sp.simplify(rule.math - (sp.Symbol("T") - sp.Symbol("A"))) == 0


# -- math ------------------------------------------------------------------------------
def test_booleans_and_numbers_mix_as_sbml_says():
    # (k > 1) + 1: true counts as 1; piecewise with a numeric condition
    body = math_apply("plus", math_apply("gt", "<ci> k </ci><cn> 1 </cn>") + "<cn> 1 </cn>")
    net = sbmlgpu.load(model("", parameter("k", 2) + parameter("y", 0, constant=False),
                             rules=f'<assignmentRule variable="y"><math xmlns="http://www.w3.org/1998/Math/MathML">{body}</math></assignmentRule>'))
    expr = net.assignment_rules[0].math
    assert float(expr.subs(sp.Symbol("k"), 2)) == 2.0
    assert float(expr.subs(sp.Symbol("k"), 0)) == 1.0


def test_csymbols_and_c_keyword_ids():
    body = ('<apply><times/><ci> int </ci><csymbol encoding="text" '
            'definitionURL="http://www.sbml.org/sbml/symbols/time"> t </csymbol></apply>')
    ids = ["int", "exp", "threadIdx", "time", "e", "pi"]
    params = "".join(parameter(i, n + 1) for n, i in enumerate(ids))
    net = sbmlgpu.load(model("", params + parameter("y", 0, constant=False),
                             rules=f'<assignmentRule variable="y"><math xmlns="http://www.w3.org/1998/Math/MathML">{body}</math></assignmentRule>'))
    expr = net.assignment_rules[0].math
    # the parameter called `time` is not the csymbol time
    assert expr == sp.Symbol("int") * ir.TIME
    assert {p.id for p in net.parameters} >= set(ids)
    ode = ode_system(net)
    assert ode.value("y") == ode.p[ode.p_ids.index("int")] * ir.TIME


@needs_semantic
def test_delay_is_kept_for_backends_to_decide():
    net = sbmlgpu.load(suite_case("01416"))
    ode = ode_system(net)
    assert ode.has_delays


def test_rem_and_quotient_follow_c_semantics():
    # rem(-7, 2) = -1 (sign of the dividend, like C's fmod); quotient(7, 2) = 3
    def value(op, a, b):
        body = math_apply(op, f"<cn> {a} </cn><cn> {b} </cn>")
        rules = f'<assignmentRule variable="y"><math xmlns="http://www.w3.org/1998/Math/MathML">{body}</math></assignmentRule>'
        return float(sbmlgpu.load(model("", parameter("y", 0, constant=False), rules=rules)).assignment_rules[0].math)
    assert value("rem", -7, 2) == -1.0
    assert value("rem", 7, -2) == 1.0
    assert value("quotient", 7, 2) == 3.0


# -- typed errors on broken input -------------------------------------------------------
def test_missing_file(tmp_path):
    with pytest.raises(SBMLImportError, match="no such file"):
        sbmlgpu.load(tmp_path / "nope.xml")


def test_empty_file(tmp_path):
    f = tmp_path / "empty.xml"
    f.write_text("")
    with pytest.raises(SBMLImportError, match="empty"):
        sbmlgpu.load(f)


def test_not_xml(tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("this is not SBML at all\n")
    with pytest.raises(SBMLImportError) as info:
        sbmlgpu.load(f)
    assert info.value.problems and info.value.problems[0].line >= 1


def test_truncated_xml_reports_line_numbers(tmp_path):
    f = tmp_path / "cut.xml"
    f.write_text(SIMPLE[: len(SIMPLE) // 2])
    with pytest.raises(SBMLImportError, match="not well-formed XML") as info:
        sbmlgpu.load(f)
    assert any(p.line > 0 for p in info.value.problems)
    assert str(f) in str(info.value)


def test_wrong_root_element():
    text = '<?xml version="1.0"?>\n<html xmlns="http://www.w3.org/1999/xhtml"><body/></html>'
    with pytest.raises(SBMLImportError):
        sbmlgpu.load(text)


def test_document_without_model():
    text = ('<?xml version="1.0" encoding="UTF-8"?>\n<sbml xmlns="http://www.sbml.org/sbml/level3/version2/core" '
            'level="3" version="2"/>')
    with pytest.raises(SBMLImportError, match="no <model>"):
        sbmlgpu.load(text)


def test_kinetic_law_without_math():
    # L3V1 requires the math: invalid SBML
    l3v1 = SIMPLE.replace("level3/version2", "level3/version1").replace('version="2"', 'version="1"')
    start = l3v1.index("<kineticLaw>")
    stop = l3v1.index("</kineticLaw>") + len("</kineticLaw>")
    with pytest.raises(SBMLImportError):
        sbmlgpu.load(l3v1[:start] + "<kineticLaw/>" + l3v1[stop:])
    # L3V2 allows it, with an undefined rate: refused by name, before any simulation
    start = SIMPLE.index("<kineticLaw>")
    stop = SIMPLE.index("</kineticLaw>") + len("</kineticLaw>")
    net = sbmlgpu.load(SIMPLE[:start] + "<kineticLaw/>" + SIMPLE[stop:])
    assert net.reactions[0].rate is None
    with pytest.raises(UnsupportedModelError, match="R1"):
        ode_system(net)


def test_reference_to_unknown_id():
    bad = SIMPLE.replace("<ci> k </ci>", "<ci> kk </ci>")
    with pytest.raises(SBMLImportError) as info:
        sbmlgpu.load(bad)
    assert "kk" in str(info.value)


def test_unknown_function_call():
    bad = SIMPLE.replace(math_apply("times", "<ci> k </ci><ci> A </ci>"),
                         "<apply><ci> f </ci><ci> A </ci></apply>")
    with pytest.raises((SBMLImportError, UnsupportedModelError)) as info:
        sbmlgpu.load(bad)
    assert "f" in str(info.value)


def test_assignment_rule_cycle_is_an_error():
    rules = ('<assignmentRule variable="a"><math xmlns="http://www.w3.org/1998/Math/MathML"><ci>b</ci></math></assignmentRule>'
             '<assignmentRule variable="b"><math xmlns="http://www.w3.org/1998/Math/MathML"><ci>a</ci></math></assignmentRule>')
    with pytest.raises(SBMLImportError):
        sbmlgpu.load(model("", parameter("a", 1, constant=False) + parameter("b", 1, constant=False), rules=rules))


def test_a_package_that_changes_the_math_is_refused_by_name():
    text = SIMPLE.replace(
        'xmlns="http://www.sbml.org/sbml/level3/version2/core"',
        'xmlns="http://www.sbml.org/sbml/level3/version2/core" '
        'xmlns:qual="http://www.sbml.org/sbml/level3/version1/qual/version1" qual:required="true"')
    with pytest.raises(UnsupportedModelError, match="qual"):
        sbmlgpu.load(text)


def test_the_distrib_package_imports():
    # its draws are read (tests/test_distrib_backends.py); declaring it changes nothing
    text = SIMPLE.replace(
        'xmlns="http://www.sbml.org/sbml/level3/version2/core"',
        'xmlns="http://www.sbml.org/sbml/level3/version2/core" '
        'xmlns:distrib="http://www.sbml.org/sbml/level3/version1/distrib/version1" distrib:required="true"')
    assert sbmlgpu.load(text).reactions == sbmlgpu.load(SIMPLE).reactions


# -- the ODE view on imported models ---------------------------------------------------------
def test_ode_view_amounts_and_concentrations():
    # species declared by concentration in a compartment of size 2
    text = model(species("A", 3.0, concentration=True) + species("B", 0, concentration=True),
                 parameter("k", 1.0),
                 reaction("R1", ["A"], ["B"], math_apply("times", "<ci> k </ci><ci> A </ci><ci> c </ci>")),
                 size=2.0)
    ode = ode_system(sbmlgpu.load(text))
    p = dict(zip(ode.p, ode.p_values))
    x0 = [float(e.subs(p)) for e in ode.x0]
    assert x0 == [6.0, 0.0]  # amounts = concentration * size
    # d amount/dt = k * [A] * c
    assert sp.simplify(ode.rhs[0] - (-ode.p[ode.p_ids.index("k")] * ode.x[0])) == 0
    assert np.isclose(float(ode.concentration("A").subs(dict(zip(ode.x, [6.0, 0.0]))).subs(p)), 3.0)
