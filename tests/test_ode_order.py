"""Outputs in the members' original order, written so by the kernel: a bundled launch of a
contiguous range of members (one batch of the whole ensemble) gets that range's rows of
the result, and the trajectory sink puts member m in column m - first_member, so that no
scatter by member remains on the host (sbmlgpu.schedule.ensemble, sinks.TrajectorySink).
Other bundled batches keep launch order and the runner's scatter. Either way the
result must equal an unbundled run member for member, on a fake GPU that runs the same
kernel through its host build (the CPU path itself does not bundle)."""

from __future__ import annotations

import numpy as np
import pytest

from .fakes import GATHER, FakeDevice
from .ode_helpers import load, needs_compiler, run_cpu
from .test_ode_engine_fake import compile_for_host

TIMES = np.linspace(0, 160, 9)


@pytest.fixture(scope="module")
def ensemble():
    needs_compiler()
    rng = np.random.default_rng(7)
    # a wide range of beta: step counts differ, so bundling reorders the members
    params = {"beta": rng.uniform(0.05, 3.0, 640), "gamma": rng.uniform(0.05, 0.5, 640)}
    net = load("seir_epidemic")
    unbundled = run_cpu(net, "dopri5", times=TIMES, parameters=params, bundling=False)
    return net, params, unbundled


class Spy:
    """Records what the engine was asked: (members given, first_member, rows given)."""

    def __init__(self, monkeypatch, cls):
        self.calls = []
        run = cls.run

        def spy(engine, device, table, times, n_outputs, config, members=None,
                first_member=0, **kw):
            self.calls.append((members is not None, int(first_member),
                               kw.get("destination") is not None))
            return run(engine, device, table, times, n_outputs, config, members,
                       first_member, **kw)

        monkeypatch.setattr(cls, "run", spy)


def _bundled(result):
    return result.metadata["bundling"] == "bundled by predicted step count"


@pytest.mark.parametrize("max_batch_items", [None, 256])
def test_the_gpu_engine_writes_members_in_their_order(ensemble, monkeypatch, max_batch_items):
    from sbmlgpu.ode.engines import GpuEngine
    from sbmlgpu.ode.sinks import LAUNCH_ORDER
    from sbmlgpu.plugins.ode.backend import OdeBackend
    from sbmlgpu.plugins.ode.options import OdeOptions
    from sbmlgpu.schedule import Scheduler
    from sbmlgpu.tasks import TimeCourse

    net, params, unbundled = ensemble
    spy = Spy(monkeypatch, GpuEngine)
    device = FakeDevice(compile=compile_for_host)
    options = OdeOptions(method="dopri5", pilot_size=64).validate()
    program = OdeBackend().compile(net, options, device)
    scheduler = Scheduler(devices=[device], max_batch_items=max_batch_items, progress=False)
    result = program.run(TimeCourse(times=TIMES, parameters=params, progress=False), scheduler)
    assert _bundled(result)
    bundled_calls = [c for c in spy.calls[1:] if c[0]]  # after the pilot
    assert bundled_calls
    if max_batch_items is None:  # one batch: every member, in place, by member id
        assert bundled_calls == [(True, 0, True)]
    else:  # batches of scattered members: launch order, scattered by the runner
        assert any(c == (True, LAUNCH_ORDER, False) for c in bundled_calls)
    assert np.array_equal(result.status, unbundled.status)
    assert np.array_equal(result.data, unbundled.data)
    # the bundled batches' columns were gathered on the device, from one upload
    assert any(launch[0] == GATHER for launch in device.launches)


def test_a_gpu_without_room_for_the_table_gathers_on_the_host(ensemble):
    """The table on the device is an option of memory: a GPU whose free memory could
    not spare it runs the same bundled launches on columns gathered by the host."""
    from sbmlgpu.plugins.ode.backend import OdeBackend
    from sbmlgpu.plugins.ode.options import OdeOptions
    from sbmlgpu.schedule import Scheduler
    from sbmlgpu.tasks import TimeCourse

    net, params, unbundled = ensemble
    device = FakeDevice(compile=compile_for_host, free=40_000)  # the table is 10 KB
    options = OdeOptions(method="dopri5", pilot_size=64).validate()
    program = OdeBackend().compile(net, options, device)
    scheduler = Scheduler(devices=[device], progress=False)
    result = program.run(TimeCourse(times=TIMES, parameters=params, progress=False), scheduler)
    assert _bundled(result)
    assert not any(launch[0] == GATHER for launch in device.launches)
    assert np.array_equal(result.status, unbundled.status)
    assert np.array_equal(result.data, unbundled.data)


def test_the_second_pass_writes_its_members_rows_on_a_fake_gpu(ensemble):
    """Members past --pass-steps run again as a batch of scattered members whose rows
    are given in launch order: they must land in their own rows (bundled first pass,
    then the second), equal to the unbundled single pass."""
    from sbmlgpu.plugins.ode.backend import OdeBackend
    from sbmlgpu.plugins.ode.options import OdeOptions
    from sbmlgpu.schedule import Scheduler
    from sbmlgpu.tasks import TimeCourse

    net, params, unbundled = ensemble
    steps = unbundled.metadata["steps_mean"]
    device = FakeDevice(compile=compile_for_host)
    options = OdeOptions(method="dopri5", pilot_size=64, pass_steps=int(steps)).validate()
    program = OdeBackend().compile(net, options, device)
    scheduler = Scheduler(devices=[device], progress=False)
    result = program.run(TimeCourse(times=TIMES, parameters=params, progress=False), scheduler)
    assert _bundled(result)
    assert 10 < result.metadata["second_pass_members"] < 630
    assert np.array_equal(result.status, unbundled.status)
    assert np.array_equal(result.data, unbundled.data)


def _fake_gpu_program(net):
    """(device, program, scheduler): the dopri5 program on a fake GPU that runs the
    kernel's host build, with a pilot of 64."""
    from sbmlgpu.plugins.ode.backend import OdeBackend
    from sbmlgpu.plugins.ode.options import OdeOptions
    from sbmlgpu.schedule import Scheduler

    device = FakeDevice(compile=compile_for_host)
    options = OdeOptions(method="dopri5", pilot_size=64).validate()
    program = OdeBackend().compile(net, options, device)
    return device, program, Scheduler(devices=[device], progress=False)


def test_a_repeated_run_bundles_by_the_last_runs_cost_model_without_a_pilot(ensemble):
    """The second run of a program's kernel orders its members by a cost model fitted
    on the first run's own steps: no pilot launch, the same results, no device buffer
    left behind."""
    from sbmlgpu.tasks import TimeCourse

    net, params, unbundled = ensemble
    device, program, scheduler = _fake_gpu_program(net)

    def run(parameters):
        before = len(device.launches)
        result = program.run(TimeCourse(times=TIMES, parameters=parameters, progress=False),
                             scheduler)
        sizes = [grid[0] * block[0] for name, grid, block, _ in device.launches[before:]
                 if name not in (GATHER, "sbmlgpu_member_major")]
        return result, sizes

    first, first_sizes = run(params)
    second, second_sizes = run(params)
    assert first.metadata["bundling_info"]["fitted_on"] == "the pilot"
    assert second.metadata["bundling_info"]["fitted_on"] == "the previous run"
    assert _bundled(second)
    # the pilot's 64 members were a launch of their own the first time only
    assert len(second_sizes) == len(first_sizes) - 1
    assert np.array_equal(second.status, unbundled.status)
    assert np.array_equal(second.data, unbundled.data)
    assert device.live_buffers() == []


def test_a_cost_model_that_never_saw_a_column_vary_is_not_reused(ensemble):
    """Both columns stay in the table (one kernel); the first run varies beta only, so
    its cost model knows nothing of gamma; a run that varies gamma runs a pilot."""
    from sbmlgpu.tasks import TimeCourse

    net, params, _ = ensemble
    device, program, scheduler = _fake_gpu_program(net)

    def run(parameters):
        return program.run(TimeCourse(times=TIMES, parameters=parameters, progress=False,
                                      table_columns=("beta", "gamma")), scheduler)

    beta_only = {"beta": params["beta"], "gamma": np.full(640, 0.2)}
    gamma_only = {"beta": np.full(640, 1.0), "gamma": params["gamma"]}
    assert run(beta_only).metadata["bundling_info"]["fitted_on"] == "the pilot"
    again = run(beta_only)
    assert again.metadata["bundling_info"]["fitted_on"] == "the previous run"
    other = run(gamma_only)
    assert _bundled(other)
    assert other.metadata["bundling_info"]["fitted_on"] == "the pilot"
    assert np.array_equal(other.data, run_cpu(net, "dopri5", times=TIMES,
                                              parameters=gamma_only, bundling=False).data)
    assert device.live_buffers() == []


def test_a_cost_model_that_does_not_pay_leaves_the_members_in_order(ensemble, monkeypatch):
    """Where the pilot's own warps fill no better in the model's order, the run is not
    bundled (no gathers, the same results), and the next run of the kernel, knowing
    that from the first run's steps, runs no pilot either."""
    from sbmlgpu.plugins.ode import bundling
    from sbmlgpu.tasks import TimeCourse

    monkeypatch.setattr(bundling, "MIN_GAIN", 100.0)  # nothing pays
    monkeypatch.setattr(bundling, "MIN_GAIN_MEMBERS", 0)
    net, params, unbundled = ensemble
    device, program, scheduler = _fake_gpu_program(net)
    results, launches = [], []
    for _ in range(2):
        before = len(device.launches)
        results.append(program.run(TimeCourse(times=TIMES, parameters=params,
                                              progress=False), scheduler))
        launches.append([launch[0] for launch in device.launches[before:]])
    for result in results:
        assert result.metadata["bundling"].startswith("not used: ordered by its cost model")
        assert np.array_equal(result.data, unbundled.data)
    assert results[1].metadata["bundling_info"]["fitted_on"] == "the previous run"
    assert GATHER not in launches[0] + launches[1]
    kernels = [[name for name in run if name.startswith("sbmlgpu_ode_")] for run in launches]
    assert len(kernels[1]) == len(kernels[0]) - 1  # the pilot's launch, once
    assert device.live_buffers() == []


@pytest.mark.parametrize("threshold,gathered", [(0, True), (10**6, False)])
def test_an_unbundled_run_gathers_its_ranges_on_the_gpu_when_large(ensemble, monkeypatch,
                                                                   threshold, gathered):
    """Without bundling, a run of several varied columns and at least
    RESIDENT_MIN_MEMBERS members keeps its table on the GPU and gathers each batch's
    range there (no strided copy on the host); a smaller one copies as before. Either
    way the results are the CPU path's."""
    from sbmlgpu.plugins.ode import program as ode_program
    from sbmlgpu.plugins.ode.backend import OdeBackend
    from sbmlgpu.plugins.ode.options import OdeOptions
    from sbmlgpu.schedule import Scheduler
    from sbmlgpu.tasks import TimeCourse

    monkeypatch.setattr(ode_program, "RESIDENT_MIN_MEMBERS", threshold)
    net, params, unbundled = ensemble
    device = FakeDevice(compile=compile_for_host)
    options = OdeOptions(method="dopri5", bundling=False).validate()
    program = OdeBackend().compile(net, options, device)
    scheduler = Scheduler(devices=[device], max_batch_items=200, progress=False)
    result = program.run(TimeCourse(times=TIMES, parameters=params, progress=False), scheduler)
    gathers = sum(launch[0] == GATHER for launch in device.launches)
    assert gathers == (4 if gathered else 0), gathers  # a gather per batch, or none
    assert np.array_equal(result.status, unbundled.status)
    assert np.array_equal(result.data, unbundled.data)
    assert device.live_buffers() == []


def test_with_lanes_that_refill_repeated_runs_time_both_orders_and_keep_the_faster(
        ensemble, monkeypatch):
    """Where lanes refill and members outnumber them, what ordering saves in time is
    measured, not modelled: after the run with a pilot, the next runs of the kernel
    take the estimate's way, then the other, each timed (seconds a step of the whole
    run), and later runs the faster; the results equal an unbundled run every time."""
    from sbmlgpu.ode.engines import GpuEngine
    from sbmlgpu.tasks import TimeCourse

    net, params, unbundled = ensemble
    monkeypatch.setattr(GpuEngine, "resident_lanes", lambda self, device, block, max_lanes=0: 64)
    device, program, scheduler = _fake_gpu_program(net)
    ways, before = [], {}
    for _ in range(5):
        timings = next(iter(program._order_timings.values()), {})
        before = dict(timings)  # what the run decides by
        result = program.run(TimeCourse(times=TIMES, parameters=params, progress=False),
                             scheduler)
        assert np.array_equal(result.data, unbundled.data)
        assert np.array_equal(result.status, unbundled.status)
        ways.append(_bundled(result))
    assert result.metadata["lanes"].startswith("refill")
    assert set(before) == {True, False}
    assert ways[2] != ways[1]  # the second timed run takes the other way
    faster = before[True] < before[False]
    assert ways[4] == faster
    info = result.metadata["bundling_info"]["measured_s_per_step"]
    assert set(info) == {"bundled", "unbundled"} and min(info.values()) > 0
    if not faster:
        assert "ns a step unbundled" in result.metadata["bundling"]


@pytest.mark.parametrize("lanes", [64, 640])
def test_a_first_run_with_more_members_than_refilling_lanes_has_no_pilot(
        ensemble, monkeypatch, lanes):
    """Under lanes that refill with more members than lanes, a first run launches no
    pilot (the order would save about what the pilot costs): its members in their
    order, the reason said, its own steps fitting the next run's cost model. With a
    lane for every member (640), warps decide and the pilot runs as before."""
    from sbmlgpu.ode.engines import GpuEngine
    from sbmlgpu.plugins.ode import bundling
    from sbmlgpu.tasks import TimeCourse

    net, params, unbundled = ensemble
    monkeypatch.setattr(GpuEngine, "resident_lanes",
                        lambda self, device, block, max_lanes=0: lanes)
    device, program, scheduler = _fake_gpu_program(net)

    def run():
        before = len(device.launches)
        result = program.run(TimeCourse(times=TIMES, parameters=params, progress=False),
                             scheduler)
        sizes = [grid[0] * block[0] for name, grid, block, _ in device.launches[before:]
                 if name not in (GATHER, "sbmlgpu_member_major")]
        assert np.array_equal(result.status, unbundled.status)
        assert np.array_equal(result.data, unbundled.data)
        return result, sizes

    first, first_sizes = run()
    second, second_sizes = run()
    assert second.metadata["bundling_info"]["fitted_on"] == "the previous run"
    if lanes < 640:
        assert first.metadata["bundling"] == bundling.FIRST_UNDER_REFILL
        assert len(first_sizes) == len(second_sizes) == 1  # no pilot launch either time
    else:
        assert first.metadata["bundling_info"]["fitted_on"] == "the pilot"
        assert len(first_sizes) == len(second_sizes) + 1
