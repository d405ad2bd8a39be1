"""benchmarks/ode_petab.py's own path on the CPU (the lead runs it on the GPU): one row per
model folder, each model in its own process; a folder that fails to load is a row with
its error, and a model past --model-budget is stopped with the stages it finished."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.shared_data import MODELS

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
pytest.importorskip("petab.v1", reason="the petab extra is not installed")

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "ode_petab.py"
BOEHM = MODELS / "petab-benchmark" / "Boehm_JProteomeRes2014"


@pytest.fixture
def root(tmp_path):
    if not BOEHM.is_dir():
        pytest.skip(f"no {BOEHM}")
    shutil.copytree(BOEHM, tmp_path / "root" / BOEHM.name)
    broken = tmp_path / "root" / "Broken_Model"
    broken.mkdir()
    (broken / "Broken_Model.yaml").write_text("sbml_files:\n  - missing.xml\n")
    return tmp_path / "root"


def _run(root, out, *extra):
    done = subprocess.run([sys.executable, str(SCRIPT), "--root", str(root), "--n", "60",
                           "--cpu", "--cores", "0", "--out", str(out), *extra],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return {row["model"]: row for row in json.loads((out / "ode_petab.json").read_text())["models"]}


def test_every_folder_is_a_row_and_a_broken_one_says_why(root, tmp_path):
    rows = _run(root, tmp_path / "out", "--model-budget", "300", "--profile-repeat", "5",
                "--sample-first", "6")
    boehm = rows["Boehm_JProteomeRes2014"]
    assert boehm["stage"] == "done" and "error" not in boehm
    assert sum(boehm["status_counts"].values()) == 60
    assert boehm["compile_s"] > 0 and boehm["method"] in ("rodas4", "dopri5", "rk4")
    assert boehm["compile_method"] in ("rodas4", "dopri5") and boehm["compile_other_s"] > 0
    # the time outside program.run named, and a second run reported apart
    inside, outside = boehm["gpu_wall_breakdown_s"], boehm["gpu_outside_breakdown_s"]
    assert 0 < inside["program_run"] < inside["execute"]
    # a GPU run's host passes are named phases (none on the CPU path): not `unnamed`
    assert inside["second pass on host threads"] == 0 and inside["unnamed"] >= 0
    assert outside["outside"] == pytest.approx(inside["execute"] - inside["program_run"])
    assert outside["prepare the run"] > 0 and outside["time course notes"] > 0
    assert boehm["gpu_repeat"]["trajectories_per_s"] > 0
    assert set(boehm["gpu_repeat"]["outside_breakdown_s"]) == set(outside)
    # what the passes did, the first run's and the repeat's
    assert boehm["passes"]["second_pass_members"] >= 0
    assert boehm["gpu_repeat"]["passes"]["first_pass_seconds"] > 0
    # --profile-repeat: the repeat's spans and its cProfile top functions
    spans = boehm["gpu_repeat"]["spans_s"]
    assert spans["program.run"] == pytest.approx(
        boehm["gpu_repeat"]["breakdown_s"]["program_run"])
    assert "function calls" in boehm["gpu_repeat"]["cprofile"]
    assert "execute" in boehm["gpu_repeat"]["cprofile"]
    # --sample-first: the first run's threads, sampled (the main thread among them)
    stacks = boehm["gpu_first_stacks"]
    assert stacks["samples"] > 0 and 0 < len(stacks["top"]) <= 6
    assert any(name == "MainThread" for name, _, _ in stacks["top"])
    assert all(count > 0 and ":" in where for _, where, count in stacks["top"])
    assert boehm["nominal_vs_reference"] < 1e-3
    assert boehm["objective"]["sets"] == 60 and sum(
        boehm["objective"]["status_counts"].values()) == 60
    assert boehm["roadrunner"] == {"available": False, "why": "--cores 0"}
    assert "SBMLImportError" in rows["Broken_Model"]["error"]


def test_a_model_past_its_budget_is_stopped_with_what_it_finished(root, tmp_path):
    shutil.rmtree(root / "Broken_Model")
    # less than the child needs to import sbmlgpu: stopped whatever the caches hold
    rows = _run(root, tmp_path / "out", "--model-budget", "0.5")
    row = rows["Boehm_JProteomeRes2014"]
    assert row["error"].startswith("stopped at the model budget (0.5 s) in stage ")
    assert row["stage"] != "done" and row["model_wall_s"] < 60


@pytest.mark.parametrize("option", ["--profile-repeat", "--sample-first"])
def test_a_negative_line_count_is_one_error_line(capsys, option):
    import importlib.util

    spec = importlib.util.spec_from_file_location("ode_petab", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    with pytest.raises(SystemExit) as stopped:
        script.main([option, "-1"])
    assert stopped.value.code == 2
    assert f"{option} must be 0 (off)" in capsys.readouterr().err
