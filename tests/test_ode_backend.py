"""The `ode` backend on the CPU path: registration, options, supports(), ensembles,
bundling, summaries, large results, the numpy engine, the CLI."""

from __future__ import annotations

import numpy as np
import pytest

import sbmlgpu
from sbmlgpu import plugin_manager
from sbmlgpu.errors import OptionError

from .ode_helpers import (MODELS, apply, ci, cn, load, needs_compiler, rate_rule_model,
                          run_cpu)

ode_backend = pytest.importorskip("sbmlgpu.plugins.ode.backend")
from sbmlgpu.plugins.ode.options import OdeOptions  # noqa: E402


@pytest.fixture(scope="module")
def compiler():
    needs_compiler()


def seir_ensemble(n: int, seed: int = 3) -> dict:
    rng = np.random.default_rng(seed)
    return {"beta": np.exp(rng.uniform(np.log(0.1), np.log(2.0), n)),
            "gamma": np.exp(rng.uniform(np.log(0.05), np.log(1.0), n))}


# -- registration and options ----------------------------------------------------
def test_registered_through_the_entry_point():
    assert isinstance(plugin_manager.backend("ode"), ode_backend.OdeBackend)


@pytest.mark.parametrize("values,bad", [
    ({"method": "euler"}, "method"), ({"dt": 0.0}, "dt"), ({"rtol": -1.0}, "rtol"),
    ({"fast_math": True}, "fast-math"), ({"block_size": 100}, "block-size"),
    ({"pilot_size": 4}, "pilot-size"), ({"precision": "half"}, "precision"),
    # a switch takes true or false: "no" would have been read as true
    ({"fast_math": "no", "precision": "float"}, "fast-math"), ({"bundling": 0}, "bundling"),
])
def test_bad_options_name_the_option(values, bad):
    with pytest.raises(OptionError) as info:
        OdeOptions.from_mapping(values)
    assert info.value.option == bad


def test_tolerance_defaults_follow_precision():
    assert OdeOptions().validate().tolerances == (1e-8, 1e-10)
    assert OdeOptions(precision="float").validate().tolerances == (1e-5, 1e-7)
    assert OdeOptions(rtol=1e-4).validate().tolerances == (1e-4, 1e-10)


# -- supports ------------------------------------------------------------------
def test_supports_accepts_the_shipped_models():
    backend = ode_backend.OdeBackend()
    for path in sorted(MODELS.glob("*.xml")):
        assert backend.supports(sbmlgpu.load(str(path))) == [], path.name


def _events_model(delay: bool) -> str:
    delay_xml = ('<delay><math xmlns="http://www.w3.org/1998/Math/MathML"><cn>1</cn></math>'
                 '</delay>') if delay else ""
    event = ('<event id="E1" useValuesFromTriggerTime="true"><trigger initialValue="true" '
             'persistent="true"><math xmlns="http://www.w3.org/1998/Math/MathML">'
             + apply("gt", "<csymbol encoding=\"text\" definitionURL=\"http://www.sbml.org/"
                           "sbml/symbols/time\">time</csymbol>", cn(1))
             + "</math></trigger>" + delay_xml
             + '<listOfEventAssignments><eventAssignment variable="x"><math '
               'xmlns="http://www.w3.org/1998/Math/MathML"><cn>5</cn></math>'
               "</eventAssignment></listOfEventAssignments></event>")
    return rate_rule_model({"x": (1.0, apply("minus", ci("x")))}, events=event)


def test_supports_accepts_events_and_delay_functions():
    """delay() is simulated from the member's history (tests/test_ode_delay.py)."""
    backend = ode_backend.OdeBackend()
    assert backend.supports(sbmlgpu.load(_events_model(delay=True))) == []
    assert backend.supports(sbmlgpu.load(_events_model(delay=False))) == []
    delay_model = rate_rule_model({"x": (1.0, apply("minus", "<apply><csymbol encoding=\"text\" "
                                                    "definitionURL=\"http://www.sbml.org/sbml/"
                                                    "symbols/delay\">delay</csymbol>"
                                                    + ci("x") + cn(0.5) + "</apply>"))})
    assert backend.supports(sbmlgpu.load(delay_model)) == []


# -- ensembles ----------------------------------------------------------------
def test_ensemble_members_equal_single_runs(compiler):
    net = load("seir_epidemic")
    params = seir_ensemble(5)
    times = np.linspace(0, 160, 11)
    ensemble = run_cpu(net, "dopri5", times=times, parameters=params)
    assert ensemble.data.shape == (5, 11, 4)
    for i in (0, 3):
        single = run_cpu(net, "dopri5", times=times,
                         parameters={k: [v[i]] for k, v in params.items()})
        assert np.array_equal(single.data[0], ensemble.data[i])


def test_initial_values_and_initial_assignments_follow_varied_parameters(compiler):
    net = load("seir_epidemic")
    result = run_cpu(net, "rk4", times=[0.0, 1.0], parameters={"S": [100.0, 200.0]})
    assert list(result["S"][:, 0]) == [100.0, 200.0]


def test_the_cpu_path_does_not_bundle(compiler):
    """Bundling fills warps; the host's threads take members as they finish. The
    bundled order's way back (a GPU run equal to the host's member for member) is
    tested through the fake GPU engine (test_ode_engine_fake.py)."""
    net = load("seir_epidemic")
    params = seir_ensemble(640)
    times = np.linspace(0, 160, 9)
    cpu = run_cpu(net, "dopri5", times=times, parameters=params, pilot_size=32)
    plain = run_cpu(net, "dopri5", times=times, parameters=params, bundling=False)
    assert cpu.metadata["bundling"] == "not used on the CPU path (no warps to fill)"
    assert cpu.metadata["bundling_info"] == {}
    assert plain.metadata["bundling"].startswith("off")
    assert np.array_equal(cpu.data, plain.data)
    assert np.array_equal(cpu.status, plain.status)


def test_bundling_not_used_where_it_cannot_pay(compiler):
    net = load("seir_epidemic")
    small = run_cpu(net, "dopri5", times=[0, 10.0], parameters=seir_ensemble(50))
    assert "fewer than" in small.metadata["bundling"]
    rk4 = run_cpu(net, "rk4", times=[0, 10.0], parameters=seir_ensemble(640), pilot_size=32)
    assert "rk4" in rk4.metadata["bundling"]


def test_summary_matches_the_summary_of_full_time_courses(compiler):
    net = load("seir_epidemic")
    params = seir_ensemble(2000)
    times = np.linspace(0, 160, 17)
    full = run_cpu(net, "dopri5", times=times, parameters=params, bundling=False)
    summary = run_cpu(net, "dopri5", times=times, parameters=params, summary=True,
                      pilot_size=100)
    assert summary.data is None and summary.summary.n_used == 2000
    exact = full.with_summary().summary
    assert np.allclose(summary.summary.mean, exact.mean, rtol=1e-10, atol=1e-9)
    assert np.allclose(summary.summary.sd, exact.sd, rtol=1e-8, atol=1e-9)
    resolution = summary.metadata["quantile_resolution_max"]
    assert np.nanmax(np.abs(summary.summary.quantile_values - exact.quantile_values)) \
        <= 3 * resolution


def test_failed_members_are_reported_and_left_out_of_summaries(compiler):
    net = sbmlgpu.load(rate_rule_model({"x": (1.0, apply("times", ci("k"), ci("x"), ci("x")))},
                                       {"k": 1.0}))
    k = np.array([0.1, 0.2, 2.0, 0.3])  # k = 2 blows up at t = 0.5
    times = np.linspace(0, 1, 5)
    full = run_cpu(net, "dopri5", times=times, parameters={"k": k})
    assert list(full.ok) == [True, True, False, True]
    summary = run_cpu(net, "dopri5", times=times, parameters={"k": k}, summary=True)
    assert summary.summary.n_used == 3 and summary.summary.n_excluded == 1
    expected = full.data[full.ok].mean(axis=0)
    assert np.allclose(summary.summary.mean, expected, rtol=1e-12)


def test_large_results_are_memory_mapped(compiler):
    net = load("lotka_volterra")
    params = {"p1": np.linspace(0.9, 1.1, 50)}
    times = np.linspace(0, 5, 11)
    in_memory = run_cpu(net, "dopri5", times=times, parameters=params)
    spilled = run_cpu(net, "dopri5", times=times, parameters=params, spill_bytes=0)
    assert "memory-mapped" in spilled.metadata["data"]
    base = spilled.data
    while getattr(base, "base", None) is not None and not isinstance(base, np.memmap):
        base = base.base
    assert isinstance(base, np.memmap)
    assert np.array_equal(in_memory.data, spilled.data)


def test_keep_source_writes_the_kernel(compiler, tmp_path):
    from sbmlgpu.api import run

    run(load("lorenz"), "ode", end=1.0, points=3, options={"cpu_engine": "native"},
        device="cpu", keep_source=tmp_path, progress=False)
    kept = list(tmp_path.glob("*.cu"))
    assert kept and "sbmlgpu_ode_" in kept[0].read_text()


def test_numpy_engine_agrees_with_native(compiler):
    net = load("seir_epidemic")
    params = seir_ensemble(20)
    times = np.linspace(0, 160, 9)
    native = run_cpu(net, "dopri5", times=times, parameters=params)
    vectorised = run_cpu(net, "dopri5", times=times, parameters=params, cpu_engine="numpy")
    assert vectorised.metadata["engine"] == "numpy"
    assert np.allclose(native.data, vectorised.data, rtol=1e-9, atol=1e-9)
    assert np.array_equal(native.metadata["steps_max"], vectorised.metadata["steps_max"])


def test_numpy_engine_rk4_and_reference_fallback():
    net = load("lotka_volterra")
    times = np.linspace(0, 2, 5)
    rk4 = run_cpu(net, "rk4", times=times, cpu_engine="numpy", dt=1e-2)
    stiff = run_cpu(net, "rodas4", times=times, cpu_engine="numpy")
    assert rk4.ok.all() and stiff.ok.all()
    assert np.allclose(rk4.data, stiff.data, rtol=1e-6)


def test_cli_run_summary_and_plot(compiler, tmp_path, capsys):
    from sbmlgpu.cli import main

    code = main(["run", str(MODELS / "seir_epidemic.xml"), "--backend", "ode", "--cpu",
                 "--end", "100", "--points", "21", "--ensemble", "400", "--sample",
                 "beta=loguniform:0.2:1", "--summary", "--plot", "--no-progress", "-o",
                 str(tmp_path), "--pilot-size", "50"])
    assert code == 0, capsys.readouterr().err
    assert (tmp_path / "seir_epidemic.csv").is_file() and (tmp_path / "seir_epidemic.png").is_file()
    header = (tmp_path / "seir_epidemic.csv").read_text().splitlines()[0]
    assert header.startswith("time,S_mean,S_sd,S_q5")


@pytest.mark.parametrize("method", ["rk4", "dopri5"])
def test_a_model_without_states_runs_on_the_numpy_engine(method):
    """Only rules, no state: the numpy engine integrates a dummy row, as the kernel does,
    and evaluates the outputs from the model's own (no) states."""
    from tests.sbml_strings import model, parameter

    rules = ('<assignmentRule variable="y"><math xmlns="http://www.w3.org/1998/Math/MathML">'
             '<apply><times/><ci>k</ci><csymbol encoding="text" definitionURL='
             '"http://www.sbml.org/sbml/symbols/time">t</csymbol></apply></math>'
             '</assignmentRule>')
    net = sbmlgpu.load(model("", parameter("k", 2.0) + parameter("y", 0.0, constant=False),
                             rules=rules))
    times = np.linspace(0, 1, 5)
    result = sbmlgpu.run(net, "ode", times=times, outputs=["y"], device="cpu",
                         options={"cpu_engine": "numpy", "method": method})
    np.testing.assert_allclose(result["y"][0], 2.0 * times)


@pytest.mark.parametrize("method", ["dopri5", "rodas4"])
def test_numpy_engine_outputs_amounts_and_concentrations(method):
    """amount(A) and [A] as outputs on the numpy engine, also where it integrates
    member by member through the reference (rodas4), whose own evaluate reads plain
    ids only (the suite's cases that ask for amounts failed there with an OptionError)."""
    from tests.sbml_strings import DECAY_SBML

    net = sbmlgpu.load(DECAY_SBML.replace('size="1"', 'size="2"'))
    times = np.linspace(0, 2, 5)
    result = sbmlgpu.run(net, "ode", times=times, outputs=["A", "amount(A)", "[A]"],
                         device="cpu", options={"cpu_engine": "numpy", "method": method})
    exact = 10 * np.exp(-0.5 * times)  # A's concentration; the amount is twice it
    np.testing.assert_allclose(result["[A]"][0], exact, rtol=1e-5)
    np.testing.assert_allclose(result["amount(A)"][0], 2 * exact, rtol=1e-5)
    np.testing.assert_allclose(result["A"][0], exact, rtol=1e-5)


@pytest.mark.parametrize("method", ["rk4", "dopri5"])
def test_numpy_engine_runs_an_event_whose_trigger_has_no_atoms(method):
    """A trigger that is a number (semantic case 01284's kind): no comparison to split
    into atoms, yet an event; the vectorised steppers have no event loop, so the engine
    must not take them (it did, and the event at t = 0 never fired: a silently wrong
    value)."""
    from tests.sbml_strings import model, parameter

    math = '<math xmlns="http://www.w3.org/1998/Math/MathML">{}</math>'
    events = ('<event id="e" useValuesFromTriggerTime="true"><trigger initialValue="false" '
              'persistent="true">' + math.format("<cn>1</cn>") + '</trigger>'
              '<listOfEventAssignments><eventAssignment variable="p1">'
              + math.format("<cn>5</cn>") + '</eventAssignment></listOfEventAssignments>'
              '</event>')
    net = sbmlgpu.load(model("", parameter("p1", 2.0, constant=False), events=events))
    times = np.linspace(0, 1, 3)
    result = sbmlgpu.run(net, "ode", times=times, outputs=["p1"], device="cpu",
                         options={"cpu_engine": "numpy", "method": method})
    assert result.ok.all()
    np.testing.assert_array_equal(result["p1"][0], [5.0, 5.0, 5.0])


@pytest.mark.parametrize("method", ["dopri5", "rodas4"])
def test_numpy_engine_reference_path_reads_the_ensembles_alike_columns(method):
    """A column alike over the ensemble (k = 2 in every member) is a literal of the
    kernel model, not a table row: the reference path, which an event sends the members
    through, must simulate with it and not with the file's k = 0.5."""
    from tests.sbml_strings import DECAY_SBML

    math = '<math xmlns="http://www.w3.org/1998/Math/MathML">{}</math>'
    never = ('<listOfEvents><event id="never" useValuesFromTriggerTime="true">'
             '<trigger initialValue="false" persistent="true">'
             + math.format("<apply><gt/><ci>k</ci><cn>100</cn></apply>") + '</trigger>'
             '<listOfEventAssignments><eventAssignment variable="A">'
             + math.format("<cn>0</cn>") + '</eventAssignment></listOfEventAssignments>'
             '</event></listOfEvents></model>')
    net = sbmlgpu.load(DECAY_SBML.replace("</model>", never))
    times = np.linspace(0, 2, 3)
    result = sbmlgpu.run(net, "ode", times=times, outputs=["A"], device="cpu",
                         parameters={"k": [2.0, 2.0], "c": [1.0, 3.0]},
                         options={"cpu_engine": "numpy", "method": method})
    assert result.ok.all()
    # d[A]/dt = -k [A] whatever the compartment's size
    np.testing.assert_allclose(result["A"], np.tile(10 * np.exp(-2 * times), (2, 1)),
                               rtol=1e-4)


def test_a_failed_member_of_the_reference_path_gets_the_references_words():
    """`failed` from the kernel means its event loop; from the numpy engine's reference
    path it is scipy's integrator or the reference's event loop: each its own words."""
    from sbmlgpu.plugins.ode import failures
    from sbmlgpu.results import Status

    status = np.array([int(Status.ok), int(Status.failed)], np.int8)
    times = np.array([0.0, 1.0])
    kernel = failures.messages(status, times, None)
    reference = failures.messages(status, times, None, reference=True)
    assert set(kernel) == set(reference) == {1}
    assert kernel[1] == failures.EVENTS_FAILED
    assert reference[1] == failures.REFERENCE_FAILED and "scipy" in reference[1]
