"""The non-finite scan of a time-course result (core/results/finite.py): the same
counts as the definition (per column, ok members with a NaN or infinite value in it),
block by block on threads, without an allocation the size of the data."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from sbmlgpu.results import Status, TimeCourseResult
from sbmlgpu.results import finite
from sbmlgpu.results.finite import non_finite_counts


def definition(data: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Per column: ok members with a non-finite value at some time (a column at a time)."""
    return np.array([int((~np.isfinite(data[ok, :, j])).any(axis=1).sum())
                     for j in range(data.shape[2])], dtype=np.int64)


def ensemble(members=600, times=7, columns=5, seed=0):
    rng = np.random.default_rng(seed)
    data = rng.normal(size=(members, times, columns))
    status = np.zeros(members, np.int8)
    failed = rng.choice(members, 40, replace=False)
    status[failed] = int(Status.non_finite)
    data[failed[:20], 3:, :] = np.nan  # a failed member's unreached times: never counted
    for value in (np.nan, np.inf, -np.inf):  # non-finite outputs of members anywhere
        picks = rng.choice(members, 25, replace=False)
        data[picks, rng.integers(0, times, 25), rng.integers(0, columns, 25)] = value
    return data, status


@pytest.mark.parametrize("block_bytes", [1, 7 * 5 * 8 * 3 + 1, finite.BLOCK_BYTES])
def test_counts_equal_the_definition_over_block_boundaries(monkeypatch, block_bytes):
    monkeypatch.setattr(finite, "BLOCK_BYTES", block_bytes)  # 1: a member per block
    data, status = ensemble()
    ok = status == 0
    expected = definition(data, ok)
    assert expected.sum() > 0 and (expected < (~np.isfinite(data)).any(axis=1).sum(0)).any()
    assert np.array_equal(non_finite_counts(data, ok), expected)


def test_a_sum_that_overflows_is_not_taken_for_a_non_finite_value(monkeypatch):
    monkeypatch.setattr(finite, "BLOCK_BYTES", 64)
    data = np.full((10, 4, 3), 1e308)  # finite, but any block's sum is inf
    data[6, 2, 1] = np.nan
    ok = np.ones(10, bool)
    with np.errstate(over="ignore"):
        assert not np.isfinite(data.sum())
    assert non_finite_counts(data, ok).tolist() == [0, 1, 0]


def test_memory_mapped_data_and_the_result_method(tmp_path):
    data, status = ensemble(members=300, seed=3)
    path = tmp_path / "data.npy"
    mapped = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64, shape=data.shape)
    mapped[...] = data
    ids = ("a", "b", "c", "d", "e")
    result = TimeCourseResult(times=np.arange(7.0), ids=ids, data=mapped, status=status)
    expected = definition(data, status == 0)
    assert result.non_finite_outputs() == {i: int(k) for i, k in zip(ids, expected) if k}
    assert TimeCourseResult(times=np.arange(7.0), ids=(), data=np.zeros((3, 7, 0)),
                            status=np.zeros(3, np.int8)).non_finite_outputs() == {}


def test_a_finite_result_is_scanned_without_a_copy_of_its_data():
    # 10^4 x 51 x 25 doubles (102 MB): the per-column scan copied 4 MB per column
    # (and a boolean array of it); the block sums allocate next to nothing
    data = np.ones((10_000, 51, 25))
    ok = np.ones(len(data), bool)
    tracemalloc.start()
    try:
        counts = non_finite_counts(data, ok)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert counts.tolist() == [0] * 25
    assert peak < (1 << 20), f"the scan allocated {peak / 1e6:.1f} MB at its peak"
