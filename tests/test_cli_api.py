"""sbmlgpu.run / api.execute: the order of steps, options, devices, outputs, sources."""

import logging
from dataclasses import dataclass

import numpy as np
import pytest
import sympy as sp

import sbmlgpu
from sbmlgpu import api, ir, plugin_manager
from sbmlgpu.backend import Backend, BackendOptions, Program, option
from sbmlgpu.errors import DeviceError, OptionError, UnsupportedModelError
from sbmlgpu.hookspecs import hookimpl
from sbmlgpu.ir import sym
from sbmlgpu.results import Result


def network():
    return ir.Network(
        id="m", compartments=(ir.Compartment("c", 1.0),),
        species=(ir.Species("A", "c", initial_concentration=1.0),),
        parameters=(ir.Parameter("k", 0.5),),
        reactions=(ir.Reaction("R", (ir.SpeciesReference("A", sp.Integer(1)),), (), (),
                               sym("k") * sym("A")),),
    )


@dataclass
class EchoOptions(BackendOptions):
    scale: float = option(1.0, "multiplies every output", minimum=0.0)


class EchoProgram(Program):
    """Returns the parameter sets it was given, so tests can see what arrived."""

    def __init__(self, backend, network, options, device):
        self.backend, self.network, self.options, self.device = backend, network, options, device
        self.sources = {"echo.cu": "// kernel\n", "../escape.cu": "// must stay inside\n"}

    def run(self, request, scheduler, profiler):
        self.backend.seen.update(request=request, scheduler=scheduler, profiler=profiler)
        n = request.ensemble_size
        k = request.parameters["k"] if request.parameters else np.full(n, 0.5)
        data = self.options.scale * np.broadcast_to(k[:, None, None], (n, len(request.times), 1))
        return Result(request.times, ("k",), data, metadata={"device": "echo-device"})


class Echo(Backend):
    name = "echo"
    description = "echoes parameters"
    options_class = EchoOptions

    def __init__(self, refuse=()):
        self.refuse = refuse
        self.seen = {}

    def supports(self, network):
        self.seen["supports_network"] = network
        return [(f, ()) for f in self.refuse]

    def compile(self, network, options, device):
        self.seen["device"] = device
        return EchoProgram(self, network, options, device)


@pytest.fixture
def echo(monkeypatch):
    backend = Echo()

    class Plugin:
        @hookimpl
        def sbmlgpu_backends(self):
            return [backend]

    pm = plugin_manager.new_manager(entry_points=False)
    pm.register(Plugin(), name="echo-plugin")
    monkeypatch.setattr(plugin_manager, "manager", lambda: pm)
    return backend, pm


def test_output_times():
    np.testing.assert_array_equal(api.output_times(0, 1, 3), [0, 0.5, 1])
    assert len(api.output_times(0, 10)) == api.DEFAULT_POINTS
    np.testing.assert_array_equal(api.output_times(times=[0, 2, 5]), [0, 2, 5])
    for kwargs, name in [({}, "end"), ({"end": 1, "points": 1}, "points"),
                         ({"end": 1, "times": [0, 1]}, "times"), ({"start": 2, "end": 1}, "end"),
                         ({"end": 1, "points": 2.5}, "points")]:
        with pytest.raises(OptionError) as e:
            api.output_times(**kwargs)
        assert e.value.option == name


def test_parameters_reach_the_program_and_n_must_agree(echo):
    backend, _ = echo
    result = sbmlgpu.run(network(), "echo", end=1, points=2, parameters={"k": [1, 2, 3]},
                         device="cpu")
    np.testing.assert_array_equal(result["k"][:, 0], [1, 2, 3])
    assert backend.seen["request"].n == 3
    with pytest.raises(OptionError, match="5 members asked for, but the parameter sets have 3"):
        sbmlgpu.run(network(), "echo", end=1, parameters={"k": [1, 2, 3]}, n=5, device="cpu")
    with pytest.raises(OptionError, match="did you mean k"):
        sbmlgpu.run(network(), "echo", end=1, parameters={"K": [1]}, device="cpu")
    with pytest.raises(OptionError, match="differ in length"):
        sbmlgpu.run(network(), "echo", end=1, parameters={"k": [1, 2], "A": [1]}, device="cpu")


def test_options_from_mapping_object_or_wrong_type(echo):
    r = sbmlgpu.run(network(), "echo", end=1, points=2, options={"scale": 2.0}, device="cpu")
    assert r["k"][0, 0] == 1.0 and r.metadata["options"] == {"scale": 2.0}
    r = sbmlgpu.run(network(), "echo", end=1, points=2, options=EchoOptions(scale=3.0),
                    device="cpu")
    assert r["k"][0, 0] == 1.5
    with pytest.raises(OptionError, match="option scale"):
        sbmlgpu.run(network(), "echo", end=1, options={"scale": -1}, device="cpu")
    with pytest.raises(OptionError, match="takes EchoOptions or a mapping"):
        sbmlgpu.run(network(), "echo", end=1, options=42, device="cpu")


def test_unsupported_model_stops_before_compiling(echo):
    backend, _ = echo
    backend.refuse = ("events",)
    with pytest.raises(UnsupportedModelError, match="backend 'echo' does not support: events"):
        sbmlgpu.run(network(), "echo", end=1)
    assert "device" not in backend.seen  # never compiled


def test_transform_hooks_run_before_supports(echo):
    backend, pm = echo

    class Renamer:
        @hookimpl
        def sbmlgpu_transform_network(self, network):
            from dataclasses import replace

            return replace(network, id="transformed")

    pm.register(Renamer(), name="renamer")
    result = sbmlgpu.run(network(), "echo", end=1, points=2, device="cpu")
    assert backend.seen["supports_network"].id == "transformed"
    assert result.metadata["model"] == "transformed"


def test_auto_without_gpu_takes_the_cpu_path_and_says_so_once(echo, monkeypatch, caplog):
    backend, _ = echo
    from sbmlgpu import runtime

    monkeypatch.setenv("SBMLGPU_NO_GPU", "1")
    runtime.reset()
    try:
        with caplog.at_level(logging.WARNING, logger="sbmlgpu"):
            sbmlgpu.run(network(), "echo", end=1, points=2)
            sbmlgpu.run(network(), "echo", end=1, points=2)
    finally:
        runtime.reset()
    said = [r.getMessage() for r in caplog.records if "CPU path" in r.getMessage()]
    assert len(said) == 1, said
    assert backend.seen["device"] is None


def test_gpu_indices_without_gpu_is_a_device_error(echo, monkeypatch):
    from sbmlgpu import runtime

    monkeypatch.setenv("SBMLGPU_NO_GPU", "1")
    runtime.reset()
    try:
        with pytest.raises(DeviceError, match=r"GPU devices \[0, 1\] requested"):
            sbmlgpu.run(network(), "echo", end=1, device=[0, 1])
    finally:
        runtime.reset()
    with pytest.raises(OptionError, match="use 'auto', 'cpu' or GPU indices"):
        sbmlgpu.run(network(), "echo", end=1, device="gpu0")


def test_gpu_indices_pick_devices(echo, monkeypatch):
    backend, _ = echo
    from sbmlgpu import runtime

    class FakeDevice:
        def __init__(self, index):
            self.index = index
            self.properties = type("P", (), {"name": f"GPU{index}"})()

    class FakeDriver:
        def devices(self):
            return devices

    devices = [FakeDevice(0), FakeDevice(1)]
    monkeypatch.setattr(runtime, "get_driver", lambda: FakeDriver())
    r = sbmlgpu.run(network(), "echo", end=1, points=2, device=[1])
    assert backend.seen["device"] is devices[1]
    assert r.metadata["device"] == "echo-device"  # the backend's own word wins
    with pytest.raises(DeviceError, match="no GPU device 3"):
        sbmlgpu.run(network(), "echo", end=1, device=[3])


def test_keep_source_writes_each_kernel_inside_the_folder(echo, tmp_path):
    outcome = api.execute(network(), "echo", end=1, points=2, device="cpu",
                          keep_source=tmp_path / "src")
    names = sorted(p.name for p in (tmp_path / "src").iterdir())
    assert names == ["echo.cu", "escape.cu"]
    assert not (tmp_path / "escape.cu").exists()
    assert set(outcome.files) == {tmp_path / "src" / "echo.cu", tmp_path / "src" / "escape.cu"}


def test_outputs_are_checked_against_the_model(echo):
    backend, _ = echo
    sbmlgpu.run(network(), "echo", end=1, points=2, outputs=["A", "R"], device="cpu")
    assert backend.seen["request"].outputs == ("A", "R")
    with pytest.raises(OptionError, match="'Q' is not an id"):
        sbmlgpu.run(network(), "echo", end=1, outputs=["Q"], device="cpu")


def test_scheduler_and_profiler_are_handed_to_the_program(echo):
    backend, _ = echo
    sbmlgpu.run(network(), "echo", end=1, points=2, device="cpu", progress=False)
    scheduler, profiler = backend.seen["scheduler"], backend.seen["profiler"]
    schedule = pytest.importorskip("sbmlgpu.schedule")
    assert isinstance(scheduler, schedule.Scheduler) and scheduler.progress is False
    profile = pytest.importorskip("sbmlgpu.profile")
    assert isinstance(profiler, profile.Profiler)


def test_metadata_records_the_run(echo):
    r = sbmlgpu.run(network(), "echo", end=1, points=2, seed=9, device="cpu")
    m = r.metadata
    assert (m["model"], m["backend"], m["seed"], m["members"]) == ("m", "echo", 9, 1)
    assert m["plugin"] == "(registered directly)"
    assert m["sbmlgpu"] == sbmlgpu.__version__
