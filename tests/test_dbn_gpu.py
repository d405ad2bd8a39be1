"""The dbn backend on the GPU (`pytest -m gpu`): counts equal an independent recount
of the GPU ode backend's trajectories of the same samples (bin for bin), failed
trajectories are never counted, sparse counting equals dense, and the GPU's
marginals agree with the CPU path's (nvcc contracts to FMAs where g++ does not, so
a member next to a bin edge may land in the neighbouring bin: compared as
fractions, not bin for bin)."""

from __future__ import annotations

import numpy as np
import pytest

import sbmlgpu

from .dbn_recount import dense, ode_backend_counts
from .shared_data import ROOT
from .test_dbn_backend import BLOW_UP, LV_SAMPLES

pytestmark = pytest.mark.gpu
MODELS = ROOT / "sbml_models"
LV = MODELS / "lotka_volterra.xml"
EGF = MODELS / "BIOMD0000000033.xml"


def egf_samples():
    from sbmlgpu.views.ode import ode_system

    ode = ode_system(sbmlgpu.load(EGF))
    index = {p: i for i, p in enumerate(ode.p_ids)}
    return {s: f"uniform:{0.8 * float(v)!r}:{1.2 * float(v)!r}" for s in ode.state_ids
            if s in index and (v := ode.p_values[index[s]]) != 0}


@pytest.mark.parametrize("fast_math", [True, False])
@pytest.mark.parametrize("model, samples, n, slices, slice_time, steps", [
    (LV, LV_SAMPLES, 4000, 10, 0.5, 20),
    (EGF, None, 2000, 10, 1.0, 50),
])
def test_gpu_counts_equal_a_recount_of_the_gpu_ode_backend(gpu_device, model, samples, n,
                                                           slices, slice_time, steps,
                                                           fast_math):
    """Bin for bin, with and without nvcc's fast math (the ode backend then compiled
    the same way)."""
    samples = samples or egf_samples()
    r = sbmlgpu.dbn(model, device=gpu_device.index, progress=False, ensemble=n,
                    sample=samples, slices=slices, slice_time=slice_time, steps=steps,
                    options={"fast_math": fast_math})
    assert r.metadata["engine"] == "gpu"
    assert r.metadata["fast_math"] is fast_math and r.metadata["integrations"] == 1
    counts, marginals, ok = ode_backend_counts(model, r, n=n, samples=samples, seed=0,
                                               steps=steps, device=gpu_device.index)
    assert int(ok.sum()) == r.metadata["counted_trajectories"]
    for v in r.variables:
        np.testing.assert_array_equal(dense(r, v), counts[v], err_msg=v)
    np.testing.assert_array_equal(r.counted, marginals)


def test_gpu_one_integration_counts_what_two_integrations_count(gpu_device, monkeypatch):
    """The values the range pass keeps on the device, counted by the replay kernel:
    the counts of integrating a second time, bin for bin (dense and sparse)."""
    from sbmlgpu.plugins.dbn import program

    settings = dict(ensemble=6000, sample=egf_samples(), slices=10, slice_time=1.0,
                    steps=50, progress=False)
    once = sbmlgpu.dbn(EGF, device=gpu_device.index, **settings)
    lv_once = sbmlgpu.dbn(LV, device=gpu_device.index, options={"max_dense_rows": 5},
                          ensemble=3000, sample=LV_SAMPLES, slices=8, slice_time=0.5,
                          steps=20, progress=False)
    monkeypatch.setattr(program, "VALUES_MEMORY_SHARE", 0.0)
    twice = sbmlgpu.dbn(EGF, device=gpu_device.index, **settings)
    lv_twice = sbmlgpu.dbn(LV, device=gpu_device.index, options={"max_dense_rows": 5},
                           ensemble=3000, sample=LV_SAMPLES, slices=8, slice_time=0.5,
                           steps=20, progress=False)
    assert (once.metadata["integrations"], twice.metadata["integrations"]) == (1, 2)
    assert lv_once.metadata["sparse_variables"] == ["x1", "x2"]
    np.testing.assert_array_equal(once.edges, twice.edges)
    for a, b in ((once, twice), (lv_once, lv_twice)):
        for v in a.variables:
            np.testing.assert_array_equal(dense(a, v), dense(b, v), err_msg=v)
        np.testing.assert_array_equal(a.counted, b.counted)


def test_gpu_failed_trajectories_are_never_counted(gpu_device, tmp_path):
    model = tmp_path / "blow_up.xml"
    model.write_text(BLOW_UP)
    samples = {"k": "uniform:0.2:2"}
    r = sbmlgpu.dbn(model, device=gpu_device.index, progress=False, ensemble=4000,
                    sample=samples, slices=4, slice_time=0.25, steps=50,
                    ranges={"X": (0.0, 6.0)})
    failed = r.metadata["failed_trajectories"]
    assert 500 < failed < 3500
    counts, _, ok = ode_backend_counts(model, r, n=4000, samples=samples, seed=0, steps=50,
                                       device=gpu_device.index)
    assert int((~ok).sum()) == failed
    np.testing.assert_array_equal(dense(r, "X"), counts["X"])


def test_gpu_sparse_counting_equals_dense_and_the_cpu_path_agrees(gpu_device):
    settings = dict(ensemble=5000, sample=LV_SAMPLES, slices=8, slice_time=0.5, steps=20,
                    progress=False)
    gpu = sbmlgpu.dbn(LV, device=gpu_device.index, **settings)
    sparse = sbmlgpu.dbn(LV, device=gpu_device.index, options={"max_dense_rows": 5},
                         **settings)
    assert sparse.metadata["sparse_variables"] == ["x1", "x2"]
    for v in gpu.variables:
        np.testing.assert_array_equal(dense(sparse, v), dense(gpu, v), err_msg=v)
    ranges = {v: (float(e[0]), float(e[-1])) for v, e in zip(gpu.variables, gpu.edges)}
    cpu = sbmlgpu.dbn(LV, device="cpu", ranges=ranges, **settings)
    gpu_same = sbmlgpu.dbn(LV, device=gpu_device.index, ranges=ranges, **settings)
    assert np.abs(cpu.counted - gpu_same.counted).max() <= 0.002  # <= 10 of 5000 members


def _egf_run(device, n=20_000, **kw):
    return sbmlgpu.dbn(EGF, device=device, progress=False, ensemble=n,
                       sample=egf_samples(), slices=10, slice_time=1.0, steps=50, **kw)


def _assert_same_counts(a, b):
    np.testing.assert_array_equal(a.edges, b.edges)
    for v in a.variables:
        np.testing.assert_array_equal(dense(a, v), dense(b, v), err_msg=v)
    np.testing.assert_array_equal(a.counted, b.counted)


@pytest.mark.parametrize("kernel", ["homogeneous", "heterogeneous"])
@pytest.mark.parametrize("ranges_given", [False, True])
def test_gpu_shares_on_threads_count_what_one_share_counts(gpu_device, monkeypatch,
                                                           ranges_given, kernel):
    """Three shares on three host threads that all drive this GPU (copies of its
    Device: one primary context, made current on each thread), with kept values and
    without, with either counting kernel: bin for bin the counts of one share. Runs
    on a machine with one GPU."""
    import copy

    from sbmlgpu.plugins.dbn import program as dbn_program

    kw = {"options": {"kernel": kernel}}
    one = _egf_run(gpu_device.index, **kw)
    if ranges_given:
        kw["ranges"] = {v: (float(e[0]), float(e[-1])) for v, e in
                        zip(one.variables, one.edges)}
        one = _egf_run(gpu_device.index, **kw)
    assert one.metadata["kernel"] == kernel
    monkeypatch.setattr(dbn_program.DbnProgram, "_devices",
                        lambda self, scheduler, n: [self.device, copy.copy(self.device),
                                                    copy.copy(self.device)])
    split = _egf_run(gpu_device.index, **kw)
    assert split.metadata["devices"] == 3
    assert split.metadata["integrations"] == 1
    _assert_same_counts(split, one)


def test_gpu_counts_do_not_depend_on_the_number_of_gpus(gpu_devices):
    if len(gpu_devices) < 2:
        pytest.skip(f"needs 2 GPUs, found {len(gpu_devices)}")
    one = _egf_run([gpu_devices[0].index], n=200_000)
    every = _egf_run([d.index for d in gpu_devices], n=200_000)
    assert every.metadata["devices"] == len(gpu_devices)
    _assert_same_counts(every, one)
