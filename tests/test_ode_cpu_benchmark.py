"""benchmarks/ode_cpu_path.py end to end on a two-parameter PEtab problem written here,
without libRoadRunner (its module hidden): our rates are measured, its are "not
available", and the JSON says so."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from .ode_helpers import apply, ci, needs_compiler, rate_rule_model

ROOT = Path(__file__).resolve().parents[1]


def petab_folder(folder: Path) -> Path:
    folder.mkdir()
    (folder / "model_decay.xml").write_text(rate_rule_model(
        {"x": (1.0, apply("times", "<cn>-1</cn>", ci("k"), ci("x")))}, parameters={"k": 1.0}))
    (folder / "parameters_decay.tsv").write_text(
        "parameterId\tparameterScale\tlowerBound\tupperBound\tnominalValue\testimate\n"
        "k\tlog10\t0.1\t10\t1\t1\n")
    (folder / "measurementData_decay.tsv").write_text(
        "observableId\tsimulationConditionId\tmeasurement\ttime\n"
        "obs_x\tc0\t1.0\t0\nobs_x\tc0\t0.1\t4\n")
    (folder / "decay.yaml").write_text(
        "format_version: 1\nparameter_file: parameters_decay.tsv\nproblems:\n"
        "- condition_files:\n  - experimentalCondition_decay.tsv\n"  # none: as Perelson's
        "  measurement_files:\n  - measurementData_decay.tsv\n"
        "  sbml_files:\n  - model_decay.xml\n")
    return folder


def test_the_cpu_path_benchmark_runs_a_petab_folder_and_reports_roadrunner_missing(
        tmp_path, monkeypatch):
    needs_compiler()
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.setitem(sys.modules, "roadrunner", None)  # `import roadrunner` fails
    from benchmarks import ode_cpu_path

    folder = petab_folder(tmp_path / "Decay")
    out = tmp_path / "out"
    assert ode_cpu_path.main(["--models", str(folder), "--n", "40", "--cores", "1",
                              "--out", str(out)]) == 0
    report = json.loads((out / "ode_cpu_path.json").read_text())
    (row,) = report["models"]
    assert "error" not in row, row.get("error")
    assert row["model"] == "Decay" and row["n"] == 40 and row["t_end"] == 4.0
    assert row["method"] == "dopri5" and row["failed"] == 0
    assert row["cli_members_per_s"] > 0 and row["in_process_members_per_s"] > 0
    assert np.isclose(row["cli_members_per_s"] * row["cli_wall_s"], 40)
    assert row["roadrunner"]["available"] is False
    assert "roadrunner_members_per_s" not in row
