#!/usr/bin/env python3
"""Fixed cost of a small run (issue 13): sbmlgpu against libRoadRunner, same machine, same run.

    python benchmarks/ode_fixed_cost.py [--cpu | --gpu] [--model FILE] [--repeats 7] [--out DIR]

Device "auto" (the default, what a user gets) runs a one-member run on the CPU path
(sbmlgpu.api: no more members than cores); --gpu forces the GPU (`--devices 0`,
`device=[0]`), --cpu the CPU path.

(a) `sbmlgpu run MODEL` from the command line, each a new process: cold (empty
    caches: libsbml, sympy, method check, code generation and the compiler), cold
    model with warm build caches (`--no-cache`: everything but the compiler), and warm
    (the compiled-model cache: sbmlgpu.model_cache); against libRoadRunner's
    import + load + simulate in a new process.
(b) `import sbmlgpu` in a new process (and a bare `python -c pass` for scale).
(c) In one process: `sbmlgpu.run(network, ...)` repeated on a loaded model, against
    libRoadRunner's `reset(); simulate(...)` on a loaded model.

Medians of --repeats runs (wall clock). The caches live in a temporary
$SBMLGPU_CACHE_DIR, so the cold figures are cold whatever ran before. Targets: warm
CLI <= 2x libRoadRunner's import + load + simulate; in-process <= 2x its
reset() + simulate(). libRoadRunner is optional: without it its figures and the
ratios are "not available". JSON to DIR/ode_fixed_cost.json (or to --out FILE.json).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MODEL = ROOT / "sbml_models" / "lotka_volterra.xml"

ROADRUNNER_RUN = """
import sys, roadrunner
r = roadrunner.RoadRunner(sys.argv[1])
r.simulate(float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]))
"""


#: CPU seconds (user + system) of each process timed_process ran, in order: on a
#: shared machine the wall clock includes waiting for a core, the CPU time does not
CPU_TIMES: list[float] = []


def timed_process(argv: list[str], env: dict) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU_TIMES.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr}")
    return wall


def median_of(repeats: int, measure) -> dict:
    first = len(CPU_TIMES)
    times = [measure() for _ in range(repeats)]
    out = {"median_s": statistics.median(times), "min_s": min(times), "all_s": times}
    if len(CPU_TIMES) - first == repeats:  # processes: their CPU time too
        out["cpu_median_s"] = statistics.median(CPU_TIMES[first:])
    return out


def roadrunner_version() -> str | None:
    try:
        import roadrunner
    except ImportError:
        return None
    return getattr(roadrunner, "__version__", "unknown")


def cli_figures(args, env: dict, outdir: Path) -> dict:
    run = [sys.executable, "-m", "sbmlgpu", "run", str(args.model), "--end", str(args.end),
           "--points", str(args.points), "--no-progress", "-o", str(outdir)]
    run += ["--cpu"] if args.cpu else (["--devices", "0"] if args.gpu else [])
    out = {"command": " ".join(run[1:])}
    out["cold_s"] = timed_process(run + ["--no-cache"], env)  # empty caches: builds too
    out["cold_model_warm_builds"] = median_of(args.repeats,
                                              lambda: timed_process(run + ["--no-cache"], env))
    timed_process(run, env)  # writes the compiled-model entry
    out["warm"] = median_of(args.repeats, lambda: timed_process(run, env))
    return out


def import_figures(args, env: dict) -> dict:
    return {"import_sbmlgpu": median_of(args.repeats, lambda: timed_process(
                [sys.executable, "-c", "import sbmlgpu"], env)),
            "python_startup": median_of(args.repeats, lambda: timed_process(
                [sys.executable, "-c", "pass"], env))}


def in_process_figures(args) -> dict:
    import sbmlgpu

    device = "cpu" if args.cpu else ([0] if args.gpu else "auto")
    network = sbmlgpu.load(str(args.model))

    def once() -> float:
        started = time.perf_counter()
        sbmlgpu.run(network, end=args.end, points=args.points, device=device, progress=False)
        return time.perf_counter() - started

    first = once()
    used = sbmlgpu.run(network, end=args.end, points=args.points, device=device,
                       progress=False).metadata["device"]
    return {"first_run_s": first, "device_used": used,
            "repeated_run": median_of(max(args.repeats, 20), once)}


def roadrunner_figures(args, env: dict) -> dict | None:
    if roadrunner_version() is None:
        return None
    import roadrunner

    process = median_of(args.repeats, lambda: timed_process(
        [sys.executable, "-c", ROADRUNNER_RUN, str(args.model), "0", str(args.end),
         str(args.points)], env))
    r = roadrunner.RoadRunner(str(args.model))
    r.simulate(0, args.end, args.points)

    def again() -> float:
        started = time.perf_counter()
        r.reset()
        r.simulate(0, args.end, args.points)
        return time.perf_counter() - started

    return {"version": roadrunner_version(), "import_load_simulate": process,
            "reset_simulate": median_of(max(args.repeats, 20), again)}


def ratio(ours: float, anchor: dict | None, key: str) -> float | str:
    return ours / anchor[key]["median_s"] if anchor else "not available"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--end", type=float, default=10.0)
    parser.add_argument("--points", type=int, default=101)
    parser.add_argument("--repeats", type=int, default=7)
    paths = parser.add_mutually_exclusive_group()
    paths.add_argument("--cpu", action="store_true", help="the CPU path, even with a GPU")
    paths.add_argument("--gpu", action="store_true",
                       help="the GPU (device 0), even for one member")
    parser.add_argument("--out", type=Path, default=Path("."),
                        help="folder for ode_fixed_cost.json, or a .json file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="sbmlgpu-fixed-cost-") as scratch:
        env = {**os.environ, "SBMLGPU_CACHE_DIR": str(Path(scratch) / "cache"),
               # bytecode, as an installed package has it (pip compiles a wheel's modules;
               # an editable install's are compiled on first import), kept out of the tree
               "PYTHONPYCACHEPREFIX": str(Path(scratch) / "pycache")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.pop("SBMLGPU_MODEL_CACHE", None)
        cli = cli_figures(args, env, Path(scratch) / "out")
        imports = import_figures(args, env)
        os.environ["SBMLGPU_CACHE_DIR"] = env["SBMLGPU_CACHE_DIR"]
        in_process = in_process_figures(args)
        anchor = roadrunner_figures(args, env)
    warm = cli["warm"]["median_s"]
    repeated = in_process["repeated_run"]["median_s"]
    report = {
        "benchmark": "ode_fixed_cost", "date": datetime.now(timezone.utc).isoformat(),
        "host": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version(),
        "load_average": list(os.getloadavg()),
        "model": str(args.model), "end": args.end, "points": args.points,
        "path": "cpu" if args.cpu else ("gpu" if args.gpu else "auto"), "cli": cli, "imports": imports,
        "in_process": in_process, "libroadrunner": anchor or "not available",
        "ratios": {"warm_cli_vs_roadrunner_process": ratio(warm, anchor, "import_load_simulate"),
                   "in_process_vs_roadrunner_reset_simulate":
                       ratio(repeated, anchor, "reset_simulate")},
        "targets": {"warm_cli_vs_roadrunner_process": 2.0,
                    "in_process_vs_roadrunner_reset_simulate": 2.0},
    }
    suffix = "_cpu" if args.cpu else ("_gpu" if args.gpu else "")
    out = args.out if args.out.suffix == ".json" else args.out / f"ode_fixed_cost{suffix}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    rr = anchor or {}
    rows = [
        ("CLI cold (empty caches)", cli["cold_s"], None),
        ("CLI cold model, warm builds (--no-cache)",
         cli["cold_model_warm_builds"]["median_s"], None),
        ("CLI warm (model cache)", warm, rr.get("import_load_simulate")),
        ("import sbmlgpu", imports["import_sbmlgpu"]["median_s"], None),
        ("python -c pass", imports["python_startup"]["median_s"], None),
        ("in-process repeated run", repeated, rr.get("reset_simulate")),
    ]
    print(f"{'':44s} {'sbmlgpu':>10s} {'libRoadRunner':>14s} {'ratio':>7s}")
    for name, ours, theirs in rows:
        other = f"{theirs['median_s'] * 1e3:11.2f} ms" if theirs else f"{'':14s}"
        share = f"{ours / theirs['median_s']:6.2f}x" if theirs else ""
        print(f"{name:44s} {ours * 1e3:7.2f} ms {other} {share}")
    if anchor:
        ours, theirs = cli["warm"]["cpu_median_s"], anchor["import_load_simulate"]["cpu_median_s"]
        report["ratios"]["warm_cli_vs_roadrunner_process_cpu_time"] = ours / theirs
        out.write_text(json.dumps(report, indent=2))
        print(f"{'CLI warm, CPU time (user + system)':44s} {ours * 1e3:7.2f} ms "
              f"{theirs * 1e3:11.2f} ms {ours / theirs:6.2f}x")
    if anchor is None:
        print("libRoadRunner: not available (pip install libroadrunner)")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
