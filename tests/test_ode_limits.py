"""No stalled ensembles (issue 13): the limits that stop slow members
(--max-steps-per-interval, --member-time-limit: sbmlgpu.ode's templates/limits.cuh)
and the second pass over members past --pass-steps (plugins/ode/passes.py), on the
CPU path, i.e. the kernel's own code built for the host.

The model: x' = -k (x - cos t), x(0) drawn uniform on (0, 1) per member (a distrib
draw: the second pass must give each member its own random stream again). dopri5's
step is bounded by stability at about 3.3/k, so its steps grow in proportion to k:
k spread over decades makes members from ~20 steps to millions.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import sbmlgpu
from sbmlgpu.errors import OptionError
from sbmlgpu.plugins.ode.options import OdeOptions
from sbmlgpu.results import Status
from sbmlgpu.schedule import Scheduler

from .ode_helpers import needs_compiler

MATHML = 'xmlns="http://www.w3.org/1998/Math/MathML"'
TIME = ('<csymbol encoding="text" definitionURL="http://www.sbml.org/sbml/symbols/time">'
        ' t </csymbol>')
UNIFORM = ('<apply><csymbol encoding="text" definitionURL="http://www.sbml.org/sbml/symbols/'
           'distrib/uniform"> uniform </csymbol><cn> 0 </cn><cn> 1 </cn></apply>')
STIFF = f'''<?xml version="1.0" encoding="UTF-8"?>
<sbml xmlns="http://www.sbml.org/sbml/level3/version2/core"
      xmlns:distrib="http://www.sbml.org/sbml/level3/version1/distrib/version1"
      level="3" version="2" distrib:required="true">
  <model id="stiff_over_decades">
    <listOfParameters>
      <parameter id="k" value="1" constant="true"/>
      <parameter id="x" value="0" constant="false"/>
    </listOfParameters>
    <listOfInitialAssignments>
      <initialAssignment symbol="x"><math {MATHML}>{UNIFORM}</math></initialAssignment>
    </listOfInitialAssignments>
    <listOfRules><rateRule variable="x"><math {MATHML}><apply><times/>
      <apply><minus/><ci> k </ci></apply>
      <apply><minus/><ci> x </ci><apply><cos/>{TIME}</apply></apply>
    </apply></math></rateRule></listOfRules>
  </model>
</sbml>'''
TIMES = np.linspace(0.0, 1.0, 11)  # intervals of 0.1: ~0.03 k dopri5 steps each


class Recording(Scheduler):
    """The host scheduler, noting each map_batches call's item count and description."""

    def __init__(self):
        super().__init__(progress=False)
        self.calls: list[tuple[int, str]] = []

    def map_batches(self, work, n_items, *args, **kwargs):
        self.calls.append((n_items, kwargs.get("desc", "")))
        return super().map_batches(work, n_items, *args, **kwargs)


@pytest.fixture(scope="module")
def model():
    needs_compiler()
    return sbmlgpu.load(STIFF)


def simulate(model, k, *, summary=False, seed=0, **options):
    """(result, program, scheduler) of dopri5 on the native CPU path; one pass unless
    `pass_steps` is given."""
    from sbmlgpu.plugins.ode.backend import OdeBackend
    from sbmlgpu.tasks import TimeCourse

    options = OdeOptions(**{"method": "dopri5", "cpu_engine": "native", "pass_steps": 0,
                            **options}).validate()
    program = OdeBackend().compile(model, options, None)
    scheduler = Recording()
    task = TimeCourse(times=TIMES, parameters={"k": np.asarray(k, float)}, seed=seed,
                      summary=summary, progress=False)
    return program.run(task, scheduler), program, scheduler


def names(result) -> list[str]:
    return [Status(int(c)).name for c in result.status]


def test_members_past_the_interval_limit_stop_with_their_own_status(model):
    # k = 1e6 needs ~30,000 steps in the first interval, k = 1e7 ten times more: past
    # the default 20,000; the others need a few thousand steps in all at most
    assert OdeOptions().max_steps_per_interval == 20_000
    k = np.array([1.0, 1e6, 30.0, 1e3, 1e7, 3e4])
    slow = np.array([False, True, False, False, True, False])
    result, program, _ = simulate(model, k)
    assert names(result) == ["max_steps_per_interval" if s else "ok" for s in slow]
    # t0's output written, then stopped before the next output time
    assert np.isfinite(result.data[slow, 0]).all() and np.isnan(result.data[slow, 1:]).all()
    assert np.isfinite(result.data[~slow]).all()
    assert np.array_equal(program.last_steps[slow], [20_000, 20_000])
    meta = result.metadata
    assert meta["limit_members"] == {"max_steps_per_interval": {"count": 2, "members": [1, 4]}}
    assert meta["steps_max"] == 20_000 and meta["steps_max_member"] == 1
    assert meta["limits"]["max_steps_per_interval"] == 20_000
    message = result.messages[1]
    assert "--max-steps-per-interval" in message and "t = 0 and t = 0.1" in message


def test_the_other_members_equal_a_run_without_the_slow_ones(model):
    """A member's numbers depend on its parameters and member number only: the fast
    members of a mixed ensemble (first, so they keep their member numbers and x(0)
    draws) equal an ensemble of them alone."""
    fast = np.array([1.0, 30.0, 1e3, 3e4])
    mixed, program, _ = simulate(model, np.concatenate([fast, [1e6, 1e7, 3e6]]))
    alone, alone_program, _ = simulate(model, fast)
    assert names(alone) == ["ok"] * 4
    assert names(mixed) == ["ok"] * 4 + ["max_steps_per_interval"] * 3
    assert np.array_equal(mixed.data[:4], alone.data)
    assert np.array_equal(program.last_steps[:4], alone_program.last_steps)


def test_without_the_interval_limit_the_slow_member_runs_to_the_end(model):
    result, program, _ = simulate(model, [1e6], max_steps_per_interval=0)
    assert names(result) == ["ok"] and program.last_steps[0] > 20_000
    assert result.metadata["limit_members"] == {}


def test_the_least_advanced_members_go_first_into_the_second_pass():
    """Members past the budget by the output times they reached (fewest first, ties in
    member order); without time courses on the host, in member order."""
    from sbmlgpu.plugins.ode.passes import least_advanced_first

    data = np.full((6, 5, 2), np.nan)
    data[:, 0] = 1.0  # t0 reached by every member
    data[1, :4, 1] = 2.0  # member 1: 4 times (one output is enough for a time)
    data[3, :2] = 3.0  # member 3: 2 times
    data[5, :2] = 4.0  # member 5: 2 times
    paused = np.array([1, 3, 4, 5])
    assert least_advanced_first(paused, data).tolist() == [4, 3, 5, 1]
    assert least_advanced_first(paused, None).tolist() == [1, 3, 4, 5]
    assert least_advanced_first(paused[:1], data).tolist() == [1]
    # members that end at their own times: the share of their own times reached
    # (member 1: 4 of 5, 3: 2 of 2, 4: 1 of 5, 5: 2 of 4)
    counts = np.array([5, 5, 5, 2, 5, 4])
    assert least_advanced_first(paused, data, counts).tolist() == [4, 5, 1, 3]
    # a spilled result is read a block of members at a time: the same order
    import sbmlgpu.plugins.ode.passes as passes
    block, passes.ORDER_BLOCK = passes.ORDER_BLOCK, 1
    try:
        assert least_advanced_first(paused, data, counts).tolist() == [4, 5, 1, 3]
    finally:
        passes.ORDER_BLOCK = block


def test_the_second_pass_takes_its_members_least_advanced_first(model, monkeypatch):
    """The rerun's batches name the members in that order, and the results land on
    each member's own rows (the test below: equal to one pass)."""
    from sbmlgpu.plugins.ode import passes

    given = []
    monkeypatch.setattr(passes, "_second_pass", lambda job, paused, rerun, what: (
        given.append(paused.copy()), _SECOND_PASS(job, paused, rerun, what))[1])
    k = 10 ** np.random.default_rng(3).uniform(0, 5, 200)
    one, _, _ = simulate(model, k, seed=2)
    two, program, _ = simulate(model, k, pass_steps=300, seed=2)
    assert len(given) == 1 and len(given[0]) == two.metadata["second_pass_members"] > 5
    # how far each got in 300 steps: a run stopped there (as its first pass was)
    capped, _, _ = simulate(model, k, max_steps=300, seed=2)
    reached = np.isfinite(capped.data).any(axis=2).sum(axis=1)[given[0]]
    assert np.all(np.diff(reached) >= 0) and reached[0] < reached[-1]
    ties = np.diff(reached) == 0
    assert np.all(np.diff(given[0])[ties] > 0)  # in member order within a tie
    assert not np.array_equal(given[0], np.sort(given[0]))
    assert np.array_equal(one.status, two.status) and np.array_equal(one.data, two.data)


def test_a_range_of_members_out_of_order_keeps_its_own_time_courses(model):
    """Every member past the budget, least advanced first: the second pass's batch is
    members [1, 0], a contiguous range out of order, whose rows must stay in launch
    order (a review found them written in member order: the two members' time
    courses swapped, statuses and steps right)."""
    k = np.array([3000.0, 30000.0])  # both past 300 steps; k = 3e4 got less far
    one, _, _ = simulate(model, k, seed=2)
    two, _, _ = simulate(model, k, pass_steps=300, seed=2)
    assert two.metadata["second_pass_members"] == 2
    assert not np.array_equal(one.data[0], one.data[1])
    assert np.array_equal(one.status, two.status) and np.array_equal(one.data, two.data)


_SECOND_PASS = __import__("sbmlgpu.plugins.ode.passes", fromlist=["_second_pass"])._second_pass


@pytest.mark.parametrize("summary", [False, True])
def test_two_passes_equal_one_pass_member_for_member(model, summary):
    # 400 members, k log-uniform over five decades: the members past 300 steps (k above
    # ~1e3) run again from t0 in a second pass (the CPU path never bundles: the GPU
    # test below has bundling and two passes together)
    k = 10 ** np.random.default_rng(7).uniform(0, 5, 400)
    one, one_program, _ = simulate(model, k, pilot_size=32, summary=summary, seed=5)
    two, two_program, scheduler = simulate(model, k, pilot_size=32, pass_steps=300,
                                           summary=summary, seed=5)
    slow = one_program.last_steps > 300
    assert 20 < slow.sum() < 380
    assert two.metadata["second_pass_members"] == slow.sum()
    assert one.metadata["second_pass_members"] == 0
    assert two.metadata["bundling"] == "not used on the CPU path (no warps to fill)"
    # the second pass ran through the scheduler over the slow members alone
    assert (int(slow.sum()), f"trajectories (second pass: {slow.sum():,} members past 300 "
                             f"steps)") in scheduler.calls
    assert np.array_equal(one.status, two.status)
    assert np.array_equal(one_program.last_steps, two_program.last_steps)
    if not summary:
        assert np.array_equal(one.data, two.data)
        return
    assert (one.summary.n_used, one.summary.n_excluded) == \
        (two.summary.n_used, two.summary.n_excluded)
    # the histogram range comes from the pilot's ok members, and the pilot runs with
    # the first pass's budget: the bins may differ, each quantile is within its bin
    resolution = one.metadata["quantile_resolution_max"] + \
        two.metadata["quantile_resolution_max"]
    assert np.abs(one.summary.quantile_values - two.summary.quantile_values).max() \
        <= resolution
    np.testing.assert_allclose(two.summary.mean, one.summary.mean, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(two.summary.sd, one.summary.sd, rtol=1e-9, atol=1e-15)


def test_a_member_past_the_time_limit_stops_and_the_rest_finish(model):
    # k = 1e9 with no step limits needs ~3e7 steps per output interval (seconds); the
    # others finish in microseconds, far inside the limit
    started = time.perf_counter()
    result, program, _ = simulate(model, [1.0, 1e9, 30.0], max_steps_per_interval=0,
                                  max_steps=10**12, member_time_limit=0.3, pass_steps=0)
    elapsed = time.perf_counter() - started
    alone, _, _ = simulate(model, [1.0], pass_steps=0)
    assert names(result) == ["ok", "time_limit", "ok"]
    assert np.array_equal(result.data[0], alone.data[0])
    assert elapsed < 30  # not the ~30 s or more the member would need
    assert program.last_steps[1] > 1000
    assert result.metadata["limit_members"] == {"time_limit": {"count": 1, "members": [1]}}
    assert "--member-time-limit" in result.messages[1]


def test_the_time_limit_stops_rk4_between_output_times(model):
    # rk4 checks the clock once per output interval: 10^6 steps each here
    from sbmlgpu.plugins.ode.backend import OdeBackend
    from sbmlgpu.tasks import TimeCourse

    options = OdeOptions(method="rk4", cpu_engine="native", dt=1e-7, max_steps=10**9,
                         member_time_limit=0.01).validate()
    program = OdeBackend().compile(model, options, None)
    result = program.run(TimeCourse(times=TIMES, parameters={"k": np.array([1.0])},
                                    progress=False), Scheduler(progress=False))
    assert names(result) == ["time_limit"]
    done = np.isfinite(result.data[0, :, 0])
    assert done[0] and not done[-1]  # stopped part way, its later outputs NaN
    assert np.array_equal(done, np.arange(len(TIMES)) < done.sum())


def test_bad_limits_are_option_errors():
    for bad in ({"member_time_limit": float("inf")}, {"member_time_limit": -1.0},
                {"max_steps_per_interval": -1}, {"pass_steps": -5}):
        with pytest.raises(OptionError):
            OdeOptions(**bad).validate()


def test_the_new_statuses_reach_the_kernels():
    defines = Status.c_defines()
    assert f"#define SBMLGPU_STATUS_MAX_STEPS_PER_INTERVAL {int(Status.max_steps_per_interval)}" \
        in defines
    assert f"#define SBMLGPU_STATUS_TIME_LIMIT {int(Status.time_limit)}" in defines
    assert "max_steps_per_interval" in Status.names() and "time_limit" in Status.names()


def test_a_pass_is_split_into_launches_so_that_progress_moves(model, monkeypatch):
    from sbmlgpu.plugins.ode import passes

    k = 10 ** np.random.default_rng(3).uniform(0, 3, 400)
    whole, _, scheduler = simulate(model, k, bundling=False)
    assert len(scheduler.last_batches) == 1  # 400 members: one launch on the host
    monkeypatch.setattr(passes, "HOST_LAUNCH_MIN", 16)
    split, _, scheduler = simulate(model, k, bundling=False)
    assert len(scheduler.last_batches) >= passes.PROGRESS_LAUNCHES
    assert max(b.stop - b.start for b in scheduler.last_batches) <= 25
    assert np.array_equal(whole.data, split.data)


def test_launches_are_never_smaller_than_a_gpu_holds():
    from types import SimpleNamespace

    from sbmlgpu.plugins.ode.passes import PROGRESS_LAUNCHES, launch_cap

    gpu = SimpleNamespace(properties=SimpleNamespace(sm_count=132, max_threads_per_sm=2048))
    assert launch_cap(10**5, [gpu]) == 132 * 2048  # one wave: no split
    assert launch_cap(10**8, [gpu]) == -(-10**8 // PROGRESS_LAUNCHES)


def test_map_batches_caps_this_calls_launches_at_max_items():
    scheduler = Scheduler(progress=False)
    pieces = scheduler.map_batches(lambda device, a, b: np.arange(a, b), 100, 8.0,
                                   max_items=30)
    assert np.array_equal(pieces, np.arange(100))
    assert [(b.start, b.stop) for b in scheduler.last_batches] == \
        [(0, 30), (30, 60), (60, 90), (90, 100)]
    with pytest.raises(OptionError):
        scheduler.map_batches(lambda device, a, b: None, 10, max_items=0)


def test_time_limits_in_nanoseconds_stay_within_an_int64():
    from sbmlgpu.plugins.ode.limits import launch_limits

    assert launch_limits(OdeOptions(member_time_limit=1e-12), "dopri5")["time_limit_ns"] == 1
    assert launch_limits(OdeOptions(member_time_limit=1e30), "dopri5")["time_limit_ns"] == \
        2**63 - 1
    assert launch_limits(OdeOptions(), "rk4") == {"max_interval_steps": 0, "time_limit_ns": 0}


@pytest.mark.gpu
def test_on_the_gpu_bundling_and_two_passes_equal_one_pass(model, gpu_device, monkeypatch):
    """The GPU's default: a bundled first pass (pilot, launch order by predicted steps)
    and later passes over the members past --pass-steps, in their original order. On
    the device alone they equal one pass bit for bit; where the host's rule takes the
    long tail, the host's build (another compiler's rounding) agrees to the tolerance."""
    from sbmlgpu.api import run
    from sbmlgpu.plugins.ode import host_pass

    k = 10 ** np.random.default_rng(7).uniform(0, 5, 4000)

    def gpu(**options):
        return run(model, "ode", times=TIMES, parameters={"k": k}, seed=5, progress=False,
                   options={"method": "dopri5", "pilot_size": 64, **options},
                   device=[gpu_device.index])

    one, with_host = gpu(pass_steps=0), gpu(pass_steps=300)
    monkeypatch.setattr(host_pass, "HOST_MEMBERS_PER_CORE", 0)  # the rule says: device
    two = gpu(pass_steps=300)
    assert two.metadata["bundling"] == "bundled by predicted step count"
    assert 100 < two.metadata["second_pass_members"] < 3900
    assert two.metadata["second_pass_where"] == "device"
    assert np.array_equal(one.status, two.status)
    assert np.array_equal(one.data, two.data, equal_nan=True)
    assert with_host.metadata["second_pass_members"] == two.metadata["second_pass_members"]
    assert np.array_equal(one.status, with_host.status)
    np.testing.assert_allclose(with_host.data, one.data, rtol=1e-4, atol=1e-8)
