"""The second pass on the host's cores beside the GPU (plugins/ode/host_pass.py, passes.py):
members a GPU's first pass leaves past --pass-steps run on the host build of the same
kernel, one member per host thread, when they are few (host_pass.HOST_MEMBERS_PER_CORE
per core); the rest of the time the device runs them as before. Here the "GPU" is a fake
device that runs the kernel through its host build (tests/test_ode_engine_fake.py), so
that the two passes must equal one pass bit for bit: same members in the same rows,
same random streams (the model draws x(0) per member), statuses and step counts.

The model is test_ode_limits.py's: x' = -k (x - cos t), dopri5's steps grow with k.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import sbmlgpu
from sbmlgpu.results import Status

from .fakes import FakeDevice
from .ode_helpers import needs_compiler
from .test_ode_engine_fake import compile_for_host
from .test_ode_limits import STIFF, TIMES

K = 10 ** np.random.default_rng(7).uniform(0, 5, 400)  # ~20 to ~3e4 steps
PASS_STEPS = 3000  # ~1e5 < k: a few dozen members past it


@pytest.fixture(scope="module")
def model():
    needs_compiler()
    return sbmlgpu.load(STIFF)


class Spy:
    """Counts members handed to the fake GPU's engine and to the host pass."""

    def __init__(self, monkeypatch):
        from sbmlgpu.ode.engines import GpuEngine
        from sbmlgpu.plugins.ode import host_pass

        self.gpu_members: list[int] = []
        self.host_runs: list[int] = []
        self.builds: list[bool] = []  # build_started right after for_run
        self.hosts: list = []  # what for_run made (None: no host pass)
        gpu_run, host_run, for_run = GpuEngine.run, host_pass.HostSecondPass.run, \
            host_pass.for_run

        def on_gpu(engine, device, table, *args, **kwargs):
            self.gpu_members.append(int(table.shape[1]))
            return gpu_run(engine, device, table, *args, **kwargs)

        def on_host(host, members, done=None, retry=None):
            self.host_runs.append(len(members))
            return host_run(host, members, done, retry)

        def made(*args, **kwargs):
            host = for_run(*args, **kwargs)
            self.builds.append(host is not None and host.build_started)
            self.hosts.append(host)
            return host

        monkeypatch.setattr(GpuEngine, "run", on_gpu)
        monkeypatch.setattr(host_pass.HostSecondPass, "run", on_host)
        monkeypatch.setattr(host_pass, "for_run", made)


def fake_gpu(network, k=K, *, summary=False, **options):
    from sbmlgpu.plugins.ode.backend import OdeBackend
    from sbmlgpu.plugins.ode.options import OdeOptions
    from sbmlgpu.schedule import Scheduler
    from sbmlgpu.tasks import TimeCourse

    device = FakeDevice(compile=compile_for_host)
    options = OdeOptions(**{"method": "dopri5", "pilot_size": 32, **options}).validate()
    program = OdeBackend().compile(network, options, device)
    task = TimeCourse(times=TIMES, parameters={"k": np.asarray(k, float)}, seed=5,
                      summary=summary, progress=False)
    result = program.run(task, Scheduler(devices=[device], progress=False))
    return result, program


@pytest.fixture(scope="module")
def one_pass(model):
    return fake_gpu(model, pass_steps=0)


def test_few_slow_members_run_on_host_threads_equal_to_one_pass(model, one_pass,
                                                                monkeypatch):
    from sbmlgpu.plugins.ode import host_pass

    monkeypatch.setattr(host_pass, "HOST_MEMBERS_PER_CORE", 10**6)  # any count here
    spy = Spy(monkeypatch)
    one, one_program = one_pass
    two, two_program = fake_gpu(model, pass_steps=PASS_STEPS)
    slow = np.flatnonzero(one_program.last_steps > PASS_STEPS)
    assert 10 < len(slow) < 200
    meta = two.metadata
    assert meta["second_pass_members"] == len(slow)
    assert meta["second_pass_where"] == "host"
    assert meta["second_pass_threads"] == min(host_pass.host_cores(), len(slow))
    # the device ran the pilot and the first pass only; the host the slow members
    assert spy.host_runs == [len(slow)]
    assert sum(spy.gpu_members) == 32 + len(K)
    assert np.array_equal(two.status, one.status)
    assert np.array_equal(two_program.last_steps, one_program.last_steps)
    assert np.array_equal(two.data, one.data)
    # the slowest member by steps ran on a host thread: its own seconds
    slowest = meta["slowest_member"]
    assert slowest["member"] == int(np.argmax(one_program.last_steps)) == meta["steps_max_member"]
    assert slowest["steps"] == meta["steps_max"] and slowest["pass"] == 2
    assert slowest["seconds_are"] == "its own, on a host thread"
    assert 0 < slowest["seconds"] <= meta["second_pass_seconds"]
    assert 0 < meta["first_pass_seconds"] < meta["wall_seconds"]


def test_many_slow_members_stay_on_the_device(model, one_pass, monkeypatch):
    from sbmlgpu.plugins.ode import host_pass, passes

    monkeypatch.setattr(host_pass, "HOST_MEMBERS_PER_CORE", 0)  # the rule says: device
    spy = Spy(monkeypatch)
    one, one_program = one_pass
    two, two_program = fake_gpu(model, pass_steps=PASS_STEPS)
    middle = passes.MIDDLE_PASS_FACTOR * PASS_STEPS
    slow = int((one_program.last_steps > PASS_STEPS).sum())
    tail = int((one_program.last_steps > middle).sum())
    meta = two.metadata
    assert meta["second_pass_where"] == "device"
    assert meta["second_pass_threads"] is None
    # a middle pass on the device with 10x the budget, then the tail (if any) there too
    assert meta["later_passes"][0]["max_steps"] == middle
    assert meta["later_passes"][0]["members"] == slow
    assert [p["members"] for p in meta["later_passes"][1:]] == ([tail] if tail else [])
    assert spy.host_runs == [] and sum(spy.gpu_members) == 32 + len(K) + slow + tail
    assert np.array_equal(two.status, one.status)
    assert np.array_equal(two_program.last_steps, one_program.last_steps)
    assert np.array_equal(two.data, one.data)
    # the slowest member's seconds are its launch's, an upper bound
    slowest = meta["slowest_member"]
    assert slowest["seconds_are"] == "its launch's wall time (an upper bound)"
    assert slowest["seconds"] <= meta["second_pass_seconds"]


def test_a_middle_pass_leaves_the_long_tail_to_the_host(model, one_pass, monkeypatch):
    """Too many members past --pass-steps for the host: the device runs them with 10x
    the budget, and the fewer past that run on the host's threads."""
    from sbmlgpu.plugins.ode import host_pass, passes

    one, one_program = one_pass
    steps = one_program.last_steps
    pass_steps = 300
    slow = int((steps > pass_steps).sum())
    tail = int((steps > passes.MIDDLE_PASS_FACTOR * pass_steps).sum())
    assert 0 < tail < slow
    monkeypatch.setattr(host_pass, "host_cores", lambda: 1)
    monkeypatch.setattr(host_pass, "HOST_MEMBERS_PER_CORE", (slow + tail) // 2)
    spy = Spy(monkeypatch)
    two, two_program = fake_gpu(model, pass_steps=pass_steps)
    meta = two.metadata
    assert [(p["members"], p["where"]) for p in meta["later_passes"]] == \
        [(slow, "device"), (tail, "host")]
    assert meta["second_pass_where"] == "host" and spy.host_runs == [tail]
    assert sum(spy.gpu_members) == 32 + len(K) + slow
    assert np.array_equal(two.status, one.status)
    assert np.array_equal(two_program.last_steps, steps)
    assert np.array_equal(two.data, one.data)


def test_the_rule_counts_members_against_cores(monkeypatch):
    from sbmlgpu.plugins.ode.host_pass import (HOST_MEMBERS_PER_CORE, LATER_FACTOR,
                                               TAIL_FACTOR, HostSecondPass)

    host = HostSecondPass(None, np.zeros((1, 4)), TIMES, 1, None, cores=16)
    assert host.takes(1) and host.takes(16 * HOST_MEMBERS_PER_CORE)
    assert not host.takes(16 * HOST_MEMBERS_PER_CORE + 1) and not host.takes(0)
    # a middle pass's long tail: TAIL_FACTOR x as many a core
    most = 16 * HOST_MEMBERS_PER_CORE * TAIL_FACTOR
    assert host.takes(most, tail=True) and not host.takes(most + 1, tail=True)
    # the host runs bdf where the device ran rodas4: LATER_FACTOR x as many, tail or not
    later = HostSecondPass(None, np.zeros((1, 4)), TIMES, 1, None, cores=16,
                           later_method=True)
    most = 16 * HOST_MEMBERS_PER_CORE * max(LATER_FACTOR, TAIL_FACTOR)
    for tail in (False, True):
        assert later.takes(most, tail=tail) and not later.takes(most + 1, tail=tail)
    assert LATER_FACTOR > 1 and TAIL_FACTOR > 1


def test_the_tail_of_a_middle_pass_gets_more_members_a_core(model, one_pass, monkeypatch):
    """A tail too long for the plain rule but within TAIL_FACTOR x it runs on the host."""
    from sbmlgpu.plugins.ode import host_pass, passes

    one, one_program = one_pass
    steps = one_program.last_steps
    pass_steps = 300
    slow = int((steps > pass_steps).sum())
    tail = int((steps > passes.MIDDLE_PASS_FACTOR * pass_steps).sum())
    per_core = -(-tail // host_pass.TAIL_FACTOR)  # the least that takes the tail
    assert per_core < tail < slow  # the plain rule would take neither
    monkeypatch.setattr(host_pass, "host_cores", lambda: 1)
    monkeypatch.setattr(host_pass, "HOST_MEMBERS_PER_CORE", per_core)
    spy = Spy(monkeypatch)
    two, two_program = fake_gpu(model, pass_steps=pass_steps)
    assert [(p["members"], p["where"]) for p in two.metadata["later_passes"]] == \
        [(slow, "device"), (tail, "host")]
    assert spy.host_runs == [tail]
    assert np.array_equal(two.status, one.status)
    assert np.array_equal(two.data, one.data)


def test_a_failed_host_build_leaves_the_pass_to_the_device(model, one_pass,
                                                            monkeypatch, caplog):
    from sbmlgpu.errors import DeviceError
    from sbmlgpu.plugins.ode import host_pass

    monkeypatch.setattr(host_pass, "HOST_MEMBERS_PER_CORE", 10**6)

    def broken(host):
        raise DeviceError("no host build today")

    monkeypatch.setattr(host_pass.HostSecondPass, "_load", broken)
    one, _ = one_pass
    with caplog.at_level("WARNING", logger="sbmlgpu.ode"):
        two, _ = fake_gpu(model, pass_steps=PASS_STEPS)
    assert two.metadata["second_pass_where"] == "device"
    assert "no host build today" in caplog.text
    # the device ran them as without a host: a middle pass first (the host's rule had
    # taken them all, more than a device pass of the full budget should hold)
    from sbmlgpu.plugins.ode import passes
    assert two.metadata["later_passes"][0]["max_steps"] == \
        passes.MIDDLE_PASS_FACTOR * PASS_STEPS
    assert np.array_equal(two.status, one.status)
    assert np.array_equal(two.data, one.data)


def test_a_failed_host_build_is_not_tried_again_by_the_next_run(model, monkeypatch,
                                                                caplog):
    """The program keeps the failure (host_pass.FailedBuilds): its next run's slow
    members go to the device without another g++ run or warning."""
    from sbmlgpu.errors import DeviceError
    from sbmlgpu.plugins.ode import host_pass, native
    from sbmlgpu.schedule import Scheduler
    from sbmlgpu.tasks import TimeCourse

    monkeypatch.setattr(host_pass, "HOST_MEMBERS_PER_CORE", 10**6)
    builds = []
    real = native.host_kernel

    def broken(source):  # the host pass's build (its thread), not the fake GPU's
        if threading.current_thread().name != "sbmlgpu-ode-host-pass-build":
            return real(source)
        builds.append(source.name)
        raise DeviceError("no host build today")

    monkeypatch.setattr(native, "host_kernel", broken)
    with caplog.at_level("WARNING", logger="sbmlgpu.ode"):
        first, program = fake_gpu(model, pass_steps=PASS_STEPS)
        task = TimeCourse(times=TIMES, parameters={"k": np.asarray(K, float)}, seed=5,
                          progress=False)
        again = program.run(task, Scheduler(devices=[program.device], progress=False))
    assert first.metadata["second_pass_where"] == "device"
    assert again.metadata["second_pass_where"] == "device"
    assert len(builds) == 1 and caplog.text.count("no host build today") == 1
    assert np.array_equal(again.status, first.status)
    assert np.array_equal(again.data, first.data)


def test_a_summary_folds_the_host_pass_in(model, monkeypatch):
    # the fake device does not run the summary kernels (their statistics are not
    # numbers to compare): the counts, from the statuses, are
    from sbmlgpu.plugins.ode import host_pass

    monkeypatch.setattr(host_pass, "HOST_MEMBERS_PER_CORE", 10**6)
    one, _ = fake_gpu(model, summary=True, pass_steps=0)
    two, _ = fake_gpu(model, summary=True, pass_steps=PASS_STEPS)
    assert two.metadata["second_pass_where"] == "host"
    assert two.metadata["second_pass_members"] > 10
    assert np.array_equal(two.status, one.status)
    assert (two.summary.n_used, two.summary.n_excluded) == \
        (one.summary.n_used, one.summary.n_excluded)


def test_the_host_build_starts_early_only_where_no_pilot_will_tell(model, monkeypatch):
    from sbmlgpu.plugins.ode import host_pass

    spy = Spy(monkeypatch)
    fake_gpu(model, K[:200], bundling=False, pass_steps=PASS_STEPS)  # no pilot, 200 members
    fake_gpu(model, K[:20], bundling=False, pass_steps=PASS_STEPS)  # a small run
    fake_gpu(model, K, pass_steps=PASS_STEPS)  # bundled: the pilot tells
    fake_gpu(model, K, pass_steps=0)  # one pass: nothing to build
    assert spy.builds == [True, False, False, False]
    assert 20 < host_pass.EARLY_BUILD_MIN_MEMBERS <= 200


def test_on_the_cpu_path_nothing_changes(model):
    from .test_ode_limits import simulate

    result, program, scheduler = simulate(model, K, pass_steps=PASS_STEPS)
    meta = result.metadata
    assert meta["second_pass_where"] == "host" and meta["second_pass_threads"] is None
    # the CPU path's second pass ran through the scheduler, as before
    assert any("second pass" in desc for _, desc in scheduler.calls)
    assert meta["slowest_member"]["seconds_are"] == "its launch's wall time (an upper bound)"


def test_a_long_pass_says_so_once_on_stderr(model, monkeypatch, capsys):
    from sbmlgpu.plugins.ode import passes

    from .test_ode_limits import simulate

    monkeypatch.setattr(passes, "LONG_PASS_S", 0.01)
    # k = 1e8 without the interval limit: ~3e6 steps per output interval, seconds
    simulate(model, [1.0, 1e8], pass_steps=1000, max_steps_per_interval=0)
    lines = [line for line in capsys.readouterr().err.splitlines() if "has run" in line]
    assert len(lines) == 1
    assert "members left" in lines[0] and "--member-time-limit SECONDS" in lines[0]


def test_a_short_run_says_nothing(model, capsys):
    from .test_ode_limits import simulate

    simulate(model, K[:50], pass_steps=PASS_STEPS)
    assert "has run" not in capsys.readouterr().err


@pytest.mark.gpu
def test_on_the_gpu_slow_members_run_on_the_host_and_sooner(model, gpu_device,
                                                             monkeypatch):
    """On the GPU: a few members of ~10^6 dopri5 steps run on host threads by default
    (second_pass_where "host"), equal to a one-pass GPU run within the GPU-vs-host
    tolerance of tests/test_ode_gpu.py, and their pass takes less time than the same
    pass on the GPU (forced with HOST_MEMBERS_PER_CORE = 0)."""
    from sbmlgpu.api import run
    from sbmlgpu.plugins.ode import host_pass

    # two members of ~3e5 and ~6e5 steps (~0.03 k per output interval)
    k = np.concatenate([10 ** np.random.default_rng(3).uniform(0, 3, 4000), [1e6, 2e6]])

    def gpu(**options):
        return run(model, "ode", times=TIMES, parameters={"k": k}, seed=5, progress=False,
                   options={"method": "dopri5", "max_steps_per_interval": 0, **options},
                   device=[gpu_device.index])

    one = gpu(pass_steps=0)
    gpu()  # builds the host library (cached): the run below times the pass alone
    two = gpu()
    assert two.metadata["second_pass_where"] == "host"
    assert two.metadata["second_pass_members"] == 2
    assert np.array_equal(one.status, two.status)
    assert (one.status == Status.ok).all()
    assert np.allclose(one.data, two.data, rtol=1e-7, atol=1e-9)
    monkeypatch.setattr(host_pass, "HOST_MEMBERS_PER_CORE", 0)
    on_device = gpu()
    assert on_device.metadata["second_pass_where"] == "device"
    assert two.metadata["second_pass_seconds"] < on_device.metadata["second_pass_seconds"]


def test_a_reduction_goes_to_the_host_only_where_it_can_score_members_there():
    """A run reduced per member (TimeCourse.reduce) keeps a host pass only where the
    reduction scores members on the host (`on_host`; the PEtab objective's does,
    tests/test_petab_gpu_objective.py): another's slow members stay on the device."""
    from sbmlgpu.plugins.ode import host_pass, passes

    needs_compiler()

    class DeviceOnly:
        names = ("total",)

        def launch(self, *args, **kwargs):
            raise AssertionError("not launched here")

    class Both(DeviceOnly):
        def on_host(self, data, status, members):
            return {"total": data.sum(axis=(1, 2))}

    def made(reduce):
        return host_pass.for_run(None, np.zeros((1, 4)), TIMES, 1, None,
                                 passes.StepBudget(10, 100), True, None, True, reduce)

    assert made(DeviceOnly()) is None
    host = made(Both())
    assert host is not None and isinstance(host.reduce, Both)
    assert not host.build_started  # a pilot will say whether members pause

    class Built:
        dtype = np.float64

    # a reduction without build_host (optional: on_host builds what it needs)
    host._load = lambda: Built()
    assert isinstance(host.kernel(), Built)
