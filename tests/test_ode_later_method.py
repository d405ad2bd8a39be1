"""Under --method auto, the members rodas4 leaves past --pass-steps run again with bdf,
and those bdf does not finish once more with rodas4 (plugins/ode/passes.py:
later_method, LaterMethod), on the CPU path (the kernels' own code built for the host).

The model is test_ode_limits.py's x' = -k (x - cos t), x(0) drawn per member: over
k in 10^(0..5) `auto` picks rodas4, whose steps grow with k (35 to ~900 at rtol 1e-8)
while bdf's stay near 200, and bdf takes more steps than rodas4 where k is small.
A member's integration depends only on its parameters and member number, so every
member of a run in passes must equal, bit for bit, the same member of a one-pass run
of the method that finished it.
"""

from __future__ import annotations

import numpy as np
import pytest

import sbmlgpu
from sbmlgpu.plugins.ode import method_trial, passes
from sbmlgpu.plugins.ode.backend import OdeBackend
from sbmlgpu.plugins.ode.options import OdeOptions
from sbmlgpu.results import Status
from sbmlgpu.tasks import TimeCourse

from .ode_helpers import needs_compiler
from .test_ode_limits import STIFF, TIMES

K = 10 ** np.random.default_rng(7).uniform(0, 5, 400)
PASS_STEPS = 40
UNLIMITED = 10**7


@pytest.fixture(scope="module")
def model():
    needs_compiler()
    return sbmlgpu.load(STIFF)


def simulate(model, method: str, **options):
    """(result, steps) of `method` over K on the native CPU path."""
    options = OdeOptions(**{"method": method, "cpu_engine": "native", "pass_steps": 0,
                            **options}).validate()
    program = OdeBackend().compile(model, options, None)
    result = program.run(TimeCourse(times=TIMES, parameters={"k": K}, seed=5,
                                    progress=False))
    return result, program.last_steps


@pytest.fixture(scope="module")
def single(model):
    """One pass each of rodas4 and bdf without a step limit: {method: (result, steps)}."""
    return {m: simulate(model, m, max_steps=UNLIMITED) for m in ("rodas4", "bdf")}


def step_limit(r: np.ndarray, b: np.ndarray):
    """(limit, groups): the step limit that leaves the most members in the smallest of
    its groups (first pass, bdf finished, bdf failed and rodas4 finished, both failed),
    given one-pass rodas4 and bdf step counts `r`, `b`."""
    paused = r > PASS_STEPS

    def groups(limit: int):
        return (~paused, paused & (b <= limit), paused & (b > limit) & (r <= limit),
                paused & (b > limit) & (r > limit))

    limit = int(max(np.unique(np.concatenate([r[paused], b[paused]])),
                    key=lambda limit: min(g.sum() for g in groups(limit))))
    assert min(g.sum() for g in groups(limit)) > 0
    return limit, groups(limit)


def test_the_rule():
    assert passes.later_method("auto", "rodas4") == "bdf"
    assert passes.later_method("auto", "dopri5") is None  # not stiff: dopri5 throughout
    # auto's dopri5 kept from an earlier run, whose check screened other members: one
    # past --pass-steps dopri5 steps is stiff where it is (Boehm's nominal set under a
    # kept dopri5, tests/test_petab_objective.py)
    assert passes.later_method("dopri5", "dopri5", as_auto=True) == "bdf"
    assert passes.later_method("rodas4", "rodas4", as_auto=True) == "bdf"
    assert passes.later_method("dopri5", "dopri5") is None
    assert passes.later_method("rodas4", "rodas4") is None  # the user's method stays
    assert passes.later_method("bdf", "bdf") is None


def test_members_past_the_pass_budget_are_bdfs_and_bdfs_failures_rodas4s(model, single):
    rodas4, r = single["rodas4"]
    bdf, b = single["bdf"]
    assert (rodas4.status == 0).all() and (bdf.status == 0).all()
    limit, (first, by_bdf, by_fallback, stopped) = step_limit(r, b)
    paused = ~first
    result, steps = simulate(model, "auto", pass_steps=PASS_STEPS, max_steps=limit)
    meta = result.metadata
    assert meta["method"] == "rodas4" and meta["second_pass_method"] == "bdf"
    assert meta["second_pass_members"] == paused.sum()
    retried = np.flatnonzero(paused & (b > limit))
    assert meta["second_pass_fallback"]["count"] == len(retried)
    assert meta["second_pass_fallback"]["members"] == retried[:100].tolist()
    assert [s.get("method") for s in meta["later_passes"]] == ["bdf", "rodas4"]

    status = np.asarray(result.status)
    assert (status[first | by_bdf | by_fallback] == int(Status.ok)).all()
    assert (status[stopped] == int(Status.max_steps)).all()
    for members, one in ((first, rodas4), (by_bdf, bdf), (by_fallback, rodas4)):
        assert np.array_equal(result.data[members], one.data[members])
    assert np.array_equal(steps[by_bdf], b[by_bdf])
    assert np.array_equal(steps[first | by_fallback], r[first | by_fallback])


def test_a_method_the_user_chose_runs_every_pass(model, single):
    rodas4, r = single["rodas4"]
    result, steps = simulate(model, "rodas4", pass_steps=PASS_STEPS)
    assert result.metadata["second_pass_members"] == (r > PASS_STEPS).sum() > 0
    assert result.metadata["second_pass_method"] is None
    assert result.metadata["second_pass_fallback"] is None
    assert np.array_equal(result.data, rodas4.data)
    assert np.array_equal(steps, r)


def test_a_bdf_build_that_fails_leaves_the_second_pass_to_rodas4(model, single, caplog,
                                                                monkeypatch):
    """On the CPU path a failed build of the later kernel is a warning, not the end of
    the run: the paused members run with rodas4, as under --method rodas4."""
    from sbmlgpu.runtime.host import HostCompileError

    rodas4, r = single["rodas4"]
    options = OdeOptions(method="auto", cpu_engine="native", pass_steps=PASS_STEPS,
                         max_steps=UNLIMITED).validate()
    program = OdeBackend().compile(model, options, None)
    build = program._engine_of

    builds = []

    def failing(source, kernel_model, method):
        if method == "bdf":
            builds.append(method)
            raise HostCompileError("ode_bdf", "g++", "g++ said no (a test)", "")
        return build(source, kernel_model, method)

    monkeypatch.setattr(program, "_engine_of", failing)
    for run in range(2):  # the second run neither builds again nor warns again
        with caplog.at_level("WARNING", logger="sbmlgpu.ode"):
            result = program.run(TimeCourse(times=TIMES, parameters={"k": K}, seed=5,
                                            progress=False))
        meta = result.metadata
        assert meta["method"] == "rodas4"
        assert meta["second_pass_members"] == (r > PASS_STEPS).sum() > 0
        assert meta["second_pass_method"] is None and meta["second_pass_fallback"] is None
        assert np.array_equal(result.data, rodas4.data)
        assert np.array_equal(program.last_steps, r)
        assert builds == ["bdf"]
        warned = [m for m in caplog.messages
                  if "bdf kernel" in m and "g++ said no" in m and "run with rodas4" in m]
        assert len(warned) == 1


def test_without_paused_members_no_bdf_kernel_is_generated(model):
    options = OdeOptions(method="auto", cpu_engine="native").validate()
    program = OdeBackend().compile(model, options, None)
    result = program.run(TimeCourse(times=TIMES, parameters={"k": K[:50]}, seed=5,
                                    progress=False))
    assert result.metadata["method"] == "rodas4"
    assert result.metadata["second_pass_members"] == 0
    (spec,) = program.specialised.runs.values()
    assert spec.later is not None and spec.later.method == "bdf"
    assert not spec.later.generated  # nothing asked for it
    assert not any("bdf" in name for name in program.sources)


def test_the_trial_picks_bdf_only_well_below_rodas4s_time():
    import time

    calls = []

    def timed(seconds):
        def run(method, warm_up):
            calls.append((method, warm_up))
            if not warm_up:
                time.sleep(seconds[method])
        return run

    pick, why, seconds = method_trial.choose(timed({"rodas4": 0.05, "bdf": 0.005}))
    assert pick == "bdf" and seconds["bdf"] < seconds["rodas4"]
    # both warmed up before either is timed
    assert calls == [("rodas4", True), ("bdf", True), ("rodas4", False), ("bdf", False),
                     ("bdf", False), ("rodas4", False)]
    assert "timed trial of 32 members" in why and "rodas4 5" in why
    assert method_trial.choose(timed({"rodas4": 0.005, "bdf": 0.05}))[0] == "rodas4"


def test_the_trial_keeps_rodas4_where_bdf_fails_more_of_its_members():
    import time

    def timed(seconds, failed):
        def run(method, warm_up):
            if not warm_up:
                time.sleep(seconds[method])
                return failed[method]
            return None
        return run

    fast = {"rodas4": 0.05, "bdf": 0.005}
    pick, why, _ = method_trial.choose(timed(fast, {"rodas4": 1, "bdf": 3}))
    assert pick == "rodas4" and "it failed 3, rodas4 1" in why
    # as many failures (or fewer): the faster bdf
    assert method_trial.choose(timed(fast, {"rodas4": 2, "bdf": 2}))[0] == "bdf"
    assert method_trial.choose(timed(fast, {"rodas4": 2, "bdf": 0}))[0] == "bdf"


def test_the_trials_count_of_failures_leaves_out_the_budgets_max_steps(model, monkeypatch):
    """The program's trial run: a member stopped by the first pass's budget (max_steps)
    is not a failure; one stopped otherwise (here max_steps_per_interval) is."""
    from sbmlgpu.plugins.ode import program as program_module

    counts = []

    def choose(run_trial):
        for method in method_trial.CANDIDATES:
            run_trial(method, True)
            counts.append((method, run_trial(method, False)))
        return "rodas4", "counted", {}

    monkeypatch.setattr(method_trial, "choose", choose)
    k = np.concatenate([K, K[:200]])
    task = TimeCourse(times=TIMES, parameters={"k": k}, seed=5, progress=False)
    for options, failing in (({"pass_steps": 5}, False),
                             ({"max_steps_per_interval": 3}, True)):
        counts.clear()
        opts = OdeOptions(method="auto", cpu_engine="native", **options).validate()
        OdeBackend().compile(model, opts, None).run(task)
        assert [m for m, _ in counts] == list(method_trial.CANDIDATES)
        assert all((c > 0) == failing for _, c in counts), counts
    assert program_module.TRIAL_UNFAILED == (0, 1)


def test_who_has_a_trial():
    n = method_trial.TRIAL_MIN_MEMBERS
    assert method_trial.wanted("auto", "rodas4", n, on_device=False)
    assert not method_trial.wanted("auto", "rodas4", n - 1, on_device=False)
    assert not method_trial.wanted("auto", "rodas4", n, on_device=True)
    assert not method_trial.wanted("auto", "dopri5", n, on_device=False)
    assert not method_trial.wanted("rodas4", "rodas4", n, on_device=False)
    a, b = method_trial.sample(10_000, 3), method_trial.sample(10_000, 3)
    assert np.array_equal(a, b) and len(np.unique(a)) == method_trial.TRIAL_MEMBERS
    assert not np.array_equal(a, method_trial.sample(10_000, 4))


def test_a_large_stiff_ensemble_runs_with_the_trials_pick(model, monkeypatch):
    """600 members: the trial runs; whichever it picks, the members equal a run of
    that method chosen by hand (a forced pick each way, so both are checked)."""
    k = np.concatenate([K, K[:200]])
    task = TimeCourse(times=TIMES, parameters={"k": k}, seed=5, progress=False)

    def run(method, **options):
        options = OdeOptions(method=method, cpu_engine="native", **options).validate()
        return OdeBackend().compile(model, options, None).run(task)

    for forced in ("rodas4", "bdf"):
        other = "bdf" if forced == "rodas4" else "rodas4"
        calls = []

        def choose(run_trial, forced=forced):
            for method in method_trial.CANDIDATES:
                calls.append(method)
                run_trial(method, True)
                run_trial(method, False)
            return forced, f"forced {forced}", {}

        monkeypatch.setattr(method_trial, "choose", choose)
        result = run("auto", pass_steps=0)
        assert calls == ["rodas4", "bdf"]
        assert result.metadata["method"] == forced
        assert f"forced {forced}" in result.metadata["method_reason"]
        assert np.array_equal(result.data, run(forced, pass_steps=0).data)
        assert not np.array_equal(result.data, run(other, pass_steps=0).data)


@pytest.mark.parametrize("fallback_on", ["host", "host, built late", "device"])
def test_on_a_gpu_the_host_pass_runs_bdf_and_rodas4_again(model, single, monkeypatch,
                                                          fallback_on):
    """A GPU run (the fake device of test_ode_passes_host.py: the kernel's host build):
    the host's second pass builds the bdf kernel, and bdf's failures run with the host
    build of rodas4's (or, where the host does not take them, the device's rodas4
    kernel); each member equals a one-pass run of the method that finished it. On the
    host, each bdf failure runs again in its thread as soon as bdf gives up on it (a
    stage that overlaps bdf's; where rodas4's host build is not done yet, once it is,
    the threads going on with other members meanwhile); where rodas4's host build
    failed, after the bdf pass on the device."""
    import time

    from sbmlgpu.plugins.ode import host_pass

    from .test_ode_passes_host import Spy, fake_gpu

    rodas4, r = single["rodas4"]
    bdf, b = single["bdf"]
    limit, (first, by_bdf, by_fallback, stopped) = step_limit(r, b)
    retried = (by_fallback | stopped).sum()
    # the host takes the second pass (here more members than 16 a core)
    monkeypatch.setattr(host_pass.HostSecondPass, "takes", lambda host, m, tail=False: 0 < m)
    # bdf's host build is a LaterKernel's (its source a callable), rodas4's a KernelSource
    load = host_pass.HostSecondPass._load
    if fallback_on == "device":  # the host build of rodas4's kernel fails
        kernel = host_pass.HostSecondPass.kernel
        monkeypatch.setattr(host_pass.HostSecondPass, "kernel", lambda host: (
            kernel(host) if callable(host.source) else None))
    if fallback_on == "host, built late":  # rodas4's build ends after bdf's pass began
        built_late = []

        def late(host):
            if not callable(host.source):
                time.sleep(0.5)
                built_late.append(True)
            return load(host)

        monkeypatch.setattr(host_pass.HostSecondPass, "_load", late)
    spy = Spy(monkeypatch)
    result, program = fake_gpu(model, K, method="auto", pass_steps=PASS_STEPS,
                               max_steps=limit)
    meta = result.metadata
    assert meta["method"] == "rodas4" and meta["second_pass_method"] == "bdf"
    assert meta["second_pass_where"] == "host"
    # the pass of bdf's host build counts as bdf's for the rule, rodas4's fallback not
    assert [h.later_method for h in spy.hosts] == [True, False]
    on_host = fallback_on != "device"
    assert [(s["where"], s.get("method"), s.get("overlaps")) for s in meta["later_passes"]] \
        == [("host", "bdf", None), ("host" if on_host else "device", "rodas4",
                                    "bdf" if on_host else None)]
    # one host pass: the retries ran in its threads (or, rodas4's host build failing,
    # the device ran them after a host pass that could not)
    assert spy.host_runs == [int((~first).sum())] + ([] if on_host else [int(retried)])
    if fallback_on == "host, built late":
        assert built_late == [True]
    assert meta["second_pass_fallback"]["count"] == (by_fallback | stopped).sum()
    assert any("bdf" in name for name in program.sources)
    status = np.asarray(result.status)
    assert (status[first | by_bdf | by_fallback] == int(Status.ok)).all()
    assert (status[stopped] == int(Status.max_steps)).all()
    for members, one in ((first, rodas4), (by_bdf, bdf), (by_fallback, rodas4)):
        assert np.array_equal(result.data[members], one.data[members])
    assert np.array_equal(program.last_steps[by_bdf], b[by_bdf])


def test_the_model_cache_keeps_the_later_kernel_once_generated(model):
    """warm_state exports the bdf kernel a run generated, and a warm program (a new
    process's, without sympy) runs the same members with it, equal to the cold run."""
    from sbmlgpu.plugins.ode.warm import WarmOdeProgram

    options = OdeOptions(method="auto", cpu_engine="native", pass_steps=PASS_STEPS,
                         max_steps=10**6).validate()
    task = TimeCourse(times=TIMES, parameters={"k": K}, seed=5, progress=False)
    cold_program = OdeBackend().compile(model, options, None)
    cold = cold_program.run(task)
    assert cold.metadata["second_pass_method"] == "bdf"
    state = cold_program.warm_state()
    (record,) = state["runs"]
    assert record["later"]["method"] == "bdf"
    warm_program = WarmOdeProgram(state, options)
    warm = warm_program.run(task)
    (spec,) = warm_program.specialised.runs.values()
    assert spec.later.generated and spec.later.source().text == record["later"]["source"]["text"]
    assert warm.metadata["second_pass_method"] == "bdf"
    assert np.array_equal(warm.data, cold.data)
    assert np.array_equal(warm.status, cold.status)

    # a run that never needed it exports none: its warm run keeps rodas4 throughout
    roomy = OdeOptions(method="auto", cpu_engine="native", pass_steps=1000).validate()
    fresh = OdeBackend().compile(model, roomy, None)
    result = fresh.run(task)  # rodas4 takes at most ~900 steps here: none paused
    assert result.metadata["method"] == "rodas4"
    assert result.metadata["second_pass_members"] == 0
    assert [r["later"] for r in fresh.warm_state()["runs"]] == [None]


def test_the_trial_runs_once_per_model_and_span(model, monkeypatch):
    """Runs with other parameter values (a sampler's calls) keep the first trial's pick;
    another time span has its own trial."""
    calls = []

    def choose(run_trial):
        calls.append(1)
        return "bdf", "forced bdf", {}

    monkeypatch.setattr(method_trial, "choose", choose)
    options = OdeOptions(method="auto", cpu_engine="native").validate()
    program = OdeBackend().compile(model, options, None)
    k = np.concatenate([K, K[:200]])
    reasons = []
    for scale, times in ((1.0, TIMES), (1.5, TIMES), (1.0, TIMES * 2)):
        result = program.run(TimeCourse(times=times, parameters={"k": k * scale}, seed=5,
                                        progress=False))
        assert result.metadata["method"] == "bdf"
        reasons.append("in an earlier run of this model" in result.metadata["method_reason"])
    assert len(calls) == 2  # the second run reused the first's pick
    assert reasons == [False, True, False]


def test_runs_with_other_values_share_the_later_kernel(model):
    """The bdf kernel is generated once per kernel model, not per parameter values (a
    sampler's calls under auto each have a method check of their own)."""
    options = OdeOptions(method="auto", cpu_engine="native", pass_steps=PASS_STEPS).validate()
    program = OdeBackend().compile(model, options, None)
    generated = []
    source = program._source

    def counting(kernel_model, method):
        generated.append(method)
        return source(kernel_model, method)

    program._source = counting
    for scale in (1.0, 1.1):
        result = program.run(TimeCourse(times=TIMES, parameters={"k": K * scale}, seed=5,
                                        progress=False))
        assert result.metadata["second_pass_method"] == "bdf"
    first, second = program.specialised.runs.values()
    assert first.later is second.later
    assert generated.count("bdf") == 1
