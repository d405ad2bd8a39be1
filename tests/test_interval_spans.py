"""The interval kernel's work per box, on the CPU path: span checks (several data times
from one enclosure over their span) give the verdicts of the times checked alone, and
save enclosures; the predicted step rule keeps SIVIA sound; the persistent kernel's
cap on resident warps."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import sbmlgpu
from sbmlgpu.plugins.interval import persistent as P

from tests.interval_fixtures import LV, SEIR, write_data
from tests.test_interval_persistent import rows_of

COUNTED = ("boxes_evaluated", "boxes_feasible", "boxes_rejected", "boxes_bisected",
           "boxes_undetermined", "boxes_integration_failed", "taylor_steps")


def search(data, unknown, epsilon, **options):
    return sbmlgpu.estimate(str(data[0]), "interval", data=str(data[1]), unknown=unknown,
                            epsilon=epsilon, options=options, progress=False)


@pytest.fixture(scope="module")
def lv_dense(tmp_path_factory):
    """LV with 400 data times (many inside each step), searched near the truth: boxes
    that are well inside their data for most times and near its bounds for some."""
    path = write_data(tmp_path_factory.mktemp("lv") / "lv.csv", "lv",
                      np.linspace(0.002, 0.6, 400), {"x1": 1.5}, p2=0.01, p4=0.02)
    return LV, path


@pytest.fixture(scope="module")
def seir_dense(tmp_path_factory):
    """SEIR, four measured states at 300 times."""
    path = write_data(tmp_path_factory.mktemp("seir") / "seir.csv", "seir",
                      np.linspace(0.03, 9.0, 300), {s: 5.0 for s in ("x1", "x2", "x3", "x4")},
                      p2=0.1, p3=0.4)
    return SEIR, path


#: unknowns, epsilon, and the share of the enclosures that spans leave at most (on
#: SEIR the boxes near the truth sit near a bound of some output at most times: spans
#: save little there)
CASES = {"lv": ({"p2": (0.008, 0.012), "p4": (0.018, 0.022)}, 2e-4, 0.6),
         "seir": ({"p2": (0.08, 0.12), "p3": (0.38, 0.42)}, 2e-3, 0.98)}


@pytest.mark.parametrize("name", ["lv", "seir"])
def test_span_checks_give_the_paving_of_single_times(name, request):
    """The same boxes, verdicts, counts and steps with spans of up to 256 times as with
    every time checked alone, with fewer enclosures evaluated: the spans were used."""
    data = request.getfixturevalue(f"{name}_dense")
    unknown, epsilon, share = CASES[name]
    alone = search(data, unknown, epsilon, span=0)
    spans = search(data, unknown, epsilon, span=256)
    assert alone.statistics["boxes_feasible"] > 0  # boxes that are inside at every time
    assert np.array_equal(rows_of(spans), rows_of(alone))
    for key in COUNTED:
        assert spans.statistics[key] == alone.statistics[key], key
    assert 0 < spans.statistics["data_enclosures"] < share * alone.statistics["data_enclosures"]


@pytest.mark.parametrize("rule", ["doubling", "predicted"])
def test_both_step_rules_keep_the_truth(lv_dense, rule):
    """Each rule proves every step it takes; neither rejects the parameters the data
    were made with, and both account for the whole search box."""
    unknown, epsilon, _ = CASES["lv"]
    paving = search(lv_dense, unknown, epsilon, step_rule=rule)
    assert paving.contains([0.01, 0.02]) != "rejected"
    s = paving.statistics
    assert s["boxes_evaluated"] == s["boxes_feasible"] + s["boxes_rejected"] \
        + s["boxes_bisected"] + s["boxes_undetermined"]
    assert paving.volumes["rejected"] == pytest.approx(s["volume_rejected_proved"],
                                                       rel=1e-9)


def test_the_predicted_rule_takes_fewer_steps(lv_dense):
    """Its steps follow the remainder's measured growth: fewer Taylor steps per box
    than doubling and halving on the same search (the measured cause of the rule)."""
    unknown, epsilon, _ = CASES["lv"]
    doubling = search(lv_dense, unknown, epsilon, step_rule="doubling")
    predicted = search(lv_dense, unknown, epsilon, step_rule="predicted")
    def per_box(paving):
        return paving.statistics["taylor_steps"] / paving.statistics["boxes_evaluated"]

    assert per_box(predicted) < per_box(doubling)


def test_resident_warps_can_be_capped():
    props = SimpleNamespace(max_threads_per_sm=2048, registers_per_sm=65536)
    regs = SimpleNamespace(registers=64)
    assert P.resident_blocks(props, regs, 64) == 16  # registers: 32 warps
    assert P.resident_blocks(props, regs, 64, warps_per_sm=4) == 2
    assert P.resident_blocks(props, regs, 64, warps_per_sm=64) == 16  # no more than fit
    assert P.resident_blocks(props, regs, 128, warps_per_sm=2) == 1  # never none


def test_the_span_default_is_the_engines():
    """--span -1: spans on the host, each time alone on a GPU (where they did not pay);
    a span given is taken on either."""
    from sbmlgpu.plugins.interval.options import IntervalOptions
    from sbmlgpu.plugins.interval.program import GPU_SPAN, HOST_SPAN, _limits
    assert IntervalOptions().span == -1
    assert _limits(IntervalOptions()).span == HOST_SPAN == 256
    assert _limits(IntervalOptions(), gpu=True).span == GPU_SPAN == 0
    assert _limits(IntervalOptions(span=16), gpu=True).span == 16
