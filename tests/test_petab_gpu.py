"""PEtab problems on a real GPU (`pytest -m gpu` on the GPU machine; skipped elsewhere).

The same checks as tests/test_petab_benchmark.py (every row against the problem's own
simulatedData table; the log-likelihood against petab's), with the ensemble on the
GPU; an ensemble of sampled parameter sets whose objective the GPU and the CPU
path agree on; and a prepared objective (sbmlgpu.petab.objective) whose later calls
are reduced on the GPU, agree with the CPU path and compile nothing."""

from __future__ import annotations

import numpy as np
import pytest

from sbmlgpu.results import Status

from .test_petab_benchmark import BENCHMARK, EXPECTED, FOUND, MATCH, check_llh, reference, within

pytestmark = [pytest.mark.gpu,
              pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning",
                                         "ignore::UserWarning")]

# small and large, with preequilibration (Blasi: t = inf; Brannmark), events (Smith)
ON_GPU = ["Boehm_JProteomeRes2014", "Blasi_CellSystems2016", "Brannmark_JBC2010",
          "Smith_BMCSystBiol2013", "Raia_CancerResearch2011", "Fiedler_BMCSystBiol2016"]


def _yaml(name):
    if name not in FOUND:
        pytest.skip(f"no PEtab problem {name} in {BENCHMARK}")
    return BENCHMARK / name / f"{name}.yaml"


@pytest.mark.parametrize("name", ON_GPU)
def test_benchmark_problem_matches_on_the_gpu(name, gpu_device):
    from sbmlgpu.petab import simulate_problem

    assert EXPECTED[name] == MATCH
    result = simulate_problem(_yaml(name), device=[gpu_device.index], backend="ode")
    assert result.failures() == []
    table = result.simulation_df(0)
    ours = result.simulation[:, 0]
    theirs = reference(name, table)
    ok = within(ours, theirs, table["observableId"].to_numpy())
    assert ok.all(), f"{(~ok).sum()} of {len(ok)} rows differ"
    check_llh(result)


def test_an_ensemble_objective_is_the_same_on_gpu_and_cpu(gpu_device):
    from sbmlgpu.petab import simulate_problem

    path = _yaml("Boehm_JProteomeRes2014")
    gpu = simulate_problem(path, device=[gpu_device.index], ensemble=200, seed=4)
    cpu = simulate_problem(path, device="cpu", ensemble=200, seed=4)
    assert gpu.n_members == 200
    ok = (gpu.status == int(Status.ok)) & (cpu.status == int(Status.ok))
    assert ok.sum() > 150
    np.testing.assert_array_equal(gpu.status, cpu.status)
    np.testing.assert_allclose(gpu.nll[ok], cpu.nll[ok], rtol=1e-4)


@pytest.mark.parametrize("name", ["Fujita_SciSignal2010", "Brannmark_JBC2010"])
def test_a_prepared_objective_repeats_on_the_gpu(name, gpu_device):
    from sbmlgpu.petab import objective, simulate_problem

    from sbmlgpu.runtime.cache import default_cache

    path = _yaml(name)
    prepared = objective(path, device=[gpu_device.index])
    first = prepared.sampled(20_000, seed=1)
    prepared.evaluate(first.sets)  # builds the program of the kept method
    misses = default_cache().misses
    again = prepared.evaluate(first.sets)
    assert again.reduced_on_device and again.simulated_rows.shape == (0, 20_000)
    assert again.method == first.method == prepared.method
    assert default_cache().misses == misses  # the repeat compiles nothing (speed is
    # measured by benchmarks/petab_objective.py, not here)
    # the same sets, the same kernel: the same numbers
    np.testing.assert_array_equal(again.status, first.status)
    ok = first.status == int(Status.ok)
    assert ok.sum() > 15_000
    np.testing.assert_allclose(again.nll[ok], first.nll[ok], rtol=1e-8)
    # 200 of them on the CPU path, with the method the objective kept
    sets = {k: np.broadcast_to(v, (20_000,))[:200] for k, v in first.sets.items()}
    cpu = simulate_problem(path, parameters=sets, device="cpu",
                           options={"method": prepared.method})
    both = ok[:200] & (cpu.status == int(Status.ok))
    assert both.sum() > 150
    np.testing.assert_allclose(again.nll[:200][both], cpu.nll[both], rtol=1e-4)


def test_rows_at_t_inf_of_an_ensemble_on_the_gpu(gpu_device, monkeypatch):
    """Blasi (252 rows, all at t = inf): the steady states come from the GPU and the
    objective kernel's host build scores them; the CPU path with numpy's scoring
    (as where no compiler is found) gives the same objective to the integrators'
    tolerance."""
    from sbmlgpu.petab import objective, reduction

    path = _yaml("Blasi_CellSystems2016")
    options = {"method": "rodas4"}
    gpu = objective(path, device=[gpu_device.index], options=options).sampled(2_000, seed=3)
    assert len(gpu.rows) == 0  # scored compiled: no values held

    def no_build(self, precision):
        raise OSError("numpy scores them (the test's)")

    monkeypatch.setattr(reduction.ObjectiveRows, "host_library", no_build)
    cpu = objective(path, device="cpu", options=options).evaluate(gpu.sets)
    assert len(cpu.rows) == 252
    both = (gpu.status == int(Status.ok)) & (cpu.status == int(Status.ok))
    assert both.sum() > 1_500
    np.testing.assert_allclose(gpu.nll[both], cpu.nll[both], rtol=1e-4)


def test_a_sigma_that_is_not_positive_fails_the_set_in_the_gpu_kernel(gpu_device, tmp_path):
    """The objective kernel on the GPU (not its host build, as
    tests/test_petab_steady_rows.py checks it) gives a set with sigma_A < 0 no finite
    objective, as numpy does on the CPU path; the sets beside it score as on the CPU."""
    from sbmlgpu.petab import objective
    from sbmlgpu.petab.result import NON_FINITE_OBJECTIVE
    from sbmlgpu.petab.values import sampled_sets

    from .test_petab_problem import write_problem
    from .test_petab_steady_rows import MEASUREMENTS

    laplace_row = "obs_scaled\t\tc2\t8.3\tinf\t2\tsigma_A\n"
    assert MEASUREMENTS.count(laplace_row) == 1
    yaml = write_problem(tmp_path, **{"measurements.tsv": MEASUREMENTS.replace(
        laplace_row, laplace_row.replace("sigma_A", "0.3"))})
    options = {"method": "rodas4"}
    gpu = objective(yaml, device=[gpu_device.index], options=options)
    sets = dict(sampled_sets(gpu.problem, 3, 2))
    sets["sigma_A"] = np.array([0.2, -0.2, 0.3])
    on_gpu = gpu.evaluate(sets)
    assert on_gpu.reduced_on_device
    on_cpu = objective(yaml, device="cpu", options=options).evaluate(sets)
    for result in (on_gpu, on_cpu):
        assert result.status.tolist() == [0, int(NON_FINITE_OBJECTIVE), 0]
        assert np.isnan(result.nll[1]) and np.isfinite(result.nll[[0, 2]]).all()
    np.testing.assert_allclose(on_gpu.nll[[0, 2]], on_cpu.nll[[0, 2]], rtol=1e-6)
