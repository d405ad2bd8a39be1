"""benchmarks/dbn_scaling.py (issue 16) without a GPU: the script end to end on two
fake GPUs whose kernels are the host builds (tests/test_dbn_devices.py), at a tiny
size: strong runs identical to the 1-GPU run, the weak run counting every
trajectory; a count that differs is found."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sbmlgpu import runtime

from .fakes import FakeDriver
from .test_dbn_devices import fake_gpus

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def script(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import dbn_scaling

    return dbn_scaling


def test_two_fake_gpus_end_to_end(script, monkeypatch, tmp_path):
    devices = fake_gpus(2)
    monkeypatch.setattr(runtime, "get_driver", lambda: FakeDriver(devices))
    assert script.main(["--members", "300", "--slices", "3", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "dbn_scaling.json").read_text())
    rows = {(r["scaling"], r["gpus"]): r for r in report["rows"]}
    assert set(rows) == {("strong", 1), ("strong", 2), ("weak", 2)}
    assert rows["strong", 2]["identical"] is True and rows["strong", 2]["cells_differing"] == 0
    assert rows["strong", 2]["devices"] == 2 and rows["strong", 2]["per_device"] == [150, 150]
    weak = rows["weak", 2]
    assert weak["trajectories"] == 600 and weak["counted"] + weak["failed"] == 600
    assert report["settings"]["trajectories"] == 300 and report["commit"] is not None


def test_a_differing_count_is_found_dense_or_sparse(script):
    from sbmlgpu.results.dbn import SparseCounts

    from .dbn_helpers import count, random_walk_bins, result_of, sparse_copy

    records = random_walk_bins(np.random.default_rng(0), 200, 3, 2, 4)
    parents = {"a": ("a", "b"), "b": ("b",)}
    counts, counted = count(records, ("a", "b"), parents, 4)
    one = result_of(("a", "b"), parents, 4, counts, counted)
    changed = {v: c.copy() for v, c in counts.items()}
    changed["a"][1, 2, 3] += 1
    other = result_of(("a", "b"), parents, 4, changed, counted)
    assert script.same_counts(one, one) == (True, 0)
    assert script.same_counts(one, other) == (False, 1)
    sparse_one, sparse_other = sparse_copy(one), sparse_copy(other)
    assert isinstance(sparse_one.counts["a"], SparseCounts)
    assert script.same_counts(sparse_one, sparse_copy(one)) == (True, 0)
    assert script.same_counts(sparse_one, sparse_other) == (False, 1)
