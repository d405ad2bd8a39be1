"""plugins/cme/gpu_engine.py and kernels/formats.cu.

Here (no GPU): the kernels compile with nvcc -arch=sm_90 for every format; the memory
estimate refuses, with an OptionError naming the size and the free memory, before
anything is compiled or allocated; and the engine runs on a fake device whose kernels
are numpy emulations of formats.cu that check each argument against the kernel's C
signature, so the same checks as on the GPU run here on the engine's plumbing (the
level and solver checks need the lead's aggregation.py/cpu_engine.py/solvers.py and
skip without them). On the GPU machine (`pytest -m gpu`): every
format's Jacobi sweep, the residual, normalise, the diagonal and ||A||_inf equal numpy
to 1e-12; the aggregation level kernels equal the CPU engine's level operations."""

from __future__ import annotations

import re

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


def generator_agrees(device, name: str, kind: str) -> None:
    """Every Engine operation of a GpuEngine over `device` equals numpy to 1e-12."""
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
        for g, w in zip(got, (np.abs(r).max(), np.abs(r).sum(), p0.max(), 0.0)):
            assert g == pytest.approx(w, rel=1e-12)
        signed = p0 - 0.25  # the largest negative entry's size, the 4th value
        assert engine.residual(engine.vector(signed))[3] == pytest.approx(0.25 - p0.min(),
                                                                          rel=1e-12)
        assert engine.normalise(p) == pytest.approx(p0.sum(), rel=1e-12)
        assert_close(engine.host(p), p0 / p0.sum())
    finally:
        engine.close()


def levels_agree(device, name: str, box: tuple[int, int], coarsest: int) -> None:
    """Each level's smooth, coarsen (pc and the next level's matrix) and prolong of a
    GpuEngine over `device` equal the CPU engine's (the lead's cpu_engine.py)."""
    cpu_engine = pytest.importorskip("sbmlgpu.plugins.cme.cpu_engine")
    sources, targets = lattice(*box)
    prop = np.random.default_rng(7).uniform(0.1, 5.0, sources.shape)
    offdiag, diag, _ = numpy_generator(sources, targets, prop)
    cpu = cpu_engine.CpuEngine(offdiag, diag, aggregate=4, coarsest=coarsest)
    gpu = G.GpuEngine(name, sources, targets, prop, device=device, aggregate=4,
                      coarsest=coarsest)
    try:
        cpu_levels, gpu_levels = cpu.levels(), gpu.levels()
        assert [lv.n for lv in gpu_levels] == [lv.n for lv in cpu_levels]
        assert len(gpu_levels) >= 3
        p_cpu = np.random.default_rng(8).random(cpu.n)
        p_gpu = gpu.vector(p_cpu)
        for k in range(len(cpu_levels) - 1):
            p_cpu = cpu_levels[k].smooth(p_cpu, 2, 0.8)
            p_gpu = gpu_levels[k].smooth(p_gpu, 2, 0.8)
            assert_close(gpu.host(p_gpu), p_cpu)
            pc_cpu, pc_gpu = cpu_levels[k].coarsen(p_cpu), gpu_levels[k].coarsen(p_gpu)
            assert_close(gpu.host(pc_gpu), pc_cpu)
            assert_close(gpu_levels[k + 1].dense(), cpu_levels[k + 1].dense())
            qc = np.random.default_rng(k).random(len(pc_cpu))
            assert_close(gpu.host(gpu_levels[k].prolong(p_gpu, gpu.vector(qc), pc_gpu)),
                         cpu_levels[k].prolong(p_cpu, qc, pc_cpu))
            p_cpu, p_gpu = pc_cpu, pc_gpu
    finally:
        gpu.close()


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
    assert G.bytes_needed(*args, "idr") == jacobi + 20 * 8 * 10**6  # 3 s + 8, s = 4
    assert G.bytes_needed(*args, "idr", idr_shadow=8) == jacobi + 32 * 8 * 10**6
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
    generator_agrees(device, name, kind)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["csr", "dia+sell"])
def test_gpu_levels_equal_the_cpu_engine(device, name):
    levels_agree(device, name, (60, 40), 64)


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
@pytest.mark.parametrize("solver", ["jacobi", "aggregation", "idr"])
def test_gpu_solvers_agree_with_the_cpu_path(device, solver):
    solvers_agree(device, solver)


@pytest.mark.gpu
def test_gpu_accelerated_aggregation_agrees_with_the_cpu_path(device):
    solvers_agree(device, "aggregation", accelerate=4)


# ---- here: the engine's launches against a numpy emulation of formats.cu -----------------
# The emulated kernels first check every argument against the C signature in the
# rendered source (a pointer gets a buffer, int an np.int32, long long an np.int64,
# double an np.float64), then compute in numpy what the kernel computes. So the
# engine's plumbing (argument order and types, the ping-pong of sweeps, the vector
# pool, the reductions, the levels) is tested without a GPU.

_C_TYPES = {"int": np.int32, "long long": np.int64, "double": np.float64}


def signatures(source: str) -> dict[str, list[str]]:
    import re

    found = {}
    for m in re.finditer(r'extern "C" __global__ void (\w+)\((.*?)\)\s*\{', source, re.S):
        params = [" ".join(p.replace("__restrict__", "").split()) for p in m.group(2).split(",")]
        found[m.group(1)] = ["ptr" if "*" in p else p.rsplit(" ", 1)[0].replace("const ", "")
                             for p in params]
    return found


class Emulated:
    """A kernel of formats.cu in numpy (see above)."""

    def __init__(self, name, signature, source, log):
        from .fakes import FakeKernel

        self.kernel = FakeKernel(name, log=log)
        self.kernel.run = self.run
        self.name, self.signature, self.source = name, signature, source
        self.offsets = [int(o) for o in source.split("bands (column - row): ")[1]
                        .split("\n")[0].split(", ")] if "bands (column - row)" in source else []

    def run(self, grid, block, args, shared_bytes):
        assert len(args) == len(self.signature), (self.name, len(args), self.signature)
        for i, (a, kind) in enumerate(zip(args, self.signature)):
            if kind == "ptr":
                assert hasattr(a, "view"), (self.name, i, a)
            else:
                assert type(a) is _C_TYPES[kind], (self.name, i, kind, type(a))
        getattr(self, "k_" + self.name.removeprefix("cme_").split("_")[0])(grid, list(args))

    # format parameters -> (rows by position, (O x) by position)
    def incoming(self, fmt_args, x, n):
        d = lambda b, count: b.view(np.float64, count)  # noqa: E731
        i32 = lambda b, count: b.view(np.int32, count)  # noqa: E731
        i64 = lambda b, count: b.view(np.int64, count)  # noqa: E731
        t = np.arange(n)
        rows, total = t.copy(), np.zeros(n)
        fmt = self.name.split("_", 2)[2].removesuffix("_lanes")  # the levels' CSR sweep
        if fmt == "csr":
            ptr, col, val = fmt_args
            ptr = i64(ptr, n + 1)
            nnz = int(ptr[-1])
            each = np.repeat(t, np.diff(ptr))
            return rows, np.bincount(each, d(val, nnz) * x[i32(col, nnz)], minlength=n)
        if fmt == "dia_sell" and len(fmt_args) == 5:
            rows = i32(fmt_args[4], n).astype(np.int64)
        if fmt.startswith("dia"):
            dia = d(fmt_args[0], len(self.offsets) * n).reshape(-1, n)
            for b, o in enumerate(self.offsets):
                c = rows + o
                ok = (c >= 0) & (c < n)
                total[ok] += dia[b, ok] * x[c[ok]]
            fmt_args = fmt_args[1:]
        if fmt.endswith("ell") and not fmt.endswith("sell"):
            width, col, val = fmt_args
            w = int(width)
            col, val = i32(col, w * n).reshape(w, n), d(val, w * n).reshape(w, n)
            total += (val * x[col]).sum(axis=0)
        if fmt == "dia_sell":
            ptr = i64(fmt_args[0], -(-n // 32) + 1)
            col, val = i32(fmt_args[1], int(ptr[-1])), d(fmt_args[2], int(ptr[-1]))
            width = (ptr[t // 32 + 1] - ptr[t // 32]) // 32
            for k in range(int(width.max(initial=0))):
                ok = k < width
                a = ptr[t[ok] // 32] + k * 32 + t[ok] % 32
                total[ok] += val[a] * x[col[a]]
        return rows, total

    def k_fill(self, grid, a):
        gather, count, prop, values = a
        g = gather.view(np.int64, int(count))
        flat = prop.view(np.float64, prop.nbytes // 8)
        values.view(np.float64, int(count))[:] = np.where(g >= 0, flat[np.maximum(g, 0)], 0.0)

    def k_diagonal(self, grid, a):
        targets, prop, R, n, d = a
        R, n = int(R), int(n)
        t = targets.view(np.int32, R * n).reshape(R, n)
        pr = prop.view(np.float64, R * n).reshape(R, n)
        d.view(np.float64, n)[:] = -np.where(t >= 0, pr, 0.0).sum(axis=0)

    def k_jacobi(self, grid, a):
        *fmt_args, p, d, n, omega, inv_norm, out = a
        n = int(n)
        x, dv = p.view(np.float64, n), d.view(np.float64, n)
        rows, inc = self.incoming(fmt_args, x, n)
        pi, di = x[rows], dv[rows]
        u = np.where(di == 0, pi + inc * inv_norm, inc * (-1.0 / np.where(di == 0, 1, di)))
        out.view(np.float64, n)[rows] = u if omega == 1.0 else (1 - omega) * pi + omega * u

    def _partials(self, grid, out, values):
        blocks = grid[0]
        o = out.view(np.float64, 4 * blocks).reshape(4, blocks)
        o[:] = 0.0
        o[:, 0] = values

    def k_residual(self, grid, a):
        *fmt_args, p, d, n, absolute, partials = a
        n = int(n)
        x, dv = p.view(np.float64, n), d.view(np.float64, n)
        rows, inc = self.incoming(fmt_args, x, n)
        dp = dv[rows] * x[rows]
        r = np.abs(inc) + np.abs(dp) if absolute else inc + dp
        self._partials(grid, partials, [np.abs(r).max(), np.abs(r).sum(), np.abs(x).max(),
                                        max(0.0, float(-x.min()))])

    def k_sum(self, grid, a):
        v, n, partials = a
        self._partials(grid, partials, [v.view(np.float64, int(n)).sum(), 0, 0, 0])

    def k_dot(self, grid, a):
        x, y, n, partials = a
        n = int(n)
        self._partials(grid, partials, [x.view(np.float64, n) @ y.view(np.float64, n), 0, 0, 0])

    def k_dots4(self, grid, a):
        *vectors, m, n, partials = a
        m, n = int(m), int(n)
        values = [vectors[2 * k].view(np.float64, n) @ vectors[2 * k + 1].view(np.float64, n)
                  if k < m else 0.0 for k in range(4)]
        self._partials(grid, partials, values)

    def k_combine8(self, grid, a):
        vectors, coefficients, (m, n, clip, out) = a[:8], a[8:16], a[16:]
        m, n = int(m), int(n)
        v = coefficients[0] * vectors[0].view(np.float64, n)
        for c, x in zip(coefficients[1:m], vectors[1:m]):
            v = v + c * x.view(np.float64, n)
        floor = float(re.search(r"#define CME_FLOOR (\S+)", self.source).group(1))
        last = vectors[m - 1].view(np.float64, n)
        out.view(np.float64, n)[:] = np.where(v > 0, v, floor * last) if int(clip) else v

    def k_reduce(self, grid, a):
        partials, blocks, mask, result = a
        p = partials.view(np.float64, 4 * int(blocks)).reshape(4, int(blocks))
        result.view(np.float64, 4)[:] = [p[k].max() if (int(mask) >> k) & 1 else p[k].sum()
                                         for k in range(4)]

    def k_divide(self, grid, a):
        v, n, total = a
        s = total.view(np.float64, 1)[0]
        if s > 0:
            v.view(np.float64, int(n))[:] /= s

    def k_level(self, grid, a):
        getattr(self, "level_" + self.name.removeprefix("cme_level_"))(a)

    def level_restrict(self, a):
        p, d, val, col, diag_ptr, diag_perm, n, s, nc, pc, cdiag = a
        n, s, nc = int(n), int(s), int(nc)
        x, dv = p.view(np.float64, n), d.view(np.float64, n)
        ptr = diag_ptr.view(np.int64, nc + 1)
        perm = diag_perm.view(np.int64, int(ptr[-1]))
        nnz = int(perm.max(initial=-1)) + 1
        w = val.view(np.float64, nnz) * x[col.view(np.int32, nnz)] if nnz else np.zeros(0)
        agg = np.arange(n) // s
        mass = np.maximum(np.bincount(agg, x, minlength=nc), 1e-300)
        inside = np.array([w[perm[ptr[i]:ptr[i + 1]]].sum() for i in range(nc)])
        pc.view(np.float64, nc)[:] = mass
        cdiag.view(np.float64, nc)[:] = (np.bincount(agg, dv * x, minlength=nc) + inside) / mass

    def level_coarse(self, a):
        seg_ptr, perm, val, col, p, ccol, pc, slots, cval = a
        slots = int(slots)
        ptr = seg_ptr.view(np.int64, slots + 1)
        e = perm.view(np.int64, int(ptr[-1]))
        x = p.view(np.float64, p.nbytes // 8)
        vals = val.view(np.float64, val.nbytes // 8)
        cols = col.view(np.int32, col.nbytes // 4)
        sums = np.array([(vals[e[ptr[m]:ptr[m + 1]]] * x[cols[e[ptr[m]:ptr[m + 1]]]]).sum()
                         for m in range(slots)])
        pcv = pc.view(np.float64, pc.nbytes // 8)
        cval.view(np.float64, slots)[:] = sums / pcv[ccol.view(np.int32, slots)]

    level_coarse_values = level_coarse

    def level_prolong(self, a):
        p, qc, pc, n, s, out = a
        n, s = int(n), int(s)
        agg = np.arange(n) // s
        nc = int(agg[-1]) + 1
        f = np.maximum(qc.view(np.float64, nc), 1e-300) / pc.view(np.float64, nc)
        out.view(np.float64, n)[:] = p.view(np.float64, n) * f[agg]


def emulating_device(**kw) -> FakeDevice:
    from .fakes import FakeModule

    def compile(device, source):
        sig = signatures(source)
        return FakeModule(sig, lambda name: Emulated(name, sig[name], source,
                                                     device.launches).kernel)
    return FakeDevice(compile=compile, **kw)


@pytest.mark.parametrize("kind", ["lattice", "random"])
@pytest.mark.parametrize("name", F.FORMATS)
def test_engine_launches_match_the_kernels_and_compute_the_generator(name, kind):
    device = emulating_device()
    generator_agrees(device, name, kind)
    sweeps = [x for x in device.launches if x[0] == f"cme_jacobi_{G.tag(name)}"]
    assert len(sweeps) == 8 and all(x[2] == (G.BLOCK, 1, 1) for x in sweeps)


@pytest.mark.parametrize("name", ["csr", "dia+sell"])
def test_engine_levels_equal_the_cpu_engine_through_the_launches(name):
    levels_agree(emulating_device(), name, (30, 20), 16)


def test_engine_reuses_pooled_vectors():
    sources, targets, prop = problem("lattice")
    engine = G.GpuEngine("dia+sell", sources, targets, prop, device=emulating_device())
    p = engine.vector(np.ones(engine.n))
    for _ in range(5):
        p = engine.jacobi(p, 3, 1.0)
    assert len(engine.pool._all) <= 4  # p, out, scratch, and norm_inf's ones: reused
    engine.close()


def solvers_agree(device, solver: str, accelerate: int = 0) -> None:
    """solvers.solve on a GpuEngine over `device` = on the CPU engine (the lead's files)."""
    solvers = pytest.importorskip("sbmlgpu.plugins.cme.solvers")
    cpu_engine = pytest.importorskip("sbmlgpu.plugins.cme.cpu_engine")
    sources, targets = lattice(12, 10)
    n = sources.shape[1]
    prop = np.random.default_rng(9).uniform(0.5, 2.0, sources.shape)
    offdiag, diag, _ = numpy_generator(sources, targets, prop)
    settings = solvers.SolverSettings(solver=solver, tol=1e-9, check_every=50,
                                      accelerate=accelerate)
    p0 = np.full(n, 1.0 / n)
    cpu = solvers.solve(cpu_engine.CpuEngine(offdiag, diag, coarsest=32), p0, settings)
    engine = G.GpuEngine("dia+sell", sources, targets, prop, device=device, coarsest=32)
    try:
        gpu = solvers.solve(engine, p0, settings)
        assert gpu.converged and cpu.converged and gpu.iterations == cpu.iterations
        assert np.abs(engine.host(gpu.p) - cpu.p).sum() <= 1e-10
    finally:
        engine.close()


@pytest.mark.parametrize("solver", ["jacobi", "aggregation", "idr"])
def test_the_solvers_run_on_the_engine_as_on_the_cpu(solver):
    solvers_agree(emulating_device(), solver)


def test_accelerated_aggregation_runs_on_the_engine_as_on_the_cpu():
    solvers_agree(emulating_device(), "aggregation", accelerate=4)
