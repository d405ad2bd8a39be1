"""benchmarks/cme_solver_study.py on a small toggle switch: every study reaches the
tolerance and reports what the docs' table quotes."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "cme_solver_study.py"


def _study():
    spec = importlib.util.spec_from_file_location("cme_solver_study", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_study_reaches_the_tolerance_on_a_small_toggle_switch(tmp_path):
    assert _study().main(["--model", "toggle", "--bound", "40", "--tol", "1e-8",
                          "--out", str(tmp_path)]) == 0
    row = json.loads((tmp_path / "cme_solver_study_toggle_40.json").read_text())
    assert row["states"] == 4 * 41 * 41 - 4 and row["levels"][0] == row["states"]
    for name in ("jacobi", "vcycle", "wcycle", "twolevel", "gmres-tg", "gmres-sa", "kcycle",
                 "idr", "bicgstab"):
        assert row[name]["converged"], (name, row[name])
    for name in ("idr", "bicgstab"):
        assert row[name]["residual"] <= 1e-8 and row[name]["sweeps"] < row["jacobi"]["sweeps"]
    assert row["jacobi"]["sweeps"] > 0
    for name in ("vcycle", "wcycle", "twolevel"):
        assert row[name]["residual"] <= 1e-8 and 0 < row[name]["rate_per_cycle"] < 1
        assert row[name]["work_sweeps"] > row[name]["cycles"]  # 9 sweeps a cycle at least
    assert row["gmres-tg"]["applies"] > 0 and row["gmres-sa"]["applies"] > 0
    assert row["kcycle"]["residual"] <= 1e-8 and row["kcycle"]["work_sweeps"] > 200
    assert row["kcycle"]["levels"][0] == row["states"]
