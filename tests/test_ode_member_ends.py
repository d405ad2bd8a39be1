"""Members that end at their own time (TimeCourse.member_ends; templates/limits.cuh).

Member j integrates to the last output time at or before its end and its later outputs
are NaN. In the ode kernels (native build, GPU, the refill lanes) a member so cut must
be exactly the run of those output times alone: same steps, same values, bit for bit,
whichever method, pass or schedule ran it. The numpy engine and the reference backend
run each member on its own times too; any other backend's time courses are cut
afterwards (sbmlgpu.api). A PEtab problem's runs end at their own last measurement
time."""

from __future__ import annotations

import numpy as np
import pytest

import sbmlgpu.api as api
from sbmlgpu.errors import OptionError
from sbmlgpu.plugins.ode.native import host_kernel
from sbmlgpu.plugins.ode.program import default_outputs, kernel_source
from sbmlgpu.ode.model import KernelModel
from sbmlgpu.results import Status
from sbmlgpu.tasks import TimeCourse
from sbmlgpu.views import ode_system

from .ode_helpers import load, needs_compiler
from .shared_data import MODELS, needs_models

TIMES = np.linspace(0.0, 10.0, 11)
ENDS = np.array([10.0, 3.0, 0.0, 4.5, np.inf, 7.0, -2.0, 9.99])
#: how many output times each member keeps: times <= its end, at least the first
COUNTS = np.array([11, 4, 1, 5, 11, 8, 1, 10])


@pytest.fixture(scope="module")
def model():
    return load("lotka_volterra")


def _members(model, n=len(ENDS), seed=3):
    """n members of varied a, b (log-uniform factors of 0.5-2)."""
    ode = ode_system(model)
    values = dict(zip(ode.p_ids, ode.p_values))
    rng = np.random.default_rng(seed)
    return {k: values[k] * np.exp(rng.uniform(np.log(0.5), np.log(2.0), n))
            for k in list(values)[:2]}


def _run(model, times, parameters, device="cpu", **options):
    return api.run(model, "ode", times=times, parameters=parameters, progress=False,
                   options=options, device=device)


def _ended(model, parameters, device="cpu", ends=ENDS, **options):
    task = TimeCourse(times=TIMES, parameters=parameters, member_ends=ends, progress=False)
    return api.execute(model, task, "ode", options=options, device=device).result


def test_own_times_counts_the_output_times_up_to_each_end():
    task = TimeCourse(times=TIMES, n=len(ENDS), member_ends=ENDS)
    assert task.own_times().tolist() == COUNTS.tolist()
    assert TimeCourse(times=TIMES, n=3, member_ends=np.inf).own_times() is None
    assert TimeCourse(times=TIMES, n=3).own_times() is None


@pytest.mark.parametrize("method", ["dopri5", "rodas4", "bdf", "rk4"])
def test_a_member_cut_in_the_kernel_is_the_run_of_its_own_times_alone(model, method):
    needs_compiler()
    members = _members(model)
    cut = _ended(model, members, method=method)
    assert cut.metadata["member_ends"] == "integrated"
    assert cut.metadata["engine"] == "native"
    assert (cut.status == Status.ok).all()
    full = _run(model, TIMES, members, method=method)
    for j, count in enumerate(COUNTS):
        alone = _run(model, TIMES[:count], {k: v[j:j + 1] for k, v in members.items()},
                     method=method)
        assert np.array_equal(cut.data[j, :count], alone.data[0]), j
        assert np.isnan(cut.data[j, count:]).all(), j
    # a member cut before the last time took fewer steps than the full run's
    assert cut.metadata["steps_mean"] < full.metadata["steps_mean"]
    # no note of NaN outputs: the cut values are not the model's
    assert "non_finite_outputs" not in cut.metadata


@pytest.mark.parametrize("method", ["dopri5", "rodas4"])
def test_members_past_pass_steps_keep_their_end_in_the_later_pass(model, method):
    """A second pass (here every member past 3 steps) runs the same columns, the row of
    counts with them."""
    needs_compiler()
    members = _members(model, seed=5)
    one = _ended(model, members, method=method)
    two = _ended(model, members, method=method, pass_steps=3)
    assert two.metadata["second_pass_members"] > 0
    assert np.array_equal(one.status, two.status)
    assert np.array_equal(one.data, two.data, equal_nan=True)


@pytest.mark.parametrize("method", ["dopri5", "rodas4"])
def test_the_refill_lanes_cut_each_member_as_one_thread_does(model, method):
    """The GPU's refill schedule on the host (lanes taking members from a queue a step
    per turn), with the table's row of counts and the launch's times_row."""
    needs_compiler()
    members = _members(model, n=64, seed=9)
    varied = tuple(members)
    src = kernel_source(KernelModel(ode_system(model), varied, default_outputs(model)),
                        method, refill=True)
    kernel = host_kernel(src)
    counts = np.resize(COUNTS, 64).astype(float)
    table = np.vstack([np.array([members[k] for k in varied]), counts])
    config = dict(rtol=1e-7, atol=1e-10, h0=0.0, max_step=0.0, dt=1e-2, max_steps=100_000,
                  seed=1, n=64, times_row=len(varied))
    plain = kernel.run(table, TIMES, len(default_outputs(model)), config)
    for lanes in (1, 5, 32):
        refill = kernel.run(table, TIMES, len(default_outputs(model)), config, lanes=lanes)
        for a, b in zip(plain, refill):
            assert np.array_equal(a, b, equal_nan=True), lanes
    out, status, steps = plain  # out: (times, outputs, n)
    whole = kernel.run(table[:len(varied)], TIMES, len(default_outputs(model)),
                       dict(config, times_row=-1))
    for j in range(64):
        count = int(counts[j])
        assert np.isnan(out[count:, :, j]).all()
        assert steps[j] <= whole[2][j]


def test_the_numpy_engine_and_the_reference_run_each_member_on_its_own_times(model):
    """Engines without the kernels' row of counts run the members of each count on
    those times alone (numpy's), or member by member (the reference backend)."""
    members = _members(model)
    task = TimeCourse(times=TIMES, parameters=members, member_ends=ENDS, progress=False)
    for backend, options in (("ode", {"method": "dopri5", "cpu_engine": "numpy"}),
                             ("reference", {})):
        cut = api.execute(model, task, backend, options=options, device="cpu").result
        assert cut.metadata["member_ends"] == "integrated"
        for j, count in enumerate(COUNTS):
            alone = api.run(model, backend, times=TIMES[:count], progress=False,
                            parameters={k: v[j:j + 1] for k, v in members.items()},
                            options=options, device="cpu")
            np.testing.assert_allclose(cut.data[j, :count], alone.data[0], rtol=1e-12,
                                       err_msg=f"{backend} member {j}")
            assert np.isnan(cut.data[j, count:]).all()


@pytest.mark.parametrize("backend, options", [
    ("ode", {"cpu_engine": "native"}), ("ode", {"cpu_engine": "numpy"}), ("reference", {})])
def test_a_member_that_fails_after_its_end_is_ok(backend, options):
    """dx/dt = k x^2 from x = 1 blows up at t = 1/k (1 to 2 here): a member that ends
    at t = 0.5 never gets there, whichever engine or backend runs it."""
    if options.get("cpu_engine") == "native":
        needs_compiler()
    import sbmlgpu

    from .ode_helpers import apply, ci, rate_rule_model

    model = sbmlgpu.load(rate_rule_model({"x": (1.0, apply("times", ci("k"), ci("x"),
                                                             ci("x")))}, {"k": 1.0}))
    times = np.linspace(0.0, 3.0, 7)
    parameters = {"k": np.array([0.5, 0.8, 1.0])}
    whole = api.run(model, backend, times=times, parameters=parameters, progress=False,
                    options=options or None, device="cpu")
    assert (whole.status != Status.ok).all()  # past t = 2 each has blown up
    task = TimeCourse(times=times, parameters=parameters, member_ends=0.5, progress=False)
    cut = api.execute(model, task, backend, options=options or None, device="cpu").result
    assert (cut.status == Status.ok).all()
    np.testing.assert_allclose(cut.data[:, 1, 0], 1.0 / (1.0 - 0.5 * parameters["k"]),
                               rtol=1e-5)
    assert np.isnan(cut.data[:, 2:]).all()


@pytest.mark.parametrize("ends, words", [
    (np.ones(3), "3 end times for 8 members"),
    (np.array([1.0, np.nan] * 4), "not NaN"),
    (np.full(8, -np.inf), "not NaN or -inf"),
])
def test_bad_ends_are_option_errors(model, ends, words):
    task = TimeCourse(times=TIMES, parameters=_members(model), member_ends=ends)
    with pytest.raises(OptionError, match=words):
        api.execute(model, task, "ode", device="cpu")


def test_ends_with_a_summary_are_an_option_error(model):
    task = TimeCourse(times=TIMES, parameters=_members(model), member_ends=ENDS,
                      summary=True)
    with pytest.raises(OptionError, match="no ensemble summary"):
        api.execute(model, task, "ode", device="cpu")


@needs_models
def test_a_petab_run_ends_at_its_last_measurement_time():
    """Brannmark_JBC2010: 8 runs measured until t = 2.5 ... 30; each run's members end
    there, and the objective equals, to the tolerance, the one of every run to the last
    time (the values at each measurement come from a shorter integration)."""
    needs_compiler()
    from sbmlgpu.petab import objective
    from sbmlgpu.petab import simulate as petab_simulate
    from sbmlgpu.petab.values import sampled_sets

    yaml = MODELS / "petab-benchmark" / "Brannmark_JBC2010" / "Brannmark_JBC2010.yaml"
    prepared = objective(yaml, device="cpu")
    runs = petab_simulate.Runs.of(prepared.problem)
    last = {}
    for run, t in zip(runs.row_run, runs.row_time):
        last[run] = max(last.get(run, runs.times[0]), t) if np.isfinite(t) else \
            last.get(run, runs.times[0])
    assert runs.ends.tolist() == [last[k] for k in range(len(runs.pairs))]
    assert runs.ends.min() < runs.ends.max() == runs.times[-1]
    sets = sampled_sets(prepared.problem, 40, 0)
    cut = prepared.evaluate(sets)

    original = petab_simulate.Runs.of

    def to_the_end(cls, problem):
        whole = original.__func__(cls, problem)
        whole.ends = None
        return whole

    petab_simulate.Runs.of = classmethod(to_the_end)
    try:
        whole = objective(yaml, device="cpu").evaluate(sets)
    finally:
        petab_simulate.Runs.of = original
    both = np.isfinite(cut.nllh) & np.isfinite(whole.nllh)
    assert both.sum() >= 35
    np.testing.assert_allclose(cut.nllh[both], whole.nllh[both], rtol=1e-3)
    assert not np.array_equal(cut.nllh[both], whole.nllh[both])  # not the same integration


@pytest.mark.gpu
def test_on_the_gpu_a_cut_member_equals_the_host_build(model, gpu_device):
    """The GPU kernel (refill lanes, resident table) cuts as the native build does."""
    needs_compiler()
    members = _members(model, n=4000, seed=11)
    ends = np.resize(ENDS, 4000)
    gpu = _ended(model, members, device=[gpu_device.index], ends=ends, method="rodas4")
    host = _ended(model, members, ends=ends, method="rodas4")
    assert gpu.metadata["member_ends"] == "integrated"
    assert np.array_equal(gpu.status, host.status)
    assert np.array_equal(np.isnan(gpu.data), np.isnan(host.data))
    np.testing.assert_allclose(gpu.data, host.data, rtol=1e-6, atol=1e-9)
