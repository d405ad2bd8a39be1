"""The SBML Test Suite runner: settings, comparison, case selection, one line per
case, the closing line, refusals, failures, timeouts and JSON records. Skipped are
only typed refusals of a feature and cases that are not time courses; every other
problem (compile, option, import, printer gap, nothing to compare) is a FAIL."""

import argparse
import io
import json
import multiprocessing as mp
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from sbmlgpu import testsuite
from sbmlgpu.errors import OptionError
from sbmlgpu.testsuite import cases as cases_mod
from sbmlgpu.testsuite import runner as run_case_mod

from .shared_data import SEMANTIC, STOCHASTIC, needs_semantic, needs_stochastic

CLOSING = re.compile(r"^(\d+) passed, (\d+) failed, (\d+) skipped(?: \((.+)\))?$")


def run_cli(*argv):
    parser = argparse.ArgumentParser()
    testsuite.add_arguments(parser)
    out = io.StringIO()
    code = testsuite.main_from_args(parser.parse_args([str(a) for a in argv]), out=out)
    return code, out.getvalue().splitlines()


def copy_case(number: str, dest: Path, source: Path = SEMANTIC) -> Path:
    target = dest / number
    shutil.copytree(source / number, target)
    return target


# -- pieces -----------------------------------------------------------------------

def test_case_selection():
    assert testsuite.parse_selection("1-3,250, 7") == {1, 2, 3, 7, 250}
    assert testsuite.parse_selection(None) is None
    for bad in ("a-b", "5-1", "1;2"):
        with pytest.raises(OptionError):
            testsuite.parse_selection(bad)
    # an empty list (a shell variable left empty) ran every case
    for empty in ("", " ", ","):
        with pytest.raises(OptionError, match="no case numbers"):
            testsuite.parse_selection(empty)


def test_settings_semantic_and_stochastic(tmp_path):
    f = tmp_path / "s.txt"
    f.write_text("start: 0\nduration: 5\nsteps: 50\nvariables: S1, S2, k\n"
                 "absolute: 1.000000e-007\nrelative: 0.0001\namount: S1\nconcentration: S2\n")
    s = testsuite.read_settings(f)
    assert (s.start, s.duration, s.steps) == (0.0, 5.0, 50)
    assert s.variables == ("S1", "S2", "k") and s.absolute == 1e-7
    assert [s.output_kind(v) for v in s.variables] == ["amount", "concentration", "value"]
    assert s.kind == "semantic" and len(s.times()) == 51
    f.write_text("start: 0\nduration: 50\nsteps: 50\nvariables: X\nabsolute: \nrelative: \n"
                 "amount: X\nconcentration: \noutput: X-mean, X-sd\nmeanRange: (-3, 3)\n"
                 "sdRange: (-5, 5)\n")
    s = testsuite.read_settings(f)
    assert s.kind == "stochastic" and s.mean_range == (-3.0, 3.0) and s.absolute is None


def test_comparison_rule():
    expected = np.array([1.0, 100.0, np.nan, np.inf, -np.inf, 0.0])
    within = expected + np.array([1e-3, 1e-2, 0, 0, 0, 1e-3]) * 0.99
    within[2:5] = [np.nan, np.inf, -np.inf]
    r = testsuite.point_ratios(within, expected, 1e-3, 1e-4)
    assert np.all(r <= 1.0)
    # just outside abs + rel |C|, NaN for a number, the wrong infinity
    assert testsuite.point_ratios([1.0 + 1.2e-3], [1.0], 1e-3, 1e-4)[0] > 1
    assert testsuite.point_ratios([1.0], [np.nan], 1e-3, 1e-4)[0] == np.inf
    assert testsuite.point_ratios([np.nan], [1.0], 1e-3, 1e-4)[0] == np.inf
    assert testsuite.point_ratios([-np.inf], [np.inf], 1e-3, 1e-4)[0] == np.inf
    passed, worst = testsuite.compare(np.array([0.0, 1.0]), {"a": np.array([1.0, 2.5])},
                                      {"a": np.array([1.0, 2.0])}, 1e-3, 1e-4)
    assert not passed and worst.variable == "a" and worst.time == 1.0 and worst.got == 2.5


def test_closing_line_says_how_the_skips_divide():
    from sbmlgpu.testsuite.outcome import FAIL, PASS, Outcome, closing_line, tally

    outcomes = ([Outcome("1", PASS)] * 1358 + [Outcome.refused("2", "delay()")] * 72
                + [Outcome.not_time_course("3", "FBA")] * 27 + [Outcome("4", FAIL, "x")] * 2)
    counts = tally(outcomes)
    line = closing_line(counts)
    assert line == "1358 passed, 2 failed, 99 skipped (72 refused features, 27 not time courses)"
    assert CLOSING.match(line).groups() == ("1358", "2", "99",
                                            "72 refused features, 27 not time courses")
    assert counts == {"passed": 1358, "failed": 2, "skipped": 99, "refused": 72,
                      "not_time_course": 27}
    assert closing_line(tally(outcomes[:1])) == "1 passed, 0 failed, 0 skipped"
    with pytest.raises(ValueError):  # a skip must say why, and only a skip has a why
        Outcome("5", "skip", "no reason")
    record = Outcome.refused("6", "delay()").record()
    assert Outcome.from_record(record) == Outcome.refused("6", "delay()")


def test_results_time_column_is_the_first_whatever_its_name(tmp_path):
    f = tmp_path / "r.csv"
    f.write_text("Time,time,Time,a\n0,10,11,1\n1,10,11,2\n")
    times, columns = cases_mod.read_results(f)
    assert times.tolist() == [0.0, 1.0]
    assert columns["time"].tolist() == [10.0, 10.0] and columns["Time"].tolist() == [11.0, 11.0]


def test_bad_arguments_exit_2(tmp_path):
    assert run_cli(tmp_path / "missing")[0] == 2
    assert run_cli(tmp_path)[0] == 2  # no cases in it
    assert run_cli(tmp_path, "--cases", "x")[0] == 2
    assert run_cli(tmp_path, "--backend", "no-such-backend")[0] == 2


def test_backend_options_are_parsed_and_checked_before_any_case(tmp_path, capsys):
    assert testsuite.cli.backend_options(["method=bdf", "rtol=1e-9", "max-steps=5",
                                          "bundling=false"]) == {
        "method": "bdf", "rtol": 1e-9, "max_steps": 5, "bundling": False}
    with pytest.raises(OptionError, match="NAME=VALUE"):
        testsuite.cli.backend_options(["method"])
    # needs a backend; an unknown name or value is one error (exit 2), not a failure
    # of every case
    assert run_cli(tmp_path, "--backend-option", "method=bdf")[0] == 2
    assert run_cli(tmp_path, "--backend", "ode", "--backend-option", "mthod=bdf")[0] == 2
    assert run_cli(tmp_path, "--backend", "ode", "--backend-option", "method=bdx")[0] == 2
    err = capsys.readouterr().err
    assert "mthod" in err and "bdx" in err and "needs --backend" in err
    # text where a number belongs: one error naming the option (was a TypeError from
    # comparing it with the option's minimum, an internal error or a failure per case)
    for flag, value, words in (("--timeout", "-1", "finite number >= 0"),
                               ("--timeout", "nan", "finite number >= 0"),
                               ("--seed", "-1", "0 to 2^64 - 1")):
        assert run_cli(tmp_path, flag, value)[0] == 2
        assert words in capsys.readouterr().err
    for bad in ("rtol=abc", "max-steps=abc"):
        assert run_cli(tmp_path, "--backend", "ode", "--backend-option", bad)[0] == 2
        name = bad.split("=")[0]
        assert f"option {name}: 'abc' is not a number" in capsys.readouterr().err


@needs_semantic
def test_backend_options_reach_the_backend(monkeypatch):
    """--backend-option method=bdf: the cases' RunConfig carries it, and a case's run
    (in this process: run_case) hands it to sbmlgpu.run."""
    import sbmlgpu.api

    configs, seen = [], []
    real_cases, real_run = testsuite.cli.run_cases, sbmlgpu.api.run

    def cases_spy(cases, config, **kw):
        configs.append(config)
        return real_cases(cases, config, **kw)

    def run_spy(*args, **kwargs):
        seen.append(kwargs.get("options"))
        return real_run(*args, **kwargs)

    monkeypatch.setattr(testsuite.cli, "run_cases", cases_spy)
    code, lines = run_cli(SEMANTIC, "--cases", "1", "--backend", "ode", "--cpu",
                          "--backend-option", "method=bdf")
    assert lines[0] == "00001 pass" and code == 0
    assert configs[0].options == (("method", "bdf"),)
    monkeypatch.setattr(sbmlgpu.api, "run", run_spy)
    (case,) = testsuite.find_cases(SEMANTIC, {1})
    assert testsuite.run_case(case, configs[0]).status == "pass"
    assert seen == [{"method": "bdf"}]


# -- real cases --------------------------------------------------------------------

@needs_semantic
def test_real_cases_pass_and_close_with_the_counts():
    code, lines = run_cli(SEMANTIC, "--cases", "1,26,928", "--jobs", "2")
    assert lines[:3] == ["00001 pass", "00026 pass", "00928 pass"]
    assert CLOSING.match(lines[-1]).groups() == ("3", "0", "0", None)
    assert code == 0


@needs_semantic
def test_forced_failure_reports_the_worst_point(tmp_path):
    case = copy_case("00001", tmp_path)
    csv = case / "00001-results.csv"
    rows = csv.read_text().splitlines()
    cells = rows[11].split(",")  # t = 1.0
    cells[1] = repr(float(cells[1]) * 1.5)
    rows[11] = ",".join(cells)
    csv.write_text("\n".join(rows) + "\n")
    code, lines = run_cli(tmp_path, "--json", tmp_path / "out.json")
    assert lines[0].startswith("00001 FAIL worst: S1 at t=1 got ")
    assert lines[-1] == "0 passed, 1 failed, 0 skipped"
    assert code == 1
    record = json.loads((tmp_path / "out.json").read_text())
    assert record["summary"]["failed"] == 1
    (c,) = record["cases"]
    assert c["case"] == "00001" and c["status"] == "fail"
    assert c["worst"]["variable"] == "S1" and c["worst"]["error_over_tolerance"] > 1


@needs_semantic
def test_flux_balance_cases_are_skipped_as_not_time_courses(tmp_path):
    case = copy_case("00001", tmp_path)
    m = case / "00001-model.m"
    m.write_text(m.read_text().replace("TimeCourse", "FluxBalanceSteadyState"))
    code, lines = run_cli(tmp_path, "--json", tmp_path / "out.json")
    assert lines[0] == "00001 skipped: testType FluxBalanceSteadyState: not a time course"
    assert lines[-1] == "0 passed, 0 failed, 1 skipped (1 not a time course)" and code == 0
    record = json.loads((tmp_path / "out.json").read_text())
    assert record["summary"]["not_time_course"] == 1 and record["summary"]["refused"] == 0
    assert record["cases"][0]["skipped_as"] == "not_time_course"


@needs_semantic
def test_a_refused_feature_is_a_skip_counted_as_refused(tmp_path, monkeypatch):
    from sbmlgpu.features import delay_users
    from sbmlgpu.plugins.ode.backend import OdeBackend

    # the ode backend simulates delay() now: its refusal is stood in for (the runner's
    # counting, not the feature, is what this tests)
    monkeypatch.setattr(OdeBackend, "supports", lambda self, network: [
        ("delay() (refused in this test)", delay_users(network))] if delay_users(network) else [])
    copy_case("00941", tmp_path)  # delay()
    copy_case("00001", tmp_path)
    m = tmp_path / "00001" / "00001-model.m"
    m.write_text(m.read_text().replace("TimeCourse", "FluxBalanceSteadyState"))
    code, lines = run_cli(tmp_path, "--backend", "ode", "--timeout", "0",
                          "--json", tmp_path / "out.json")
    assert lines[1].startswith("00941 skipped: backend 'ode' does not support: delay()")
    assert lines[-1] == "0 passed, 0 failed, 2 skipped (1 refused feature, 1 not a time course)"
    assert code == 0
    summary = json.loads((tmp_path / "out.json").read_text())["summary"]
    assert (summary["refused"], summary["not_time_course"], summary["skipped"]) == (1, 1, 2)


@needs_semantic
def test_sbml_the_importer_cannot_read_is_a_failure_not_a_skip(tmp_path):
    case = copy_case("00001", tmp_path)
    (case / "00001-sbml-l3v2.xml").write_text("<sbml>not really</sbml>")
    code, lines = run_cli(tmp_path, "--timeout", "0")
    assert lines[0].startswith("00001 FAIL SBMLImportError: ")
    assert lines[-1] == "0 passed, 1 failed, 0 skipped" and code == 1


@needs_semantic
def test_a_compile_failure_is_a_failure_not_a_skip(tmp_path, monkeypatch):
    """The real path: the ode backend's CPU engine builds the generated kernel with
    $CXX, here a compiler that rejects everything (and has a version of its own, so
    that no cached build of another compiler is used)."""
    copy_case("00001", tmp_path)
    cxx = tmp_path / "broken-c++"
    cxx.write_text("#!/bin/sh\n"
                   "if [ \"$1\" = --version ]; then echo 'broken-c++ 0.0 (test)'; exit 0; fi\n"
                   "echo 'kernel.cpp:1:1: error: this compiler compiles nothing' >&2\n"
                   "exit 1\n")
    cxx.chmod(0o755)
    monkeypatch.setenv("CXX", str(cxx))
    monkeypatch.setenv("SBMLGPU_CACHE_DIR", str(tmp_path / "cache"))
    code, lines = run_cli(tmp_path, "--backend", "ode", "--timeout", "0",
                          "--json", tmp_path / "out.json")
    assert lines[0].startswith("00001 FAIL HostCompileError: ")
    assert str(cxx) in lines[0]
    assert lines[-1] == "0 passed, 1 failed, 0 skipped" and code == 1
    (record,) = json.loads((tmp_path / "out.json").read_text())["cases"]
    assert "compiles nothing" in record["message"]  # the compiler's own words are kept


@needs_semantic
@pytest.mark.parametrize("backend", [None, "reference"])
def test_an_option_error_is_a_failure_not_a_skip(tmp_path, backend):
    """A variable the model does not have: `sbmlgpu.run` refuses the output name
    with an OptionError, which the runner reports as a FAIL."""
    case = copy_case("00001", tmp_path)
    settings = case / "00001-settings.txt"
    settings.write_text(settings.read_text().replace("variables: S1, S2", "variables: S1, S3"))
    results = case / "00001-results.csv"
    results.write_text(results.read_text().replace("S2", "S3", 1))
    argv = ["--timeout", "0"] + (["--backend", backend] if backend else [])
    code, lines = run_cli(tmp_path, *argv)
    assert lines[0].startswith("00001 FAIL OptionError: option outputs: 'S3' is not an id")
    assert lines[-1] == "0 passed, 1 failed, 0 skipped" and code == 1


@needs_semantic
def test_a_printer_gap_is_a_failure_and_a_bug_report_not_a_skip(tmp_path, monkeypatch):
    """The CUDA printer made unable to print products: the ode backend must not
    refuse the model (a refusal would read as a skip) but raise InternalError."""
    import sympy as sp

    import sbmlgpu
    from sbmlgpu.codegen import printer
    from sbmlgpu.errors import InternalError

    real = printer._dispatch

    def without_mul(printer_class, expr_class):
        return None if issubclass(expr_class, sp.Mul) else real(printer_class, expr_class)

    monkeypatch.setattr(printer, "_dispatch", without_mul)
    copy_case("00001", tmp_path)
    code, lines = run_cli(tmp_path, "--backend", "ode", "--timeout", "0")
    assert lines[0].startswith("00001 FAIL CodegenError: the CUDA code generator cannot print ")
    assert "bug in sbmlgpu" in lines[0]
    assert lines[-1] == "0 passed, 1 failed, 0 skipped" and code == 1
    # for a user: a typed error naming the construct and the elements, not a refusal
    with pytest.raises(InternalError, match=r"cannot print Mul \(in .*reaction1.*\): this is "
                                            r"a bug in sbmlgpu"):
        sbmlgpu.run(SEMANTIC / "00001" / "00001-sbml-l3v2.xml", backend="ode", end=1.0,
                    device="cpu", progress=False)


@needs_semantic
@pytest.mark.parametrize("settings_edit, why", [
    (("variables: S1, S2", "variables: "), "names nothing to compare"),
])
def test_a_case_with_nothing_to_compare_fails(tmp_path, settings_edit, why):
    case = copy_case("00001", tmp_path)
    settings = case / "00001-settings.txt"
    settings.write_text(settings.read_text().replace(*settings_edit))
    code, lines = run_cli(tmp_path, "--timeout", "0")
    assert lines[0].startswith("00001 FAIL bad case files:") and why in lines[0]
    assert lines[-1] == "0 passed, 1 failed, 0 skipped" and code == 1


@needs_semantic
def test_unexpected_exception_is_a_fail_and_the_run_goes_on(tmp_path, monkeypatch):
    copy_case("00001", tmp_path)
    copy_case("00002", tmp_path)
    real = run_case_mod.reference_values

    def broken(network, *args, **kw):
        if "00001" in network.source:
            raise RuntimeError("boom")
        return real(network, *args, **kw)

    monkeypatch.setattr(run_case_mod, "reference_values", broken)
    code, lines = run_cli(tmp_path, "--timeout", "0")  # in this process
    assert lines[0].startswith("00001 FAIL error: RuntimeError: boom")
    assert lines[1] == "00002 pass"
    assert lines[-1] == "1 passed, 1 failed, 0 skipped" and code == 1


@needs_semantic
@pytest.mark.skipif("fork" not in mp.get_all_start_methods(), reason="needs fork")
def test_a_hanging_case_times_out(tmp_path, monkeypatch):
    copy_case("00001", tmp_path)
    copy_case("00002", tmp_path)
    real = run_case_mod.reference_values

    def hang(network, *args, **kw):
        if "00001" in network.source:
            import time
            time.sleep(60)
        return real(network, *args, **kw)

    monkeypatch.setattr(run_case_mod, "reference_values", hang)  # the forked worker has it
    code, lines = run_cli(tmp_path, "--timeout", "3")
    assert lines[0] == "00001 FAIL timeout (3 s)"
    assert lines[1] == "00002 pass"
    assert lines[-1] == "1 passed, 1 failed, 0 skipped"


@needs_stochastic
def test_stochastic_cases_need_a_stochastic_backend(tmp_path):
    copy_case("00001", tmp_path, STOCHASTIC)
    code, lines = run_cli(tmp_path, "--timeout", "0")
    assert lines[0] == "00001 skipped: stochastic case: needs a stochastic backend (--backend ssa)"
    assert lines[-1] == "0 passed, 0 failed, 1 skipped (1 refused feature)"
