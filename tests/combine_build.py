"""Building SED-ML files and COMBINE archives in tests (libsedml, libcombine): a time
course of an SBML Test Suite case, reported as the case reports its variables."""

from __future__ import annotations

from pathlib import Path

import libcombine
import libsedml  # before libsbml (core/combine/libraries.py)
import libsbml

SBML_NS = "http://www.sbml.org/sbml/level3/version2/core"
TIME = "urn:sedml:symbol:time"
CVODE = "KISAO_0000019"
SEDML_FORMAT = "http://identifiers.org/combine.specifications/sed-ml"
SBML_FORMAT = "http://identifiers.org/combine.specifications/sbml"


def target(kind: str, sbml_id: str) -> str:
    lists = {"species": "listOfSpecies", "parameter": "listOfParameters",
             "compartment": "listOfCompartments"}
    return f"/sbml:sbml/sbml:model/sbml:{lists[kind]}/sbml:{kind}[@id='{sbml_id}']"


def new_document() -> libsedml.SedDocument:
    # through SedNamespaces, never the shared XMLNamespaces (core/combine/libraries.py)
    ns = libsedml.SedNamespaces(1, 4)
    ns.addNamespace(SBML_NS, "sbml")
    return libsedml.SedDocument(ns)


def add_model(doc, model_id: str, source: str):
    m = doc.createModel()
    m.setId(model_id)
    m.setSource(source)
    m.setLanguage("urn:sedml:language:sbml.level-3.version-2")
    return m


def add_time_course(doc, sim_id: str, start: float, end: float, steps: int,
                    kisao: str = CVODE, initial: float | None = None):
    s = doc.createUniformTimeCourse()
    s.setId(sim_id)
    s.setInitialTime(start if initial is None else initial)
    s.setOutputStartTime(start)
    s.setOutputEndTime(end)
    s.setNumberOfSteps(steps)
    s.createAlgorithm().setKisaoID(kisao)
    return s


def add_task(doc, task_id: str, model_id: str, sim_id: str):
    t = doc.createTask()
    t.setId(task_id)
    t.setModelReference(model_id)
    t.setSimulationReference(sim_id)
    return t


def add_generator(doc, gen_id: str, task_id: str, variables: dict[str, tuple[str, str]],
                  formula: str):
    """variables: {variable id: (kind, sbml id)}; kind 'symbol' for time."""
    g = doc.createDataGenerator()
    g.setId(gen_id)
    for var_id, (kind, sbml_id) in variables.items():
        v = g.createVariable()
        v.setId(var_id)
        v.setTaskReference(task_id)
        if kind == "symbol":
            v.setSymbol(TIME)
        else:
            v.setTarget(target(kind, sbml_id))
    g.setMath(libsedml.parseL3Formula(formula))
    return g


def add_report(doc, report_id: str, generators: list[str], labels: list[str] | None = None):
    r = doc.createReport()
    r.setId(report_id)
    for k, gen in enumerate(generators):
        d = r.createDataSet()
        d.setId(f"ds_{gen}")
        d.setLabel(labels[k] if labels else gen)
        d.setDataReference(gen)
    return r


def write_archive(path: Path, files: dict[str, tuple[str, str]], master: str | None = None
                  ) -> Path:
    """files: {location: (text, format)}."""
    archive = libcombine.CombineArchive()
    for location, (text, fmt) in files.items():
        assert archive.addFileFromString(text, location, fmt, location == master)
    assert archive.writeToFile(str(path))
    archive.cleanUp()
    return path


def sedml_text(doc) -> str:
    return libsedml.writeSedMLToString(doc)


def case_kinds(model_text: str) -> dict[str, tuple[str, bool, str]]:
    """{id: (kind, hasOnlySubstanceUnits, compartment)} of the model's elements."""
    m = libsbml.readSBMLFromString(model_text).getModel()
    out = {}
    for s in m.getListOfSpecies():
        out[s.getId()] = ("species", s.getHasOnlySubstanceUnits(), s.getCompartment())
    for p in m.getListOfParameters():
        out[p.getId()] = ("parameter", False, "")
    for c in m.getListOfCompartments():
        out[c.getId()] = ("compartment", False, "")
    return out


def suite_case_archive(case, path: Path, kisao: str = CVODE) -> tuple[Path, list[str]]:
    """An archive running `case` (core.testsuite Case) as its settings say, with a report
    `results` whose rows are time and the case's variables, each spelled as the case
    reports it (an amount of a species that is a concentration in SBML: S * C)."""
    settings = case.settings()
    model_text = case.model_path().read_text()
    kinds = case_kinds(model_text)
    doc = new_document()
    add_model(doc, "model", "model.xml")
    add_time_course(doc, "sim", settings.start, settings.start + settings.duration,
                    settings.steps, kisao)
    add_task(doc, "task", "model", "sim")
    add_generator(doc, "time", "task", {"t": ("symbol", "")}, "t")
    for v in settings.variables:
        kind, only_substance, compartment = kinds.get(v, ("parameter", False, ""))
        wanted = settings.output_kind(v)
        if kind == "species" and wanted == "amount" and not only_substance:
            add_generator(doc, f"g_{v}", "task", {"x": (kind, v), "c": ("compartment",
                                                                         compartment)},
                          "x * c")
        elif kind == "species" and wanted == "concentration" and only_substance:
            add_generator(doc, f"g_{v}", "task", {"x": (kind, v), "c": ("compartment",
                                                                         compartment)},
                          "x / c")
        else:
            add_generator(doc, f"g_{v}", "task", {"x": (kind, v)}, "x")
    add_report(doc, "results", ["time"] + [f"g_{v}" for v in settings.variables],
               ["time", *settings.variables])
    write_archive(path, {"model.xml": (model_text, SBML_FORMAT),
                         "simulation.sedml": (sedml_text(doc), SEDML_FORMAT)},
                  master="simulation.sedml")
    return path, list(settings.variables)


#: production and decay of X in a compartment of size 2: dX/dt = k2 - k1 X, so
#: X(t) = k2/k1 + (X0 - k2/k1) exp(-k1 t) and the steady state is k2/k1
BIRTH_DEATH = """<?xml version="1.0" encoding="UTF-8"?>
<sbml xmlns="http://www.sbml.org/sbml/level3/version2/core" level="3" version="2">
  <model id="birth_death">
    <listOfCompartments>
      <compartment id="cell" size="2" constant="true" spatialDimensions="3"/>
    </listOfCompartments>
    <listOfSpecies>
      <species id="X" compartment="cell" initialConcentration="10" hasOnlySubstanceUnits="false"
               boundaryCondition="false" constant="false"/>
    </listOfSpecies>
    <listOfParameters>
      <parameter id="k1" value="0.5" constant="true"/>
      <parameter id="k2" value="2" constant="true"/>
    </listOfParameters>
    <listOfReactions>
      <reaction id="birth" reversible="false">
        <listOfProducts>
          <speciesReference species="X" stoichiometry="1" constant="true"/>
        </listOfProducts>
        <kineticLaw><math xmlns="http://www.w3.org/1998/Math/MathML">
          <apply><times/><ci>k2</ci><ci>cell</ci></apply></math></kineticLaw>
      </reaction>
      <reaction id="death" reversible="false">
        <listOfReactants>
          <speciesReference species="X" stoichiometry="1" constant="true"/>
        </listOfReactants>
        <kineticLaw><math xmlns="http://www.w3.org/1998/Math/MathML">
          <apply><times/><ci>k1</ci><ci>X</ci><ci>cell</ci></apply></math></kineticLaw>
      </reaction>
    </listOfReactions>
  </model>
</sbml>
"""


def birth_death_x(t, x0=10.0, k1=0.5, k2=2.0):
    import numpy as np

    return k2 / k1 + (x0 - k2 / k1) * np.exp(-k1 * np.asarray(t, dtype=float))


def simple_document(end: float = 5.0, steps: int = 50, kisao: str = CVODE):
    """model `m` (model.xml), time course `sim`, task `task`, generators time and X,
    report `report`: the skeleton that tests add to."""
    doc = new_document()
    add_model(doc, "m", "model.xml")
    add_time_course(doc, "sim", 0.0, end, steps, kisao)
    add_task(doc, "task", "m", "sim")
    add_generator(doc, "time", "task", {"t": ("symbol", "")}, "t")
    add_generator(doc, "gX", "task", {"x": ("species", "X")}, "x")
    add_report(doc, "report", ["time", "gX"])
    return doc


def pack(path: Path, doc, model_text: str = BIRTH_DEATH, sedml: str = "simulation.sedml",
         extra: dict | None = None) -> Path:
    files = {"model.xml": (model_text, SBML_FORMAT), sedml: (sedml_text(doc), SEDML_FORMAT)}
    files.update(extra or {})
    return write_archive(path, files, master=sedml)


def add_set_value(repeated, kind: str, sbml_id: str, range_id: str, formula: str,
                  model: str = "m"):
    """A setValue of a repeated task: `sbml_id` = formula (over its ranges)."""
    sv = repeated.createTaskChange()
    sv.setModelReference(model)
    sv.setTarget(target(kind, sbml_id))
    sv.setRange(range_id)
    sv.setMath(libsedml.parseL3Formula(formula))
    return sv


def add_repeated(doc, task_id: str, values, sub_tasks=("task",), reset: bool = True):
    """A repeated task over a vector range `r` of `values`, its sub-tasks in order."""
    rt = doc.createRepeatedTask()
    rt.setId(task_id)
    rt.setRangeId("r")
    rt.setResetModel(reset)
    r = rt.createVectorRange()
    r.setId("r")
    r.setValues([float(v) for v in values])
    for order, sub in enumerate(sub_tasks, start=1):
        st = rt.createSubTask()
        st.setTask(sub)
        st.setOrder(order)
    return rt


def add_plot(doc, plot_id: str, refs: tuple[str, ...]):
    """A plot2D (x, y) or plot3D (x, y, z) with one curve or surface of these generators."""
    plot = doc.createPlot2D() if len(refs) == 2 else doc.createPlot3D()
    plot.setId(plot_id)
    item = plot.createCurve() if len(refs) == 2 else plot.createSurface()
    item.setId(f"{plot_id}_item")
    item.setXDataReference(refs[0])
    item.setYDataReference(refs[1])
    if len(refs) == 3:
        item.setZDataReference(refs[2])
    return plot
