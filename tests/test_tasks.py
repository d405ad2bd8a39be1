"""Tasks: each validates itself, checks its ids against the model once, and generates its
CLI subcommand (only where an installed backend computes it) and its Python function."""

import inspect
import re
from dataclasses import dataclass

import numpy as np
import pytest

import sbmlgpu
from sbmlgpu import api, cli, plugin_manager
from sbmlgpu.backend import Backend, BackendOptions, Program, option
from sbmlgpu.errors import OptionError
from sbmlgpu.hookspecs import hookimpl
from sbmlgpu.results import DbnResult, Paving, StateDistribution
from sbmlgpu.tasks import (TASKS, DbnApproximation, Estimation, SteadyState, TimeCourse,
                           read_measurements, task_class)
from tests.sbml_strings import write_decay_model
from tests.test_cli_api import network  # A -> (nothing) at rate k*A


# -- each task checks itself -----------------------------------------------------------------
def test_task_classes_are_complete():
    assert [t.kind for t in TASKS] == ["time-course", "steady-state", "estimation", "dbn"]
    for task in TASKS:
        assert task.command and task.function and task.title and task.description
        assert task_class(task.kind) is task and task_class(task.command) is task
    with pytest.raises(OptionError, match="'fba' is not a task"):
        task_class("fba")


def test_steady_state_checks_its_fields_and_ids():
    SteadyState(bounds={"A": 80}, tol=1e-9).bind(network())
    with pytest.raises(OptionError, match="option tol: 0.0 must be positive"):
        SteadyState(tol=0.0).validate()
    with pytest.raises(OptionError, match="option bound: A=-1"):
        SteadyState(bounds={"A": -1}).validate()
    with pytest.raises(OptionError, match="option bound: 'a' is not a species.*did you mean A"):
        SteadyState(bounds={"a": 3}).bind(network())
    with pytest.raises(OptionError, match="option initial: 'Q'"):
        SteadyState(initial={"Q": 1.0}).bind(network())


def test_estimation_reads_its_data_and_checks_unknowns(tmp_path):
    data = tmp_path / "data.csv"
    data.write_text("time,id,lower,upper\n1,A,0.5,0.7\n2,A,0.2,0.4\n")
    task = Estimation(data=str(data), unknown={"k": (0.1, 1.0)}, epsilon=1e-3).bind(network())
    assert len(task.measurements) == 2 and task.measurements.ids == ("A",)
    with pytest.raises(OptionError, match="option data: is required"):
        Estimation(unknown={"k": (0, 1)}, epsilon=0.1).validate()
    with pytest.raises(OptionError, match="option unknown: name at least one"):
        Estimation(data=str(data), epsilon=0.1).validate()
    with pytest.raises(OptionError, match="k: the search interval"):
        Estimation(data=str(data), unknown={"k": (1, 1)}, epsilon=0.1).validate()
    with pytest.raises(OptionError, match="option unknown: 'kk'.*did you mean k"):
        Estimation(data=str(data), unknown={"kk": (0, 1)}, epsilon=0.1).bind(network())
    bad = tmp_path / "bad.csv"
    bad.write_text("time,id,lower,upper\n1,A,0.7,0.5\n")
    with pytest.raises(OptionError, match="bad.csv, line 2: need lower <= upper"):
        Estimation(data=str(bad), unknown={"k": (0, 1)}, epsilon=0.1).validate()
    with pytest.raises(OptionError, match="missing: upper"):
        read_measurements(_write(tmp_path / "h.csv", "time,id,lower\n1,A,0\n"))
    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"\xff\xfe\x00garbage\x81")
    with pytest.raises(OptionError, match="binary.csv, line 1: not UTF-8 text"):
        read_measurements(binary)
    rows = read_measurements([(0.0, "A", 1.0, 1.0)])
    assert rows.id == ("A",) and rows.lower[0] == 1.0


def _write(path, text):
    path.write_text(text)
    return path


def test_dbn_checks_its_fields():
    task = DbnApproximation(ensemble=100, sample={"k": "uniform:0.1:1"}, slices=5,
                            slice_time=1.0).bind(network())
    assert task.steps == 10 and task.bins == 5
    with pytest.raises(OptionError, match="option slices: is required"):
        DbnApproximation(ensemble=10, slice_time=1.0).validate()
    with pytest.raises(OptionError, match="option sample"):
        DbnApproximation(ensemble=10, slices=1, slice_time=1.0,
                         sample={"k": "gamma:1:2"}).validate()
    with pytest.raises(OptionError, match="option bins: 1 is below the minimum 2"):
        DbnApproximation(ensemble=10, slices=1, slice_time=1.0, bins=1).validate()


def test_time_course_checks_ids_once_at_the_edge():
    task = TimeCourse(times=[0, 1], parameters={"k": np.array([1.0, 2.0])}, outputs=["A"])
    assert task.ensemble_size == 2
    assert task.bind(network()) is task
    with pytest.raises(OptionError, match="did you mean k"):
        TimeCourse(times=[0, 1], parameters={"K": np.array([1.0])}).bind(network())
    with pytest.raises(OptionError, match="option seed"):
        TimeCourse(times=[0, 1], seed=-1).validate()


# -- a backend that computes the three new kinds -------------------------------------------------
@dataclass
class PointOptions(BackendOptions):
    level: float = option(2.0, "the value every answer is built from", minimum=0.0)


class PointProgram(Program):
    sources: dict = {}

    def __init__(self, options):
        self.options = options
        self.seen = []

    def run(self, task, scheduler, profiler):
        self.seen.append(task)
        level = self.options.level
        if isinstance(task, SteadyState):
            return StateDistribution(("A",), [[level]], [1.0], {"residual": 0.0})
        if isinstance(task, Estimation):
            (uid, (low, high)), = task.unknown.items()
            return Paving((uid,), [[low]], [[high]], ["feasible"], [[low, high]], task.epsilon)
        counts = {"A": np.zeros((task.slices, task.bins, task.bins), int)}
        return DbnResult(("A",), np.arange(task.slices + 1) * task.slice_time,
                         [np.linspace(0, level, task.bins + 1)], {"A": ("A",)}, counts,
                         np.full((task.slices + 1, 1, task.bins), 1 / task.bins))


class PointBackend(Backend):
    name = "point"
    description = "answers every new task kind with a fixed point (for tests)"
    options_class = PointOptions
    tasks = (SteadyState, Estimation, DbnApproximation)
    cpu_only = True

    def supports(self, network):
        return []

    def compile(self, network, options, device=None):
        self.program = PointProgram(options)
        return self.program


@pytest.fixture
def point(use_backends):
    backend = PointBackend()
    use_backends(backend, installed=True)  # the installed ones (reference, ...) and this one
    return backend


def test_commands_exist_only_where_a_backend_computes_the_task(capsys, point, monkeypatch):
    cli.main(["--help"])
    listed = capsys.readouterr().out
    for command in ("run", "steady-state", "estimate", "dbn"):
        assert re.search(rf"^    {command}\b", listed, re.M), command
    monkeypatch.setattr(plugin_manager, "manager", lambda: plugin_manager.new_manager())
    code = cli.main(["--help"])
    listed = capsys.readouterr().out
    assert code == 0 and re.search(r"^    run\b", listed, re.M)
    assert re.search(r"^    steady-state\b", listed, re.M)  # the built-in cme backend
    assert re.search(r"^    dbn\b", listed, re.M)  # the built-in dbn backend
    assert re.search(r"^    estimate\b", listed, re.M)  # the built-in interval backend

    def reference_only():  # a time-course backend alone: the other commands vanish
        from sbmlgpu.plugins import reference

        pm = plugin_manager.new_manager(entry_points=False)
        pm.register(reference, name="reference")
        return pm

    monkeypatch.setattr(plugin_manager, "manager", reference_only)
    code = cli.main(["--help"])
    listed = capsys.readouterr().out
    assert code == 0 and re.search(r"^    run\b", listed, re.M)
    for command in ("estimate", "steady-state", "dbn"):
        assert not re.search(rf"^    {command}\b", listed, re.M), command
    assert cli.main(["estimate", "m.xml", "-o", "out"]) == 2  # no such command
    assert "invalid choice: 'estimate'" in capsys.readouterr().err


def test_backends_and_info_say_which_tasks_each_backend_computes(capsys, point, tmp_path):
    cli.main(["backends"])
    out = capsys.readouterr().out
    assert "tasks: steady-state, estimate (estimation), dbn" in out
    assert "tasks: run (time-course)" in out
    cli.main(["info", str(write_decay_model(tmp_path))])
    assert "point      accepts (steady-state, estimation, dbn)" in capsys.readouterr().out


def test_steady_state_command_generates_flags_and_writes_every_format(capsys, point, tmp_path):
    model = write_decay_model(tmp_path)
    code = cli.main(["steady-state", "--backend", "point", "--help"])
    text = capsys.readouterr().out
    assert code == 0 and "--bound ID=N" in text and "--initial ID=VALUE" in text
    assert "--tol TOL" in text and "options of backend 'point'" in text and "--level" in text
    for fmt, suffix in (("csv", ".csv"), ("npz", ".npz"), ("hdf5", ".h5")):
        code = cli.main(["steady-state", str(model), "--backend", "point", "--bound", "A=40",
                         "--bound", "B=3", "--level", "3.5", "-o", str(tmp_path / fmt),
                         "--format", fmt])
        out = capsys.readouterr().out
        assert code == 0, out
        assert f"wrote {tmp_path / fmt / ('decay' + suffix)}" in out
    task = point.program.seen[-1]
    assert task.bounds == {"A": 40, "B": 3}
    back = sbmlgpu.results.read(tmp_path / "npz" / "decay.npz")
    assert back.states[0, 0] == 3.5 and back.metadata["backend"] == "point"
    assert back.metadata["task"]["bounds"] == {"A": 40, "B": 3}
    assert (tmp_path / "csv" / "decay.marginals.csv").exists()


def test_task_flags_report_bad_values_as_usage_errors(capsys, point, tmp_path):
    model = write_decay_model(tmp_path)
    assert cli.main(["steady-state", str(model), "--bound", "A=4.5", "-o", "x"]) == 2
    assert "'A=4.5': '4.5' is not a whole number" in capsys.readouterr().err
    assert cli.main(["steady-state", str(model), "--bound", "A=4", "--bound", "A=5",
                     "-o", "x"]) == 2
    assert "option bound: 'A' is given twice" in capsys.readouterr().err
    assert cli.main(["steady-state", str(model), "--bound", "Z=4", "-o", "x"]) == 2
    assert "option bound: 'Z' is not a species" in capsys.readouterr().err
    assert cli.main(["run", str(model), "--backend", "point", "--end", "1", "-o", "x"]) == 2
    assert "backend 'point' does not compute a time-course" in capsys.readouterr().err


def test_estimate_and_dbn_commands_run(capsys, point, tmp_path):
    model = write_decay_model(tmp_path)
    data = _write(tmp_path / "d.csv", "time,id,lower,upper\n1,A,5,7\n")
    code = cli.main(["estimate", str(model), "--data", str(data), "--unknown", "k=0.1:1",
                     "--epsilon", "0.01", "-o", str(tmp_path / "e"), "--plot"])
    assert code == 0, capsys.readouterr()
    assert (tmp_path / "e" / "decay.paving.csv").exists() and (tmp_path / "e" / "decay.png").exists()
    code = cli.main(["dbn", str(model), "--backend", "point", "--ensemble", "50",
                     "--sample", "k=uniform:0.1:1", "--slices", "4", "--slice-time", "0.5",
                     "--bins", "3",
                     "-o", str(tmp_path / "d")])
    assert code == 0, capsys.readouterr()
    assert (tmp_path / "d" / "decay.marginals.csv").read_text().startswith("time,id,bin")
    task = point.program.seen[-1]
    assert (task.ensemble, task.slices, task.slice_time, task.bins) == (50, 4, 0.5, 3)


def test_python_functions_are_generated_from_the_tasks(point, tmp_path):
    signature = inspect.signature(sbmlgpu.steady_state)
    assert list(signature.parameters)[:5] == ["model", "backend", "initial", "bounds", "tol"]
    assert "bounds:" in sbmlgpu.steady_state.__doc__
    d = sbmlgpu.steady_state(network(), "point", bounds={"A": 10}, options={"level": 4.0})
    assert isinstance(d, StateDistribution) and d.states[0, 0] == 4.0
    with pytest.raises(OptionError, match="unknown option; known: initial, bound, tol"):
        sbmlgpu.steady_state(network(), bound={"A": 10})
    p = sbmlgpu.estimate(network(), data=[(1.0, "A", 0.1, 0.2)], unknown={"k": (0.1, 1)},
                         epsilon=0.1)
    assert isinstance(p, Paving) and p.metadata["task"]["data"] == "1 rows"
    with pytest.raises(OptionError, match="backend 'reference' does not compute a dbn"):
        sbmlgpu.dbn(network(), "reference", ensemble=10, slices=2, slice_time=1.0)


def test_a_backend_answering_with_the_wrong_kind_is_a_plugin_error(point, monkeypatch):
    monkeypatch.setattr(PointProgram, "run", lambda self, task, s, p: "not a result")
    with pytest.raises(plugin_manager.PluginError, match="answered a steady-state task with "
                                                         "str, not StateDistribution"):
        sbmlgpu.steady_state(network(), "point")


def test_the_default_backend_is_the_only_one_that_can(point, monkeypatch):
    assert plugin_manager.backend_for(SteadyState).name == "cme"  # the task's default
    assert plugin_manager.backend_for(TimeCourse).name == "ode"  # the fast default
    assert plugin_manager.backend_for(Estimation).name == "interval"  # the task's default
    assert plugin_manager.backend_for(DbnApproximation).name == "dbn"
    second = PointBackend()
    second.name = "point2"

    class Plugin:
        @hookimpl
        def sbmlgpu_backends(self):
            return [second]

    plugin_manager.manager().register(Plugin(), name="second")
    monkeypatch.setattr(Estimation, "default_backend", None)  # no default: must choose
    with pytest.raises(OptionError, match="several backends compute a estimation: interval, "
                                          "point, point2; name one with --backend"):
        plugin_manager.backend_for(Estimation)


def test_execute_takes_only_tasks():
    with pytest.raises(OptionError, match="is not a task"):
        api.execute(network(), {"end": 1})
