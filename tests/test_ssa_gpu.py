"""The SSA backend on a real GPU (`pytest -m gpu` on the GPU machine; skipped elsewhere).

GPU against the CPU engines (same realisations up to the last bit of log and FMA
contraction, and the same statistics), reproducibility across batch sizes and
GPU counts, the three layouts, on-GPU summaries, DSMTS cases."""

from __future__ import annotations

import numpy as np
import pytest

import sbmlgpu
from sbmlgpu.tasks import TimeCourse
from sbmlgpu.plugins.ssa.backend import SsaBackend
from sbmlgpu.plugins.ssa.options import SsaOptions
from sbmlgpu.schedule import Scheduler
from sbmlgpu.testsuite import RunConfig, find_cases, run_case

from .shared_data import STOCHASTIC, needs_stochastic
from .test_ssa_model import dimerisation, small_dimerisation

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def devices(gpu_devices):
    return gpu_devices


def program(devices, net, **options):
    return SsaBackend().compile(net, SsaOptions(**options), devices[0])


def gpu_run(devices, net, request, scheduler=None, **options):
    scheduler = scheduler or Scheduler(devices=devices[:1], progress=False)
    return program(devices, net, **options).run(request, scheduler, None)


def cpu_run(net, request, **options):
    return SsaBackend().compile(net, SsaOptions(**options), None).run(request, None, None)


def _z_means(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Two-sample Z of the means of (members, ...) arrays, NaN where both are constant."""
    var = a.var(axis=0, ddof=1) / len(a) + b.var(axis=0, ddof=1) / len(b)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (a.mean(axis=0) - b.mean(axis=0)) / np.sqrt(var)


def test_gpu_realisations_equal_the_cpu_ones(devices):
    request = TimeCourse(times=np.linspace(0, 10, 21), n=2000, seed=5, progress=False)
    gpu = gpu_run(devices, small_dimerisation(), request)
    cpu = cpu_run(small_dimerisation(), request)
    same = np.all(gpu.data == cpu.data, axis=(1, 2))
    # a member differs only if a firing lands within an ulp of a sample time
    assert same.mean() > 0.999, f"{(~same).sum()} of 2000 members differ"


def test_gpu_and_cpu_statistics_agree_on_decay_dimerisation(devices):
    request = TimeCourse(times=np.linspace(0, 5, 11), n=20000, seed=1, progress=False)
    gpu = gpu_run(devices, dimerisation(), request).data
    cpu = cpu_run(dimerisation(), TimeCourse(times=request.times, n=4000, seed=2,
                                             progress=False)).data
    z = _z_means(gpu[:, 1:], cpu[:, 1:])
    assert np.nanmax(np.abs(z)) < 4.5, z


@needs_stochastic
@pytest.mark.parametrize("number", ["00001", "00011", "00019", "00028", "00033"])
def test_dsmts_cases_pass_on_the_gpu(devices, number):
    # the seed and run count of the CPU test (test_ssa_testsuite.py): the GPU draws the
    # same realisations, so a pass there and a fail here would be a GPU bug
    (case,) = find_cases(STOCHASTIC / number)
    outcome = run_case(case, RunConfig(backend="ssa", stochastic_runs=10000, seed=1))
    assert outcome.status == "pass", outcome.line()


def test_same_seed_same_realisations_whatever_the_batches_and_gpus(devices):
    request = TimeCourse(times=np.linspace(0, 10, 11), n=5000, seed=77, progress=False)
    whole = gpu_run(devices, small_dimerisation(), request)
    split = Scheduler(devices=devices[:1], max_batch_items=1024 + 64, progress=False)
    pieces = gpu_run(devices, small_dimerisation(), request, split)
    assert len(split.last_batches) >= 4
    assert np.array_equal(whole.data, pieces.data)
    if len(devices) > 1:
        spread = Scheduler(devices=devices, max_batch_items=512, progress=False)
        assert np.array_equal(whole.data, gpu_run(devices, small_dimerisation(), request,
                                                  spread).data)


@pytest.mark.parametrize("layout", ["fat", "thin"])
def test_layouts_give_the_same_realisations_as_registers(devices, layout):
    request = TimeCourse(times=np.linspace(0, 2, 11), n=4096, seed=8, progress=False)
    reference = gpu_run(devices, dimerisation(), request, layout="register").data
    other = gpu_run(devices, dimerisation(), request, layout=layout).data
    same = np.all(reference == other, axis=(1, 2))
    assert same.mean() > 0.999  # the same propensities, sums and draws: the same members


def test_optimized_method_has_the_direct_methods_statistics(devices):
    request = TimeCourse(times=np.linspace(0, 2, 11), n=20000, seed=4, progress=False)
    direct = gpu_run(devices, dimerisation(), request, method="direct").data
    optimized = gpu_run(devices, dimerisation(), TimeCourse(times=request.times, n=20000,
                                                            seed=5, progress=False),
                        method="optimized", layout="thin").data
    assert np.nanmax(np.abs(_z_means(direct[:, 1:], optimized[:, 1:]))) < 4.5


def test_on_gpu_summary_equals_the_statistics_of_the_same_trajectories(devices):
    times = np.linspace(0, 2, 11)
    full = gpu_run(devices, dimerisation(), TimeCourse(times=times, n=30000, seed=6,
                                                       progress=False)).data
    summ = gpu_run(devices, dimerisation(), TimeCourse(times=times, n=30000, seed=6,
                                                       summary=True, progress=False), pilot=512)
    assert summ.data is None and summ.summary.n_used == 30000
    np.testing.assert_allclose(summ.summary.mean, full.mean(axis=0), rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(summ.summary.sd, full.std(axis=0, ddof=1), rtol=1e-8, atol=1e-9)
    counts = np.asarray(summ.metadata["histograms"]["counts"])
    assert np.all(counts.sum(axis=-1) == 30000)


def test_trajectories_in_batches_fill_memory_and_file_alike(devices, tmp_path):
    """Each batch's rows come from the device (transposed there): in memory or in the
    spill file, in double or float, the same numbers."""
    request = TimeCourse(times=np.linspace(0, 10, 7), n=3000, seed=12, progress=False)
    split = Scheduler(devices=devices[:1], max_batch_items=1024, progress=False)
    whole = gpu_run(devices, small_dimerisation(), request)
    spilled = gpu_run(devices, small_dimerisation(), request, split,
                      trajectory_dir=str(tmp_path))
    assert np.array_equal(np.asarray(spilled.data), whole.data)
    assert np.array_equal(np.load(spilled.metadata["trajectory_file"]), whole.data)
    single = gpu_run(devices, small_dimerisation(), request, precision="float")
    assert single.data.dtype == np.float64
    assert np.array_equal(gpu_run(devices, small_dimerisation(), request, split,
                                  precision="float").data, single.data)


def test_float_precision_and_block_sizes(devices):
    request = TimeCourse(times=np.linspace(0, 2, 5), n=8192, seed=2, progress=False)
    double = gpu_run(devices, dimerisation(), request).data
    for block in (64, 192, 384, 1024):
        other = gpu_run(devices, dimerisation(), request, block_size=block).data
        assert np.array_equal(double, other), block  # the block size changes nothing
    single = gpu_run(devices, dimerisation(), request, precision="float").data
    assert np.nanmax(np.abs(_z_means(double[:, 1:], single[:, 1:]))) < 4.5


def test_run_api_on_the_gpu_reports_firings_per_second(devices):
    r = sbmlgpu.run(dimerisation(), backend="ssa", end=1.0, points=3, n=10000, summary=True,
                    progress=False)
    assert r.metadata["engine"] == "gpu"
    assert r.metadata["firings_per_second"] > 1e8
