"""SED-ML semantics through `run_omex` on archives built here: repeated tasks and
parameter scans (one ensemble, the same numbers as separate runs), model changes,
derived models, steady states, the KiSAO map and its substitution warning, plots."""

from __future__ import annotations

import csv
import logging

import h5py
import numpy as np
import pytest

# the GPU machine may lack them (no cp312 wheels carried): skip there, saying so, rather
# than fail the whole run's collection
pytest.importorskip("libcombine", reason="python-libcombine is not installed")
libsedml = pytest.importorskip("libsedml", reason="python-libsedml is not installed")

import sbmlgpu.api  # noqa: E402
from sbmlgpu.combine import run_omex  # noqa: E402
from sbmlgpu.errors import UnsupportedModelError  # noqa: E402

from .combine_build import (BIRTH_DEATH, add_generator, add_model, add_plot,  # noqa: E402
                            add_repeated, add_report, add_set_value, add_task, add_time_course, birth_death_x,
                            new_document, pack, simple_document, target)

TIMES = np.linspace(0, 5, 51)


def report(outdir, path="simulation.sedml/report"):
    with h5py.File(outdir / "reports.h5") as h5:
        return h5[path][:], dict(h5[path].attrs)


@pytest.fixture
def runs(monkeypatch):
    """Every sbmlgpu.run call the archive makes: (backend, members, parameters)."""
    calls = []
    real = sbmlgpu.api.run

    def counting(model, backend="reference", **kw):
        parameters = kw.get("parameters")
        calls.append((backend, {k: np.asarray(v).copy() for k, v in (parameters or {}).items()}))
        return real(model, backend, **kw)
    monkeypatch.setattr(sbmlgpu.api, "run", counting)
    return calls


def add_scan(doc, values_k1, *, vector_k2=None, task="task"):
    """repeatedTask `scan` over k1 (a vector range `r`) and, optionally, k2 (`v`, with a
    functional range over `r` too), one sub-task, generators sX and sT."""
    rt = add_repeated(doc, "scan", values_k1, (task,))
    add_set_value(rt, "parameter", "k1", "r", "r")
    if vector_k2 is not None:
        f = rt.createFunctionalRange()
        f.setId("f")
        f.setRange("r")
        p = f.createParameter()
        p.setId("scale")
        p.setValue(2.0)
        f.setMath(libsedml.parseL3Formula("scale * r"))
        v = rt.createVectorRange()
        v.setId("v")
        v.setValues(list(vector_k2))
        add_set_value(rt, "parameter", "k2", "v", "v + f - 2 * r")  # = v (f = 2 r)
    add_generator(doc, "sX", "scan", {"x": ("species", "X")}, "x")
    add_generator(doc, "sT", "scan", {"t": ("symbol", "")}, "t")
    add_report(doc, "scan_report", ["sT", "sX"])


def test_time_course_matches_the_closed_form(tmp_path):
    archive = pack(tmp_path / "a.omex", simple_document())
    run_omex(archive, tmp_path / "out", device="cpu")
    data, attrs = report(tmp_path / "out")
    np.testing.assert_allclose(data[0], TIMES)
    np.testing.assert_allclose(data[1], birth_death_x(TIMES), rtol=1e-5)
    assert list(attrs["sedmlDataSetShapes"]) == ["51", "51"]
    assert list(attrs["sedmlDataSetDataTypes"]) == ["float64", "float64"]
    assert attrs["_type"] == "SedReport" and attrs["uri"] == "simulation.sedml/report"


def test_parameter_scan_is_one_ensemble_with_the_numbers_of_separate_runs(tmp_path, runs):
    k1 = [0.2, 0.5, 1.3]
    k2 = [1.0, 3.0, 0.5]
    doc = simple_document()
    add_scan(doc, k1, vector_k2=k2)
    run_omex(pack(tmp_path / "scan.omex", doc), tmp_path / "out", device="cpu")
    data, attrs = report(tmp_path / "out", "simulation.sedml/scan_report")
    # rows (time, X), each (iterations, sub-tasks, times): BioSimulators' layout
    assert data.shape == (2, 3, 1, 51)
    assert list(attrs["sedmlDataSetShapes"]) == ["3,1,51", "3,1,51"]
    scans = [c for c in runs if c[1]]
    assert len(scans) == 1, "the repeated task must run as one ensemble, not a loop"
    np.testing.assert_array_equal(scans[0][1]["k1"], k1)
    np.testing.assert_array_equal(scans[0][1]["k2"], k2)

    for i, (a, b) in enumerate(zip(k1, k2)):  # separate runs, each with changed values
        doc = simple_document()
        for sbml_id, value in (("k1", a), ("k2", b)):
            change = doc.getModel("m").createChangeAttribute()
            change.setTarget(target("parameter", sbml_id) + "/@value")
            change.setNewValue(repr(value))
        run_omex(pack(tmp_path / f"single{i}.omex", doc), tmp_path / f"single{i}",
                 device="cpu")
        single, _ = report(tmp_path / f"single{i}")
        np.testing.assert_allclose(data[1, i, 0], single[1], rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(data[1, i, 0], birth_death_x(TIMES, k1=a, k2=b),
                                   rtol=1e-5)
        np.testing.assert_array_equal(data[0, i, 0], TIMES)
    with open(tmp_path / "out" / "simulation.sedml" / "scan_report.csv", newline="") as f:
        rows = {r[0]: np.array(r[1:], dtype=float) for r in csv.reader(f)}
    assert len(rows) == 2 * 3  # a row per data set and iteration
    np.testing.assert_array_equal(rows["sX[1,0]"], data[1, 1, 0])


def test_uniform_range_and_two_sub_tasks_pad_with_nan(tmp_path):
    doc = simple_document()
    short = doc.createUniformTimeCourse()
    short.setId("short")
    short.setInitialTime(0)
    short.setOutputStartTime(0)
    short.setOutputEndTime(2)
    short.setNumberOfSteps(20)
    short.createAlgorithm().setKisaoID("KISAO_0000019")
    add_task(doc, "task_short", "m", "short")
    rt = doc.createRepeatedTask()
    rt.setId("scan")
    rt.setRangeId("r")
    rt.setResetModel(True)
    r = rt.createUniformRange()
    r.setId("r")
    r.setStart(1)
    r.setEnd(100)
    r.setNumberOfSteps(2)
    r.setType("log")
    add_set_value(rt, "species", "X", "r", "r")
    for order, task in ((2, "task_short"), (1, "task")):
        st = rt.createSubTask()
        st.setTask(task)
        st.setOrder(order)
    add_generator(doc, "sX", "scan", {"x": ("species", "X")}, "x")
    add_report(doc, "scan_report", ["sX"])
    run_omex(pack(tmp_path / "a.omex", doc), tmp_path / "out", device="cpu")
    data, _ = report(tmp_path / "out", "simulation.sedml/scan_report")
    assert data.shape == (1, 3, 2, 51)
    for i, x0 in enumerate([1.0, 10.0, 100.0]):  # log range: 1, 10, 100
        np.testing.assert_allclose(data[0, i, 0], birth_death_x(TIMES, x0=x0), rtol=1e-5)
        np.testing.assert_allclose(data[0, i, 1, :21], birth_death_x(TIMES[:21], x0=x0),
                                   rtol=1e-5)
        assert np.isnan(data[0, i, 1, 21:]).all()  # the shorter sub-task, padded


def test_model_changes_and_a_derived_model(tmp_path):
    doc = new_document()
    base = add_model(doc, "m", "model.xml")
    change = base.createChangeAttribute()  # a species' initial value: X0 = 4
    change.setTarget(target("species", "X") + "/@initialConcentration")
    change.setNewValue("4")
    derived = add_model(doc, "d", "#m")  # starts from m's text, changes included
    compute = derived.createComputeChange()  # k1 = 2 * k2 (k2 = 2 in the model) = 4
    compute.setTarget(target("parameter", "k1"))
    v = compute.createVariable()
    v.setId("k2v")
    v.setModelReference("d")
    v.setTarget(target("parameter", "k2"))
    p = compute.createParameter()
    p.setId("two")
    p.setValue(2)
    compute.setMath(libsedml.parseL3Formula("two * k2v"))
    add_xml = derived.createAddXML()  # a new parameter, then a rule that uses it
    add_xml.setTarget("/sbml:sbml/sbml:model/sbml:listOfParameters")
    add_xml.setNewXML(libsedml.XMLNode.convertStringToXMLNode(
        '<parameter id="k3" value="7" constant="false"/>'))
    change_xml = derived.createChangeXML()  # k2 replaced: 2 -> 3
    change_xml.setTarget(target("parameter", "k2"))
    change_xml.setNewXML(libsedml.XMLNode.convertStringToXMLNode(
        '<parameter id="k2" value="3" constant="true"/>'))
    add_time_course(doc, "sim", 0, 5, 50)
    add_task(doc, "t_m", "m", "sim")
    add_task(doc, "t_d", "d", "sim")
    add_generator(doc, "Xm", "t_m", {"x": ("species", "X")}, "x")
    add_generator(doc, "Xd", "t_d", {"x": ("species", "X")}, "x")
    add_generator(doc, "k3", "t_d", {"k": ("parameter", "k3")}, "k")
    add_generator(doc, "amount", "t_m", {"x": ("species", "X"),
                                         "c": ("compartment", "cell")}, "x * c")
    add_report(doc, "report", ["Xm", "Xd", "k3", "amount"])
    run_omex(pack(tmp_path / "a.omex", doc), tmp_path / "out", device="cpu")
    data, _ = report(tmp_path / "out")
    np.testing.assert_allclose(data[0], birth_death_x(TIMES, x0=4), rtol=1e-5)
    np.testing.assert_allclose(data[1], birth_death_x(TIMES, x0=4, k1=4, k2=3), rtol=1e-5)
    np.testing.assert_allclose(data[2], 7.0)
    np.testing.assert_allclose(data[3], 2 * data[0], rtol=1e-12)  # compartment size 2


def test_remove_xml(tmp_path):
    doc = simple_document()
    remove = doc.getModel("m").createRemoveXML()  # no birth: X decays to 0
    remove.setTarget("/sbml:sbml/sbml:model/sbml:listOfReactions/sbml:reaction[@id='birth']")
    run_omex(pack(tmp_path / "a.omex", doc), tmp_path / "out", device="cpu")
    data, _ = report(tmp_path / "out")
    np.testing.assert_allclose(data[1], birth_death_x(TIMES, k2=0.0), rtol=1e-5)


def steady_document(kisao="KISAO_0000407"):
    doc = new_document()
    add_model(doc, "m", "model.xml")
    s = doc.createSteadyState()
    s.setId("ss")
    s.createAlgorithm().setKisaoID(kisao)
    add_task(doc, "task", "m", "ss")
    add_generator(doc, "gX", "task", {"x": ("species", "X")}, "x")
    add_report(doc, "report", ["gX"])
    return doc


def test_steady_state_and_a_steady_state_scan(tmp_path):
    doc = steady_document()
    add_scan(doc, [0.25, 1.0, 4.0])
    # the scan's report holds X only (a steady state has no time)
    doc.getOutput("scan_report").removeDataSet(0)
    run_omex(pack(tmp_path / "a.omex", doc), tmp_path / "out", device="cpu")
    data, attrs = report(tmp_path / "out")
    assert data.shape == (1,) and list(attrs["sedmlDataSetShapes"]) == [""]
    np.testing.assert_allclose(data[0], 2.0 / 0.5, rtol=1e-5)  # k2 / k1
    scan, _ = report(tmp_path / "out", "simulation.sedml/scan_report")
    np.testing.assert_allclose(scan[0, :, 0], 2.0 / np.array([0.25, 1.0, 4.0]), rtol=1e-5)


def test_kisao_substitution_warns_and_policy_none_refuses(tmp_path, caplog):
    archive = pack(tmp_path / "a.omex", simple_document(kisao="KISAO_0000352"))
    with caplog.at_level(logging.WARNING, logger="sbmlgpu"):
        run_omex(archive, tmp_path / "out", device="cpu")
    warned = [r.getMessage() for r in caplog.records if "KISAO_0000352" in r.getMessage()]
    assert warned and "ode" in warned[0] and "SIMILAR_APPROXIMATIONS" in warned[0]
    data, _ = report(tmp_path / "out")  # and it ran, deterministically
    np.testing.assert_allclose(data[1], birth_death_x(TIMES), rtol=1e-5)
    with pytest.raises(UnsupportedModelError, match="KISAO_0000352"):
        run_omex(archive, tmp_path / "out2", device="cpu", algorithm_substitution="NONE")


def test_kisao_map_chooses_the_backend(tmp_path, runs):
    run_omex(pack(tmp_path / "a.omex", simple_document(kisao="KISAO_0000088")),
             tmp_path / "ode", device="cpu")  # LSODA
    assert runs[-1][0] == "ode"
    doc = simple_document(kisao="KISAO_0000029")  # Gillespie direct
    run_omex(pack(tmp_path / "b.omex", doc, BIRTH_DEATH.replace('initialConcentration="10"',
                                                                 'initialAmount="20"')),
             tmp_path / "ssa", device="cpu")
    assert runs[-1][0] == "ssa"
    data, _ = report(tmp_path / "ssa")
    amounts = data[1] * 2  # one realisation: whole molecule counts in a compartment of 2
    np.testing.assert_allclose(amounts, np.round(amounts), atol=1e-9)
    run_omex(pack(tmp_path / "a.omex", simple_document(kisao="KISAO_0000029")),
             tmp_path / "named", device="cpu", backend="reference")
    assert runs[-1][0] == "reference"  # --backend overrides the algorithm


def test_plot2d_is_drawn(tmp_path):
    doc = simple_document()
    add_plot(doc, "plot", ("time", "gX"))
    outcome = run_omex(pack(tmp_path / "a.omex", doc), tmp_path / "out", device="cpu")
    png = tmp_path / "out" / "simulation.sedml" / "plot.png"
    assert png in outcome.files and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    data, attrs = report(tmp_path / "out", "simulation.sedml/plot")
    assert attrs["_type"] == "SedPlot2D" and list(attrs["sedmlDataSetIds"]) == ["time", "gX"]
    np.testing.assert_allclose(data[1], birth_death_x(TIMES), rtol=1e-5)


def test_master_file_runs_first_and_sources_resolve_beside_the_sedml(tmp_path):
    from .combine_build import SBML_FORMAT, SEDML_FORMAT, sedml_text, write_archive

    first = simple_document()
    second = simple_document()
    second.getModel("m").setSource("../model.xml")  # relative to sub/second.sedml
    step = second.createOneStep()
    step.setId("one")
    step.setStep(1.0)
    step.createAlgorithm().setKisaoID("KISAO_0000019")
    add_task(second, "t_one", "m", "one")
    add_generator(second, "oneX", "t_one", {"x": ("species", "X")}, "x")
    add_report(second, "one_report", ["oneX"])
    archive = write_archive(tmp_path / "a.omex", {
        "model.xml": (BIRTH_DEATH, SBML_FORMAT),
        "first.sedml": (sedml_text(first), SEDML_FORMAT),
        "sub/second.sedml": (sedml_text(second), SEDML_FORMAT)}, master="sub/second.sedml")
    outcome = run_omex(archive, tmp_path / "out", device="cpu")
    assert list(outcome.reports) == ["sub/second.sedml", "first.sedml"]
    one, attrs = report(tmp_path / "out", "sub/second.sedml/one_report")
    assert list(attrs["sedmlDataSetShapes"]) == ["2"]  # oneStep: start and end
    np.testing.assert_allclose(one[0], birth_death_x([0.0, 1.0]), rtol=1e-5)
    assert (tmp_path / "out" / "sub" / "second.sedml" / "report.csv").is_file()
    assert (tmp_path / "out" / "first.sedml" / "report.csv").is_file()


def test_plot3d_is_drawn(tmp_path):
    doc = simple_document()
    add_generator(doc, "gX2", "task", {"x": ("species", "X")}, "x ^ 2")
    add_plot(doc, "plot3", ("time", "gX", "gX2"))
    run_omex(pack(tmp_path / "a.omex", doc), tmp_path / "out", device="cpu")
    assert (tmp_path / "out" / "simulation.sedml" / "plot3.png").read_bytes()[:4] == b"\x89PNG"
    data, attrs = report(tmp_path / "out", "simulation.sedml/plot3")
    assert attrs["_type"] == "SedPlot3D"
    np.testing.assert_allclose(data[2], data[1] ** 2, rtol=1e-12)


def test_a_steady_state_never_reached_is_an_error_naming_the_task(tmp_path):
    from sbmlgpu.errors import SimulationError

    doc = steady_document()
    remove = doc.getModel("m").createRemoveXML()  # birth only: X grows without end
    remove.setTarget("/sbml:sbml/sbml:model/sbml:listOfReactions/sbml:reaction[@id='death']")
    with pytest.raises(SimulationError, match=r"task 'task'.*no steady state"):
        run_omex(pack(tmp_path / "a.omex", doc), tmp_path / "out", device="cpu")


def test_settle_finds_the_first_quiet_doubling():
    from sbmlgpu.ode_steady_state import TIMES, settle

    quiet = np.ones((1, len(TIMES), 1))
    quiet[0, :10, 0] = np.linspace(5, 1.5, 10)  # changes up to output time 10 (value 1)
    growing = TIMES.reshape(1, -1, 1) + 1.0
    first, settled = settle(np.concatenate([quiet, growing]), [0], 1e-6, 1e-9)
    # the first quiet doubling is [TIMES[10], TIMES[11]]: the state is the one at TIMES[11]
    assert settled.tolist() == [True, False] and first.tolist() == [11, -1]
