"""The `reference` backend (plugins/reference): options, supports, ensembles, failures,
and agreement with the CPU reference called directly on the SBML Test Suite."""

import argparse
import io

import numpy as np
import pytest
import sympy as sp

import sbmlgpu
from sbmlgpu import ir, plugin_manager
from sbmlgpu.errors import OptionError, UnsupportedModelError
from sbmlgpu.ir import TIME, sym
from sbmlgpu.results import Status

from .shared_data import SEMANTIC, needs_semantic

reference_backend = pytest.importorskip("sbmlgpu.plugins.reference.backend")
ReferenceOptions = reference_backend.ReferenceOptions
# Cases that `--backend reference` failed while the direct path passed them: species in
# compartments of spatialDimensions 0 (amounts asked for; the old runner multiplied by
# a size the compartment does not have), and parameters that are legitimately INF or
# NaN (a member was flagged non_finite for its outputs, not for its integration).
ZERO_D = ("00048,00049,00097,00103,00156,00238,00239,00241,00242,00243,00244,00246,"
          "00247,00257,00258,00259,00262,00268,00321,00324,00327,00362,00368,00419,"
          "00422,00489,00491,00543,00546")
NOT_FINITE = "00951,01811,01813"


def decay():
    """A -> (nothing) at rate k*A in a compartment of size 2: A(t) = A0 exp(-k t)."""
    return ir.Network(
        id="decay",
        compartments=(ir.Compartment("c", 2.0),),
        species=(ir.Species("A", "c", initial_concentration=3.0),),
        parameters=(ir.Parameter("k", 0.5),),
        reactions=(ir.Reaction("R", (ir.SpeciesReference("A", sp.Integer(1)),), (), (),
                               sym("k") * sym("A") * sym("c")),),
    )


def square_root_growth():
    """x' = sqrt(x - 2): x(t) = 2 + (sqrt(x0 - 2) + t/2)^2 for x0 >= 2; NaN for x0 < 2."""
    return ir.Network(
        id="sqrt_growth",
        parameters=(ir.Parameter("x", 3.0, constant=False),),
        rate_rules=(ir.RateRule("x", sp.sqrt(sym("x") - 2)),),
    )


def test_registered_through_the_entry_point():
    backend = plugin_manager.backend("reference")
    assert isinstance(backend, reference_backend.ReferenceBackend)
    assert backend.description == "the scipy CPU reference, one trajectory per parameter set"


@pytest.mark.parametrize("values,option", [
    ({"rtol": 0.0}, "rtol"), ({"rtol": 1e-16}, "rtol"), ({"rtol": 0.5}, "rtol"),
    ({"atol": 0.0}, "atol"), ({"method": "Euler"}, "method"), ({"max_step": -1.0}, "max-step"),
    ({"tolerance": 1.0}, "tolerance"),
])
def test_bad_options_name_the_option(values, option):
    with pytest.raises(OptionError) as e:
        ReferenceOptions.from_mapping(values)
    assert e.value.option == option


def test_methods_match_the_reference_solver():
    from sbmlgpu import reference

    assert set(reference_backend.METHODS) == set(reference.METHODS)


def test_supports_refuses_what_the_reference_refuses():
    backend = plugin_manager.backend("reference")
    assert backend.supports(decay()) == []
    algebraic = ir.Network(id="alg", parameters=(ir.Parameter("y", None, constant=False),),
                           algebraic_rules=(ir.AlgebraicRule(sym("y") - 1, id="rule1"),))
    refused = backend.supports(algebraic)
    assert refused and refused[0][1] == ("rule1",)
    with pytest.raises(UnsupportedModelError, match="backend 'reference' does not support"):
        sbmlgpu.run(algebraic, "reference", end=1)


def test_ensemble_matches_the_exact_solution():
    k = np.array([0.1, 0.5, 2.0])
    result = sbmlgpu.run(decay(), "reference", end=2.0, points=5, parameters={"k": k},
                         progress=False)
    t = np.linspace(0, 2, 5)
    assert result.ids == ("A",) and result.n_members == 3 and result.n_failed == 0
    np.testing.assert_allclose(result["A"], 3.0 * np.exp(-np.outer(k, t)), rtol=1e-6)
    assert result.metadata["backend"] == "reference" and result.metadata["device"] == "cpu"
    assert result.metadata["options"]["rtol"] == 1e-8
    assert result.metadata["plugin"] == f"sbmlgpu {sbmlgpu.__version__}"


def test_summary_keeps_statistics_not_members():
    k = np.linspace(0.1, 1.0, 6)
    result = sbmlgpu.run(decay(), "reference", end=1.0, points=3, parameters={"k": k}, summary=True,
                         progress=False)
    assert result.data is None
    exact = 3.0 * np.exp(-np.outer(k, [0.0, 0.5, 1.0]))
    np.testing.assert_allclose(result.summary.mean[:, 0], exact.mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(result.summary.sd[:, 0], exact.std(axis=0, ddof=1), rtol=1e-5)


def test_a_failing_member_is_reported_and_the_others_kept():
    x0 = np.array([3.0, 1.0])  # the second takes the square root of a negative number
    result = sbmlgpu.run(square_root_growth(), "reference", end=2.0, points=5, parameters={"x": x0},
                         progress=False)
    assert result.statuses() == [Status.ok, Status.non_finite]
    [(member, status, message)] = result.failures()
    assert member == 1 and message
    t = np.linspace(0, 2, 5)
    np.testing.assert_allclose(result["x"][0], 2 + (1 + t / 2) ** 2, rtol=1e-6)
    summary = result.with_summary().summary
    assert summary.n_excluded == 1
    np.testing.assert_allclose(summary.mean[:, 0], result["x"][0], rtol=1e-12)


def test_the_model_is_compiled_once_for_all_members(monkeypatch):
    from sbmlgpu import reference

    calls = []
    original = reference.compile_model

    def counting(model, **kw):
        calls.append(model)
        return original(model, **kw)

    monkeypatch.setattr(reference, "compile_model", counting)
    sbmlgpu.run(decay(), "reference", end=1.0, points=3, parameters={"k": [0.1, 0.2, 0.3, 0.4]},
                progress=False)
    assert len(calls) == 1


def test_default_outputs_are_species_then_changing_variables():
    net = ir.Network(
        id="m", compartments=(ir.Compartment("c", 1.0),),
        species=(ir.Species("A", "c", initial_concentration=1.0),),
        parameters=(ir.Parameter("k", 1.0), ir.Parameter("y", None, constant=False),
                    ir.Parameter("z", 0.0, constant=False)),
        assignment_rules=(ir.AssignmentRule("y", 2 * sym("A")),),
        rate_rules=(ir.RateRule("z", TIME),),
    )
    from sbmlgpu.plugins.reference import program

    assert program.default_outputs(net) == ("A", "y", "z")
    result = sbmlgpu.run(net, "reference", end=2.0, points=3, progress=False)
    np.testing.assert_allclose(result["z"][0], [0.0, 0.5, 2.0], rtol=1e-6)  # z = t^2 / 2
    np.testing.assert_allclose(result["y"][0], 2.0)


def _suite(*argv) -> list[str]:
    from sbmlgpu import testsuite

    parser = argparse.ArgumentParser()
    testsuite.add_arguments(parser)
    out = io.StringIO()
    testsuite.main_from_args(parser.parse_args([str(SEMANTIC), *argv]), out=out)
    return out.getvalue().splitlines()


@needs_semantic
def test_the_backend_agrees_with_the_direct_path_where_it_used_to_fail():
    cases = f"{ZERO_D},{NOT_FINITE}"
    n = cases.count(",") + 1
    direct = _suite("--cases", cases, "--jobs", "2")
    through_backend = _suite("--cases", cases, "--jobs", "2", "--backend", "reference")
    assert direct == through_backend
    assert through_backend[-1] == f"{n} passed, 0 failed, 0 skipped"


def test_infinite_outputs_are_results_but_a_state_gone_nan_is_a_failure():
    net = ir.Network(id="inf", parameters=(ir.Parameter("P", float("inf")),
                                           ir.Parameter("Q", float("nan"))))
    result = sbmlgpu.run(net, "reference", end=1.0, points=3, outputs=["P", "Q"], progress=False)
    assert result.statuses() == [Status.ok]
    assert np.all(np.isposinf(result["P"])) and np.all(np.isnan(result["Q"]))
    result = sbmlgpu.run(square_root_growth(), "reference", end=1.0, points=3,
                         parameters={"x": [1.0]},
                         progress=False)
    [(_, status, message)] = result.failures()
    assert status == Status.non_finite and "state x not finite at t = 0.5" in message
