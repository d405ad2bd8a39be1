"""The interval backend on the CPU path (the kernel built for the host): enclosures are
guaranteed, SIVIA never excludes the truth, its verdicts hold up against point
simulations, budgets lose nothing, bad input is refused by name."""

from __future__ import annotations

import csv

import numpy as np
import pytest

import sbmlgpu
from sbmlgpu import cli
from sbmlgpu.codegen.compile_check import nvcc_available, nvcc_compile
from sbmlgpu.errors import OptionError, UnsupportedModelError
from sbmlgpu.plugins.interval.backend import IntervalBackend
from sbmlgpu.plugins.interval.kernels import interval_source
from sbmlgpu.plugins.interval.model import IntervalModel
from sbmlgpu.sbml.load import load
from sbmlgpu.views.ode import ode_system

from tests.interval_fixtures import LV, SEIR, solve, worst_margin, write_data
from tests.sbml_strings import math_apply, model, parameter, reaction, species

RNG = np.random.default_rng(20261124)
KA = math_apply("times", "<ci>k</ci><ci>A</ci>")  # the rate law k * A
#: the point solver's error is far below this; the enclosures are compared with it
SLACK = 1e-7


def program(path, **options):
    return IntervalBackend().compile(load(path), options or None)


def random_boxes(centre: dict, relative: float, count: int):
    """`count` boxes around `centre` with random relative half-widths up to `relative`."""
    ids = tuple(centre)
    mid = np.array([centre[i] for i in ids])
    half = np.abs(mid) * relative * RNG.random((count, len(ids)))
    shift = (RNG.random((count, len(ids))) - 0.5) * np.abs(mid) * relative
    return ids, mid + shift - half, mid + shift + half


def points_in(lower, upper, per_box: int):
    """per_box points in each box: its corners first, then uniform samples."""
    b, k = lower.shape
    u = RNG.random((b, per_box, k))
    corners = np.array(np.meshgrid(*[[0.0, 1.0]] * k)).reshape(k, -1).T
    u[:, :len(corners)] = corners[:per_box]
    return lower[:, None, :] + u * (upper - lower)[:, None, :]


@pytest.mark.parametrize("name, path, centre, relative", [
    ("lv", LV, {"p2": 0.01, "p4": 0.02}, 0.02),
    ("seir", SEIR, {"p2": 0.1, "p3": 0.4, "x1": 700.0}, 0.05),
])
def test_ten_thousand_point_solutions_lie_inside_the_enclosures(name, path, centre, relative):
    """5,000 per model (10^4 together): 20 random boxes of unknowns (SEIR: an initial
    value too), 250 points each (corners included), solved by DOP853 at rtol 1e-12."""
    times = np.linspace(0.0, 0.7 if name == "lv" else 5.0, 15)
    ids, lower, upper = random_boxes(centre, relative, 20)
    boxes = program(path).enclose(ids, lower, upper, times)
    assert np.all(np.isfinite(boxes)), "an enclosure was lost on these short runs"
    points = points_in(lower, upper, 250).reshape(-1, len(ids))
    y = solve(name, times, **{sid: points[:, j] for j, sid in enumerate(ids)})
    y = y.reshape(20, 250, len(times), -1)
    lo, hi = boxes[:, None, ..., 0], boxes[:, None, ..., 1]
    scale = SLACK * (1.0 + np.abs(y))
    assert np.all(y >= lo - scale) and np.all(y <= hi + scale)
    # ... and the check can fail: enclosures 5 % narrower on each side miss points
    width = hi - lo
    assert np.any((y < lo + 0.05 * width) | (y > hi - 0.05 * width))


def test_enclosures_are_tight_on_small_boxes():
    """Lohner's form: on LV with unknowns known to 1e-4, the enclosure at t = 0.7 is
    within 15 % of the spread of the solutions (a plain interval Taylor method wraps)."""
    times = np.linspace(0.0, 0.7, 8)
    lower, upper = np.array([[0.0099, 0.0199]]), np.array([[0.0101, 0.0201]])
    box = program(LV).enclose(("p2", "p4"), lower, upper, times)[0, -1]
    corners = points_in(lower, upper, 4)[0]
    y = solve("lv", times, p2=corners[:, 0], p4=corners[:, 1])[:, -1]
    spread = y.max(axis=0) - y.min(axis=0)
    assert np.all(box[:, 1] - box[:, 0] <= 1.15 * spread)


@pytest.fixture(scope="module")
def lv_paving(tmp_path_factory):
    data = write_data(tmp_path_factory.mktemp("lv") / "lv.csv", "lv",
                      np.linspace(0.02, 0.5, 25), {"x1": 4.0}, p2=0.01, p4=0.02)
    paving = sbmlgpu.estimate(str(LV), "interval", data=str(data),
                              unknown={"p2": (-0.2, 0.2), "p4": (-0.2, 0.2)}, epsilon=2e-3,
                              progress=False)
    return data, paving


def test_the_true_parameters_are_never_excluded(lv_paving, tmp_path):
    data, paving = lv_paving
    assert paving.contains([0.01, 0.02]) != "rejected"
    # other truths, their own data
    for p2, p4 in RNG.uniform([0.005, 0.015], [0.015, 0.025], (3, 2)):
        path = write_data(tmp_path / f"lv_{p2:.4f}.csv", "lv", np.linspace(0.05, 0.5, 10),
                          {"x1": 1.5}, p2=p2, p4=p4)
        found = sbmlgpu.estimate(str(LV), "interval", data=str(path),
                                 unknown={"p2": (-0.2, 0.2), "p4": (-0.2, 0.2)},
                                 epsilon=5e-3, progress=False)
        assert found.contains([p2, p4]) != "rejected", (p2, p4)


def test_rejected_points_violate_the_data_and_feasible_points_fit_it(lv_paving):
    data, paving = lv_paving
    points = RNG.uniform(-0.05, 0.05, (400, 2)) + [0.01, 0.02]
    verdict = np.array([paving.contains(p) for p in points])
    rejected = points[verdict == "rejected"]
    assert len(rejected) > 50
    margin = worst_margin("lv", data, {"p2": rejected[:, 0], "p4": rejected[:, 1]})
    assert np.all(margin < SLACK), "a rejected point fits the data"
    lo, hi = paving.boxes("feasible")
    assert len(lo) > 0, "the paving has no feasible box to check"
    inside = points_in(lo, hi, 4).reshape(-1, 2)
    margin = worst_margin("lv", data, {"p2": inside[:, 0], "p4": inside[:, 1]})
    assert np.all(margin > -SLACK), "a point of a feasible box leaves the data"


def test_the_paving_accounts_for_the_whole_search_box(lv_paving):
    _, paving = lv_paving
    s = paving.statistics
    assert s["complete"] and s["boxes_left_in_queue"] == 0
    assert s["boxes_evaluated"] == (s["boxes_feasible"] + s["boxes_rejected"]
                                    + s["boxes_bisected"] + s["boxes_undetermined"])
    volumes = paving.volumes
    assert volumes["rejected"] == pytest.approx(s["volume_rejected_proved"], rel=1e-9)
    assert np.all(paving.upper - paving.lower >= 0)
    undetermined_lo, undetermined_hi = paving.boxes("undetermined")
    assert np.all(undetermined_hi - undetermined_lo <= 2e-3 + 1e-15)


def test_a_box_budget_stops_with_nothing_lost(lv_paving):
    data, _ = lv_paving
    paving = sbmlgpu.estimate(str(LV), "interval", data=str(data),
                              unknown={"p2": (-0.2, 0.2), "p4": (-0.2, 0.2)}, epsilon=2e-3,
                              options={"max_boxes": 40, "batch": 16}, progress=False)
    s = paving.statistics
    assert not s["complete"] and s["stopped_by"].startswith("max-boxes")
    assert 0 < s["boxes_evaluated"] <= 40 and s["boxes_left_in_queue"] > 0
    assert paving.volumes["rejected"] == pytest.approx(s["volume_rejected_proved"], rel=1e-9)
    assert paving.contains([0.01, 0.02]) != "rejected"


def test_initial_intervals_widen_the_enclosures(tmp_path):
    times = np.linspace(0.0, 2.0, 5)
    prog = program(SEIR)
    narrow = prog.enclose(("p2",), [[0.1]], [[0.1]], times)
    data = write_data(tmp_path / "seir.csv", "seir", times[1:], {"x1": 5.0, "x3": 5.0})
    wide = sbmlgpu.estimate(str(SEIR), "interval", data=str(data),
                            unknown={"p2": (0.05, 0.15)}, initial={"x1": (690.0, 710.0)},
                            epsilon=1e-2, progress=False)
    assert np.all(narrow[0, 1:, :, 1] - narrow[0, 1:, :, 0] < 1e-6)
    assert wide.contains([0.1]) != "rejected"
    assert wide.metadata["initial_intervals"] == {"x1": [690.0, 710.0]}


def test_cli_writes_the_paving_and_its_summary(tmp_path, capsys):
    data = write_data(tmp_path / "lv.csv", "lv", np.linspace(0.1, 0.5, 5), {"x1": 1.5},
                      p2=0.01, p4=0.02)
    out = tmp_path / "out"
    code = cli.main(["estimate", str(LV), "--data", str(data), "--unknown", "p2=-0.1:0.1",
                     "--unknown", "p4=-0.1:0.1", "--epsilon", "0.01", "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    rows = list(csv.DictReader(open(out / "lotka_volterra.paving.csv", encoding="utf-8")))
    assert rows and set(rows[0]) == {"verdict", "p2_lower", "p2_upper", "p4_lower",
                                     "p4_upper"}
    summary = dict(csv.reader(open(out / "lotka_volterra.paving.summary.csv",
                                   encoding="utf-8")))
    assert float(summary["boxes_evaluated"]) > 0 and summary["complete"] == "True"


def test_cli_exits_1_and_says_so_when_every_box_failed_its_integration(tmp_path, capsys):
    """A measurement at t = 1e9: no box's enclosure gets there within --max-steps, so
    nothing is decided. The command said nothing and exited 0 (a bad-input audit)."""
    data = tmp_path / "far.csv"
    data.write_text("time,id,lower,upper\n1e9,x1,0,1\n")
    code = cli.main(["estimate", str(LV), "--data", str(data), "--unknown", "p1=0.5:1.5",
                     "--epsilon", "0.1", "--cpu", "--no-progress", "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "every one of the" in err and "nothing was decided" in err
    summary = dict(csv.reader(open(tmp_path / "out" / "lotka_volterra.paving.summary.csv",
                                   encoding="utf-8")))
    assert summary["boxes_integration_failed"] == summary["boxes_evaluated"] != "0"


# -- bad input ----------------------------------------------------------------------
def lv_estimate(tmp_path, **overrides):
    data = write_data(tmp_path / "d.csv", "lv", [0.1, 0.2], {"x1": 1.5})
    settings = {"data": str(data), "unknown": {"p2": (-1.0, 1.0)}, "epsilon": 0.1,
                "progress": False, **overrides}
    return sbmlgpu.estimate(str(LV), "interval", **settings)


@pytest.mark.parametrize("overrides, option, words", [
    ({"unknown": {"nope": (0.0, 1.0)}}, "unknown", "nope"),
    ({"unknown": {"p2": (1.0, -1.0)}}, "unknown", "p2"),
    ({"unknown": {"p2": (0.0, float("inf"))}}, "unknown", "finite"),
    ({"epsilon": 0.0}, "epsilon", "positive"),
    ({"epsilon": -1.0}, "epsilon", "minimum"),
    ({"initial": {"x1": (60.0, 40.0)}}, "initial", "x1"),
])
def test_bad_estimation_input_is_an_option_error_naming_it(tmp_path, overrides, option, words):
    with pytest.raises(OptionError, match=words) as error:
        lv_estimate(tmp_path, **overrides)
    assert error.value.option == option


def test_a_max_step_that_cannot_reach_the_last_time_is_refused(tmp_path):
    """--max-step 1e-300 held the search for good (every box stepping a million times,
    past --time-limit, which is read between work items; a bad-input audit): a step
    under which --max-steps cannot reach the last data time is an OptionError."""
    with pytest.raises(OptionError, match=r"1e-300 would take --max-steps "
                                          r"\(1,000,000\) steps or more to reach the last "
                                          r"time, 0.2"
                       ) as error:
        lv_estimate(tmp_path, options={"max_step": 1e-300})
    assert error.value.option == "max-step"
    with pytest.raises(OptionError, match="max-step"):  # enclose() too
        from sbmlgpu.plugins.interval.options import IntervalOptions

        IntervalBackend().compile(load(LV), IntervalOptions.from_mapping(
            {"max_step": 1e-9, "max_steps": 1000})).enclose(["p2"], [[0.0]], [[0.1]], [1.0])
    # at the boundary: 1,000 steps of 0.0002 land on 0.2 at the 1,000th, past the limit
    with pytest.raises(OptionError, match="max-step"):
        lv_estimate(tmp_path, options={"max_step": 0.2 / 1000, "max_steps": 1000})
    # a step that the limit allows is still taken: no box fails its integration that
    # fails without the limit (the wide boxes' a-priori enclosures fail either way)
    limited = lv_estimate(tmp_path, options={"max_step": 0.2 / 500, "max_steps": 1000})
    free = lv_estimate(tmp_path, options={"max_step": 0.2 / 500, "max_steps": 100_000})
    assert limited.statistics["boxes_evaluated"] == free.statistics["boxes_evaluated"] > 0
    assert (limited.statistics["boxes_integration_failed"]
            == free.statistics["boxes_integration_failed"])


def test_data_for_an_id_the_model_lacks_is_refused(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("time,id,lower,upper\n0.1,x9,0,1\n", encoding="utf-8")
    with pytest.raises(OptionError, match="x9") as error:
        lv_estimate(tmp_path, data=str(path))
    assert error.value.option == "data"


def test_an_unknown_set_by_a_rule_is_refused(tmp_path):
    text = model(species("A", 10.0), parameter("k", 1.0) + parameter("k2", 2.0, constant=False),
                 reaction("r", ["A"], [], KA),
                 rules='<assignmentRule variable="k2"><math xmlns="http://www.w3.org/1998/'
                       'Math/MathML"><apply><times/><cn>2</cn><ci>k</ci></apply></math>'
                       '</assignmentRule>')
    path = tmp_path / "rule.xml"
    path.write_text(text, encoding="utf-8")
    data = tmp_path / "d.csv"
    data.write_text("time,id,lower,upper\n0.5,A,0,100\n", encoding="utf-8")
    with pytest.raises(OptionError, match="k2.*rule") as error:
        sbmlgpu.estimate(str(path), "interval", data=str(data), unknown={"k2": (0.0, 1.0)},
                         epsilon=0.1, progress=False)
    assert error.value.option == "unknown"


@pytest.mark.parametrize("law, feature", [
    ("piecewise", "piecewise"),
    ("abs", "abs()"),
])
def test_rates_without_a_taylor_expansion_are_refused_by_state(tmp_path, law, feature):
    math = {"piecewise": "<piecewise><piece><ci>k</ci><apply><gt/><ci>A</ci><cn>1</cn>"
                         "</apply></piece><otherwise><cn>0</cn></otherwise></piecewise>",
            "abs": "<apply><abs/><apply><minus/><ci>A</ci><cn>5</cn></apply></apply>"}[law]
    text = model(species("A", 10.0), parameter("k", 1.0), reaction("r", ["A"], [], math))
    path = tmp_path / f"{law}.xml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UnsupportedModelError, match=feature.rstrip("()")) as error:
        IntervalBackend().compile(load(path), None)
    assert any("A" in ids for ids in error.value.features.values())


def test_events_are_refused_by_id(tmp_path):
    event = ('<event id="kick" useValuesFromTriggerTime="true"><trigger initialValue="false" '
             'persistent="true"><math xmlns="http://www.w3.org/1998/Math/MathML"><apply><gt/>'
             '<csymbol encoding="text" definitionURL="http://www.sbml.org/sbml/symbols/time">'
             't</csymbol><cn>1</cn></apply></math></trigger><listOfEventAssignments>'
             '<eventAssignment variable="A"><math xmlns="http://www.w3.org/1998/Math/MathML">'
             '<cn>5</cn></math></eventAssignment></listOfEventAssignments></event>')
    text = model(species("A", 10.0), parameter("k", 1.0), reaction("r", ["A"], [], KA),
                 events=event)
    path = tmp_path / "event.xml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UnsupportedModelError, match="kick"):
        IntervalBackend().compile(load(path), None)


@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not installed")
@pytest.mark.parametrize("path, unknown, measured", [
    (LV, ("p2", "p4"), ("x1",)), (SEIR, ("p2", "p3", "p4"), ("x1", "x2", "x3", "x4"))])
def test_the_kernel_compiles_for_the_gpu(path, unknown, measured):
    m = IntervalModel.of(ode_system(load(path)), unknown, (), measured)
    source = interval_source(m, 6)
    assert "d x1 / d p2(0)" in source.text  # generated code names its SBML ids
    assert nvcc_compile(source.text, "sm_90", options=("--fmad=false",), name=source.name)
