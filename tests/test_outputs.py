"""Output names (core/outputs.py): `S1` the SBML value, `[S1]` / `concentration(S1)`
the concentration, `amount(S1)` the amount; checked once at the edge, resolved by
every backend through the views, columns named as asked."""

from __future__ import annotations

import numpy as np
import pytest

import sbmlgpu
from sbmlgpu import cli, outputs
from sbmlgpu.errors import OptionError
from sbmlgpu.outputs import AMOUNT, CONCENTRATION, VALUE, Output

from .sbml_strings import math_apply, model, parameter, reaction, species

ASKED = ["A", "[A]", "amount(A)", "concentration(A)", "B", "[B]", "amount(B)", "k"]


def document() -> str:
    """A -> B at rate k*A in a compartment of size 2: A (10 molecules) is read as a
    concentration, B (hasOnlySubstanceUnits) as an amount; Z in a 0-D compartment."""
    text = model(species("A", 10) + species("B", 0, hosu=True)
                 + species("Z", 3, compartment="z"),
                 parameter("k", 0.5),
                 reaction("R", ["A"], ["B"], math_apply("times", "<ci> k </ci><ci> A </ci>")),
                 size=2.0)
    text = text.replace('<compartment id="c" size="2.0" constant="true"/>',
                        '<compartment id="c" size="2.0" constant="true"/>'
                        '<compartment id="z" spatialDimensions="0" constant="true"/>')
    return text


def network():
    return sbmlgpu.load(document())


# -- names ---------------------------------------------------------------------------

@pytest.mark.parametrize("name, sbml_id, kind", [
    ("S1", "S1", VALUE), ("[S1]", "S1", CONCENTRATION), ("concentration(S1)", "S1", CONCENTRATION),
    ("amount(S1)", "S1", AMOUNT), ("_x9", "_x9", VALUE), ("amount", "amount", VALUE),
])
def test_names_parse_to_id_and_kind_and_keep_their_spelling(name, sbml_id, kind):
    assert outputs.parse_output(name) == Output(name, sbml_id, kind)


def test_canonical_names_read_back():
    for kind in (VALUE, AMOUNT, CONCENTRATION):
        assert outputs.parse_output(outputs.output_name("S1", kind)).kind == kind


@pytest.mark.parametrize("bad", ["", "[S1", "amount(S1", "amount()", "[ S1 ]", "1S", "mass(S1)",
                                 "amount([S1])", "S 1", 7])
def test_what_is_not_a_name_is_an_option_error(bad):
    with pytest.raises(OptionError, match="outputs"):
        outputs.parse_output(bad)


def test_names_are_checked_against_the_model():
    net = network()
    assert [o.kind for o in outputs.check_outputs(net, ASKED)] == [
        VALUE, CONCENTRATION, AMOUNT, CONCENTRATION, VALUE, CONCENTRATION, AMOUNT, VALUE]
    with pytest.raises(OptionError, match=r"'a' is not an id of the model; did you mean A"):
        outputs.check_outputs(net, ["A", "amount(a)"])
    with pytest.raises(OptionError, match=r"'amount\(k\)': 'k' is a parameter"):
        outputs.check_outputs(net, ["amount(k)"])
    with pytest.raises(OptionError, match=r"'\[c\]': 'c' is a compartment"):
        outputs.check_outputs(net, ["[c]"])
    # 0-D: the amount is there, a concentration is not (SBML leaves it undefined)
    outputs.check_outputs(net, ["Z", "amount(Z)"])
    with pytest.raises(OptionError, match=r"'\[Z\]'.*spatialDimensions 0.*'amount\(Z\)'"):
        outputs.check_outputs(net, ["[Z]"])


def test_every_backend_takes_its_default_outputs_from_core():
    from sbmlgpu.plugins.ode import program
    from sbmlgpu.plugins.reference import program as reference_program
    from sbmlgpu.plugins.ssa import model as ssa_model

    assert program.default_outputs is outputs.default_outputs
    assert reference_program.default_outputs is outputs.default_outputs
    net = network()
    assert ssa_model.build(net).default_outputs() == outputs.default_outputs(net)


# -- through the backends --------------------------------------------------------------

def _check_values(result, times):
    """The law k*A reads A as amount / 2, so amount(A) = 10 exp(-k t / 2) molecules
    and [A] = amount / 2; B gets what A loses."""
    amount_a = 10.0 * np.exp(-0.5 * times / 2)
    np.testing.assert_allclose(result["amount(A)"][0], amount_a, rtol=1e-5)
    np.testing.assert_allclose(result["A"][0], amount_a / 2, rtol=1e-5)
    np.testing.assert_allclose(result["[A]"][0], amount_a / 2, rtol=1e-5)
    np.testing.assert_allclose(result["concentration(A)"][0], amount_a / 2, rtol=1e-5)
    np.testing.assert_allclose(result["B"][0], 10.0 - amount_a, rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(result["amount(B)"][0], 10.0 - amount_a, rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(result["[B]"][0], (10.0 - amount_a) / 2, rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(result["k"][0], 0.5)


@pytest.mark.parametrize("backend", ["reference", "ode"])
def test_deterministic_backends_report_each_quantity_as_asked(backend):
    times = np.linspace(0.0, 2.0, 5)
    result = sbmlgpu.run(network(), backend=backend, times=times, outputs=ASKED, device="cpu",
                         progress=False)
    assert result.ids == tuple(ASKED) and result.n_failed == 0
    _check_values(result, times)


def test_ssa_reports_amounts_and_concentrations_of_its_counts():
    times = np.array([0.0, 1.0, 2.0])
    result = sbmlgpu.run(network(), backend="ssa", times=times, n=20, seed=3, device="cpu",
                         outputs=["A", "amount(A)", "[A]", "amount(B)", "amount(Z)"],
                         progress=False)
    assert result.ids == ("A", "amount(A)", "[A]", "amount(B)", "amount(Z)")
    counts = result["amount(A)"]
    assert np.all(counts == np.round(counts)) and np.all(counts[:, 0] == 10)
    np.testing.assert_array_equal(result["A"], counts / 2)
    np.testing.assert_array_equal(result["[A]"], counts / 2)
    np.testing.assert_array_equal(result["amount(B)"], 10 - counts)  # A -> B conserves
    np.testing.assert_array_equal(result["amount(Z)"], 3.0)


@pytest.mark.parametrize("backend", ["reference", "ode", "ssa"])
def test_a_bad_name_is_refused_before_anything_runs(backend):
    with pytest.raises(OptionError, match=r"'\[Z\]'.*spatialDimensions 0"):
        sbmlgpu.run(network(), backend=backend, end=1.0, outputs=["A", "[Z]"], device="cpu",
                    progress=False)


def test_cli_columns_keep_the_names_as_asked(tmp_path, capsys):
    path = tmp_path / "m.xml"
    path.write_text(document())
    code = cli.main(["run", str(path), "--end", "1", "--points", "3", "--backend", "reference",
                     "--outputs", "A,[A],amount(A)", "-o", str(tmp_path / "out")])
    capsys.readouterr()
    assert code == 0
    (csv,) = (tmp_path / "out").glob("*.csv")
    lines = csv.read_text().splitlines()
    assert lines[0].split(",")[1:] == ["A", "[A]", "amount(A)"]
    first = [float(v) for v in lines[1].split(",")]
    assert first[1:] == [5.0, 5.0, 10.0]
    code = cli.main(["run", str(path), "--end", "1", "--backend", "reference",
                     "--outputs", "A,[Z]", "-o", str(tmp_path / "out2")])
    assert code == 2 and "spatialDimensions 0" in capsys.readouterr().err
