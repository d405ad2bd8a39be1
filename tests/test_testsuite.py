"""The SBML Test Suite runner: settings, comparison, case selection, one line per
case, the closing line, refusals, failures, timeouts and JSON records."""

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

SUITE = Path(__file__).resolve().parents[2] / "shared" / "sbml-test-suite"
SEMANTIC = SUITE / "semantic"
STOCHASTIC = SUITE / "stochastic"
needs_semantic = pytest.mark.skipif(not SEMANTIC.is_dir(), reason=f"{SEMANTIC} is absent")
CLOSING = re.compile(r"^(\d+) passed, (\d+) failed, (\d+) skipped$")


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


# -- real cases --------------------------------------------------------------------

@needs_semantic
def test_real_cases_pass_and_close_with_the_counts():
    code, lines = run_cli(SEMANTIC, "--cases", "1,26,928", "--jobs", "2")
    assert lines[:3] == ["00001 pass", "00026 pass", "00928 pass"]
    assert CLOSING.match(lines[-1]).groups() == ("3", "0", "0")
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
def test_flux_balance_cases_are_skipped(tmp_path):
    case = copy_case("00001", tmp_path)
    m = case / "00001-model.m"
    m.write_text(m.read_text().replace("TimeCourse", "FluxBalanceSteadyState"))
    code, lines = run_cli(tmp_path)
    assert lines[0].startswith("00001 skipped: flux balance")
    assert lines[-1] == "0 passed, 0 failed, 1 skipped" and code == 0


@needs_semantic
def test_invalid_sbml_is_a_refusal_not_a_crash(tmp_path):
    case = copy_case("00001", tmp_path)
    (case / "00001-sbml-l3v2.xml").write_text("<sbml>not really</sbml>")
    code, lines = run_cli(tmp_path, "--timeout", "0")
    assert lines[0].startswith("00001 skipped: ")
    assert lines[-1] == "0 passed, 0 failed, 1 skipped"


@needs_semantic
def test_unexpected_exception_is_a_fail_and_the_run_goes_on(tmp_path, monkeypatch):
    copy_case("00001", tmp_path)
    copy_case("00002", tmp_path)
    real = run_case_mod.reference_values

    def broken(model_path, *args, **kw):
        if "00001" in str(model_path):
            raise RuntimeError("boom")
        return real(model_path, *args, **kw)

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

    def hang(model_path, *args, **kw):
        if "00001" in str(model_path):
            import time
            time.sleep(60)
        return real(model_path, *args, **kw)

    monkeypatch.setattr(run_case_mod, "reference_values", hang)  # the forked worker has it
    code, lines = run_cli(tmp_path, "--timeout", "3")
    assert lines[0] == "00001 FAIL timeout (3 s)"
    assert lines[1] == "00002 pass"
    assert lines[-1] == "1 passed, 1 failed, 0 skipped"


@pytest.mark.skipif(not (STOCHASTIC / "00001").is_dir(), reason="no stochastic suite")
def test_stochastic_cases_need_a_stochastic_backend(tmp_path):
    copy_case("00001", tmp_path, STOCHASTIC)
    code, lines = run_cli(tmp_path, "--timeout", "0")
    assert lines[0] == "00001 skipped: stochastic case: needs a stochastic backend (--backend ssa)"
    assert lines[-1] == "0 passed, 0 failed, 1 skipped"
