"""benchmarks/petab_objective.py on the CPU (the lead runs it on the GPU): our first
and repeated calls of the prepared objective, and, where the roadrunner package is
installed (it is no dependency of sbmlgpu), libRoadRunner's objective of the same
sets, which must agree with ours."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.shared_data import MODELS

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
pytest.importorskip("petab.v1", reason="the petab extra is not installed")

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "petab_objective.py"
ROOT = MODELS / "petab-benchmark"
# preequilibration and 8 runs
PROBLEM = "Brannmark_JBC2010"
FOUND = (ROOT / PROBLEM / f"{PROBLEM}.yaml").is_file()  # decided once, at collection


def _run(out, *extra) -> dict:
    if not FOUND:
        pytest.skip(f"no {ROOT / PROBLEM}")
    done = subprocess.run([sys.executable, str(SCRIPT), "--root", str(ROOT), "--models",
                           PROBLEM, "--n", "24", "--cpu", "--out", str(out), *extra],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = json.loads((out / "petab_objective.json").read_text())["problems"]
    assert [r["problem"] for r in rows] == [PROBLEM] and "error" not in rows[0], rows
    return rows[0]


def _stopped_at_half_a_second(out) -> list[dict]:
    """The rows in `out` after a run of PROBLEM stopped by --problem-budget 0.5."""
    done = subprocess.run([sys.executable, str(SCRIPT), "--root", str(ROOT), "--models",
                           PROBLEM, "--n", "24", "--cpu", "--cores", "0", "--out", str(out),
                           "--problem-budget", "0.5"], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads((out / "petab_objective.json").read_text())["problems"]


def test_first_and_repeated_calls_are_measured(tmp_path):
    row = _run(tmp_path, "--cores", "0", "--repeats", "2")
    assert row["sets"] == 24 and row["runs"] == 8
    assert sum(row["status_counts"].values()) == 24
    assert len(row["repeated_s"]) == 2 and row["repeated_best_s"] == min(row["repeated_s"])
    assert row["first_s"] > 0 and row["sets_per_s"] == pytest.approx(24 / row["repeated_best_s"])
    assert row["repeated_equals_first"] is True
    assert row["roadrunner"] == {"available": False, "why": "--cores 0"}


def test_roadrunner_computes_the_same_objective(tmp_path):
    pytest.importorskip("roadrunner", reason="libRoadRunner is not installed (no dependency)")
    row = _run(tmp_path, "--cores", "1", "--time-budget", "1", "--repeats", "1")
    rr = row["roadrunner"]
    assert rr["available"] and rr["sets"] >= 1 and rr["sets_per_s"] > 0
    assert rr["compared_sets"] >= 1 and rr["nllh_max_rel_diff"] < 1e-3
    assert row["speedup_repeated"] == pytest.approx(row["sets_per_s"] / rr["sets_per_s"])


def test_a_problem_budget_runs_the_problem_in_a_child_and_keeps_its_row(tmp_path):
    row = _run(tmp_path, "--cores", "0", "--repeats", "1", "--problem-budget", "500")
    assert row["sets"] == 24 and row["runs"] == 8 and len(row["repeated_s"]) == 1


def test_a_problem_past_its_budget_is_stopped_and_its_row_says_so(tmp_path):
    if not FOUND:
        pytest.skip(f"no {ROOT / PROBLEM}")
    rows = _stopped_at_half_a_second(tmp_path)
    assert rows[0]["problem"] == PROBLEM
    assert rows[0]["error"] == "stopped after 0.5 s (--problem-budget)"
    assert "sets_per_s" not in rows[0]


def test_the_profile_script_names_each_ensemble_and_the_host_time(tmp_path):
    if not FOUND:
        pytest.skip(f"no {ROOT / PROBLEM}")
    done = subprocess.run([sys.executable, str(SCRIPT.parent / "petab_objective_profile.py"),
                           PROBLEM, "--n", "16", "--cpu", "--top", "5"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"=== {PROBLEM}: first ") and "runs 8" in lines[0]
    ensembles = [json.loads(line.split("execute", 1)[1]) for line in lines
                 if line.startswith("  execute")]
    # Brannmark: its preequilibration, then the 8 runs' time courses
    assert [e["members"] for e in ensembles] == [16, 8 * 16]
    assert all(e["wall"] > 0 and "program.run" in e["spans"] for e in ensembles)
    assert any(line.startswith("  outside execute: ") for line in lines)


def test_rows_of_other_problems_written_earlier_to_the_folder_are_kept(tmp_path):
    """One process per problem into one --out folder (docs/benchmarks.md's method):
    each run keeps the others' rows and replaces only its own problem's."""
    if not FOUND:
        pytest.skip(f"no {ROOT / PROBLEM}")
    earlier = {"benchmark": "petab_objective", "command": "earlier command", "date": "d0",
               "n": 7, "problems": [{"problem": "Other_Problem", "sets_per_s": 1.0},
                                    {"problem": PROBLEM, "sets_per_s": 2.0}]}
    (tmp_path / "petab_objective.json").write_text(json.dumps(earlier))
    rows = _stopped_at_half_a_second(tmp_path)
    assert [r["problem"] for r in rows] == ["Other_Problem", PROBLEM]
    assert rows[0]["sets_per_s"] == 1.0 and rows[0]["command"] == "earlier command"
    assert rows[0]["n"] == 7
    assert "sets_per_s" not in rows[1] and rows[1]["n"] == 24
    assert "--problem-budget 0.5" in rows[1]["command"]
