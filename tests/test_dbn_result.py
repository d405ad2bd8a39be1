"""DbnResult's counts in both forms (dense tables and SparseCounts of visited
configurations): validation, CPT rows, and NPZ/HDF5 round trips."""

from __future__ import annotations

import numpy as np
import pytest

from sbmlgpu.results import read
from sbmlgpu.results.dbn import FULL_TABLE_LIMIT, DbnResult, SparseCounts

from .dbn_helpers import count, random_network, random_walk_bins, result_of, sparse_copy


def sparse(configs, counts):
    return SparseCounts(tuple(np.asarray(c) for c in configs),
                        tuple(np.asarray(c) for c in counts))


# -- SparseCounts ----------------------------------------------------------------------------------
def test_sparse_counts_store_canonical_read_only_arrays():
    s = sparse([[[0, 1], [2, 0]]], [[[1, 0, 3], [0, 2, 0]]])
    assert s.configs[0].dtype == np.uint8 and s.counts[0].dtype == np.int64
    assert (s.transitions, s.n_parents, s.bins) == (1, 2, 3)
    with pytest.raises(ValueError):
        s.counts[0][0, 0] = 5  # frozen: the arrays cannot be changed behind its back


@pytest.mark.parametrize("configs, counts, message", [
    ([[[1, 0], [0, 2]]], [[[1, 0, 0], [0, 1, 0]]], "sorted lexicographically and unique"),
    ([[[0, 1], [0, 1]]], [[[1, 0, 0], [0, 1, 0]]], "sorted lexicographically and unique"),
    ([[[0, 1], [0, 2]]], [[[1, 0, 0], [0, 0, 0]]], r"configuration \[0, 2\] is listed with no"),
    ([[[0, 1]]], [[[1, -1, 1]]], "negative counts"),
    ([[[0, 3]]], [[[1, 0, 0]]], r"parent bin outside 0..2"),
    ([[[0, 2]]], [[[1, 0]]], r"parent bin outside 0..1"),  # K = 2, read from the counts
    ([[[0, 1], [0, 2]]], [[[1, 0, 0]]], "do not match"),
    ([[[0.5, 1]]], [[[1, 0, 0]]], "must be integers"),
])
def test_sparse_counts_refuse_what_breaks_the_convention(configs, counts, message):
    with pytest.raises(ValueError, match=message):
        sparse(configs, counts)


def test_sparse_counts_name_the_transition_at_fault():
    with pytest.raises(ValueError, match="transition 1: negative counts"):
        sparse([[[0]], [[1]]], [[[1, 0]], [[0, -2]]])
    with pytest.raises(ValueError, match="one each per transition"):
        SparseCounts((np.zeros((1, 1), int),), ())


def test_sparse_and_dense_forms_convert_both_ways():
    rng = np.random.default_rng(1)
    dense = rng.integers(0, 3, (2, 9, 3)) * (rng.random((2, 9, 1)) < 0.6)
    s = SparseCounts.from_dense(dense)
    np.testing.assert_array_equal(s.to_dense(), dense)
    for t in range(2):  # only the rows with counts, in row (lexicographic) order
        rows = np.flatnonzero(dense[t].sum(axis=1) > 0)
        np.testing.assert_array_equal(s.configs[t], np.stack(np.divmod(rows, 3), axis=1))


# -- DbnResult with either form --------------------------------------------------------------------
def small():
    records = random_walk_bins(np.random.default_rng(7), 60, 2, 3, 3)
    parents = {"a": ("a", "b"), "b": ("b",), "c": ("a", "b", "c")}
    counts, counted = count(records, ("a", "b", "c"), parents, 3)
    return result_of(("a", "b", "c"), parents, 3, counts, counted)


def test_cpt_rows_give_the_visited_rows_of_both_forms_alike():
    dense = small()
    mixed = sparse_copy(dense, ["c"])
    assert mixed.is_sparse("c") and not mixed.is_sparse("a")
    for var in dense.variables:
        for s in range(dense.slices):
            configs, probabilities, counts = dense.cpt_rows(var, s)
            for got, want in zip(mixed.cpt_rows(var, s), (configs, probabilities, counts)):
                np.testing.assert_array_equal(got, want)
            rows = np.ravel_multi_index(tuple(configs.T.astype(int)), (3,) * configs.shape[1])
            np.testing.assert_array_equal(probabilities, dense.cpt(var, s)[rows])
            np.testing.assert_allclose(probabilities.sum(axis=1), 1.0)
            assert len(rows) + len(dense.unvisited(var, s)) == 3 ** len(dense.parents[var])
            # a small sparse table can still be seen whole, NaN rows unvisited
            np.testing.assert_array_equal(mixed.cpt(var, s), dense.cpt(var, s))
            np.testing.assert_array_equal(mixed.unvisited(var, s), dense.unvisited(var, s))


def test_a_variable_with_28_parents_is_stored_sparse_and_its_full_table_refused(tmp_path):
    # as a variable of BIOMD0000000088: 5**28 rows could never be stored densely
    rng = np.random.default_rng(3)
    names = tuple(f"x{i}" for i in range(28))
    records = random_walk_bins(rng, 50, 2, 28, 5)
    parents = {v: (v,) for v in names}
    parents["x0"] = names
    counts, counted = count(records, names, {v: (v,) for v in names}, 5)
    configs, tables = [], []
    for s in range(2):  # the records' distinct configurations, counted the plain way
        keys = sorted({tuple(r) for r in records[:, s].tolist()})
        table = np.zeros((len(keys), 5), np.int64)
        for r in records:
            table[keys.index(tuple(r[s].tolist())), r[s + 1, 0]] += 1
        configs.append(np.array(keys))
        tables.append(table)
    counts["x0"] = SparseCounts(tuple(configs), tuple(tables))
    result = result_of(names, parents, 5, counts, counted)
    got_configs, probabilities, _ = result.cpt_rows("x0", 1)
    assert got_configs.dtype == np.uint8 and got_configs.shape == (len(configs[1]), 28)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0)
    with pytest.raises(ValueError, match="x0 has 28 parents.*cpt_rows"):
        result.cpt("x0", 0)
    with pytest.raises(ValueError, match="x0 has 28 parents"):
        result.unvisited("x0", 0)
    assert 5 ** 28 * 5 > FULL_TABLE_LIMIT
    for path in result.to_npz(tmp_path / "r.npz") + result.to_hdf5(tmp_path / "r.h5"):
        back = read(path)
        assert back.is_sparse("x0") and not back.is_sparse("x1")
        for s in range(2):
            np.testing.assert_array_equal(back.counts["x0"].configs[s], configs[s])
            np.testing.assert_array_equal(back.counts["x0"].counts[s], tables[s])


def test_sparse_counts_must_fit_their_variable():
    d = small()
    wrong = SparseCounts.from_dense(d.counts["a"][:1])  # one transition, not two
    with pytest.raises(ValueError, match="sparse counts of a have 1 transitions, 2 parents"):
        DbnResult(d.variables, d.times, d.edges, d.parents, {**d.counts, "a": wrong}, d.counted)
    with pytest.raises(ValueError, match="expected 2, 2 and 3"):
        DbnResult(d.variables, d.times, d.edges, d.parents,
                  {**d.counts, "a": SparseCounts.from_dense(d.counts["c"])}, d.counted)


@pytest.mark.parametrize("parents_of_c, message", [
    (("c", "a"), "must be distinct and in model order"),
    (("a", "a", "c"), "must be distinct and in model order"),
    (("a", "b"), "must include c itself"),
])
def test_parents_must_follow_the_convention_rows_are_indexed_by(parents_of_c, message):
    d = small()
    counts = {**d.counts, "c": np.zeros((2, 3 ** len(parents_of_c), 3), int)}
    with pytest.raises(ValueError, match=message):
        DbnResult(d.variables, d.times, d.edges, {**d.parents, "c": parents_of_c}, counts,
                  d.counted)


def test_an_empty_sparse_transition_and_the_inference_fields_round_trip(tmp_path):
    d = random_network(np.random.default_rng(5))
    counts = dict(d.counts)
    s = SparseCounts.from_dense(counts["b"])
    # no trajectory reached transition 1 for b (say, all failed): nothing listed there
    counts["b"] = SparseCounts((s.configs[0], np.zeros((0, 2), int), s.configs[2]),
                               (s.counts[0], np.zeros((0, 3), int), s.counts[2]))
    rng = np.random.default_rng(6)
    inferred, unvisited_mass = rng.random(d.counted.shape), rng.random((3, 3))
    inferred[2, 1] = np.nan
    result = DbnResult(d.variables, d.times, d.edges, d.parents, counts, d.counted, inferred,
                       {"model": "m"}, unvisited_mass)
    for path in result.to_npz(tmp_path / "r.npz") + result.to_hdf5(tmp_path / "r.h5"):
        back = read(path)
        assert back.counts["b"].configs[1].shape == (0, 2)
        np.testing.assert_array_equal(back.inferred, result.inferred)
        np.testing.assert_array_equal(back.unvisited_mass, result.unvisited_mass)
        for key, value in result.arrays().items():
            if isinstance(value, np.ndarray):
                np.testing.assert_array_equal(back.arrays()[key], value)
    [csv] = result.to_csv(tmp_path / "r.marginals.csv")
    assert csv.read_text().splitlines()[0] == "time,id,bin,lower,upper,counted,inferred"
