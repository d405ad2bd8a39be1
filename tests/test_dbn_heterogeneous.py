"""The dbn backend's heterogeneous counting kernel (plugins/dbn/heterogeneous.py,
kernels/heterogeneous.cu).

Here (no GPU): the kernel compiles for sm_90 on the pathway models; the equation
groups cover every equation once, carry the temporaries they need, and are balanced
by the cost model; the groups' dx equal model_rhs bit for bit (host build); choose_c
follows its model; the options are checked with typed errors. On the GPU (`-m gpu`):
its counts equal the homogeneous kernel's."""

from __future__ import annotations

import ctypes
from types import SimpleNamespace

import numpy as np
import pytest

import sbmlgpu
from sbmlgpu.codegen.compile_check import nvcc_available, nvcc_compile
from sbmlgpu.errors import OptionError
from sbmlgpu.ode.model import KernelModel
from sbmlgpu.plugins.dbn import heterogeneous as het
from sbmlgpu.plugins.dbn.kernels import dbn_kernels
from sbmlgpu.plugins.dbn.options import DbnOptions
from sbmlgpu.plugins.dbn.structure import DbnStructure
from sbmlgpu.views.ode import ode_system

from .ode_helpers import apply, ci, cn, load, needs_compiler, rate_rule_model

MATHML = 'xmlns="http://www.w3.org/1998/Math/MathML"'
needs_nvcc = pytest.mark.skipif(not nvcc_available(), reason="nvcc not found")

#: a device as far as plan() looks at one: Hopper's shared memory
HOPPER = SimpleNamespace(properties=SimpleNamespace(shared_memory_per_block_optin=227 * 1024,
                                                    shared_memory_per_sm=228 * 1024))

#: (model, sampled ids): lotka_volterra with a parameter node, the pathway models
MODELS = [("lotka_volterra", ("x1", "p1")), ("BIOMD0000000033", ("EGF", "NGF")),
          ("BIOMD0000000201", ())]


def prepared(name, sampled=(), precision="float", max_dense_rows=65_536, bins=5, slices=10):
    net = load(name) if isinstance(name, str) else name
    ode = ode_system(net)
    nodes = tuple(s for s in sampled if s not in ode.state_ids)
    structure = DbnStructure.of(ode, nodes, bins, slices, max_dense_rows)
    model = KernelModel(ode, tuple(sampled), structure.variables)
    kernels = dbn_kernels(model, structure, precision, 128)
    return model, structure, kernels


def planned(name, sampled=(), device=HOPPER, steps=20, **options):
    model, structure, kernels = prepared(name, sampled, options.get("precision", "float"))
    o = DbnOptions(**{"kernel": "heterogeneous", **options}).validate()
    return het.plan(model, structure, kernels.counts, kernels.sink, o, device, steps)


# -- the kernel compiles --------------------------------------------------------------
@needs_nvcc
@pytest.mark.parametrize("name,sampled", MODELS)
@pytest.mark.parametrize("precision", ["float", "double"])
def test_the_heterogeneous_kernel_compiles_for_sm_90(name, sampled, precision):
    kernel = planned(name, sampled, precision=precision)
    text = kernel.source.text
    assert kernel.source.kernel == het.ENTRY and f"{het.ENTRY}(" in text
    assert f"#define DBN_C {kernel.layout.compute_warps}" in text
    assert "bar.sync" in text and "bar.arrive" in text
    # the SBML ids name the generated equations
    model = prepared(name, sampled, precision)[0]
    assert all(f"/* {sid} */" in text for sid in model.ode.state_ids)
    nvcc_compile(text, "sm_90", name=kernel.source.name)  # CompileError if nvcc refuses
    # its values variant (the range pass of a run whose values are kept)
    values = kernel.values_source
    assert values.kernel == het.VALUES_ENTRY and f"{het.VALUES_ENTRY}(" in values.text
    # each variant has its own slice output: bins handed to the memory warps, or values
    assert "dbn_bar_arrive(DBN_BAR_FULL" in text and "values[((long long)k" not in text
    assert "dbn_bar_arrive(DBN_BAR_FULL" not in values.text
    assert "values[((long long)k" in values.text and f"{het.ENTRY}(" not in values.text
    nvcc_compile(values.text, "sm_90", name=values.name)


@needs_nvcc
@pytest.mark.parametrize("warps", [1, 2])
def test_forced_compute_warps_compile(warps):
    kernel = planned("BIOMD0000000033", ("EGF",), warps=warps)
    assert kernel.layout.compute_warps == warps and kernel.chosen_by == "--warps"
    assert len(kernel.groups) == warps
    nvcc_compile(kernel.source.text, "sm_90", name=kernel.source.name)


# -- the partition ------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["BIOMD0000000033", "BIOMD0000000201", "BIOMD0000000088"])
@pytest.mark.parametrize("c", [1, 2, 3, 5, 8])
def test_partition_covers_every_equation_once_and_is_balanced(name, c):
    model = prepared(name)[0]
    rhs = het.RhsBlock(model)
    groups = het.partition(rhs, c)
    assert [g.index for g in groups] == list(range(c))
    flat = [i for g in groups for i in g.equations]
    assert sorted(flat) == list(range(model.n_states))  # each exactly once
    assert all(g.equations for g in groups)
    # each group's temporaries are what its equations use, closed under use
    names = {symbol: k for k, (symbol, _) in enumerate(rhs.block.temporaries)}
    for g in groups:
        have = set(g.temporaries)
        for e in [rhs.block.outputs[i] for i in g.equations] + \
                 [rhs.block.temporaries[k][1] for k in g.temporaries]:
            assert {names[s] for s in e.free_symbols if s in names} <= have
    # greedy by least growth: the heaviest group exceeds the mean by at most one equation
    costs = [g.flops for g in groups]
    heaviest_equation = max(rhs.cost([i]) for i in range(model.n_states))
    assert max(costs) <= sum(costs) / c + heaviest_equation + 1e-9
    # and splitting never makes the heaviest group heavier than the whole
    assert max(costs) <= rhs.cost(range(model.n_states)) + 1e-9


def test_partition_refuses_more_groups_than_equations():
    rhs = het.RhsBlock(prepared("lotka_volterra")[0])
    with pytest.raises(ValueError):
        het.partition(rhs, 3)


def test_group_equations_equal_model_rhs_bit_for_bit_on_the_host(tmp_path):
    """The groups print the temporaries of model_rhs's CSE block: every dx is the same
    expression, so a host build (no FMA contraction) gives the same bits."""
    needs_compiler()
    from sbmlgpu.runtime import host

    kernel = planned("BIOMD0000000033", ("EGF", "NGF"), precision="double", warps=3)
    model = prepared("BIOMD0000000033", ("EGF", "NGF"), "double")[0]
    nx, npar, t_count = model.n_states, len(model.varied), kernel.layout.trajectories
    calls = []
    for g in kernel.groups:
        calls.append(f"    {{ real_t dx[{len(g.equations)}]; "
                     f"dbn_rhs_group_{g.index}(t, xs + j, ps + j, dx);")
        calls += [f"      grouped[j * ODE_NX + {i}] = dx[{m}];"
                  for m, i in enumerate(g.equations)]
        calls.append("    }")
    harness = kernel.source.text + "\n" + "\n".join([
        'extern "C" int het_harness(const real_t* xs, const real_t* ps, real_t t,',
        '                           real_t* full, real_t* grouped)',
        "{",
        "  for (int j = 0; j < DBN_T; ++j) {",
        "    real_t x[ODE_NX], p[ODE_NP];",
        "    for (int i = 0; i < ODE_NX; ++i) x[i] = xs[i * DBN_T + j];",
        "    for (int i = 0; i < ODE_NP; ++i) p[i] = ps[i * DBN_T + j];",
        "    model_rhs(t, x, p, full + j * ODE_NX);",
        *calls,
        "  }",
        "  return 0;",
        "}", ""])
    library = host.load(harness, "het_harness.cu", ("-w", "-ffp-contract=off"))
    rng = np.random.default_rng(3)
    xs = rng.uniform(0.0, 2e4, (nx, t_count))
    ps = rng.uniform(0.5, 2e4, (npar, t_count))
    full = np.zeros((t_count, nx))
    grouped = np.full((t_count, nx), np.nan)
    ptr = ctypes.c_void_p
    library.het_harness.argtypes = [ptr, ptr, ctypes.c_double, ptr, ptr]
    library.het_harness(*(a.ctypes.data_as(ptr) for a in (xs, ps)), 0.0,
                        full.ctypes.data_as(ptr), grouped.ctypes.data_as(ptr))
    assert np.isfinite(full).all() and np.abs(full).max() > 0
    assert np.array_equal(full.view(np.uint64), grouped.view(np.uint64))


# -- choose_c and the block --------------------------------------------------------------
def test_choose_c_follows_its_cost_model():
    model, structure, _ = prepared("BIOMD0000000033")
    rhs = het.RhsBlock(model)
    per = het.bytes_per_trajectory(model, structure, "float")
    limits = het.SmLimits()
    c = het.choose_c(rhs, per, structure, 20, limits)
    assert 1 <= c <= het.MAX_COMPUTE_WARPS
    rates = {k: het.design(rhs, k, per, structure, 20, limits).rate
             for k in range(1, het.MAX_COMPUTE_WARPS + 1)}
    assert rates[c] == max(rates.values())
    # issue-bound (latency hidden): one group has no duplicated temporaries, C = 1
    assert het.choose_c(rhs, per, structure, 20, het.SmLimits(latency=0.0)) == 1
    # latency-bound (unlimited issue): splitting shortens the critical path, C > 1
    assert het.choose_c(rhs, per, structure, 20, het.SmLimits(schedulers=10**9)) > 1


def test_choose_c_stays_within_the_equations():
    model, structure, _ = prepared("lotka_volterra")
    rhs = het.RhsBlock(model)
    per = het.bytes_per_trajectory(model, structure, "float")
    assert het.choose_c(rhs, per, structure, 20, het.SmLimits(schedulers=10**9)) <= 2


def test_block_holds_warp_multiples_within_shared_memory():
    for name in ("lotka_volterra", "BIOMD0000000033", "BIOMD0000000201"):
        kernel = planned(name)
        layout = kernel.layout
        assert layout.trajectories % 32 == 0 and layout.trajectories >= 32
        assert layout.shared_bytes <= 227 * 1024
        assert layout.threads == 32 * (layout.compute_warps + layout.memory_warps)
        assert layout.memory_warps in (1, 2)
        blocks, threads, shared = kernel.launch_shape(2000)
        assert blocks * layout.trajectories >= 2000 > (blocks - 1) * layout.trajectories
        assert (threads, shared) == (layout.threads, layout.shared_bytes)
        assert f"#define DBN_SHARED_BYTES {layout.shared_bytes}" in kernel.source.text


def test_too_little_shared_memory_is_not_applicable():
    tiny = SimpleNamespace(properties=SimpleNamespace(shared_memory_per_block_optin=4096,
                                                      shared_memory_per_sm=8192))
    with pytest.raises(OptionError, match="shared memory"):
        planned("BIOMD0000000033", device=tiny)


# -- options ---------------------------------------------------------------------------------
def test_kernel_option_values_are_checked():
    with pytest.raises(OptionError, match="kernel"):
        DbnOptions(kernel="fast").validate()
    with pytest.raises(OptionError, match="warps"):
        DbnOptions(warps=2).validate()  # warps without the heterogeneous kernel
    with pytest.raises(OptionError, match="warps"):
        DbnOptions(kernel="heterogeneous", warps=9).validate()
    assert DbnOptions().kernel == "homogeneous"


def test_more_warps_than_equations_is_an_option_error():
    with pytest.raises(OptionError, match=r"warps.*at most 2"):
        planned("lotka_volterra", warps=3)


def test_heterogeneous_needs_a_gpu():
    with pytest.raises(OptionError, match="GPU only"):
        planned("lotka_volterra", device=None)
    model, structure, kernels = prepared("lotka_volterra")
    auto = DbnOptions(kernel="auto", warps=1).validate()
    assert het.plan(model, structure, kernels.counts, kernels.sink, auto, None, 20) is None


@needs_nvcc
def test_sparse_variables_get_their_bin_records_from_the_memory_warps():
    # a dense limit below EGF-NGF's largest table: some variables are counted on the host
    model, structure, kernels = prepared("BIOMD0000000033", max_dense_rows=25)
    assert structure.sparse and kernels.sink.records
    o = DbnOptions(kernel="heterogeneous").validate()
    kernel = het.plan(model, structure, kernels.counts, kernels.sink, o, HOPPER, 20)
    assert "row[v] = S->bins[slot][v * DBN_T + j]" in kernel.source.text
    nvcc_compile(kernel.source.text, "sm_90", name=kernel.source.name)
    # all dense: no copy in the text
    dense_only = planned("BIOMD0000000033")
    assert "row[v] = S->bins" not in dense_only.source.text


def test_events_are_not_applicable():
    at_one = apply("gt", '<csymbol encoding="text" definitionURL="http://www.sbml.org/sbml/'
                         'symbols/time">time</csymbol>', cn(1))
    event = ('<event id="E1" useValuesFromTriggerTime="true"><trigger initialValue="true" '
             f'persistent="true"><math {MATHML}>{at_one}</math></trigger>'
             f'<listOfEventAssignments><eventAssignment variable="x"><math {MATHML}>'
             f'{cn(5)}</math></eventAssignment></listOfEventAssignments></event>')
    net = sbmlgpu.load(rate_rule_model({"x": (1.0, apply("minus", ci("x")))}, events=event))
    model, structure, kernels = prepared(net)
    assert model.events and not structure.sparse
    o = DbnOptions(kernel="heterogeneous").validate()
    with pytest.raises(OptionError, match="events"):
        het.plan(model, structure, kernels.counts, kernels.sink, o, HOPPER, 20)


def test_auto_keeps_small_models_homogeneous_and_takes_large_ones(tmp_path):
    auto = DbnOptions(kernel="auto").validate()
    for small in ("lotka_volterra", "BIOMD0000000033"):  # 2 and 28 equations
        model, structure, kernels = prepared(small)
        assert het.plan(model, structure, kernels.counts, kernels.sink, auto, HOPPER,
                        20) is None
    # 98 equations (BIOMD0000000088 without its event, which the kernel does not take)
    import libsbml

    from .ode_helpers import MODELS

    document = libsbml.readSBMLFromFile(str(MODELS / "BIOMD0000000088.xml"))
    while document.getModel().getNumEvents():
        document.getModel().removeEvent(0)
    libsbml.writeSBMLToFile(document, str(tmp_path / "m88.xml"))
    model, structure, kernels = prepared(sbmlgpu.load(tmp_path / "m88.xml"))
    assert model.n_states >= het.AUTO_MIN_EQUATIONS
    chosen = het.plan(model, structure, kernels.counts, kernels.sink, auto, HOPPER, 20)
    assert chosen is not None and chosen.chosen_by == "cost model"


def test_the_cpu_path_refuses_the_heterogeneous_kernel():
    with pytest.raises(OptionError, match="kernel"):
        sbmlgpu.dbn(load("lotka_volterra"), ensemble=20, sample={"x1": "uniform:5:15"},
                    slices=2, slice_time=1.0, steps=4, device="cpu", progress=False,
                    options={"kernel": "heterogeneous"})


# -- on the GPU: the same counts as the homogeneous kernel -------------------------------
GPU_CASES = [("lotka_volterra", {"x1": "uniform:5:15", "p1": "uniform:0.5:1.5"}, 1.0),
             # a step of 0.02 (RK4 is unstable on EGF-NGF at 0.5, the first choice here)
             ("BIOMD0000000033", {"EGF": "uniform:5000:20000", "NGF": "uniform:1000:9000"},
              0.4)]


def _gpu_run(device, name, sample, slice_time, precision, ranges=None, **options):
    return sbmlgpu.dbn(load(name), ensemble=2000, sample=sample, slices=10,
                       slice_time=slice_time, steps=20, seed=7, device=[device.index],
                       progress=False, ranges=ranges or {},
                       options={"precision": precision, **options})


def _count_difference(a, b) -> tuple[int, int]:
    """(counts that differ, counts in all) between two results' dense tables."""
    total = differ = 0
    for v in a.variables:
        x, y = np.asarray(a.counts[v]), np.asarray(b.counts[v])
        assert x.shape == y.shape
        assert np.array_equal(x.sum(axis=(1, 2)), y.sum(axis=(1, 2)))  # members per slice
        total += int(x.sum())
        differ += int(np.abs(x.astype(np.int64) - y).sum())
    return differ, total


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["double", "float"])
@pytest.mark.parametrize("warps", [1, 2, 0])
@pytest.mark.parametrize("name,sample,slice_time", GPU_CASES)
def test_gpu_heterogeneous_counts_equal_the_homogeneous(gpu_device, name, sample, slice_time,
                                                        warps, precision):
    """Both heterogeneous kernels against the homogeneous one: the counting kernel
    (memory warps) with the ranges given, and the values variant (a run without ranges:
    it integrates once, the extrema and counts come from its values)."""
    hom = _gpu_run(gpu_device, name, sample, slice_time, precision)
    ranges = {v: (float(e[0]), float(e[-1])) for v, e in zip(hom.variables, hom.edges)}
    counting = _gpu_run(gpu_device, name, sample, slice_time, precision, ranges,
                        kernel="heterogeneous", warps=warps)
    once = _gpu_run(gpu_device, name, sample, slice_time, precision, kernel="heterogeneous",
                    warps=warps)
    for result in (counting, once):
        meta = result.metadata
        assert hom.metadata["kernel"] == "homogeneous" and meta["kernel"] == "heterogeneous"
        if warps:
            assert meta["compute_warps"] == warps
        assert meta["counted_trajectories"] == hom.metadata["counted_trajectories"]
        assert meta["rk4_steps"] == hom.metadata["rk4_steps"]
        assert meta["integrations"] == 1
    if precision == "double":
        assert np.array_equal(once.edges, hom.edges)  # the same values, the same extrema
        for result in (counting, once):
            differ, total = _count_difference(hom, result)
            assert differ == 0, f"{differ} of {total} counts differ"
    else:
        # float: nvcc may fuse a product shared by two groups differently (module
        # docstring of heterogeneous.py); a last-bit difference moves a member across a
        # bin edge only rarely, and the extrema by a last bit at most
        differ, total = _count_difference(hom, counting)
        assert differ <= 1e-3 * total, f"{differ} of {total} counts differ"
        np.testing.assert_allclose(once.edges, hom.edges, rtol=1e-5)
        assert np.abs(once.counted - hom.counted).max() <= 1e-3


@pytest.mark.gpu
def test_gpu_heterogeneous_bin_records_equal_the_homogeneous(gpu_device):
    """Variables counted on the host from the memory warps' bin records: the same
    counts as from the homogeneous kernel's records (double: bit for bit)."""
    from .dbn_recount import dense

    name, sample, slice_time = GPU_CASES[1]
    hom = _gpu_run(gpu_device, name, sample, slice_time, "double", max_dense_rows=25)
    ranges = {v: (float(e[0]), float(e[-1])) for v, e in zip(hom.variables, hom.edges)}
    # with the ranges given the counting kernel runs (its memory warps copy the
    # records); without, the values variant (the records come from the replay)
    for given in (ranges, None):
        het_result = _gpu_run(gpu_device, name, sample, slice_time, "double", given,
                              kernel="heterogeneous", max_dense_rows=25)
        assert het_result.metadata["kernel"] == "heterogeneous"
        assert het_result.metadata["sparse_variables"] == hom.metadata["sparse_variables"]
        assert hom.metadata["sparse_variables"]
        for v in hom.variables:
            np.testing.assert_array_equal(dense(het_result, v), dense(hom, v), err_msg=v)
        np.testing.assert_array_equal(het_result.counted, hom.counted)


@pytest.mark.gpu
def test_gpu_heterogeneous_values_variant_in_batches_with_failed_members(gpu_device,
                                                                         tmp_path):
    """The values variant over batches that do not divide the ensemble (members at an
    offset) with members that blow up: the homogeneous run's edges, counts and failures
    (double: bit for bit)."""
    from .test_dbn_backend import BLOW_UP

    model = tmp_path / "blow_up.xml"
    model.write_text(BLOW_UP)
    settings = dict(ensemble=1000, sample={"k": "uniform:0.2:2"}, slices=4, slice_time=0.25,
                    steps=50, device=[gpu_device.index], progress=False)
    hom = sbmlgpu.dbn(model, options={"precision": "double", "batch": 333}, **settings)
    het_result = sbmlgpu.dbn(model, options={"precision": "double", "batch": 333,
                                             "kernel": "heterogeneous"}, **settings)
    meta = het_result.metadata
    assert meta["kernel"] == "heterogeneous" and meta["integrations"] == 1
    assert 100 < meta["failed_trajectories"] == hom.metadata["failed_trajectories"] < 900
    assert meta["failed_members"] == hom.metadata["failed_members"]
    np.testing.assert_array_equal(het_result.edges, hom.edges)
    np.testing.assert_array_equal(np.asarray(het_result.counts["X"]),
                                  np.asarray(hom.counts["X"]))


def test_the_gpu_engine_counts_with_the_heterogeneous_kernel():
    """Launch shape and arguments on a fake device: the planned kernel replaces the
    homogeneous count kernel, the weight -1 pass included; ranges stay homogeneous."""
    from sbmlgpu.ode.engines import LaunchConfig
    from sbmlgpu.plugins.dbn.engines import WEIGHT_REMOVE, GpuEngine

    from .fakes import FakeDevice, FakeKernel, FakeModule

    names = (het.ENTRY, het.VALUES_ENTRY, "sbmlgpu_dbn_cpt_rk4", "sbmlgpu_dbn_range_rk4",
             "sbmlgpu_dbn_range_replay", "sbmlgpu_dbn_cpt_replay")
    device = FakeDevice(compile=lambda dev, _: FakeModule(
        names, lambda name: FakeKernel(name, log=dev.launches)))
    model, structure, kernels = prepared("BIOMD0000000033", ("EGF",))
    options = DbnOptions(kernel="heterogeneous", warps=2).validate()
    kernel = het.plan(model, structure, kernels.counts, kernels.sink, options, device, 20)
    engine = GpuEngine(kernels, device, kernel)
    engine.compile()
    assert kernel.source.text in device.compiled
    config = LaunchConfig(rtol=0.0, atol=0.0, h0=0.5, max_step=0.5, dt=0.5, max_steps=500,
                          seed=1, block_size=128)
    table, times = np.ones((1, 1000)), np.arange(11.0)
    ranges = np.tile([0.0, 1.0], (len(structure.variables), 1))
    engine.start_counts(structure.count_elements)
    engine.count_pass(table, times, config, ranges)
    engine.count_pass(table[:, :3], times, config, ranges, weight=WEIGHT_REMOVE)
    engine.range_pass(table, times, config)
    (first, grid, block, shared), (back, grid_b, _, _), (ranges_name, _, block_r, shared_r) = \
        device.launches[-3:]
    assert first == back == het.ENTRY and ranges_name == "sbmlgpu_dbn_range_rk4"
    assert (grid[0], block[0], shared) == kernel.launch_shape(1000)
    assert grid_b[0] == kernel.launch_shape(3)[0] == 1
    assert (block_r[0], shared_r) == (128, 0)
    assert len(engine.finish_counts()) == structure.count_elements
    # values kept: the values variant integrates, the range kernel's replay finds the
    # extrema, the count kernel's replay counts
    values = engine.start_values(1000, len(times))
    engine.range_pass(table, times, config, values=(values, 0))
    engine.start_counts(structure.count_elements)
    engine.replay_pass(values, 0, np.zeros(1000, np.int8), len(times), ranges, 128)
    (integrate, grid_v, block_v, shared_v), (extrema, _, _, _), (count, _, _, _) = \
        device.launches[-3:]
    assert (integrate, extrema, count) == (het.VALUES_ENTRY, "sbmlgpu_dbn_range_replay",
                                          "sbmlgpu_dbn_cpt_replay")
    assert (grid_v[0], block_v[0], shared_v) == kernel.launch_shape(1000)
    assert kernel.values_source.text in device.compiled
