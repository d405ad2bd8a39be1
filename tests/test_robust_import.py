"""Model input that used to crash, hang or break the importer (issue 14, point 5):
each is now a typed error naming what is wrong and where (exit 2 through the CLI),
or a correct result whose run is flagged."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time

import numpy as np
import pytest
import sympy as sp

import sbmlgpu
from sbmlgpu.cli import main
from sbmlgpu.errors import SBMLImportError
from sbmlgpu.ir import RateOf
from sbmlgpu.outputs import parse_output, table_column
from sbmlgpu.sbml import guard

from .sbml_strings import model, parameter, reaction, species

MATH = '<math xmlns="http://www.w3.org/1998/Math/MathML">'
LAW = "<apply><times/><ci>k</ci><ci>A</ci></apply>"
TIME = '<csymbol encoding="text" definitionURL="http://www.sbml.org/sbml/symbols/time">t</csymbol>'


def with_rule(body: str, *, law: str = LAW, more_parameters: str = "") -> str:
    """A -> B at k*A, and a parameter x given by the assignment rule x = body."""
    rule = f'<assignmentRule variable="x">{MATH}{body}</math></assignmentRule>'
    return model(species("A", 10) + species("B", 0),
                 parameter("k", 1) + parameter("x", 0, constant=False) + more_parameters,
                 reaction("R", ["A"], ["B"], law), rules=rule)


def nested(op: str, depth: int, inner: str = "<ci>A</ci>") -> str:
    return f"<apply><{op}/>" * depth + inner + "</apply>" * depth


def cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def refused(capsys, path, *words) -> str:
    """`sbmlgpu info path` exits 2 with an error naming every one of `words`."""
    code, _, err = cli(capsys, "info", path)
    assert code == 2, err
    assert err.startswith("sbmlgpu: error:") and "Traceback" not in err
    for w in words:
        assert w in err, (w, err)
    return err


# -- crashes of libsbml: guarded before libsbml reads the file ------------------------
RATE_OF_NOTHING = with_rule(
    '<apply><csymbol encoding="text" definitionURL="http://www.sbml.org/sbml/symbols/rateOf">'
    'rateOf</csymbol></apply>')


@pytest.mark.parametrize("name, text, words", [
    ("rateof.xml", RATE_OF_NOTHING, ["rateOf without an argument", "line 7"]),
    ("deep.xml", with_rule(nested("minus", 20_000)), ["MathML nested deeper than", "line 7"]),
    ("deepxml.xml", model(species("A", 1)).replace(
        "</model>", "<annotation>" + "<a>" * 20_000 + "</a>" * 20_000 + "</annotation></model>"),
     ["XML nested deeper than 1000"]),
])
def test_libsbml_crashers_are_refused_in_a_child_process(tmp_path, name, text, words):
    # in a child process: were the guard to fail, libsbml's segfault would end the child,
    # not this test run
    path = tmp_path / name
    path.write_text(text)
    done = subprocess.run([sys.executable, "-m", "sbmlgpu", "info", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    for w in words:
        assert w in done.stderr
    assert "Traceback" not in done.stderr


def test_the_guard_names_the_line_and_column_in_python_too():
    with pytest.raises(SBMLImportError) as info:
        sbmlgpu.load(RATE_OF_NOTHING)
    (problem,) = info.value.problems
    assert problem.line == 7 and problem.column > 1


def test_a_rate_of_with_its_argument_still_imports():
    text = with_rule('<apply><csymbol encoding="text" definitionURL="http://www.sbml.org/'
                     'sbml/symbols/rateOf">rateOf</csymbol><ci>A</ci></apply>')
    net = sbmlgpu.load(text)
    assert net.assignment_rules[0].math == RateOf(sp.Symbol("A"))


# -- deep and long math: a clear limit, and no RecursionError below it ------------------
def test_math_nested_deeper_than_the_limit_is_refused_with_the_limit(tmp_path, capsys):
    path = tmp_path / "deep600.xml"
    path.write_text(with_rule(nested("minus", 600)))
    refused(capsys, path, f"deeper than {guard.MAX_MATH_DEPTH}", "line 7", "assignment rules")


def test_math_nested_up_to_the_limit_imports_and_runs(tmp_path, capsys):
    depth = guard.MAX_MATH_DEPTH // 2 - 1  # an <apply> and its operator: 2 levels each
    path = tmp_path / "sin.xml"
    path.write_text(with_rule(nested("sin", depth)))
    code, _, err = cli(capsys, "run", path, "--backend", "reference", "--end", "1",
                       "--points", "2", "-o", tmp_path / "out")
    assert code == 0, err
    last = (tmp_path / "out" / "sin.csv").read_text().splitlines()[-1].split(",")
    expected = math.exp(-1) * 10
    for _ in range(depth):
        expected = math.sin(expected)
    assert float(last[-1]) == pytest.approx(expected, rel=1e-6)


def test_an_apply_of_more_operands_than_the_limit_is_refused(tmp_path, capsys):
    path = tmp_path / "long.xml"
    path.write_text(with_rule("<apply><plus/>" + "<cn>1</cn>" * (guard.MAX_MATH_OPERANDS + 1)
                              + "</apply>"))
    refused(capsys, path, f"more than {guard.MAX_MATH_OPERANDS} operands", "line 7")


@pytest.mark.parametrize("terms", [340, guard.MAX_MATH_OPERANDS])
def test_a_flat_sum_of_hundreds_of_terms_is_exact(terms):
    body = "<apply><plus/>" + "".join(f"<apply><times/><cn>{i}</cn><ci>k</ci></apply>"
                                      for i in range(terms)) + "</apply>"
    net = sbmlgpu.load(with_rule(body))
    assert net.assignment_rules[0].math == sp.Integer(terms * (terms - 1) // 2) * sp.Symbol("k")


def test_nested_products_and_conjunctions_are_merged():
    body = "<apply><times/><ci>k</ci><apply><times/><ci>A</ci><ci>B</ci></apply></apply>"
    net = sbmlgpu.load(with_rule(body))
    assert net.assignment_rules[0].math == sp.Symbol("k") * sp.Symbol("A") * sp.Symbol("B")


# -- stoichiometries ---------------------------------------------------------------------
@pytest.mark.parametrize("value, word", [("NaN", "not a number"), ("INF", "infinite"),
                                         ("-INF", "infinite"), ("1e300", "larger than")])
def test_unusable_stoichiometries_are_refused_naming_reaction_and_species(tmp_path, capsys,
                                                                          value, word):
    text = model(species("A", 10) + species("B", 0), parameter("k", 1),
                 reaction("R", ["A"], ["B"], LAW).replace('stoichiometry="1"',
                                                          f'stoichiometry="{value}"', 1))
    path = tmp_path / "stoich.xml"
    path.write_text(text)
    refused(capsys, path, "reaction R", "species A", word)


def test_a_large_but_usable_stoichiometry_is_kept_exactly():
    text = model(species("A", 10) + species("B", 0), parameter("k", 1),
                 reaction("R", ["A"], ["B"], LAW).replace('stoichiometry="1"',
                                                          'stoichiometry="1000000"', 1))
    (r,) = sbmlgpu.load(text).reactions
    assert r.reactants[0].stoichiometry == 1_000_000


# -- ids that libsbml's checks did not reach ---------------------------------------------
def test_an_unknown_species_behind_an_undefined_unit_is_refused_by_name(tmp_path, capsys):
    # the undefined unit is an error libsbml's consistency check stops at, so the
    # reference to the undefined species Zzz reached the builder (a KeyError)
    text = model(species("A", 10).replace('compartment="c"', 'compartment="c" '
                                          'substanceUnits="nounit"'),
                 parameter("k", 1), reaction("R", ["A"], ["Zzz"], LAW))
    path = tmp_path / "unit.xml"
    path.write_text(text)
    refused(capsys, path, "reaction R", "product 'Zzz'")


def test_without_validation_undefined_ids_are_still_refused():
    text = model(species("A", 10, compartment="nowhere") + species("B", 0),
                 parameter("k", 1), reaction("R", ["A", "Q"], ["B"], LAW))
    with pytest.raises(SBMLImportError) as info:
        sbmlgpu.load(text, validate=False)
    message = str(info.value)
    assert "species A: its compartment 'nowhere'" in message
    assert "reaction R: reactant 'Q'" in message


# -- values without a real number: NaN, as double arithmetic gives ----------------------
@pytest.mark.parametrize("body", ["<apply><root/><cn>-4</cn></apply>",
                                  "<apply><ln/><cn>-4</cn></apply>",
                                  "<apply><arccos/><cn>2</cn></apply>"])
def test_functions_of_constants_without_a_real_value_are_nan(body):
    (rule,) = sbmlgpu.load(with_rule(body)).assignment_rules
    assert rule.math is sp.nan


def test_a_rate_without_a_real_value_fails_the_run(tmp_path, capsys):
    law = "<apply><times/><apply><root/><cn>-4</cn></apply><ci>A</ci></apply>"
    path = tmp_path / "sqrt.xml"
    path.write_text(model(species("A", 10) + species("B", 0), parameter("k", 1),
                          reaction("R", ["A"], ["B"], law)))
    code, _, err = cli(capsys, "run", path, "--backend", "reference", "--end", "1",
                       "--points", "2", "-o", tmp_path / "out")
    assert code == 1 and "member 0" in err and "not finite" in err, err


def test_a_real_function_of_constants_is_still_a_number():
    (rule,) = sbmlgpu.load(with_rule("<apply><root/><cn>4</cn></apply>")).assignment_rules
    assert rule.math == 2


def test_factorial_200_imports_and_a_state_it_overflows_is_flagged(tmp_path, capsys):
    ia = (f'<listOfInitialAssignments><initialAssignment symbol="A">{MATH}<apply><factorial/>'
          f'<cn>200</cn></apply></math></initialAssignment></listOfInitialAssignments>')
    text = model(species("A", 10) + species("B", 0), parameter("k", 1),
                 reaction("R", ["A"], ["B"], LAW)).replace("<listOfReactions>",
                                                           ia + "<listOfReactions>")
    (a,) = sbmlgpu.load(text).initial_assignments
    assert float(a.math) == math.inf  # beyond the largest double, as SBML computes it
    path = tmp_path / "fact.xml"
    path.write_text(text)
    code, _, err = cli(capsys, "run", path, "--backend", "reference", "--end", "1",
                       "--points", "2", "-o", tmp_path / "out")
    assert code == 1 and "non_finite" in err, err


@pytest.mark.parametrize("body, value", [
    (nested("exp", 60, "<cn>1</cn>"), sp.oo),  # exp(exp(...)): 40 digits of it took hours
    ("<apply><power/><cn>10</cn><cn>10000000000</cn></apply>", sp.oo),
    ("<apply><power/><cn>-10</cn><cn>1000001</cn></apply>", -sp.oo),
    ("<apply><factorial/><cn>1000000000</cn></apply>", sp.oo),
    ("<apply><minus/><apply><sinh/><cn>1000</cn></apply></apply>", -sp.oo),
    ("<apply><exp/><cn>1000</cn></apply>", sp.oo),
    (nested("exp", 3, "<cn>-800</cn>"), None),  # no overflow: exp(exp(exp(-800))) = e
])
def test_constants_beyond_a_double_are_infinite_at_once(body, value):
    started = time.monotonic()
    (rule,) = sbmlgpu.load(with_rule(body)).assignment_rules
    assert time.monotonic() - started < 20
    if value is None:
        assert float(rule.math) == pytest.approx(math.e)
    else:
        assert rule.math == value


# -- rem(a, 0) ---------------------------------------------------------------------------
def test_rem_by_a_literal_zero_is_nan_not_its_dividend():
    (rule,) = sbmlgpu.load(with_rule("<apply><rem/><ci>A</ci><cn>0</cn></apply>")).assignment_rules
    assert rule.math is sp.nan


def test_rem_by_a_number_is_fmod():
    (rule,) = sbmlgpu.load(with_rule("<apply><rem/><cn>-7</cn><cn>3</cn></apply>")).assignment_rules
    assert float(rule.math) == math.fmod(-7, 3)


# -- event delays ------------------------------------------------------------------------
def _event(delay: str) -> str:
    return (f'<event id="E" useValuesFromTriggerTime="true"><trigger initialValue="false" persistent="true">{MATH}<apply><gt/>'
            f'{TIME}<cn>1</cn></apply></math></trigger><delay>{MATH}{delay}</math></delay>'
            f'<listOfEventAssignments><eventAssignment variable="A">{MATH}<cn>5</cn></math>'
            f'</eventAssignment></listOfEventAssignments></event>')


def test_a_negative_constant_delay_is_refused_naming_the_event(tmp_path, capsys):
    path = tmp_path / "delay.xml"
    path.write_text(model(species("A", 10) + species("B", 0), parameter("k", 1),
                          reaction("R", ["A"], ["B"], LAW), events=_event("<cn>-1</cn>")))
    refused(capsys, path, "event E", "delay is -1", "SBML requires a delay >= 0")


def test_a_zero_or_state_dependent_delay_is_accepted():
    for delay in ("<cn>0</cn>", "<apply><minus/><ci>k</ci><cn>2</cn></apply>"):
        net = sbmlgpu.load(model(species("A", 10) + species("B", 0), parameter("k", 1),
                                 reaction("R", ["A"], ["B"], LAW), events=_event(delay)))
        assert net.events[0].delay is not None


# -- INF with fast reactions -------------------------------------------------------------
def test_an_infinite_amount_under_fast_reactions_fails_the_member(tmp_path, capsys):
    text = model(species("A", "INF") + species("B", 0), parameter("k", 1),
                 reaction("R", ["A"], ["B"], LAW).replace('reversible="false"',
                                                          'reversible="false" fast="true"'))
    text = text.replace("version2", "version1").replace('version="2"', 'version="1"')
    path = tmp_path / "fast.xml"
    path.write_text(text)
    code, _, err = cli(capsys, "run", path, "--backend", "reference", "--end", "1",
                       "--points", "2", "-o", tmp_path / "out")
    assert code == 1 and "fast reactions" in err and "not finite" in err, err


# -- what MODEL is: pipes, devices, sizes ------------------------------------------------
def test_a_named_pipe_is_refused_without_reading_it(tmp_path, capsys):
    fifo = tmp_path / "model.xml"
    os.mkfifo(fifo)
    started = time.monotonic()
    refused(capsys, fifo, "named pipe", "regular file")
    assert time.monotonic() - started < 10


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero here")
def test_dev_zero_is_refused(capsys):
    refused(capsys, "/dev/zero", "is a device")


def test_a_file_over_the_size_limit_is_refused_before_reading(tmp_path, capsys, monkeypatch):
    path = tmp_path / "big.xml"
    path.write_text(model(species("A", 1)))
    monkeypatch.setattr(guard, "MAX_MODEL_BYTES", 100)
    refused(capsys, path, "MiB", "at most")


def test_an_unknown_xml_encoding_is_refused(tmp_path, capsys):
    path = tmp_path / "enc.xml"
    path.write_text(model(species("A", 1)).replace('encoding="UTF-8"', 'encoding="true"'))
    refused(capsys, path, "unknown encoding")


# -- output columns named like the table's own ------------------------------------------
def test_ids_named_time_and_member_get_unambiguous_columns(tmp_path, capsys):
    text = model(species("time", 10) + species("member", 0), parameter("k", 1),
                 reaction("R", ["time"], ["member"], "<apply><times/><ci>k</ci><ci>time</ci></apply>"))
    path = tmp_path / "clash.xml"
    path.write_text(text)
    code, _, err = cli(capsys, "run", path, "--backend", "reference", "--end", "1",
                       "--points", "3", "-o", tmp_path / "one")
    assert code == 0, err
    lines = (tmp_path / "one" / "clash.csv").read_text().splitlines()
    assert lines[0] == "time,value(time),member"
    assert [float(v) for v in lines[-1].split(",")][1] == pytest.approx(10 * math.exp(-1), rel=1e-6)
    code, _, err = cli(capsys, "run", path, "--backend", "reference", "--end", "1",
                       "--points", "3", "--sample", "k=uniform:1:2", "--ensemble", "2",
                       "-o", tmp_path / "two")
    assert code == 0, err
    table = np.genfromtxt(tmp_path / "two" / "clash.csv", delimiter=",", names=True,
                          deletechars="")
    assert table.dtype.names == ("time", "member", "value(time)", "value(member)")
    assert sorted(set(table["member"])) == [0, 1]
    # the column names are output names too: asking for them gives the same values
    assert parse_output("value(time)").id == "time"
    assert table_column("S1", ("time", "member")) == "S1"


# -- large models: the views grow linearly with the model --------------------------------
def _chain(n: int) -> str:
    """S0 -> S1 -> ... -> S(n-1), each at k*S."""
    return model("".join(species(f"S{i}", 10 if i == 0 else 0) for i in range(n)),
                 parameter("k", 1),
                 "".join(reaction(f"R{i}", [f"S{i}"], [f"S{i + 1}"],
                                  f"<apply><times/><ci>k</ci><ci>S{i}</ci></apply>")
                         for i in range(n - 1)))


def test_the_ode_view_of_a_long_chain_grows_about_linearly():
    from sbmlgpu.views.ode import ode_system

    def cpu_seconds(n: int) -> float:
        best = math.inf
        for _ in range(2):  # a fresh network each time: views are memoised per network
            net = sbmlgpu.load(_chain(n))
            started = time.process_time()
            system = ode_system(net)
            best = min(best, time.process_time() - started)
        assert len(system.rhs) == n
        return best

    small, large = cpu_seconds(300), cpu_seconds(2400)
    # 8 times the species: ~8 times the work when linear, 64 when quadratic (the view
    # asked every reaction about every species: 23 times on this machine)
    assert large < 16 * small, (small, large)
