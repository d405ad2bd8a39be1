"""The pgmpy export of a DbnResult (sbmlgpu.results.dbn_export): networks and XMLBIF that
pgmpy loads, whose exact inference agrees with our factored-frontier step, and unvisited
configurations filled uniform only in the export, and said so."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import warnings

import numpy as np
import pytest

from sbmlgpu.errors import OptionError, UnsupportedModelError
from sbmlgpu.results.dbn import DbnResult, SparseCounts
from sbmlgpu.results.dbn_export import UNVISITED, node_name
from sbmlgpu.results.dbn_inference import forward_step

from .dbn_helpers import count, random_walk_bins, result_of, sparse_copy

# pgmpy is in the test extra, so `make test` runs these; skip only where it cannot import
needs_pgmpy = pytest.mark.skipif(importlib.util.find_spec("pgmpy") is None,
                                 reason="pgmpy is not installed (pip install sbmlgpu[dbn])")


def fully_visited(seed, bins=3, slices=3):
    """Random counts with every parent configuration visited at every transition."""
    rng = np.random.default_rng(seed)
    variables = ("s1", "s2", "s3", "s4")
    parents = {"s1": ("s1", "s3"), "s2": ("s1", "s2", "s4"), "s3": ("s3",),
               "s4": ("s2", "s3", "s4")}
    counts = {v: rng.integers(1, 9, (slices, bins ** len(parents[v]), bins))
              for v in variables}
    counted = rng.dirichlet(np.ones(bins), (slices + 1, len(variables)))
    counted[1, 2, 0] = 0.0  # a zero-mass bin in a prior is fine
    counted[1, 2] /= counted[1, 2].sum()
    return result_of(variables, parents, bins, counts, counted, metadata={"model": "toy"})


def with_unvisited():
    records = random_walk_bins(np.random.default_rng(8), 40, 2, 3, 4)
    variables = ("a", "b", "c")
    parents = {"a": ("a", "b"), "b": ("a", "b", "c"), "c": ("c",)}
    return result_of(variables, parents, 4, *count(records, variables, parents, 4))


def ve_marginals(network, names):
    with warnings.catch_warnings():  # pgmpy's own deprecation notices, not ours
        warnings.simplefilter("ignore", FutureWarning)
        from pgmpy.inference import VariableElimination

        engine = VariableElimination(network)
        return {n: engine.query([n], show_progress=False).values for n in names}


@needs_pgmpy
@pytest.mark.parametrize("seed", [0, 1])
def test_exact_inference_on_the_export_equals_our_forward_step(seed):
    result = fully_visited(seed)
    for s in range(result.slices):
        network = result.to_bayesian_network(s)
        assert network.check_model()
        ours, unvisited = forward_step(result, s, result.counted[s])
        assert not unvisited.any()
        got = ve_marginals(network, [node_name(v, s + 1) for v in result.variables])
        for v, var in enumerate(result.variables):
            np.testing.assert_allclose(got[f"{var}@{s + 1}"], ours[v], rtol=0, atol=1e-9)
            assert network.nodes[f"{var}@{s + 1}"][UNVISITED] == "none"


@needs_pgmpy
def test_the_dynamic_network_holds_the_same_distributions():
    result = fully_visited(2)
    network = result.to_pgmpy(1)
    assert network.check_model()
    assert sorted(map(tuple, network.get_inter_edges())) == sorted(
        ((p, 0), (v, 1)) for v in result.variables for p in result.parents[v])
    ours, _ = forward_step(result, 1, result.counted[1])
    with warnings.catch_warnings():
        # pgmpy's deprecation notices, and its 0/0 on the zero-mass bin of a prior while
        # it normalises internally (the marginals it returns are checked below)
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        from pgmpy.inference import DBNInference

        got = DBNInference(network).forward_inference([(v, 1) for v in result.variables])
    for v, var in enumerate(result.variables):
        np.testing.assert_allclose(got[(var, 1)].values, ours[v], rtol=0, atol=1e-9)
        np.testing.assert_allclose(network.get_cpds((var, 0)).values, result.counted[1, v])


@needs_pgmpy
def test_xmlbif_loads_back_with_the_same_tables(tmp_path):
    from pgmpy.readwrite import XMLBIFReader

    result = fully_visited(3)
    [path] = result.write_xmlbif(tmp_path / "toy.xml", 2)
    model = XMLBIFReader(str(path)).get_model()
    assert model.check_model()
    assert set(model.nodes) == {node_name(v, s) for v in result.variables for s in (2, 3)}
    for var in result.variables:
        cpd = model.get_cpds(f"{var}@3")
        assert cpd.variables[1:] == [f"{p}@2" for p in result.parents[var]]
        np.testing.assert_allclose(cpd.get_values().T, result.cpt(var, 2), rtol=0, atol=1e-15)
        assert model.nodes[f"{var}@3"][UNVISITED] == "none"


@needs_pgmpy
def test_unvisited_configurations_are_filled_uniform_and_listed(tmp_path):
    from pgmpy.readwrite import XMLBIFReader

    result = with_unvisited()
    assert len(result.unvisited("b", 1)) > 0 and len(result.unvisited("c", 1)) == 0
    [path] = result.write_xmlbif(tmp_path / "m.xml", 1)
    loaded = XMLBIFReader(str(path)).get_model()
    for network in (result.to_bayesian_network(1), loaded):
        assert network.check_model()
        for var in result.variables:
            missing = result.unvisited(var, 1)
            listed = network.nodes[f"{var}@2"][UNVISITED]
            assert listed == (" ".join(map(str, missing)) if missing.size else "none")
            table = network.get_cpds(f"{var}@2").get_values().T
            np.testing.assert_allclose(table[missing], 0.25)
            visited = np.setdiff1d(np.arange(len(table)), missing)
            np.testing.assert_allclose(table[visited], result.cpt(var, 1)[visited])
    assert np.isnan(result.cpt("b", 1)[result.unvisited("b", 1)]).all()  # result unfilled
    dynamic = result.to_pgmpy(1)
    assert dynamic.nodes[("b", 1)][UNVISITED] == " ".join(map(str, result.unvisited("b", 1)))


@needs_pgmpy
def test_a_small_sparse_variable_exports_as_its_dense_table():
    dense = with_unvisited()
    sparse = sparse_copy(dense, ["b"])
    for var in dense.variables:
        want = dense.to_bayesian_network(0).get_cpds(f"{var}@1").get_values()
        np.testing.assert_array_equal(sparse.to_bayesian_network(0).get_cpds(f"{var}@1")
                                      .get_values(), want)
    assert (sparse.to_bayesian_network(0).nodes["b@1"][UNVISITED]
            == dense.to_bayesian_network(0).nodes["b@1"][UNVISITED])


@needs_pgmpy
def test_a_sparse_variable_too_large_for_a_full_table_is_refused_by_name():
    names = tuple(f"v{i}" for i in range(9))
    records = random_walk_bins(np.random.default_rng(9), 30, 2, 9, 5)
    parents = {v: (v,) for v in names}
    counts, counted = count(records, names, parents, 5)
    # v0 given all nine: 5**9 configurations, 5**10 entries, over the export's limit
    configs = [np.unique(records[:, s], axis=0) for s in range(2)]
    tables = [np.array([[int(sum((r[s] == c).all() and r[s + 1, 0] == b for r in records))
                         for b in range(5)] for c in configs[s]]) for s in range(2)]
    counts["v0"] = SparseCounts(tuple(configs), tuple(tables))
    result = result_of(names, {**parents, "v0": names}, 5, counts, counted)
    with pytest.raises(UnsupportedModelError, match=r"v0: 9 parents") as caught:
        result.to_bayesian_network(0)
    assert caught.value.features and list(caught.value.features.values()) == [("v0",)]
    with pytest.raises(UnsupportedModelError, match="transition 1"):
        result.to_pgmpy(1)


@needs_pgmpy
@pytest.mark.parametrize("transition", [-1, 3, 1.0])
def test_a_transition_the_result_does_not_have_is_an_option_error(transition):
    with pytest.raises(OptionError, match=r"not a transition of this result \(0 \.\. 2\)"):
        fully_visited(0).to_bayesian_network(transition)


def test_without_pgmpy_the_export_says_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pgmpy.models", None)  # `import` now raises ImportError
    result = fully_visited(0)
    for export in (lambda: result.to_pgmpy(0), lambda: result.to_bayesian_network(0),
                   lambda: result.write_xmlbif(tmp_path / "x.xml", 0)):
        with pytest.raises(OptionError, match=r"pip install 'sbmlgpu\[dbn\]'"):
            export()
    assert not (tmp_path / "x.xml").exists()


def test_pgmpy_is_imported_only_when_an_export_is_asked_for():
    # results must load and be read where pgmpy is absent: no import at module level
    code = ("import sys, sbmlgpu.results.dbn_export, sbmlgpu.results.dbn_inference; "
            "print('pgmpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
