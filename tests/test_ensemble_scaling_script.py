"""benchmarks/ensemble_scaling.py (issue 16) without a GPU: --cpu-smoke end to end in
a subprocess (the JSON's fields, every run identical to the 1-GPU one), and the
pieces that a CPU run cannot reach: a member that differs is counted and its
difference reported, and the per-device figures come from the profile."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from sbmlgpu.profile import LaunchRecord, Profiler

from .ode_helpers import needs_compiler
from .shared_data import MODELS

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "ensemble_scaling.py"
ROW_KEYS = {"case", "model", "backend", "scaling", "gpus", "devices", "members", "seconds",
            "seconds_each", "members_per_s", "speedup", "efficiency", "kernel_s",
            "per_device", "method", "failed", "identical", "members_compared",
            "max_abs_diff", "promise_kept"}


@pytest.fixture
def script(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import ensemble_scaling

    return ensemble_scaling


def test_cpu_smoke_writes_every_run_identical_to_the_one_gpu_run(tmp_path):
    needs_compiler()
    petab = (MODELS / "petab-benchmark" / "Boehm_JProteomeRes2014").is_dir()
    models = ["lorenz", "ssa"] + (["petab"] if petab else [])
    done = subprocess.run([sys.executable, str(SCRIPT), "--cpu-smoke", "--gpus", "1", "2",
                           "--models", *models, "--members", "ssa=8", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads((tmp_path / "ensemble_scaling.json").read_text())
    assert {"machine", "commit", "command", "settings", "cases", "rows"} <= set(report)
    assert report["settings"]["path"] == "cpu" and report["settings"]["gpu_counts"] == [1, 2]
    assert set(report["cases"]) == set(models)
    rows = report["rows"]
    # per case: strong on 1 GPU (the reference), strong and weak on 2
    assert [(r["case"], r["scaling"], r["gpus"]) for r in rows] == [
        (m, s, g) for m in models for s, g in (("strong", 1), ("strong", 2), ("weak", 2))]
    for row in rows:
        assert ROW_KEYS <= set(row), ROW_KEYS - set(row)
        assert row["identical"] is True and row["promise_kept"] is True, row
        assert row["failed"] == 0 and row["seconds"] > 0
        assert np.isclose(row["members_per_s"] * row["seconds"], row["members"])
        assert np.isclose(row["efficiency"] * row["gpus"], row["speedup"])
    weak_ssa = next(r for r in rows if r["case"] == "ssa" and r["scaling"] == "weak")
    assert weak_ssa["members"] == 16 and weak_ssa["members_compared"] == 8  # its first 8
    weak_lorenz = next(r for r in rows if r["case"] == "lorenz" and r["scaling"] == "weak")
    assert weak_lorenz["members_compared"] == weak_lorenz["members"] == 128  # both copies
    assert "identical True" in done.stdout  # the progress lines


def test_a_member_that_differs_is_counted_and_its_difference_reported(script):
    data = np.arange(24.0).reshape(4, 3, 2)
    reference = SimpleNamespace(data=data, status=np.zeros(4, np.int8))
    other = np.concatenate([data, data])  # a weak run of two copies
    other[5, 2, 1] += 0.25
    other[6, 0, 0] = np.nan
    result = SimpleNamespace(data=other, status=np.zeros(8, np.int8))
    found = script.compare(reference, result, copies=2)
    assert found["identical"] is False and found["promise_kept"] is False
    assert found["members_compared"] == 8 and found["members_differing"] == 2
    assert found["max_abs_diff"] == 0.25
    assert script.compare(reference, SimpleNamespace(data=data.copy(), status=reference.status),
                          copies=1)["identical"] is True


def test_per_device_figures_come_from_the_launches_and_batches(script):
    profiler = Profiler()
    for device, ms in ((0, 30.0), (1, 20.0), (1, 5.0)):
        profiler.record(LaunchRecord("sbmlgpu_ode_rk4", device, "GPU", (1,), (128,), 32, 0,
                                     0, 0, ms, 0.0, 0.0, "double"))
    profiler.record(LaunchRecord("other", 0, "GPU", (1,), (128,), 32, 0, 0, 0, 99.0, 0.0,
                                 0.0, "double"))
    profiler.add_span("batch", 0.0, 1.0, device=0, start=0, stop=600)
    profiler.add_span("batch", 0.0, 1.0, device=1, start=600, stop=1000)
    found = script.per_device(profiler, "sbmlgpu_ode_")
    assert found == {"0": {"kernel_s": pytest.approx(0.03), "launches": 1, "batches": 1,
                           "members": 600},
                     "1": {"kernel_s": pytest.approx(0.025), "launches": 2, "batches": 1,
                           "members": 400}}


def test_ensemble_sizes_and_gpu_counts(script):
    assert script.ensemble_sizes(["5", "ssa=7"], "full") == {"lorenz": 5, "petab": 5, "ssa": 7}
    with pytest.raises(ValueError):
        script.ensemble_sizes(["cme=3"], "full")
    assert script.gpu_counts(None, 4, cpu=False) == [1, 2, 3, 4]
    assert script.gpu_counts([4, 2], 4, cpu=False) == [1, 2, 4]  # 1: the reference
    with pytest.raises(ValueError):
        script.gpu_counts([8], 2, cpu=False)
