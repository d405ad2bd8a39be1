"""benchmarks/interval_data.py and benchmarks/interval_sivia.py on the CPU: the data
files hold the thesis's rows around the model's own solution, and a tiny LV case
runs through the benchmark and writes the JSON its docstring documents."""

from __future__ import annotations

import csv
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import sbmlgpu

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def scripts():
    """The two scripts as modules (they import each other by bare name, as scripts)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import interval_data
        import interval_sivia
        yield interval_data, interval_sivia
    finally:
        sys.path.remove(str(BENCHMARKS))


@pytest.fixture(scope="module")
def written(scripts, tmp_path_factory):
    """Every case's data at full size, as `interval_data.py --out DIR` writes them."""
    folder = tmp_path_factory.mktemp("interval_data")
    subprocess.run([sys.executable, str(BENCHMARKS / "interval_data.py"), "--out",
                    str(folder)], check=True, capture_output=True, text=True)
    return folder


def read_rows(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == ["time", "id", "lower", "upper"]
        return list(reader)


def reference_values(model, times, ids) -> dict[str, np.ndarray]:
    """An independent solution: the reference backend (libsbml -> its own compiled
    model), DOP853 at tight tolerances. Its first output time is its start: t = 0."""
    result = sbmlgpu.run(model, "reference", times=np.concatenate([[0.0], times]),
                         progress=False,
                         options={"method": "DOP853", "rtol": 1e-12, "atol": 1e-12})
    return {i: np.asarray(result[i]).reshape(-1)[1:] for i in ids}


@pytest.mark.parametrize("name", ["lv", "seir"])
def test_data_rows_times_widths_and_the_truth_inside(scripts, written, name):
    interval_data, _ = scripts
    dataset = interval_data.DATASETS[name]
    rows = read_rows(written / f"{name}.csv")
    assert len(rows) == dataset.points * len(dataset.measured)
    times = np.array([float(r["time"]) for r in rows])
    expected = dataset.step * np.arange(1, dataset.points + 1)
    np.testing.assert_allclose(times.reshape(dataset.points, -1),
                               np.repeat(expected[:, None], len(dataset.measured), 1),
                               rtol=1e-12)
    ids = [r["id"] for r in rows]
    assert ids == list(dataset.measured) * dataset.points
    lower = np.array([float(r["lower"]) for r in rows])
    upper = np.array([float(r["upper"]) for r in rows])
    np.testing.assert_allclose(upper - lower, 2 * dataset.error, rtol=1e-9)
    truth = reference_values(dataset.path, expected, dataset.measured)
    value = np.stack([truth[i] for i in dataset.measured], axis=1).reshape(-1)
    assert np.all((lower <= value) & (value <= upper))
    # centred on the model's solution, not merely near it
    np.testing.assert_allclose((lower + upper) / 2, value, rtol=0, atol=1e-6)


def test_cases_json_names_the_data_unknowns_and_truth(scripts, written):
    interval_data, _ = scripts
    cases = {c["name"]: c for c in interval_data.load_cases(written)}
    assert set(cases) == set(interval_data.CASES)
    for name, case in cases.items():
        assert Path(case["model"]).is_file() and Path(case["data"]).is_file()
        spec = interval_data.CASES[name]
        assert case["unknown"] == spec.unknown and case["epsilon"] == spec.epsilon
        for sbml_id, (low, high) in case["unknown"].items():
            assert low < case["truth"][sbml_id] < high, (name, sbml_id)
    assert set(cases["seir3"]["unknown"]) > set(cases["seir2"]["unknown"])


def test_fewer_points_keep_the_span(scripts, tmp_path):
    interval_data, _ = scripts
    cases = interval_data.build_cases(tmp_path, ["lv"], points=40)
    rows = read_rows(tmp_path / "lv.csv")
    times = [float(r["time"]) for r in rows]
    assert cases[0]["times"] == len(rows) == 40
    assert times[0] == interval_data.DATASETS["lv"].step and times[-1] == pytest.approx(0.7)
    assert sorted(set(times)) == times
    assert not (tmp_path / "seir.csv").exists()


def test_unknown_case_is_refused(scripts, tmp_path):
    interval_data, _ = scripts
    with pytest.raises(ValueError, match="nope"):
        interval_data.build_cases(tmp_path, ["nope"])


@pytest.mark.slow
def test_sivia_quick_cpu_writes_the_documented_json(scripts, tmp_path):
    _, interval_sivia = scripts
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "interval_sivia.py"), "--quick", "--cpu",
         "--cases", "lv", "--points", "40", "--epsilon", "0.05", "--repeat", "2",
         "--out", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "SOUNDNESS FAILURE" not in done.stderr
    report = json.loads((out / "interval_sivia_lv.json").read_text())
    assert {"machine", "commit", "command", "case", "settings", "rows",
            "cpu_over_gpu"} <= set(report)
    assert report["settings"]["epsilon"] == 0.05 and report["settings"]["times"] == 40
    assert not report["settings"]["thesis_settings"]
    [row] = report["rows"]
    assert set(interval_sivia.ROW_KEYS) <= set(row)
    assert row["engine"] == "native" and row["device"] == "cpu"
    assert len(row["wall_seconds"]) == 2 and row["wall_s"] > 0
    assert row["boxes_evaluated"] > 1 and row["launches"] >= 1 and row["complete"]
    assert row["boxes_per_second"] > 0 and row["taylor_steps"] > 0
    assert row["truth_verdict"] in ("feasible", "undetermined")
    assert row["speedup_vs_k20"] is None  # not the thesis's data and epsilon
    assert row["registers"] is None  # the host has no kernel attributes
    assert "lv" in done.stdout and "boxes/s" in done.stdout
    kept = list((out / "interval_sources").rglob("*.cu"))
    assert kept, "the warm-up keeps the kernel's source"


def test_kernel_attributes_read_every_entry_of_the_kept_source(scripts, tmp_path):
    """The GPU path's register record, through a fake device: the real generated
    source's entry points are found and their attributes reported."""
    from .fakes import ATTRIBUTES, FakeDevice, FakeKernel, FakeModule

    from sbmlgpu.plugins.interval.kernels import KERNEL, interval_source
    from sbmlgpu.plugins.interval.model import IntervalModel
    from sbmlgpu.views.ode import ode_system

    _, interval_sivia = scripts
    ode = ode_system(sbmlgpu.load(str(BENCHMARKS.parent / "sbml_models/lotka_volterra.xml")))
    source = interval_source(IntervalModel.of(ode, ("p2", "p4"), (), ("x1",)), 6)
    (tmp_path / source.name).write_text(source.text)
    attributes = dataclasses.replace(ATTRIBUTES, registers=87, local_bytes=424)
    device = FakeDevice(compile=lambda dev, text: FakeModule(
        [KERNEL], lambda name: FakeKernel(name, attributes=attributes)))
    found = interval_sivia.kernel_attributes(device, tmp_path)
    assert found == {KERNEL: {"registers": 87, "local_bytes": 424, "shared_bytes": 0,
                              "max_threads_per_block": 1024}}
    assert device.compiled == [source.text]


def test_kernels_follow_the_backend_option(scripts, tmp_path):
    _, interval_sivia = scripts
    from sbmlgpu.plugins.interval.options import IntervalOptions

    fields = {f.name: f for f in dataclasses.fields(IntervalOptions)}
    choices = interval_sivia.kernel_choices()
    if "kernel" not in fields:
        assert choices is None
        done = subprocess.run([sys.executable, str(BENCHMARKS / "interval_sivia.py"),
                               "--cpu", "--kernels", "persistent", "--out", str(tmp_path)],
                              capture_output=True, text=True)
        assert done.returncode != 0 and "no option 'kernel'" in done.stderr
    else:
        f = fields["kernel"]
        assert choices == list(f.metadata.get("choices") or [f.default])
