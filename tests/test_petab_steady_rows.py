"""Rows at t = inf of an ensemble's objective, scored by the objective kernel's host
build (PreparedObjective._steady_compiled) where the host scores nothing else: those
at finite times were reduced on the device, or the problem has none (Blasi). The
numbers must be numpy's (likelihood.summed_terms over observables.Formulas), which
is what runs where no C++ compiler is found."""

from __future__ import annotations

import numpy as np
import pytest

from .ode_helpers import needs_compiler
from .test_petab_gpu_objective import _yaml, fake_gpu  # noqa: F401 (a fixture)
from .test_petab_problem import write_problem

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning",
                                        "ignore::UserWarning")
petab = pytest.importorskip("petab.v1", reason="the petab extra is not installed")

# the closed-form problem of test_petab_problem, with more rows at t = inf: a log10 /
# laplace observable with per-row placeholders (a number and a parameterId), and a
# preequilibrated run whose only rows are at t = inf
MEASUREMENTS = """observableId\tpreequilibrationConditionId\tsimulationConditionId\tmeasurement\ttime\tobservableParameters\tnoiseParameters
obs_A\t\tc1\t1.1\t0\t\t
obs_A\t\tc1\t1.4\t1\t\t
obs_A\t\tc1\t2.1\tinf\t\t
obs_A\t\tc2\t3.2\t0\t\t
obs_A\t\tc2\t4.1\tinf\t\t
obs_scaled\t\tc2\t8.3\tinf\t2\tsigma_A
obs_scaled\tpre\tc1\t2.2\t0\t2\t0.1
obs_scaled\tpre\tc2\t7.5\tinf\t1.5\t0.2
"""


def _numpy_only(monkeypatch):
    """As where no C++ compiler is found: the rows at t = inf scored by numpy."""
    from sbmlgpu.petab import reduction

    def no_build(self, precision):
        raise OSError("no C++ compiler (the test's)")

    monkeypatch.setattr(reduction.ObjectiveRows, "host_library", no_build)


def test_blasi_steady_rows_compiled_equal_numpy(monkeypatch):
    """Blasi's 252 rows, all at t = inf, on the CPU path: compiled = numpy."""
    needs_compiler()
    from sbmlgpu.petab import objective
    from sbmlgpu.petab.values import sampled_sets

    yaml = _yaml("Blasi_CellSystems2016")
    prepared = objective(yaml, device="cpu")
    sets = sampled_sets(prepared.problem, 60, 7)
    compiled = prepared.evaluate(sets)
    # nothing held: the rows were scored where the steady states are
    assert len(compiled.rows) == 0 and np.isnan(compiled.simulation).all()
    _numpy_only(monkeypatch)
    numpy = objective(yaml, device="cpu").evaluate(sets)
    assert len(numpy.rows) == 252
    np.testing.assert_array_equal(compiled.status, numpy.status)
    ok = numpy.status == 0
    assert ok.sum() >= 40
    np.testing.assert_allclose(compiled.nll[ok], numpy.nll[ok], rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(compiled.chi2[ok], numpy.chi2[ok], rtol=1e-12, atol=1e-9)


def test_reduced_and_steady_rows_together_equal_the_cpu_paths(fake_gpu, tmp_path):  # noqa: F811
    """Rows at finite times reduced on a (fake) GPU, rows at t = inf compiled on the
    host, against the CPU path, which keeps every time course and scores every row
    in numpy."""
    from sbmlgpu.petab import objective
    from sbmlgpu.petab.values import sampled_sets

    yaml = write_problem(tmp_path, **{"measurements.tsv": MEASUREMENTS})
    options = {"method": "rodas4"}
    gpu = objective(yaml, device=[0], options=options)
    sets = sampled_sets(gpu.problem, 50, 2)
    on_gpu = gpu.evaluate(sets)
    assert on_gpu.reduced_on_device and fake_gpu.objectives[-1].launched
    assert len(on_gpu.rows) == 0  # the four rows at t = inf were not held either
    on_cpu = objective(yaml, device="cpu", options=options).evaluate(sets)
    assert len(on_cpu.rows) == 8 and np.isfinite(on_cpu.simulation).all()
    np.testing.assert_array_equal(on_gpu.status, on_cpu.status)
    assert (on_cpu.status == 0).all()
    np.testing.assert_allclose(on_gpu.nll, on_cpu.nll, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(on_gpu.chi2, on_cpu.chi2, rtol=1e-12, atol=1e-9)


def test_one_set_keeps_its_steady_rows(tmp_path):
    """The nominal set (one member) keeps every simulated value, t = inf included,
    for its simulation table."""
    from sbmlgpu.petab import objective

    yaml = write_problem(tmp_path, **{"measurements.tsv": MEASUREMENTS})
    result = objective(yaml, device="cpu")()
    assert len(result.rows) == 8
    table = result.simulation_df(0)
    steady = np.isinf(table["time"].to_numpy(float))
    # kp / kd of each condition: c1 1 / 0.5, c2 kp_c2 / kd = 2 / 0.5 (x2 where scaled)
    np.testing.assert_allclose(table["simulation"].to_numpy()[steady], [2.0, 4.0, 8.0, 6.0],
                               rtol=1e-5)


def test_members_split_over_threads_score_as_one_call(monkeypatch):
    """on_host over several threads (chunks of members) gives one call's numbers, in
    member order."""
    needs_compiler()
    from sbmlgpu.petab import objective, reduction
    from sbmlgpu.petab.values import sampled_sets

    prepared = objective(_yaml("Blasi_CellSystems2016"), device="cpu")
    sets = sampled_sets(prepared.problem, 40, 3)
    one = prepared.evaluate(sets)
    monkeypatch.setattr(reduction, "HOST_CHUNK", 3)  # 40 members on 4 threads: 4 of 10
    calls = []
    serial = reduction.ObjectiveReduction.on_host

    def counted(self, data, status, members, threads=1):
        calls.append((len(members), threads))
        return serial(self, data, status, members, threads)

    monkeypatch.setattr(reduction.ObjectiveReduction, "on_host", counted)
    monkeypatch.setattr("sbmlgpu.runtime.host.host_cores", lambda: 4)
    split = prepared.evaluate(sets)
    assert calls[0] == (40, 4) and [m for m, t in calls[1:]] == [10, 10, 10, 10]
    np.testing.assert_array_equal(split.nll, one.nll)
    np.testing.assert_array_equal(split.chi2, one.chi2)


def test_a_formula_the_kernel_cannot_print_leaves_the_rows_to_numpy(monkeypatch):
    """Where the objective kernel's printer gives up on a formula (CodegenError), numpy
    scores the rows at t = inf, as it did before, and keeps their values."""
    from sbmlgpu.codegen.printer import CodegenError
    from sbmlgpu.petab import objective, reduction
    from sbmlgpu.petab.values import sampled_sets

    build = reduction.ObjectiveRows.build.__func__

    def refuse(cls, *args, steady=False, **kwargs):
        if steady:
            raise CodegenError("a function the test's printer does not know")
        return build(cls, *args, steady=steady, **kwargs)

    monkeypatch.setattr(reduction.ObjectiveRows, "build", classmethod(refuse))
    yaml = _yaml("Blasi_CellSystems2016")
    prepared = objective(yaml, device="cpu")
    sets = sampled_sets(prepared.problem, 20, 5)
    first, second = prepared.evaluate(sets), prepared.evaluate(sets)
    assert len(first.rows) == len(second.rows) == 252
    assert np.isfinite(first.simulation[:, first.status == 0]).all()
    np.testing.assert_array_equal(first.nll, second.nll)


def test_a_sigma_that_is_not_positive_fails_the_set_on_the_gpu_path_too(fake_gpu, tmp_path):  # noqa: F811
    """The objective kernel (reduced on a fake GPU, which runs its host build; the rows
    at t = inf by the same build) gives a set with sigma_A < 0 no finite objective, as
    numpy does on the CPU path: the normal's sigma**2 had scored it as |sigma_A|."""
    from sbmlgpu.petab import objective
    from sbmlgpu.petab.result import NON_FINITE_OBJECTIVE
    from sbmlgpu.petab.values import sampled_sets

    # sigma_A only as the normal observable's sigma (the laplace row's log(2 sigma)
    # was NaN for a negative one before too)
    laplace_row = "obs_scaled\t\tc2\t8.3\tinf\t2\tsigma_A\n"
    assert MEASUREMENTS.count(laplace_row) == 1
    yaml = write_problem(tmp_path, **{"measurements.tsv": MEASUREMENTS.replace(
        laplace_row, laplace_row.replace("sigma_A", "0.3"))})
    options = {"method": "rodas4"}
    gpu = objective(yaml, device=[0], options=options)
    sets = dict(sampled_sets(gpu.problem, 3, 2))
    sets["sigma_A"] = np.array([0.2, -0.2, 0.3])
    on_gpu = gpu.evaluate(sets)
    assert on_gpu.reduced_on_device and fake_gpu.objectives[-1].launched
    on_cpu = objective(yaml, device="cpu", options=options).evaluate(sets)
    for result in (on_gpu, on_cpu):
        assert result.status.tolist() == [0, int(NON_FINITE_OBJECTIVE), 0]
        assert np.isnan(result.nll[1]) and np.isfinite(result.nll[[0, 2]]).all()
    np.testing.assert_allclose(on_gpu.nll[[0, 2]], on_cpu.nll[[0, 2]], rtol=1e-12, atol=1e-9)
