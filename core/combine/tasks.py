"""SED-ML tasks: a task runs one simulation of one model; a repeated task whose sub-tasks
are tasks with value changes (setValue) runs each sub-task ONCE, as an ensemble whose
members are the iterations (the ranges' values), not as a loop of runs.

Values: {SBML id or TIME: array}; a task's arrays have the simulation's shape
(points,) or () for a steady state; a repeated task's have (iterations, sub-tasks,
...), right-padded with NaN where sub-tasks differ in length (BioSimulators' layout).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np

from ..errors import OptionError, SBMLImportError, UnsupportedModelError
from .mathexpr import evaluate_math
from .models import ModelSources, read_value
from .simulate import TIME, RunSettings, simulate
from .xpath import model_id


class TaskRunner:
    def __init__(self, doc, sources: ModelSources, settings: RunSettings, where: str):
        self.doc = doc
        self.sources = sources
        self.settings = settings
        self.where = where
        self._networks: dict[str, object] = {}

    def network(self, model_ref: str):
        if model_ref not in self._networks:
            from .. import load

            try:
                self._networks[model_ref] = load(self.sources.text(model_ref))
            except SBMLImportError as exc:  # named by the SED-ML model, not "<string>"
                model = self.doc.getModel(model_ref)
                raise SBMLImportError(f"{self.where}, model {model_ref!r} (source "
                                      f"{model.getSource() if model else '?'!r})",
                                      exc.summary, exc.problems) from None
        return self._networks[model_ref]

    def run(self, task_id: str, ids: list[str]) -> dict[str, np.ndarray]:
        task = self.doc.getTask(task_id)
        where = f"{self.where}, task {task_id!r}"
        if task is None:
            raise OptionError("task", f"{self.where}: no task with id {task_id!r}")
        kind = task.getElementName()
        if kind == "task":
            values = self._simulate(task, ids, None, 1, where)
            return {k: v[0] for k, v in values.items()}
        if kind == "repeatedTask":
            return self._repeated(task, ids, where)
        raise UnsupportedModelError({f"SED-ML {kind}": (task_id,)}, who="sbmlgpu omex")

    def _simulate(self, task, ids, parameters, members, where):
        simulation = self.doc.getSimulation(task.getSimulationReference())
        if simulation is None:
            raise OptionError("simulation", f"{where}: no simulation "
                                            f"{task.getSimulationReference()!r}")
        network = self.network(task.getModelReference())
        unknown = [i for i in ids if i != TIME and network.kind_of(i) is None]
        if unknown:
            raise OptionError("target", f"{where}: {', '.join(unknown)} is not an id of "
                                        f"model {task.getModelReference()!r}")
        where = f"{where}, simulation {simulation.getId()!r}"
        return simulate(network, simulation, [i for i in ids if i != TIME], parameters,
                        members, self.settings, where)

    # -- repeated tasks ------------------------------------------------------------------
    def _repeated(self, task, ids, where):
        ranges = iteration_values(task, self._model_root, self.sources.ns, where)
        members = len(ranges[task.getRangeId()])
        subtasks = sorted((task.getSubTask(k) for k in range(task.getNumSubTasks())),
                          key=lambda s: s.getOrder() if s.isSetOrder() else 0)
        if not subtasks:
            raise OptionError("repeatedTask", f"{where}: no sub-tasks")
        runs = []
        for sub in subtasks:
            inner = self.doc.getTask(sub.getTask())
            sub_where = f"{where}, sub-task {sub.getTask()!r}"
            if inner is None or inner.getElementName() != "task":
                raise UnsupportedModelError(
                    {"repeated task whose sub-task is not a task (nested repeated tasks)":
                     (task.getId(),)}, who="sbmlgpu omex")
            simulation = self.doc.getSimulation(inner.getSimulationReference())
            if (not task.getResetModel() and members > 1 and simulation is not None
                    and simulation.getElementName() != "steadyState"):
                raise UnsupportedModelError(
                    {"repeated time course with resetModel=false (each iteration would "
                     "continue from the last)": (task.getId(),)}, who="sbmlgpu omex")
            parameters = self._set_values(task, inner.getModelReference(), ranges, where)
            runs.append(self._simulate(inner, ids, parameters or None, members, sub_where))
        return {name: stack([r[name] for r in runs]) for name in runs[0]}

    def _model_root(self, model_ref: str) -> ET.Element:
        return ET.fromstring(self.sources.text(model_ref).encode("utf-8"))

    def _set_values(self, task, model_ref, ranges, where) -> dict[str, np.ndarray]:
        members = len(ranges[task.getRangeId()])
        out = {}
        for k in range(task.getNumTaskChanges()):
            change = task.getTaskChange(k)
            change_where = f"{where}, setValue {k + 1}"
            if change.getModelReference() != model_ref:
                continue
            sbml_id = model_id(change.getTarget(), change_where)
            values = dict(ranges)
            values.update({p.getId(): p.getValue() for p in change.getListOfParameters()})
            if change.getNumVariables():
                root = self._model_root(change.getModelReference())
                for v in change.getListOfVariables():
                    values[v.getId()] = read_value(root, v, self.sources.ns, change_where)
            value = evaluate_math(change.getMath(), values, change_where)
            out[sbml_id] = np.broadcast_to(value, (members,)).astype(float)
        return out


def stack(arrays: list[np.ndarray]) -> np.ndarray:
    """(members, ...) per sub-task -> (members, sub-tasks, ...), NaN right-padded."""
    shape = tuple(max(s) for s in zip(*(a.shape for a in arrays)))
    out = np.full((shape[0], len(arrays), *shape[1:]), np.nan)
    for k, a in enumerate(arrays):
        out[(slice(None), k, *(slice(0, n) for n in a.shape[1:]))] = a
    return out


def iteration_values(task, model_root, ns: dict, where: str) -> dict[str, np.ndarray]:
    """{range id: value per iteration}; the master range (rangeId) sets the count."""
    ranges = {task.getRange(k).getId(): task.getRange(k) for k in range(task.getNumRanges())}
    master = task.getRangeId()
    if master not in ranges:
        raise OptionError("repeatedTask", f"{where}: its range {master!r} is not one of its "
                                          f"ranges")
    out: dict[str, np.ndarray] = {}
    pending = list(ranges)
    while pending:  # functional ranges refer to other ranges: evaluate those first
        progressed = False
        for rid in list(pending):
            r = ranges[rid]
            if r.getElementName() == "functionalRange" and r.getRange() in pending:
                continue
            out[rid] = range_values(r, out, model_root, ns, f"{where}, range {rid!r}")
            pending.remove(rid)
            progressed = True
        if not progressed:
            raise OptionError("range", f"{where}: functional ranges refer to each other: "
                                       f"{', '.join(pending)}")
    n = len(out[master])
    short = [rid for rid, v in out.items() if len(v) < n]
    if short:
        raise OptionError("range", f"{where}: range(s) {', '.join(short)} have fewer values "
                                   f"than the master range {master!r} ({n})")
    return {rid: v[:n] for rid, v in out.items()}


def range_values(r, known, model_root, ns, where) -> np.ndarray:
    kind = r.getElementName()
    if kind == "uniformRange":
        steps = r.getNumberOfSteps() if r.isSetNumberOfSteps() else r.getNumberOfPoints()
        start, end = r.getStart(), r.getEnd()
        if steps < 1:
            raise OptionError("uniformRange", f"{where}: numberOfSteps must be >= 1")
        if r.getType().lower() == "log":
            if start <= 0 or end <= 0:
                raise OptionError("uniformRange", f"{where}: a log range needs start and "
                                                  f"end > 0")
            return np.geomspace(start, end, steps + 1)
        return np.linspace(start, end, steps + 1)
    if kind == "vectorRange":
        values = np.asarray(list(r.getValues()), dtype=float)
        if values.size == 0:
            raise OptionError("vectorRange", f"{where}: no values")
        return values
    if kind == "functionalRange":
        values = {p.getId(): p.getValue() for p in r.getListOfParameters()}
        values.update(known)
        if r.getNumVariables():
            for v in r.getListOfVariables():
                if not v.isSetModelReference():
                    raise UnsupportedModelError(
                        {"functionalRange variable of a task's results": (v.getId(),)},
                        who="sbmlgpu omex")
                root = model_root(v.getModelReference())
                values[v.getId()] = read_value(root, v, ns, where)
        base = known.get(r.getRange())
        if base is None:
            raise OptionError("functionalRange", f"{where}: it refers to no range "
                                                 f"({r.getRange()!r})")
        return np.broadcast_to(evaluate_math(r.getMath(), values, where),
                               base.shape).astype(float)
    raise UnsupportedModelError({f"SED-ML range {kind}": (r.getId(),)}, who="sbmlgpu omex")
