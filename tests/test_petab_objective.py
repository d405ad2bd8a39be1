"""sbmlgpu.petab.objective (core/petab/prepared.py): a PEtab problem prepared once and
evaluated call after call, as an estimation loop uses it.

Its numbers must be those of the host computation: on the CPU path (simulations
copied back, the likelihood in numpy) the NLL of a first and of a later call equals
petab's own calculate_llh on our simulation table with that set's parameter values,
on problems with several conditions and a preequilibration; a later call equals a
fresh simulate_problem with the method the objective kept. On a fake GPU (the
kernels' host builds, tests/test_petab_gpu_objective.py) later calls are reduced on
"the device", equal the host's numbers, hold no per-(set, row) arrays, and compile
nothing again."""

from __future__ import annotations

import numpy as np
import pytest

from sbmlgpu.errors import OptionError

from .test_petab_gpu_objective import BENCHMARK, fake_gpu  # noqa: F401 - a fixture

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning",
                                        "ignore::UserWarning")
petab = pytest.importorskip("petab.v1", reason="the petab extra is not installed")

# several conditions (Fujita: 6 runs; Zhao: 7), preequilibration (Brannmark: 8 runs
# after Dose_0; Weber: 2 runs); noise formulas without model values (petab_llh)
PROBLEMS = ["Brannmark_JBC2010", "Fujita_SciSignal2010", "Zhao_QuantBiol2020",
            "Weber_BMC2015"]
FOUND = [p for p in PROBLEMS if (BENCHMARK / p / f"{p}.yaml").is_file()]


def _yaml(name):
    if name not in FOUND:
        pytest.skip(f"no PEtab problem {name} in {BENCHMARK}")
    return BENCHMARK / name / f"{name}.yaml"


def petab_llh(result, j: int) -> float:
    """petab's log-likelihood of set j: our simulation table of that set, the
    parameter table's nominal values replaced by the set's (its noise parameters)."""
    p = result.problem.problem
    parameters = p.parameter_df.copy()
    for pid in parameters.index:
        parameters.loc[pid, "nominalValue"] = float(np.broadcast_to(
            result.sets[pid], (result.n_members,))[j])
    return petab.calculate_llh(p.measurement_df, result.simulation_df(j), p.observable_df,
                               parameters)


@pytest.mark.parametrize("name", PROBLEMS)
def test_calls_on_the_cpu_path_equal_petab_and_a_fresh_simulate_problem(name):
    from sbmlgpu.petab import objective, simulate_problem
    from sbmlgpu.petab.values import sampled_sets

    yaml = _yaml(name)
    prepared = objective(yaml, device="cpu")
    first = prepared.sampled(12, seed=1)
    assert prepared.method in ("rodas4", "dopri5", "rk4")  # kept for the later calls
    later = prepared.evaluate(sampled_sets(prepared.problem, 12, 2))
    assert later.method == prepared.method
    for result in (first, later):
        assert not result.reduced_on_device and result.simulation.shape[1] == 12
        ok = np.flatnonzero(result.status == 0)
        assert len(ok) >= 6, result.failures()[:3]
        for j in ok[:3]:
            assert -result.nll[j] == pytest.approx(petab_llh(result, j), rel=1e-9, abs=1e-9)
    # today's one-shot path on the same sets, with the method the objective kept; its
    # kernel has the columns alike over the ensemble as constants, the objective's as
    # table columns (one kernel for every call): equal to rounding
    fresh = simulate_problem(yaml, ensemble=12, seed=2, device="cpu",
                             options={"method": prepared.method})
    np.testing.assert_array_equal(fresh.status, later.status)
    np.testing.assert_allclose(fresh.nll, later.nll, rtol=1e-8)
    np.testing.assert_allclose(fresh.chi2, later.chi2, rtol=1e-8)


def test_calls_with_other_values_reuse_one_kernel():
    """A set alike over the ensemble (here: one set) with new values each call: no
    value becomes a constant of the kernel, so nothing is generated again."""
    from sbmlgpu.plugins.ode import program

    prepared = objective_of("Fujita_SciSignal2010")
    x = np.array([[q.nominal for q in prepared.problem.parameters if q.estimate]])
    first = prepared(x)
    generated = []
    real = program.kernel_source
    try:
        program.kernel_source = lambda *a, **k: generated.append(a) or real(*a, **k)
        later = [prepared(x * factor) for factor in (1.01, 1.02, 0.98)]
    finally:
        program.kernel_source = real
    assert len(generated) <= 1  # the second call's program (the kept method), no more
    assert len({float(r.nll[0]) for r in [first, *later]}) == 4  # the values count


def objective_of(name: str):
    from sbmlgpu.petab import objective

    return objective(_yaml(name), device="cpu")


def test_a_call_takes_dicts_arrays_tables_and_nothing():
    from sbmlgpu.petab import PreparedObjective, objective, simulate_problem

    yaml = _yaml("Fujita_SciSignal2010")
    prepared = objective(yaml, device="cpu")
    assert isinstance(prepared, PreparedObjective)
    nominal = prepared()
    assert nominal.llh == pytest.approx(simulate_problem(yaml, device="cpu").llh, rel=1e-12)
    ids = prepared.parameter_ids
    x = np.array([[q.nominal for q in prepared.problem.parameters if q.estimate]] * 3)
    x[1, 0] *= 1.5
    x[2, 1] *= 0.5
    by_array = prepared(x)
    by_dict = prepared({pid: x[:, k] for k, pid in enumerate(ids)})
    np.testing.assert_array_equal(by_array.nll, by_dict.nll)
    assert by_array.nll[0] == pytest.approx(nominal.nll[0], rel=1e-9)
    assert by_array.nll[1] != pytest.approx(by_array.nll[0], rel=1e-6)  # the sets count
    with pytest.raises(OptionError, match="one column per estimated parameter"):
        prepared(np.ones((2, len(ids) + 1)))
    with pytest.raises(OptionError, match="not_a_parameter"):
        prepared({"not_a_parameter": [1.0]})


@pytest.mark.parametrize("name", ["Brannmark_JBC2010", "Fujita_SciSignal2010"])
def test_later_calls_on_a_fake_gpu_are_reduced_there_and_compile_nothing(name, fake_gpu):  # noqa: F811
    from sbmlgpu.petab import objective

    yaml = _yaml(name)
    prepared = objective(yaml, device=[0])
    prepared.sampled(40, seed=3)  # the first call: prepares, chooses the method
    prepared.sampled(40, seed=4)  # builds the program of the kept method
    compiled = len(fake_gpu.compiled)
    result = prepared.sampled(40, seed=5)
    assert len(fake_gpu.compiled) == compiled  # no kernel generated or loaded again
    assert len(fake_gpu.objectives) == 1 and fake_gpu.objectives[0].launched >= 3
    assert result.reduced_on_device and result.simulated_rows.shape == (0, 40)
    # the same kernel on the CPU path, the likelihood computed on the host
    host = objective(yaml, device="cpu", options={"method": prepared.method}).sampled(40, 5)
    assert not host.reduced_on_device
    np.testing.assert_array_equal(result.status, host.status)
    ok = host.status == 0
    assert ok.sum() >= 20
    np.testing.assert_allclose(result.nll[ok], host.nll[ok], rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(result.chi2[ok], host.chi2[ok], rtol=1e-12, atol=1e-9)


def test_summed_terms_are_the_terms_summed_over_rows():
    from sbmlgpu.petab.likelihood import summed_terms, terms

    rng = np.random.default_rng(5)
    rows, n = 75, 40
    measurement = rng.uniform(0.1, 5.0, rows)
    simulation = rng.uniform(0.1, 5.0, (rows, n))
    simulation[3, 7] = np.nan  # a failed value stays NaN in its set's sums
    simulation[9, 2] = -1.0  # log of a negative: NaN too, as in terms
    sigma = rng.uniform(0.1, 2.0, (rows, n))
    scale = rng.choice(["lin", "log", "log10"], rows)
    distribution = rng.choice(["normal", "laplace"], rows)
    nll_rows, chi2_rows = terms(measurement, simulation, sigma, scale, distribution)
    for block in (1, 7, 32, 500):
        nll, chi2 = summed_terms(measurement, simulation, sigma, scale, distribution, block)
        np.testing.assert_allclose(nll, nll_rows.sum(axis=0), rtol=1e-12)
        np.testing.assert_allclose(chi2, chi2_rows.sum(axis=0), rtol=1e-12)
        assert np.isnan(nll[7]) and np.isnan(chi2[7])
        assert np.isnan(nll[2]) == bool(scale[9] != "lin")


def test_row_values_read_as_the_whole_array_would():
    from sbmlgpu.petab.simulate import RowValues

    rng = np.random.default_rng(2)
    n_runs, n_times, n = 3, 4, 6
    courses = rng.normal(size=(n_runs, n_times, n))
    steady = rng.normal(size=(2, n))
    whole = np.full((9, n), np.nan)  # row 8 gets nothing: NaN
    values = RowValues(9, n)
    timed, run, time = np.array([0, 2, 3, 5]), np.array([0, 2, 1, 2]), np.array([1, 0, 3, 3])
    values.add(timed, courses, run, time)
    whole[timed] = courses[run, time]
    at_inf, slot = np.array([1, 4, 6, 7]), np.array([1, 0, 0, 1])
    values.add(at_inf, steady, slot)
    whole[at_inf] = steady[slot]
    for where in (np.arange(9), np.array([8, 1, 0]), np.array([4]), np.array([], int)):
        np.testing.assert_array_equal(values[where], whole[where])
    assert values.shape == whole.shape


@pytest.mark.parametrize("backend", ["ode", None])
def test_a_repeated_call_integrates_slow_members_as_the_first_did(backend):
    """--method auto's choice kept for the later calls keeps its later passes' method
    too (OdeOptions.later_as_auto: members past --pass-steps run again with bdf, as in
    the first call), so that the same sets give the same numbers call after call;
    kept as a plain rodas4, the slow members' NLLs moved (up to 8e10 here)."""
    from sbmlgpu.petab import objective

    prepared = objective(_yaml("Brannmark_JBC2010"), device="cpu", backend=backend,
                         options={"pass_steps": 60})  # most of the 40 sets past it
    first = prepared.sampled(40, seed=3)
    assert prepared.method == "rodas4"
    assert prepared.simulation.options["later_as_auto"] is True
    again = prepared.evaluate(first.sets)
    ok = first.status == 0
    assert ok.sum() >= 30
    np.testing.assert_array_equal(again.status, first.status)
    np.testing.assert_array_equal(again.nll[ok], first.nll[ok])
    np.testing.assert_array_equal(again.chi2[ok], first.chi2[ok])


def test_a_kept_dopri5_runs_a_stiff_later_set_with_bdf():
    """A first call at all-ones sets keeps dopri5 (not stiff there); the nominal set is
    stiff, and its members past --pass-steps ran dopri5 again until
    max_steps_per_interval: NaN where simulate_problem gives 138.22. Under auto's kept
    choice, they now run again with bdf, as after rodas4 (passes.LATER_METHODS)."""
    from sbmlgpu.petab import objective, simulate_problem

    yaml = BENCHMARK / "Boehm_JProteomeRes2014" / "Boehm_JProteomeRes2014.yaml"
    if not yaml.is_file():
        pytest.skip(f"no PEtab problem Boehm_JProteomeRes2014 in {BENCHMARK}")
    prepared = objective(yaml, device="cpu")
    first = prepared(np.ones((4, len(prepared.parameter_ids))))
    assert prepared.method == "dopri5" and first.status.tolist() == [0] * 4
    nominal = prepared()
    assert nominal.status.tolist() == [0]
    fresh = simulate_problem(yaml, device="cpu")
    assert nominal.nll[0] == pytest.approx(fresh.nll[0], rel=1e-6)


def test_a_kept_dopri5_hands_a_stiff_set_to_the_hosts_bdf_on_a_fake_gpu(fake_gpu):  # noqa: F811
    """The same on the GPU path (a fake device runs the kernels' host builds): the
    nominal set's members past --pass-steps go to the host's bdf pass, with the
    dopri5 kernel's host build as the fallback, and score as the CPU path does."""
    from sbmlgpu.petab import objective

    yaml = BENCHMARK / "Boehm_JProteomeRes2014" / "Boehm_JProteomeRes2014.yaml"
    if not yaml.is_file():
        pytest.skip(f"no PEtab problem Boehm_JProteomeRes2014 in {BENCHMARK}")
    on_gpu = objective(yaml, device=[0])
    ones = np.ones((4, len(on_gpu.parameter_ids)))
    assert on_gpu(ones).status.tolist() == [0] * 4
    assert on_gpu.method == "dopri5"
    on_cpu = objective(yaml, device="cpu")
    on_cpu(ones)
    nominal = {k: np.repeat(np.atleast_1d(v), 2) for k, v in on_gpu.sets().items()}
    gpu, cpu = on_gpu.evaluate(nominal), on_cpu.evaluate(nominal)
    assert gpu.reduced_on_device  # an ensemble of two: the GPU path's reduction
    assert gpu.status.tolist() == cpu.status.tolist() == [0, 0]
    np.testing.assert_allclose(gpu.nll, cpu.nll, rtol=1e-6)
