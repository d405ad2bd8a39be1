#!/usr/bin/env python3
"""The `ode` backend's CPU path against libRoadRunner on the same cores (issue 13).

    python benchmarks/ode_cpu_path.py [--models A,B|all] [--root DIR] [--n 1000]
                                      [--cores N] [--method auto] [--out DIR]

For each PEtab model (folders under --root, default ../shared/models/petab-benchmark;
a --models entry holding a "/" is a PEtab folder anywhere, e.g. a copy of the
collection's Perelson_Science1996): the model, its first condition and --n parameter
sets sampled within the PEtab bounds (benchmarks/ode_petab.py's helpers: the same
sets, output times and tolerances, rtol 1e-6, atol 1e-12, as that benchmark), then

- `sbmlgpu run --cpu` as a user types it (a new process: import, load, method check,
  code generation, the native kernel over every member with OpenMP threads, the
  result file written), members/s of its wall time, after one run of the same command
  that leaves the host build of the kernel in the cache (libRoadRunner's model
  compilation is not timed either);
- `sbmlgpu.run(..., device="cpu")` in this process on the loaded model (the second
  of two runs: the whole run without import, load and file writing), members/s and
  where the time went (method check, code generation, batches);
- libRoadRunner (CVODE) on --cores processes (spawned, one model each, loaded
  before the clock starts), the same members: members/s, or "not available"
  without the `roadrunner` module;
- agreement at the nominal parameters with libRoadRunner (ode_petab.rel_error).

JSON to DIR/ode_cpu_path.json (DIR: --out, else $OUT, else .); one line per model.
--cores sets OMP_NUM_THREADS of our runs as well, so both use the same cores.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.ode_petab import (ATOL, DEFAULT_ROOT, POINTS, RTOL, end_time,  # noqa: E402
                                  parameter_sets, petab_problem, rel_error,
                                  roadrunner_nominal, roadrunner_rate, rr_selections)

#: PEtab models whose kernels build in seconds on the host (rodas4 and dopri5)
DEFAULT_MODELS = ("Perelson_Science1996", "Boehm_JProteomeRes2014", "Fujita_SciSignal2010",
                  "Brannmark_JBC2010", "Raia_CancerResearch2011", "Bachmann_MSB2011",
                  "Crauste_CellSystems2017", "Elowitz_Nature2000")


#: the printed table: title, key of the row, width (negative: left-aligned), format
COLUMNS = (("model", "model", -30, "s"), ("method", "method", 8, "s"),
           ("CLI m/s", "cli_members_per_s", 10, ".0f"),
           ("in-proc m/s", "in_process_members_per_s", 12, ".0f"),
           ("RR m/s", "roadrunner_members_per_s", 10, ".0f"),
           ("CLI/RR", "cli_vs_roadrunner", 8, ".2f"),
           ("proc/RR", "in_process_vs_roadrunner", 8, ".2f"),
           ("vs RR", "nominal_vs_roadrunner", 10, ".1e"), ("failed", "failed", 8, "d"))


def _cell(value, width: int, spec: str) -> str:
    try:
        text = format(value, spec)
    except (TypeError, ValueError):
        text = str(value)
    return f"{text:<{-width}}" if width < 0 else f"{text:>{width}}"


def folders(root: Path, models: str | None) -> list[Path]:
    if models == "all":
        return sorted(p for p in root.iterdir() if p.is_dir())
    names = models.split(",") if models else DEFAULT_MODELS
    return [Path(name) if "/" in name else root / name for name in names]


def cli_run(model: Path, table: Path, t_end: float, method: str, env: dict) -> tuple[float, dict]:
    """Wall seconds of one `sbmlgpu run --cpu` process and its result's metadata."""
    with tempfile.TemporaryDirectory(prefix="sbmlgpu-cpu-bench-") as outdir:
        command = [sys.executable, "-m", "sbmlgpu", "run", str(model), "--cpu",
                   "--parameters", str(table), "--end", repr(t_end), "--points", str(POINTS),
                   "--rtol", repr(RTOL), "--atol", repr(ATOL), "--method", method,
                   "-o", outdir, "--format", "npz", "--no-progress"]
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, env=env)
        wall = time.perf_counter() - started
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
        result = np.load(next(Path(outdir).glob("*.npz")), allow_pickle=True)
        return wall, json.loads(str(result["metadata_json"]))


def run_model(folder: Path, args) -> dict:
    import sbmlgpu
    from sbmlgpu.outputs import default_outputs

    problem = petab_problem(folder)
    network = sbmlgpu.load(str(problem["sbml"]))
    condition, sets, nominal_sets = parameter_sets(problem, network, args.n)
    t_end = end_time(problem, condition)
    times = np.linspace(0.0, t_end, POINTS)
    outputs = list(default_outputs(network))
    row = {"model": folder.name, "species": len(network.species), "t_end": t_end,
           "varied": sum(1 for v in sets.values() if np.ptp(v) > 0), "outputs": len(outputs),
           "n": args.n}
    options = {"method": args.method, "rtol": RTOL, "atol": ATOL}
    env = {**os.environ, "OMP_NUM_THREADS": str(args.cores)}

    # the CLI, as a user runs it: the first run builds the kernel, the second is timed
    with tempfile.TemporaryDirectory(prefix="sbmlgpu-cpu-bench-") as scratch:
        table = Path(scratch) / "members.npz"
        np.savez(table, **sets)
        started = time.perf_counter()
        cli_run(problem["sbml"], table, t_end, args.method, env)
        row["cli_first_run_s"] = time.perf_counter() - started
        wall, meta = cli_run(problem["sbml"], table, t_end, args.method, env)
    row.update({"cli_wall_s": wall, "cli_members_per_s": args.n / wall,
                "method": meta.get("method"), "method_reason": meta.get("method_reason"),
                "steps_mean": meta.get("steps_mean"), "steps_max": meta.get("steps_max"),
                "bundling": meta.get("bundling")})

    # in this process, on the loaded model (the second of two runs)
    os.environ["OMP_NUM_THREADS"] = str(args.cores)  # read when libgomp starts
    walls = []
    for _ in range(2):
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="sbmlgpu-cpu-bench-") as scratch:
            profile = Path(scratch) / "profile.json"
            result = sbmlgpu.run(network, times=times, parameters=sets, options=options,
                                 device="cpu", progress=False, profile=profile)
            wall = time.perf_counter() - started
            walls.append(wall)
            spans = json.loads(profile.read_text())["spans"]
    row["in_process_wall_s"] = wall
    # the first run also checks the method (and under --method auto, on a stiff model
    # of 512 members or more, times rodas4 against bdf on a sample: method_trial.py)
    row["in_process_first_wall_s"] = walls[0]
    row["in_process_method"] = result.metadata.get("method")
    row["second_pass_members"] = result.metadata.get("second_pass_members")
    row["second_pass_method"] = result.metadata.get("second_pass_method")
    row["second_pass_seconds"] = result.metadata.get("second_pass_seconds")
    row["in_process_members_per_s"] = args.n / wall
    row["failed"] = args.n - int(np.sum(result.status == 0))
    row["in_process_breakdown_s"] = {
        name: round(sum(s["end_s"] - s["start_s"] for s in spans if s["name"] == name), 4)
        for name in ("choose method", "generate kernel", "pilot", "batch")}
    counts = np.bincount(result.status.astype(int), minlength=5)
    row["status_counts"] = {"ok": int(counts[0]), "max_steps": int(counts[1]),
                            "step_size_underflow": int(counts[2]),
                            "non_finite": int(counts[3]), "failed": int(counts[4])}

    sbml_text = Path(problem["sbml"]).read_text()
    selections = rr_selections(network, outputs)
    ids = list(sets)
    members = np.column_stack([sets[k] for k in ids]) if ids else np.zeros((args.n, 0))
    rr = roadrunner_rate(sbml_text, rr_selections(network, ids), members, t_end, selections,
                         args.cores,
                         budget=float("inf"))  # every member, as ours
    row["roadrunner"] = rr
    if rr.get("available"):
        row["roadrunner_members_per_s"] = rr["trajectories_per_s"]
        row["cli_vs_roadrunner"] = row["cli_members_per_s"] / rr["trajectories_per_s"]
        row["in_process_vs_roadrunner"] = (row["in_process_members_per_s"]
                                           / rr["trajectories_per_s"])
        nominal = sbmlgpu.run(network, times=times, parameters=nominal_sets, options=options,
                              device="cpu", progress=False)
        rr_nominal = roadrunner_nominal(sbml_text, nominal_sets, t_end, selections, network)
        if rr_nominal is not None and nominal.ok.all():
            row["nominal_vs_roadrunner"] = rel_error(nominal.data[0], rr_nominal)
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default=str(DEFAULT_ROOT))
    parser.add_argument("--models", default=None,
                        help="comma-separated folder names (or paths), or 'all'")
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--method", default="auto")
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = {"benchmark": "ode_cpu_path", "date": datetime.now(timezone.utc).isoformat(),
              "n": args.n, "cores": args.cores, "cpu_count": os.cpu_count(),
              "load_average": os.getloadavg(), "rtol": RTOL, "atol": ATOL,
              "command": " ".join(sys.argv), "models": []}
    print("".join(_cell(title, width, "s") for title, _, width, _ in COLUMNS), flush=True)
    for folder in folders(Path(args.root), args.models):
        try:
            if not folder.is_dir():
                raise FileNotFoundError(f"no PEtab folder {folder}")
            row = run_model(folder, args)
        except Exception as exc:  # noqa: BLE001 - report and go on with the next model
            row = {"model": folder.name, "error": f"{type(exc).__name__}: {exc}",
                   "traceback": traceback.format_exc()[-2000:]}
        report["models"].append(row)
        (out / "ode_cpu_path.json").write_text(json.dumps(report, indent=1, default=str))
        if "error" in row:
            print(f"{row['model']:<30} {row['error'][:200]}", flush=True)
            continue
        print("".join(_cell(row.get(key, "n/a"), width, spec)
                      for _, key, width, spec in COLUMNS), flush=True)
    print(f"wrote {out / 'ode_cpu_path.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
