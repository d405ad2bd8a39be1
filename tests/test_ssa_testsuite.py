"""The DSMTS part of the test-suite runner (core/testsuite/stochastic.py) with the
SSA backend: the Z/Y criteria, sigma = 0 points, amounts asked of the backend,
refusals (skipped, counted as refused), and the failures that are not refusals."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from sbmlgpu.plugins.ssa import host
from sbmlgpu.testsuite import RunConfig, find_cases, main, run_case
from sbmlgpu.testsuite.stochastic import check_points, z_and_y

from .shared_data import STOCHASTIC, needs_stochastic

fast = pytest.mark.skipif(not host.available(), reason="10,000 runs need the compiled engine")


def test_z_and_y_follow_the_dsmts_formulas():
    z, y = z_and_y(mean=[10.3], sd=[2.2], mu=[10.0], sigma=[2.0], runs=10000)
    assert z[0] == pytest.approx(100 * 0.3 / 2.0)
    assert y[0] == pytest.approx(np.sqrt(5000) * (4.84 / 4.0 - 1))


def test_points_with_zero_sigma_must_match_exactly():
    mu, sigma = np.array([100.0, 50.0, 7.0]), np.array([0.0, 0.0, 1.0])
    bad_z, bad_y, score = check_points([100.0, 50.0, 7.0], [0.0, 0.0, 1.0], mu, sigma, 10000)
    assert not bad_z.any() and not bad_y.any() and np.all(score <= 1)
    bad_z, _, score = check_points([100.0, 50.0, 7.0], [0.0, 0.1, 1.0], mu, sigma, 10000)
    assert bad_z.tolist() == [False, True, False] and score[1] == np.inf
    bad_z, _, _ = check_points([100.5, 50.0, 7.0], [0.0, 0.0, 1.0], mu, sigma, 10000)
    assert bad_z[0]


def test_ranges_come_from_the_settings_and_nan_misses():
    bad_z, bad_y, _ = check_points([10.05], [1.0], [10.0], [1.0], 10000, (-3, 3), (-5, 5))
    assert bad_z[0] and not bad_y[0]  # Z = 5
    bad_z, _, _ = check_points([10.05], [1.0], [10.0], [1.0], 10000, (-6, 6), (-5, 5))
    assert not bad_z[0]
    bad_z, bad_y, score = check_points([np.nan], [1.0], [10.0], [1.0], 100)
    assert bad_z[0] and score[0] == np.inf


@needs_stochastic
@fast
@pytest.mark.parametrize("number", ["00001", "00011", "00019", "00028", "00033"])
def test_dsmts_cases_pass_with_10000_runs(number):
    # 00011: concentration species in a size-2 compartment, reported as an amount;
    # 00019: an assignment rule; 00028: a time event; 00033: a state event
    (case,) = find_cases(STOCHASTIC / number)
    outcome = run_case(case, RunConfig(backend="ssa", stochastic_runs=10000, seed=1))
    assert outcome.status == "pass", outcome.line()
    assert outcome.worst is not None and outcome.worst.ratio <= 1


def _with_a_refused_case(folder) -> None:
    """00001, and 00041 with its clock's rate (dt/dt = 1: a clock, which the SSA
    carries, tests/test_ssa_clocks.py) made to read t itself: a rate rule the SSA
    refuses by name."""
    for number in ("00001", "00041"):
        shutil.copytree(STOCHASTIC / number, folder / number)
    xml = folder / "00041" / "00041-sbml-l3v2.xml"
    text = xml.read_text()
    clock_rate = '<cn type="integer"> 1 </cn>\n        </math>\n      </rateRule>'
    assert clock_rate in text
    xml.write_text(text.replace(clock_rate, clock_rate.replace('<cn type="integer"> 1 </cn>',
                                                               "<ci> t </ci>")))


@needs_stochastic
def test_a_refused_rate_rule_is_skipped_by_the_ssa_with_the_reason(tmp_path):
    _with_a_refused_case(tmp_path)
    (case,) = find_cases(tmp_path / "00041")
    outcome = run_case(case, RunConfig(backend="ssa", stochastic_runs=100))
    assert outcome.status == "skip" and "rate rule" in outcome.message
    assert outcome.skipped_as == "refused"


@needs_stochastic
def test_a_bad_output_is_a_failure_and_a_foreign_test_type_a_skip(tmp_path):
    """Same rules as the semantic cases: an OptionError (a variable the model does
    not have) fails; a testType that is not a time course is skipped as such."""
    case = tmp_path / "00001"
    shutil.copytree(STOCHASTIC / "00001", case)
    settings = case / "00001-settings.txt"
    settings.write_text(settings.read_text().replace("variables: X", "variables: Y")
                        .replace("amount: X", "amount: Y"))
    results = case / "00001-results.csv"
    results.write_text(results.read_text().replace("X-mean,X-sd", "Y-mean,Y-sd", 1))
    (found,) = find_cases(case)
    outcome = run_case(found, RunConfig(backend="ssa", stochastic_runs=100))
    assert outcome.status == "fail" and outcome.message.startswith("OptionError: ")
    assert "'Y' is not an id" in outcome.message
    m = case / "00001-model.m"
    m.write_text(m.read_text().replace("StochasticTimeCourse", "SteadyStateDistribution"))
    outcome = run_case(found, RunConfig(backend="ssa", stochastic_runs=100))
    assert outcome.status == "skip" and outcome.skipped_as == "not_time_course"


@needs_stochastic
def test_a_wrong_simulator_fails(monkeypatch):
    """A mean 1 % off must be caught: the criteria have teeth."""
    import sbmlgpu.api

    real_run = sbmlgpu.api.run

    def biased(network, **kwargs):
        result = real_run(network, **kwargs)
        result.summary.mean[1:] *= 1.01
        return result

    monkeypatch.setattr(sbmlgpu.api, "run", biased)
    (case,) = find_cases(STOCHASTIC / "00001")
    outcome = run_case(case, RunConfig(backend="ssa", stochastic_runs=2000, seed=1))
    assert outcome.status == "fail" and "Z" in outcome.message


@needs_stochastic
@fast
def test_command_line_closes_with_the_counts(capsys, tmp_path):
    _with_a_refused_case(tmp_path)
    status = main([str(tmp_path), "--backend", "ssa", "--stochastic-runs", "2000",
                   "--cases", "1,41"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("00001 ")
    assert lines[1].startswith("00041 skipped:")
    assert lines[-1] in ("1 passed, 0 failed, 1 skipped (1 refused feature)",
                         "0 passed, 1 failed, 1 skipped (1 refused feature)")
    assert status in (0, 1)
