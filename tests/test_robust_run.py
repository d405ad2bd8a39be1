"""Runs that cannot break (issue 14): the fast default and its fallback, limits checked
before anything is allocated, bad tables and options as one typed message."""

from pathlib import Path

import numpy as np
import pytest

import sbmlgpu
from sbmlgpu.ensemble import read_petab_parameters, read_table
from sbmlgpu.errors import OptionError, UnsupportedModelError
from sbmlgpu.tasks import TimeCourse
from sbmlgpu.tasks.limits import MAX_OUTPUT_TIMES, check_result_size
from sbmlgpu.tasks.estimation import read_measurements
from tests.sbml_strings import model as sbml_model
from tests.sbml_strings import parameter, reaction, species, write_decay_model
from tests.test_cli import run_main

DELAYED_LAW = ("<apply><times/><ci>k</ci><apply><csymbol encoding='text' definitionURL="
               "'http://www.sbml.org/sbml/symbols/delay'>delay</csymbol><ci>A</ci>"
               "<cn>0.1</cn></apply></apply>")


@pytest.fixture
def decay(tmp_path):
    return write_decay_model(tmp_path)


@pytest.fixture
def delayed(tmp_path, monkeypatch):
    """A model the ode backend refuses: it simulates delay() now, so its refusal is
    stood in for here (the fallback, not the feature, is what these tests test)."""
    from sbmlgpu.plugins.ode.backend import OdeBackend

    monkeypatch.setattr(OdeBackend, "supports",
                        lambda self, network: [("delay() (refused in this test)", ("r",))])
    path = tmp_path / "delayed.xml"
    path.write_text(sbml_model(species("A", 10) + species("B", 0), parameter("k", 1),
                               reaction("r", ["A"], ["B"], DELAYED_LAW)))
    return path


# -- the fast default ----------------------------------------------------------------------
def test_the_default_backend_is_ode_on_the_cpu_path(decay):
    result = sbmlgpu.run(decay, end=2.0, points=3, device="cpu", progress=False)
    assert result.metadata["backend"] == "ode" and result.metadata["device"].startswith("cpu")
    np.testing.assert_allclose(result["A"][0], 10 * np.exp(-0.5 * np.array([0, 1, 2])),
                               rtol=1e-6)


def test_a_model_ode_refuses_falls_back_to_the_reference_with_one_note(capsys, delayed,
                                                                        tmp_path):
    code, out, err = run_main(capsys, "run", delayed, "--end", 1, "--points", 3,
                              "-o", tmp_path / "o", "--format", "npz")
    assert code == 0, err
    notes = [line for line in err.splitlines() if "refuses this model" in line]
    assert len(notes) == 1 and "delay()" in notes[0] and "'reference'" in notes[0]
    assert sbmlgpu.results.read(tmp_path / "o" / "delayed.npz").metadata["backend"] \
        == "reference"


def test_a_named_backend_refusal_is_the_answer(capsys, delayed, tmp_path):
    code, _, err = run_main(capsys, "run", delayed, "--end", 1, "--backend", "ode",
                            "-o", tmp_path)
    assert code == 2 and "backend 'ode' does not support: delay()" in err
    with pytest.raises(UnsupportedModelError, match="delay"):
        sbmlgpu.run(delayed, "ode", end=1.0, device="cpu", progress=False)


def test_no_fallback_when_options_of_the_default_were_given(capsys, delayed, tmp_path):
    code, _, err = run_main(capsys, "run", delayed, "--end", 1, "--dt", "0.01",
                            "-o", tmp_path)
    assert code == 2 and "backend 'ode' does not support" in err
    assert "options of 'ode' were given" in err


def test_without_ode_installed_the_default_is_its_fallback(use_backends):
    from sbmlgpu import plugin_manager
    from tests.test_plugins import FakeBackend

    use_backends(FakeBackend("reference"), FakeBackend("other"))  # time courses, no ode
    assert plugin_manager.backend_for(TimeCourse).name == "reference"


# -- sizes checked before anything runs -------------------------------------------------------
def test_too_many_output_times_is_an_option_error_naming_need_and_limit(capsys, decay, tmp_path):
    code, _, err = run_main(capsys, "run", decay, "--end", 1, "--points", 100_000_000,
                            "-o", tmp_path)
    assert code == 2 and "100,000,000 output times would need 2.4 GB" in err
    assert f"the limit is {MAX_OUTPUT_TIMES:,} output times" in err
    assert not (tmp_path / "decay.csv").exists()


def test_an_ensemble_too_large_for_memory_and_disk_is_refused(capsys, decay, tmp_path):
    code, _, err = run_main(capsys, "run", decay, "--end", 1, "--ensemble", 10**10,
                            "--backend", "ssa", "-o", tmp_path)
    assert code == 2 and "option ensemble: 10,000,000,000 member(s)" in err
    assert "would need 2.42e+04 GB for the result; the limit is" in err
    code, _, err = run_main(capsys, "run", decay, "--end", 1, "--ensemble", 10**10,
                            "--sample", "k=uniform:0:1", "-o", tmp_path)
    assert code == 2 and "would need 160 GB for the parameter sets" in err


def test_the_result_size_counts_summary_rows_not_members(decay):
    network = sbmlgpu.load(decay)
    task = TimeCourse.between(end=1.0, points=11, n=10**6, summary=True)
    assert check_result_size(task, network, limit=10**6) < 10**4  # 11 x 3 x 10 x 8
    task = TimeCourse.between(end=1.0, points=11, n=10**6)
    with pytest.raises(OptionError, match=r"264 MB|0.264 GB"):
        check_result_size(task, network, limit=10**6)


# -- options ---------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", ["-1", str(2**64)])
def test_a_seed_outside_0_to_2_64_is_an_option_error(capsys, decay, tmp_path, seed):
    code, _, err = run_main(capsys, "run", decay, "--end", 1, "--backend", "reference",
                            "--seed", seed, "-o", tmp_path)
    assert code == 2 and "option seed" in err and "Traceback" not in err


def test_outputs_given_twice_are_reported_once_with_a_note(capsys, decay, tmp_path):
    code, _, err = run_main(capsys, "run", decay, "--end", 1, "--points", 2, "--backend",
                            "reference", "--outputs", "A,B,A", "-o", tmp_path)
    assert code == 0, err
    assert "outputs given more than once are reported once: A" in err
    assert Path(tmp_path / "decay.csv").read_text().splitlines()[0] == "time,A,B"


# -- tables ---------------------------------------------------------------------------------
def test_tables_take_tabs_as_well_as_commas(tmp_path):
    (tmp_path / "sets.tsv").write_text("k\tA\n0.1\t1\n1.0\t2\n")
    table = read_table(tmp_path / "sets.tsv")
    np.testing.assert_array_equal(table["k"], [0.1, 1.0])
    np.testing.assert_array_equal(table["A"], [1, 2])
    (tmp_path / "data.tsv").write_text("time\tid\tlower\tupper\n1\tA\t0\t2\n")
    data = read_measurements(tmp_path / "data.tsv")
    assert data.ids == ("A",) and list(data.upper) == [2.0]
    (tmp_path / "p.csv").write_text("parameterId,parameterScale,lowerBound,upperBound,"
                                    "nominalValue,estimate\nk,lin,0,1,0.5,1\n")
    [k] = read_petab_parameters(tmp_path / "p.csv")
    assert (k.id, k.upper, k.estimate) == ("k", 1.0, True)


def test_a_table_that_is_not_utf8_names_the_file_and_line(capsys, decay, tmp_path):
    (tmp_path / "sets.csv").write_bytes("k,A\n0.1,1\n0.2,2 \xb5M\n".encode("latin-1"))
    with pytest.raises(OptionError, match=r"sets.csv, line 3: not UTF-8 text \(byte 0xb5\)"):
        read_table(tmp_path / "sets.csv")
    code, _, err = run_main(capsys, "run", decay, "--end", 1, "--parameters",
                            tmp_path / "sets.csv", "-o", tmp_path)
    assert code == 2 and "line 3: not UTF-8" in err and "Traceback" not in err


# -- runs that end, flagged -------------------------------------------------------------------
def _write(tmp_path, name, text) -> Path:
    path = tmp_path / f"{name}.xml"
    path.write_text(text)
    return path


def _event(eid: str, trigger: str, value: str) -> str:
    math = '<math xmlns="http://www.w3.org/1998/Math/MathML">'
    return (f'<event id="{eid}" useValuesFromTriggerTime="true"><trigger initialValue="false" '
            f'persistent="true">{math}{trigger}</math></trigger><listOfEventAssignments>'
            f'<eventAssignment variable="B">{math}<cn>{value}</cn></math></eventAssignment>'
            f'</listOfEventAssignments></event>')


def ping_pong_events(tmp_path) -> Path:
    """B < 1 sets B = 2, B > 1 sets B = 0: at t = 0 the events trigger each other
    without end (the reference fails the run; the SSA used to settle after one round)."""
    law = "<apply><times/><ci>k</ci><ci>A</ci></apply>"
    events = (_event("low", "<apply><lt/><ci>B</ci><cn>1</cn></apply>", "2")
              + _event("high", "<apply><gt/><ci>B</ci><cn>1</cn></apply>", "0"))
    return _write(tmp_path, "pingpong", sbml_model(
        species("A", 10) + species("B", 0.5), parameter("k", 1),
        reaction("r", ["A"], [], law), events=events))


@pytest.mark.parametrize("engine", ["compiled", "numpy"])
def test_an_ssa_event_loop_that_never_settles_fails_the_member(tmp_path, engine):
    result = sbmlgpu.run(ping_pong_events(tmp_path), "ssa", end=1.0, points=3, n=2,
                         device="cpu", options={"cpu_engine": engine}, progress=False)
    failures = result.failures()
    assert len(failures) == 2
    assert all("events kept triggering each other" in message for _, _, message in failures)


def test_the_ssa_event_kernel_compiles_for_sm_90():
    from sbmlgpu.codegen.compile_check import nvcc_available, nvcc_compile
    from sbmlgpu.plugins.ssa.codegen import kernel_source
    from sbmlgpu.plugins.ssa.expressions import prepare
    from sbmlgpu.plugins.ssa.model import build
    from tests.test_ssa_cpu import VARIANTS, events_model

    if not nvcc_available():
        pytest.skip("nvcc not installed")
    for variant in VARIANTS[:2]:
        source = kernel_source(prepare(build(events_model()), (), ("X",)), variant)
        assert "ssa_fire" in source and nvcc_compile(source, "sm_90", name="ssa_events")


def test_an_ssa_realisation_whose_firings_never_end_stops_at_the_default_limit(tmp_path):
    from sbmlgpu.plugins.ssa.options import SsaOptions

    assert SsaOptions().max_firings == 100_000_000  # a limit without being asked
    law = "<apply><times/><ci>k</ci><ci>A</ci><ci>A</ci></apply>"  # A -> 2A, blowing up
    path = _write(tmp_path, "blowup", sbml_model(species("A", 10), parameter("k", 1),
                                                 reaction("r", ["A"], ["A", "A"], law)))
    result = sbmlgpu.run(path, "ssa", end=10.0, points=3, device="cpu", progress=False,
                         options={"max_firings": 10_000})
    [(_, status, message)] = result.failures()
    assert status.name == "max_steps" and "raise --max-firings" in message


def test_cpu_threads_beyond_the_cap_is_an_option_error(capsys, decay, tmp_path):
    code, _, err = run_main(capsys, "run", decay, "--end", 1, "--backend", "ssa",
                            "--cpu-threads", 100000, "-o", tmp_path)
    assert code == 2 and "option cpu-threads: 100000 is above the maximum 1024" in err


@pytest.mark.parametrize("backend", ["ode", "ssa", "reference"])
def test_a_compartment_of_size_zero_fails_the_member(tmp_path, backend):
    law = "<apply><times/><ci>k</ci><ci>A</ci></apply>"
    path = _write(tmp_path, "empty", sbml_model(
        species("A", 10) + species("B", 0), parameter("k", 1),
        reaction("r", ["A"], ["B"], law), size=0))
    result = sbmlgpu.run(path, backend, end=1.0, points=3, device="cpu", progress=False)
    [(_, status, _)] = result.failures()
    assert status.name in ("non_finite", "failed")


@pytest.mark.parametrize("model", ["overflow", "no value"])
def test_ode_flags_what_the_reference_flags(tmp_path, model):
    law = "<apply><times/><ci>k</ci><ci>A</ci></apply>"
    if model == "overflow":  # A' = k A^2: infinite at t = 0.1
        text = sbml_model(species("A", 10), parameter("k", 1), reaction(
            "r", [], ["A"], "<apply><times/><ci>k</ci><ci>A</ci><ci>A</ci></apply>"))
    else:
        text = sbml_model(species("A", 10) + species("B", 0),
                          '<parameter id="k" constant="true"/>',
                          reaction("r", ["A"], ["B"], law))
    path = _write(tmp_path, "m", text)
    for backend in ("reference", "ode"):
        result = sbmlgpu.run(path, backend, end=1.0, points=3, device="cpu", progress=False)
        [(_, status, message)] = result.failures()
        assert status.name != "ok", backend
    if model == "no value":  # ode says when: A is 10 at t = 0, NaN from the first step
        assert status.name == "non_finite"
        assert message.startswith("a state became NaN or infinite between t = 0 and t = 0.5")


def test_ode_names_why_an_event_loop_failed(tmp_path):
    result = sbmlgpu.run(ping_pong_events(tmp_path), "ode", end=1.0, points=3, device="cpu",
                         progress=False)
    [(_, status, message)] = result.failures()
    assert status.name == "failed" and "events triggered each other without end" in message


# -- notes where a right result looks wrong -----------------------------------------------
def test_a_summary_of_one_member_notes_that_sd_is_undefined(capsys, decay, tmp_path):
    code, _, err = run_main(capsys, "run", decay, "--end", 1, "--points", 3, "--backend",
                            "reference", "--summary", "-o", tmp_path)
    assert code == 0 and "--summary over one member: its sd is undefined" in err
    header, *rows = (tmp_path / "decay.csv").read_text().splitlines()
    assert header.split(",")[2] == "A_sd" and all(r.split(",")[2] == "nan" for r in rows)


def test_an_output_without_columns_says_so(capsys, tmp_path):
    path = _write(tmp_path, "bare", sbml_model("", parameter("k", 1)))
    code, _, err = run_main(capsys, "run", path, "--end", 1, "--points", 3, "--backend",
                            "reference", "-o", tmp_path)
    assert code == 0 and "the result has no output columns" in err
    assert (tmp_path / "bare.csv").read_text().splitlines()[0] == "time"


# -- non-finite outputs of members that succeeded -----------------------------------------------
ACOS_OF_TIME = ('<assignmentRule variable="y"><math xmlns="http://www.w3.org/1998/Math/MathML">'
                "<apply><arccos/><csymbol encoding='text' definitionURL="
                "'http://www.sbml.org/sbml/symbols/time'>t</csymbol></apply></math>"
                "</assignmentRule>")


@pytest.mark.parametrize("backend", ["ode", "reference"])
def test_non_finite_outputs_of_ok_members_are_flagged_with_a_note(capsys, tmp_path, backend):
    """acos(t) has no value past t = 1: the member is right to succeed (its state A
    is fine) but y's NaN must be flagged, in a note and in the result's metadata."""
    path = tmp_path / "acos.xml"
    path.write_text(sbml_model(species("A", 1), parameter("k", 1) + parameter("y", 0, constant=False),
                               reaction("r", ["A"], [], "<apply><times/><ci>k</ci><ci>A</ci></apply>"),
                               rules=ACOS_OF_TIME))
    code, _, err = run_main(capsys, "run", path, "--backend", backend, "--cpu", "--end", 2,
                            "--points", 5, "-o", tmp_path / "o", "--format", "npz",
                            "--no-progress")
    assert code == 0, err
    result = sbmlgpu.results.read(tmp_path / "o" / "acos.npz")
    assert result.ok.all() and np.isnan(result["y"][0, -1]) and np.isfinite(result["A"]).all()
    assert result.metadata["non_finite_outputs"] == {"y": 1}
    assert "NaN or infinite values in outputs of members that succeeded: y (1 member(s))" in err


def test_a_finite_result_has_no_non_finite_flag(decay):
    result = sbmlgpu.run(decay, end=1.0, points=3, device="cpu", progress=False)
    assert result.non_finite_outputs() == {} and "non_finite_outputs" not in result.metadata
