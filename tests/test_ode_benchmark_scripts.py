"""benchmarks/ode_delay_accuracy.py and benchmarks/ode_cpu_methods.py end to end on
the CPU path, small: their JSON holds what their docstrings say, and bad arguments are
one usage error."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from .ode_helpers import needs_compiler
from .test_ode_cpu_benchmark import petab_folder

ROOT = Path(__file__).resolve().parents[1]


def test_the_delay_accuracy_benchmark_measures_against_the_exact_solution(tmp_path,
                                                                          monkeypatch):
    needs_compiler()
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks import ode_delay_accuracy

    assert ode_delay_accuracy.main(["--members", "4", "--cpu", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "ode_delay_accuracy.json").read_text())["rows"]
    assert [(r["method"], r["rtol"]) for r in rows] == list(ode_delay_accuracy.RUNS)
    for row in rows:  # the error follows the tolerance (it did not before the check)
        assert row["failed"] == 0 and row["max_error"] < 100 * row["rtol"] + 1e-9, row
    with pytest.raises(SystemExit):
        ode_delay_accuracy.main(["--members", "0"])


def test_the_cpu_methods_benchmark_reports_passes_and_roadrunner_missing(tmp_path,
                                                                        monkeypatch):
    needs_compiler()
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.setitem(sys.modules, "roadrunner", None)  # `import roadrunner` fails
    from benchmarks import ode_cpu_methods

    folder = petab_folder(tmp_path / "decay")
    assert ode_cpu_methods.main([str(folder), "--n", "40", "--out", str(tmp_path)]) == 0
    model = json.loads((tmp_path / "ode_cpu_methods.json").read_text())["models"][0]
    assert model["model"] == "decay"
    assert [m["method"] for m in model["methods"]] == ["rodas4", "dopri5"]
    assert all(m["status_counts"] == {"0": 40} and m["wall_s"] > 0 for m in model["methods"])
    assert model["slowest"]["roadrunner_s"] == "not available"
    for bad in (["no_such_model"], [str(folder), "--methods", "radau"], [str(folder), "--n", "0"]):
        with pytest.raises(SystemExit):
            ode_cpu_methods.main(bad)
