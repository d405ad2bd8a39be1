"""The dbn backend on the CPU path (the generated kernel built for the host): counts
equal an independent recount of the ode backend's trajectories of the same samples,
sparse counting equals dense, failed trajectories are reported and never counted,
parameter nodes, runs with another seed agree within sampling error, bad input is a
typed error. The same checks on the GPU: tests/test_dbn_gpu.py."""

from __future__ import annotations

import numpy as np
import pytest

import sbmlgpu
from sbmlgpu import cli
from sbmlgpu.codegen.compile_check import nvcc_available, nvcc_compile
from sbmlgpu.errors import OptionError, UnsupportedModelError
from sbmlgpu.ode.model import KernelModel
from sbmlgpu.plugins.dbn import program as dbn_program
from sbmlgpu.plugins.dbn.kernels import dbn_kernels
from sbmlgpu.plugins.dbn.structure import DbnStructure
from sbmlgpu.results.io import read
from sbmlgpu.views.ode import ode_system

from . import sbml_strings as sbml
from .dbn_recount import dense, ode_backend_counts
from .shared_data import ROOT

MODELS = ROOT / "sbml_models"
LV = MODELS / "lotka_volterra.xml"
LV_SAMPLES = {"x1": "uniform:5:15", "p2": "uniform:0.01:0.03"}


def lv(n=1500, seed=0, **kw):
    settings = dict(ensemble=n, sample=LV_SAMPLES, slices=8, slice_time=0.5, steps=20,
                    seed=seed)
    settings.update(kw)
    return sbmlgpu.dbn(LV, device="cpu", progress=False, **settings)


@pytest.fixture(scope="module")
def lv_result():
    return lv()


def test_counts_equal_an_independent_recount_of_the_ode_backend(lv_result):
    r = lv_result
    counts, marginals, ok = ode_backend_counts(LV, r, n=1500, samples=LV_SAMPLES, seed=0,
                                               steps=20)
    assert ok.all() and r.metadata["failed_trajectories"] == 0
    for v in r.variables:
        np.testing.assert_array_equal(dense(r, v), counts[v], err_msg=v)
    np.testing.assert_array_equal(r.counted, marginals)
    # the ensemble actually moves through bins: not a trivial all-in-one-bin case
    assert (r.counted[:, 0, :] > 0).sum() > len(r.times)


def test_structure_parents_and_parameter_nodes(lv_result):
    r = lv_result
    assert r.variables == ("x1", "x2", "p2")
    assert r.parents == {"x1": ("x1", "x2", "p2"), "x2": ("x1", "x2"), "p2": ("p2",)}
    assert r.metadata["parameter_nodes"] == ["p2"]
    # a parameter node keeps its bin: its CPT is the identity on visited rows
    for s in range(len(r.times) - 1):
        cpt = r.cpt("p2", s)
        visited = ~np.isnan(cpt[:, 0])
        np.testing.assert_array_equal(cpt[visited], np.eye(r.bins)[visited])


def test_cpt_rows_sum_to_one_over_visited_configurations(lv_result):
    r = lv_result
    for v in r.variables:
        for s in range(len(r.times) - 1):
            cpt = r.cpt(v, s)
            visited = r.counts[v][s].sum(axis=1) > 0
            np.testing.assert_allclose(cpt[visited].sum(axis=1), 1.0, rtol=1e-12)
            assert np.isnan(cpt[~visited]).all()
            assert r.counts[v][s].sum() == 1500


def test_inference_is_run_and_its_error_reported(lv_result):
    r = lv_result
    assert r.inferred is not None and r.inferred.shape == r.counted.shape
    np.testing.assert_allclose(r.inferred[0], r.counted[0])
    err = r.inference_error()
    assert 0.0 <= err["mean"] <= err["max"] <= 1.0


def test_sparse_counting_on_the_host_equals_dense_counting(lv_result):
    sparse = lv(options={"max_dense_rows": 5})
    assert sparse.metadata["sparse_variables"] == ["x1", "x2"]
    for v in lv_result.variables:
        np.testing.assert_array_equal(dense(sparse, v), dense(lv_result, v), err_msg=v)
    np.testing.assert_array_equal(sparse.counted, lv_result.counted)


def test_batches_add_up_to_one_launch(lv_result):
    batched = lv(options={"batch": 400})
    assert batched.metadata["batch"] == 400
    for v in lv_result.variables:
        np.testing.assert_array_equal(batched.counts[v], lv_result.counts[v])


def test_another_seed_agrees_within_sampling_error(lv_result):
    ranges = {v: (float(e[0]), float(e[-1])) for v, e in zip(lv_result.variables,
                                                             lv_result.edges)}
    other = lv(n=1500, seed=1, ranges=ranges)
    np.testing.assert_array_equal(other.edges, lv_result.edges)
    assert not np.array_equal(other.counted, lv_result.counted)  # other samples
    p = 0.5 * (other.counted + lv_result.counted)
    sigma = np.sqrt(2 * p * (1 - p) / 1500) + 1e-3
    assert np.all(np.abs(other.counted - lv_result.counted) <= 5 * sigma)


def test_one_integration_counts_what_two_integrations_count(lv_result, monkeypatch):
    """The range pass keeps the values and the counts are made from them: the same
    counts, edges and marginals as integrating a second time (dense and sparse)."""
    assert lv_result.metadata["integrations"] == 1
    sparse_once = lv(options={"max_dense_rows": 5})
    monkeypatch.setattr(dbn_program, "VALUES_MEMORY_SHARE", 0.0)  # nothing fits
    twice, sparse_twice = lv(), lv(options={"max_dense_rows": 5})
    assert twice.metadata["integrations"] == sparse_twice.metadata["integrations"] == 2
    np.testing.assert_array_equal(twice.edges, lv_result.edges)
    for v in lv_result.variables:
        np.testing.assert_array_equal(twice.counts[v], lv_result.counts[v], err_msg=v)
        np.testing.assert_array_equal(dense(sparse_twice, v), dense(sparse_once, v),
                                      err_msg=v)
    np.testing.assert_array_equal(twice.counted, lv_result.counted)
    # ranges given: nothing to find, one integration (the counting pass)
    ranges = {v: (float(e[0]), float(e[-1])) for v, e in zip(lv_result.variables,
                                                             lv_result.edges)}
    assert lv(ranges=ranges).metadata["integrations"] == 1


def test_kernel_text_does_not_depend_on_the_slices():
    """One compile for any --slices: the tables' offsets scale at launch."""
    ode = ode_system(sbmlgpu.load(LV))
    texts = set()
    for slices in (1, 8, 100):
        structure = DbnStructure.of(ode, (), 5, slices, 65536)
        model = KernelModel(ode, (), structure.variables)
        texts.add(dbn_kernels(model, structure, "float", 128).counts.text)
    assert len(texts) == 1


# dX/dt = k X^2, X(0) = 1: X = 1/(1 - k t), which blows up at t = 1/k
BLOW_UP = sbml.model(sbml.species("X", 1, concentration=True), sbml.parameter("k", 1),
                     sbml.reaction("growth", [], ["X"], sbml.math_apply(
                         "times", "<ci>k</ci><ci>X</ci><ci>X</ci>")))


def test_failed_trajectories_are_reported_and_never_counted(tmp_path):
    model = tmp_path / "blow_up.xml"
    model.write_text(BLOW_UP)
    samples = {"k": "uniform:0.2:2"}  # X = 1/(1 - k t): k > 1 blows up before t = 1
    r = sbmlgpu.dbn(model, device="cpu", progress=False, ensemble=400, sample=samples,
                    slices=4, slice_time=0.25, steps=50, ranges={"X": (0.0, 6.0)})
    failed = r.metadata["failed_trajectories"]
    assert 50 < failed < 350 and r.metadata["counted_trajectories"] == 400 - failed
    assert set(r.metadata["failed_status"]) <= {"non_finite", "max_steps"}
    counts, marginals, ok = ode_backend_counts(model, r, n=400, samples=samples, seed=0,
                                               steps=50)
    assert int((~ok).sum()) == failed
    for v in r.variables:
        np.testing.assert_array_equal(dense(r, v), counts[v], err_msg=v)
        assert r.counts[v].sum(axis=(1, 2)).tolist() == [400 - failed] * 4
    np.testing.assert_array_equal(r.counted, marginals)


def test_failed_trajectories_are_never_counted_when_the_values_are_kept(tmp_path):
    """Without --range the counts come from the range pass's values: a member that
    failed there is skipped (status known), never binned."""
    model = tmp_path / "blow_up.xml"
    model.write_text(BLOW_UP)
    samples = {"k": "uniform:0.2:2"}
    r = sbmlgpu.dbn(model, device="cpu", progress=False, ensemble=400, sample=samples,
                    slices=4, slice_time=0.25, steps=50)
    assert r.metadata["integrations"] == 1
    failed = r.metadata["failed_trajectories"]
    assert 50 < failed < 350
    counts, marginals, ok = ode_backend_counts(model, r, n=400, samples=samples, seed=0,
                                               steps=50)
    assert int((~ok).sum()) == failed
    np.testing.assert_array_equal(dense(r, "X"), counts["X"])
    np.testing.assert_array_equal(r.counted, marginals)


@pytest.mark.parametrize("settings, option", [
    (dict(bins=1), "bins"), (dict(slices=0), "slices"), (dict(slice_time=0.0), "slice-time"),
    (dict(steps=0), "steps"), (dict(ranges={"x1": (3.0, 1.0)}), "range"),
    (dict(ranges={"p3": (0.0, 1.0)}), "range"), (dict(ranges={"nope": (0.0, 1.0)}), "range"),
    (dict(sample={"nope": "uniform:0:1"}), "sample"),
    (dict(options={"fast_math": "yes"}), "fast-math"),
    (dict(sample={"x1": "uniform:3:1"}), "sample"),
])
def test_bad_input_is_an_option_error_naming_it(settings, option):
    base = dict(ensemble=10, slices=2, slice_time=0.5, steps=4)
    base.update(settings)
    with pytest.raises(OptionError) as info:
        sbmlgpu.dbn(LV, device="cpu", progress=False, **base)
    assert info.value.option == option
    if "ranges" in settings and "p3" in settings["ranges"]:
        assert "not a variable of the DBN" in str(info.value)


def test_runs_too_large_for_memory_are_refused_before_anything_is_sampled(monkeypatch):
    from sbmlgpu.plugins.dbn import program

    monkeypatch.setattr(program, "available_memory", lambda: 2**30)
    with pytest.raises(OptionError, match="sampled trajectories.*GiB available on the host") \
            as info:
        sbmlgpu.dbn(LV, device="cpu", progress=False, ensemble=10**8, sample=LV_SAMPLES,
                    slices=2, slice_time=0.5)
    assert info.value.option == "ensemble"
    with pytest.raises(OptionError, match="'x1' alone has 16581375 parent") as info:
        sbmlgpu.dbn(LV, device="cpu", progress=False, ensemble=10, sample=LV_SAMPLES,
                    slices=1000, slice_time=0.5, bins=255,
                    options={"max_dense_rows": 10**9})
    assert info.value.option == "bins"


DELAYED = sbml.model(sbml.species("X", 1, concentration=True), sbml.parameter("k", 1),
                     sbml.reaction("growth", [], ["X"], sbml.math_apply(
                         "times", '<ci>k</ci><apply><csymbol encoding="text" definitionURL='
                         '"http://www.sbml.org/sbml/symbols/delay">delay</csymbol>'
                         '<ci>X</ci><cn>0.1</cn></apply>')))


def test_delay_is_refused_by_name(tmp_path):
    model = tmp_path / "delayed.xml"
    model.write_text(DELAYED)
    with pytest.raises(UnsupportedModelError, match="delay.*growth"):
        sbmlgpu.dbn(model, device="cpu", progress=False, ensemble=10, slices=2,
                    slice_time=0.5)


def test_a_model_without_states_is_refused_by_name(tmp_path):
    """No species and no rate rule: nothing to bin (numpy's "need at least one array
    to stack" reached the user as an internal error before)."""
    model = tmp_path / "parameters_only.xml"
    model.write_text(sbml.model("", sbml.parameter("k", 1)))
    with pytest.raises(UnsupportedModelError, match="no variable that changes in time"):
        sbmlgpu.dbn(model, device="cpu", progress=False, ensemble=5, slices=2,
                    slice_time=0.5)


def test_cli_says_how_many_trajectories_failed_and_were_left_out(tmp_path, capsys):
    """One RK4 step a slice of 3 time units: wide p1 blows some trajectories up. They
    were dropped from the counts without a word (a bad-input audit)."""
    code = cli.main(["dbn", str(LV), "--ensemble", "20", "--slices", "3", "--slice-time",
                     "3", "--steps", "1", "--sample", "p1=uniform:0.1:5", "--cpu",
                     "--no-progress", "-o", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 0, err
    loaded = sbmlgpu.dbn(LV, device="cpu", progress=False, ensemble=20, slices=3,
                         slice_time=3, steps=1, sample={"p1": "uniform:0.1:5"})
    failed = loaded.metadata["failed_trajectories"]
    assert 0 < failed < 20  # the case this test is about
    assert f"{failed} of 20 trajectories failed (non_finite {failed}" in err
    assert "left out of the counts" in err


def test_cli_writes_marginals_counts_and_plot(tmp_path, capsys):
    command = ["dbn", str(LV), "--ensemble", "300", "--sample", "x1=uniform:5:15",
               "--slices", "4", "--slice-time", "0.5", "--steps", "10", "--bins", "4",
               "--cpu", "--no-progress"]
    code = cli.main([*command, "--plot", "-o", str(tmp_path)])
    assert code == 0, capsys.readouterr()
    lines = (tmp_path / "lotka_volterra.marginals.csv").read_text().splitlines()
    assert lines[0] == "time,id,bin,lower,upper,counted,inferred"
    assert len(lines) == 1 + 5 * 2 * 4
    assert (tmp_path / "lotka_volterra.png").exists()
    assert cli.main([*command, "--format", "npz", "-o", str(tmp_path / "npz")]) == 0
    loaded = read(tmp_path / "npz" / "lotka_volterra.npz")
    assert loaded.counts["x1"].sum(axis=(1, 2)).tolist() == [300] * 4


@pytest.mark.skipif(not nvcc_available(), reason="nvcc not found")
@pytest.mark.parametrize("name", ["BIOMD0000000033", "BIOMD0000000201"])
def test_pathway_kernels_compile_for_the_gpu(name):
    ode = ode_system(sbmlgpu.load(MODELS / f"{name}.xml"))
    structure = DbnStructure.of(ode, (), 5, 10, 65536)
    kernels = dbn_kernels(KernelModel(ode, (), structure.variables), structure, "float", 128)
    assert not structure.sparse
    for source in (kernels.ranges, kernels.counts):
        assert nvcc_compile(source.text, "sm_90", name=source.name).startswith(b"\x7fELF")
    # the generated counting names the SBML ids it counts
    assert f"/* {structure.variables[0]}: parents" in kernels.counts.text


@pytest.mark.parametrize("k, width", [(5, 3), (5, 28), (2, 70), (255, 9)])
def test_group_rows_equals_numpy_unique_over_rows(k, width):
    from sbmlgpu.plugins.dbn.counting import group_rows

    rng = np.random.default_rng(width)
    rows = rng.integers(0, k, size=(3000, width)).astype(np.uint8)
    rows[1000:2000] = rows[:1000]  # repeated rows
    rows[2000:2010, :] = k - 1  # the largest digits in every word
    expected, inverse = np.unique(rows, axis=0, return_inverse=True)
    got, got_inverse = group_rows(rows, k)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(got_inverse, inverse.reshape(-1))
