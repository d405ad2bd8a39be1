"""plugins/cme/gpu_engine.py and kernels/formats.cu.

Here (no GPU): the kernels compile with nvcc -arch=sm_90 for every format; the memory
estimate refuses, with an OptionError naming the size and the free memory, before
anything is compiled or allocated. On the GPU machine (`pytest -m gpu`): every
format's Jacobi sweep, the residual, normalise, the diagonal and ||A||_inf equal numpy
to 1e-12; the aggregation level kernels equal the CPU engine's level operations."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sps

from sbmlgpu.codegen.compile_check import nvcc_available, nvcc_compile
from sbmlgpu.errors import OptionError
from sbmlgpu.plugins.cme import formats as F
from sbmlgpu.plugins.cme import gpu_engine as G

from .fakes import FakeDevice
from .test_cme_formats import lattice, random_sources, reference

needs_nvcc = pytest.mark.skipif(not nvcc_available(), reason="nvcc not found")


def problem(kind: str = "lattice", seed: int = 0):
    """(sources, targets, prop) of a DFS lattice or of random arrays."""
    rng = np.random.default_rng(seed)
    if kind == "lattice":
        sources, targets = lattice(40, 25)
    else:
        sources = random_sources(rng, 6, 3000, present=0.5)
        targets = random_sources(rng, 6, 3000, present=0.7)
    prop = rng.uniform(0.1, 5.0, sources.shape)
    return sources, targets, prop


def numpy_generator(sources, targets, prop):
    offdiag = reference(sources, prop)
    diag = -(prop * (targets >= 0)).sum(axis=0)
    norm = float(np.max(np.asarray(offdiag.sum(axis=1)).ravel() + np.abs(diag)))
    return offdiag, diag, norm


def numpy_jacobi(offdiag, diag, p, sweeps, omega, norm):
    absorbing = diag == 0
    for _ in range(sweeps):
        incoming = offdiag @ p
        update = np.where(absorbing, p + incoming / norm,
                          incoming * (-1.0 / np.where(absorbing, 1.0, diag)))
        p = update if omega == 1.0 else (1.0 - omega) * p + omega * update
    return p


def assert_close(got, want, rel=1e-12):
    scale = max(float(np.max(np.abs(want), initial=0.0)), 1e-300)
    assert float(np.max(np.abs(np.asarray(got) - want), initial=0.0)) <= rel * scale


# ---- here: kernel text, memory estimate --------------------------------------------------


@needs_nvcc
@pytest.mark.parametrize("name", F.FORMATS)
@pytest.mark.parametrize("sort_rows", [False, True])
def test_kernels_compile_for_sm90(name, sort_rows):
    sources = random_sources(np.random.default_rng(1), 5, 600, present=0.5)
    fmt = F.build(name, sources, sort_rows=sort_rows, dia_fill=0.001)
    source = G.kernel_source(fmt, "toggle_switch")
    assert "toggle_switch" in source and f"cme_jacobi_{G.tag(name)}" in source
    assert "cme_jacobi_csr" in source and "cme_level_coarse_values" in source
    if fmt.part("dia") is not None:
        assert f"bands (column - row): {', '.join(map(str, fmt.part('dia').offsets))}" in source
    nvcc_compile(source, "sm_90", ("-O3",), name=f"cme_{G.tag(name)}")


def test_bytes_needed_grows_with_the_solver_and_counts_prop_once():
    args = ("dia+sell", 10**6, 8, 6 * 10**6)
    jacobi = G.bytes_needed(*args, "jacobi")
    assert G.bytes_needed(*args, "aggregation") > jacobi
    assert G.bytes_needed(*args, "jacobi", prop_on_device=True) == jacobi - 8 * 8 * 10**6
    # 10^8 states of an 8-reaction model: tens of GB, far below an H200's 141 GB
    big = G.bytes_needed("dia+sell", 10**8, 8, 6 * 10**8, "auto")
    assert 30e9 < big < 141e9
    with pytest.raises(OptionError, match="format"):
        G.bytes_needed("coo", 10, 1, 10)


def test_check_fits_names_size_and_free_memory():
    G.check_fits(100, 100, "x")
    with pytest.raises(OptionError, match=r"needs about 2\.00 GiB on GPU 0, but 1\.00 GiB "
                                          r"are free: lower the --bound"):
        G.check_fits(2 * 2**30, 2**30, "the CME generator", "GPU 0")


def test_engine_refuses_before_compiling_or_allocating():
    sources, targets, prop = problem()
    device = FakeDevice(free=10_000)
    allocated = []
    device.alloc = lambda nbytes: allocated.append(nbytes)
    with pytest.raises(OptionError, match="states .dia\\+sell, solver auto. needs about"):
        G.GpuEngine("dia+sell", sources, targets, prop, device=device)
    assert device.compiled == [] and allocated == []


def test_engine_needs_targets_or_diag():
    sources, _targets, prop = problem()
    with pytest.raises(OptionError, match="targets"):
        G.GpuEngine("csr", sources, None, prop, device=FakeDevice())


# ---- on the GPU ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def device(gpu_device):
    return gpu_device


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["lattice", "random"])
@pytest.mark.parametrize("name", F.FORMATS)
def test_gpu_matrix_sweep_residual_and_normalise_equal_numpy(device, name, kind):
    sources, targets, prop = problem(kind, seed=3)
    offdiag, diag, norm = numpy_generator(sources, targets, prop)
    engine = G.GpuEngine(name, sources, targets, prop, device=device)
    try:
        assert engine.norm_inf == pytest.approx(norm, rel=1e-12)
        p0 = np.random.default_rng(4).random(engine.n)
        p = engine.vector(p0)
        for sweeps, omega in ((1, 1.0), (4, 1.0), (3, 0.8)):
            out = engine.jacobi(p, sweeps, omega)
            assert_close(engine.host(out), numpy_jacobi(offdiag, diag, p0, sweeps, omega, norm))
        assert np.array_equal(engine.host(p), p0)  # the input is left as it was
        r = offdiag @ p0 + diag * p0
        got = engine.residual(p)
        want = (np.abs(r).max(), np.abs(r).sum(), np.abs(p0).max(), p0.sum())
        for g, w in zip(got, want):
            assert g == pytest.approx(w, rel=1e-12)
        total = engine.normalise(p)
        assert total == pytest.approx(p0.sum(), rel=1e-12)
        assert_close(engine.host(p), p0 / p0.sum())
    finally:
        engine.close()


@pytest.mark.gpu
def test_gpu_given_diagonal_and_device_prop(device):
    sources, targets, prop = problem("lattice", seed=5)
    offdiag, diag, norm = numpy_generator(sources, targets, prop)
    diag[7] = 0.0  # an absorbing row takes the uniformised step
    prop_buffer = device.to_device(prop)
    engine = G.GpuEngine("dia+ell", sources, None, prop_buffer, diag=diag, device=device)
    try:
        p0 = np.random.default_rng(6).random(engine.n)
        norm = float(np.max(np.asarray(offdiag.sum(axis=1)).ravel() + np.abs(diag)))
        out = engine.host(engine.jacobi(engine.vector(p0), 2, 1.0))
        assert_close(out, numpy_jacobi(offdiag, diag, p0, 2, 1.0, norm))
    finally:
        engine.close()
        prop_buffer.free()


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["csr", "dia+sell"])
def test_gpu_levels_equal_the_cpu_engine(device, name):
    cpu_engine = pytest.importorskip("sbmlgpu.plugins.cme.cpu_engine")
    sources, targets, prop = lattice(60, 40)
    prop = np.random.default_rng(7).uniform(0.1, 5.0, sources.shape)
    offdiag, diag, _ = numpy_generator(sources, targets, prop)
    cpu = cpu_engine.CpuEngine(offdiag, diag, aggregate=4, coarsest=64)
    gpu = G.GpuEngine(name, sources, targets, prop, device=device, aggregate=4, coarsest=64)
    try:
        cpu_levels, gpu_levels = cpu.levels(), gpu.levels()
        assert [lv.n for lv in gpu_levels] == [lv.n for lv in cpu_levels]
        assert len(gpu_levels) >= 3
        p0 = np.random.default_rng(8).random(cpu.n)
        p_cpu, p_gpu = p0, gpu.vector(p0)
        for k in range(len(cpu_levels) - 1):
            p_cpu = cpu_levels[k].smooth(p_cpu, 2, 0.8)
            p_gpu = gpu_levels[k].smooth(p_gpu, 2, 0.8)
            assert_close(gpu.host(p_gpu), p_cpu)
            pc_cpu = cpu_levels[k].coarsen(p_cpu)
            pc_gpu = gpu_levels[k].coarsen(p_gpu)
            assert_close(gpu.host(pc_gpu), pc_cpu)
            nxt = cpu_levels[k + 1]
            assert_close(gpu_levels[k + 1].dense(), nxt.dense())
            qc = np.random.default_rng(k).random(len(pc_cpu))
            assert_close(gpu.host(gpu_levels[k].prolong(p_gpu, gpu.vector(qc), pc_gpu)),
                         cpu_levels[k].prolong(p_cpu, qc, pc_cpu))
            p_cpu, p_gpu = pc_cpu, pc_gpu
    finally:
        gpu.close()


@pytest.mark.gpu
def test_gpu_solvers_agree_with_the_cpu_path(device):
    solvers = pytest.importorskip("sbmlgpu.plugins.cme.solvers")
    cpu_engine = pytest.importorskip("sbmlgpu.plugins.cme.cpu_engine")
    sources, targets, _ = lattice(30, 30)
    n = sources.shape[1]
    prop = np.random.default_rng(9).uniform(0.5, 2.0, sources.shape)
    offdiag, diag, _ = numpy_generator(sources, targets, prop)
    settings = solvers.SolverSettings(solver="aggregation", tol=1e-10)
    cpu = solvers.solve(cpu_engine.CpuEngine(offdiag, diag), np.full(n, 1.0 / n), settings)
    gpu_engine = G.GpuEngine("dia+sell", sources, targets, prop, device=device)
    try:
        gpu = solvers.solve(gpu_engine, np.full(n, 1.0 / n), settings)
        assert gpu.converged and cpu.converged
        assert np.abs(gpu_engine.host(gpu.p) - cpu.p).sum() <= 1e-8
    finally:
        gpu_engine.close()
