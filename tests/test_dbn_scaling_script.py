"""benchmarks/dbn_scaling.py (issue 16) without a GPU: the script end to end on two
fake GPUs whose kernels are the host builds (tests/test_dbn_devices.py), at a tiny
size: strong runs identical to the 1-GPU run, the weak run counting every
trajectory; a count that differs is found."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

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


def test_a_differing_count_is_found(script):
    counts = {"x": np.zeros((2, 5, 5), np.int64)}
    a = SimpleNamespace(variables=("x",), edges=np.zeros((1, 6)), counts=counts,
                        counted=np.zeros((3, 1, 5)))
    other = {"x": counts["x"].copy()}
    other["x"][1, 2, 3] = 1
    b = SimpleNamespace(variables=("x",), edges=a.edges, counts=other, counted=a.counted)
    assert script.same_counts(a, a) == (True, 0)
    assert script.same_counts(a, b) == (False, 1)
