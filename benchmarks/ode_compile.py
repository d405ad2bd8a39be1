#!/usr/bin/env python3
"""Compile times of the ode kernel for every PEtab model: nvcc (sm_90 cubin) and g++ (host).

    python benchmarks/ode_compile.py [--models A,B] [--methods rodas4,dopri5]
                                     [--timeout 300] [--model-timeout 600] [--jobs N]
                                     [--out DIR] [--no-host] [--no-nvcc] [--no-whole]

For each model under ../shared/models/petab-benchmark (or --root), loaded as
benchmarks/ode_petab.py loads it (its SBML, its first condition's overrides, the
PEtab-sampled parameters varied, the condition's values fixed), the ode backend's
kernel is generated for each method (rodas4 and dopri5: the two that `--method auto`
picks from) and compiled, one compile at a time, with no cache:

- nvcc as the runtime builds it (`units`, sbmlgpu.runtime.parallel_build): a large
  model's kernel as several translation units compiled at once on --jobs cores (default:
  the cores this process may use) and linked; a small model's as one `-cubin -arch=sm_90`
  compile. `compile_s` = code generation + that build's wall time: the figure the
  issue's target (<= 30 s per model) is about;
- nvcc on the whole file at once (`nvcc`, as before the split; --no-whole skips it);
- the host build of the CPU path: g++ with the ode plugin's flags (plugins/ode/native.py)
  and core's base flags (sbmlgpu.runtime.host), OpenMP included.

Each model runs in a process of its own, stopped after --model-timeout seconds (its
row then says so). Each row: states, varied parameters, source size (bytes, lines), code
generation seconds, nvcc and g++ seconds: wall, and (in brackets) the CPU time of the
compiler and its children, which is what a compile costs on a quiet machine (a compile
past --timeout is stopped and reported as such); the units' build also per unit, and
the machine's load average when the model started. JSON to DIR/ode_compile.json (DIR:
--out, else $OUT, else .), a table printed. Time on a quiet machine: the figures are
wall-clock seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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
sys.path.insert(0, str(ROOT / "benchmarks"))
from ode_petab import DEFAULT_ROOT, parameter_sets, petab_problem  # noqa: E402

METHODS = ("rodas4", "dopri5")
SAMPLES = 64  # parameter sets drawn to decide which columns vary


def kernel_model(folder: Path):
    """(network, KernelModel) of the model's ensemble as ode_petab.py runs it: sampled
    columns varied, the condition's constant columns fixed."""
    import sbmlgpu
    from sbmlgpu.ode.model import KernelModel
    from sbmlgpu.outputs import default_outputs
    from sbmlgpu.views.ode import ode_system

    problem = petab_problem(folder)
    network = sbmlgpu.load(str(problem["sbml"]))
    _, sets, _ = parameter_sets(problem, network, SAMPLES)
    fixed = {k: float(np.asarray(v)[0]) for k, v in sets.items() if np.ptp(v) == 0}
    varied = tuple(k for k in sets if k not in fixed)
    return network, KernelModel(ode_system(network), varied, tuple(default_outputs(network)),
                                fixed)


def time_nvcc(text: str, name: str, timeout: float) -> dict:
    from sbmlgpu.codegen import compile_check

    nvcc = compile_check.nvcc_path()
    return _time_compile(nvcc, text, f"{name}.cu", lambda src, scratch: [
        nvcc, "-cubin", "-arch=sm_90", "-o", str(src.with_suffix(".cubin")), str(src)],
        timeout) if nvcc else {"status": "nvcc not found"}


def time_host(text: str, name: str, timeout: float) -> dict:
    from sbmlgpu.plugins.ode.native import FLAGS
    from sbmlgpu.runtime import host

    cxx = host.find_compiler()
    return _time_compile(cxx, text, f"{name}.cpp", lambda src, scratch: [
        cxx, *host.build_flags(cxx, FLAGS), "-x", "c++", str(src), "-o",
        str(scratch / "kernel.so")], timeout) if cxx else {"status": "no C++ compiler"}


def _time_compile(compiler: str, text: str, file_name: str, command_of, timeout: float) -> dict:
    """`text` written to a scratch folder as `file_name`, compiled by command_of(src, scratch)."""
    with tempfile.TemporaryDirectory(prefix="ode-compile-") as scratch:
        src = Path(scratch) / file_name
        src.write_text(text)
        return _timed(command_of(src, Path(scratch)), timeout)


def _cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(command, timeout: float) -> dict:
    """Wall seconds, and CPU seconds of the compiler and its children (what the
    compile costs on a quiet machine: the wall time of a shared one includes waiting)."""
    from sbmlgpu.runtime.host import run_compiler

    started, cpu = time.perf_counter(), _cpu_of_children()
    try:
        done = run_compiler(command, timeout)
    except subprocess.TimeoutExpired:
        return {"status": f"stopped after {timeout:g} s", "seconds": None}
    seconds, cpu = time.perf_counter() - started, _cpu_of_children() - cpu
    if done.returncode != 0:
        return {"status": "error", "seconds": seconds, "cpu_s": cpu,
                "log": (done.stdout + done.stderr)[-3000:]}
    return {"status": "ok", "seconds": seconds, "cpu_s": cpu}


def time_units(text: str, name: str, jobs: int | None) -> dict:
    """The runtime's build (parallel_build.compile_source): units at once, linked."""
    from sbmlgpu.codegen.compile_check import CompileError
    from sbmlgpu.runtime import parallel_build

    report = parallel_build.BuildReport()
    started, cpu = time.perf_counter(), _cpu_of_children()
    try:
        parallel_build.compile_source(text, "sm_90", name=name, max_jobs=jobs, report=report)
    except CompileError as exc:
        return {"status": "error", "log": str(exc)[-3000:]}
    seconds, cpu = time.perf_counter() - started, _cpu_of_children() - cpu
    return {"status": "ok", "seconds": seconds, "cpu_s": cpu,
            "units": len(report.units) or 1, "jobs": report.jobs if report.units else 1,
            "unit_s": dict(report.units), "link_s": report.link_s,
            "fell_back": report.fell_back}


def measure(folder: Path, args) -> list[dict]:
    from sbmlgpu import plugin_manager
    from sbmlgpu.plugins.ode.program import kernel_source

    network, model = kernel_model(folder)
    refused = plugin_manager.backend("ode").supports(network)
    base = {"model": folder.name, "states": model.n_states, "varied": len(model.varied),
            "fixed": len(model.fixed_values), "events": len(model.events),
            "atoms": len(model.atoms)}
    if refused:
        return [{**base, "refused": "; ".join(f for f, _ in refused)}]
    rows = []
    for method in args.methods:
        started = time.perf_counter()
        source = kernel_source(model, method)
        row = {**base, "method": method, "codegen_s": time.perf_counter() - started,
               "source_bytes": len(source.text), "source_lines": source.text.count("\n"),
               "linear_algebra": source.linear_algebra}
        name = Path(source.name).stem
        if args.nvcc:
            row["nvcc_units"] = time_units(source.text, source.name, args.jobs)
            if row["nvcc_units"].get("status") == "ok":
                row["compile_s"] = row["codegen_s"] + row["nvcc_units"]["seconds"]
            if args.whole:
                row["nvcc"] = time_nvcc(source.text, name, args.timeout)
        if args.host:
            row["host"] = time_host(source.text, name, args.timeout)
        rows.append(row)
        print(_line(row), flush=True)
        if getattr(args, "rows_to", None):  # what a model stopped later has done so far
            Path(args.rows_to).write_text(json.dumps(rows, default=str))
    return rows


def _seconds(entry) -> str:
    if not entry:
        return "-"
    if entry.get("status") == "ok":
        return f"{entry['seconds']:.1f} ({entry['cpu_s']:.1f})"
    return entry.get("status", "?")[:14]


def _line(row: dict) -> str:
    if "refused" in row:
        return f"{row['model']:<34} refused: {row['refused']}"
    if "error" in row:
        return f"{row['model']:<34} error: {row['error']}"
    units = row.get("nvcc_units") or {}
    return (f"{row['model']:<34}{row['states']:>6}{row['varied']:>7} {row['method']:<7}"
            f"{row['source_bytes'] / 1024:>9.0f}{row['codegen_s']:>9.1f}"
            f"{_seconds(units):>15}{units.get('units', '-'):>6}"
            f"{_fmt(row.get('compile_s')):>9}"
            f"{_seconds(row.get('nvcc')):>15}{_seconds(row.get('host')):>15}")


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.1f}"


def _one_model(folder: Path, args, rows_file: Path) -> None:
    """Measure one model (in a process of its own) and write its rows as JSON."""
    try:
        rows = measure(folder, args)
    except Exception as exc:  # noqa: BLE001 - report and go on with the next model
        rows = [{"model": folder.name, "error": f"{type(exc).__name__}: {exc}",
                 "traceback": traceback.format_exc()[-2000:]}]
    rows_file.write_text(json.dumps(rows, default=str))


def _in_a_process(folder: Path, argv: list[str], timeout: float) -> list[dict]:
    """The rows of one model measured by a child process, stopped after `timeout` s
    (the rows it finished are kept: the child writes them after each method)."""
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="ode-compile-rows-") as scratch:
        rows_file = Path(scratch) / "rows.json"
        started = time.perf_counter()
        try:
            done = subprocess.run([sys.executable, __file__, *argv, "--one", str(folder),
                                   "--rows-to", str(rows_file)], timeout=timeout)
            stopped = None if done.returncode == 0 else f"exited with {done.returncode}"
        except subprocess.TimeoutExpired:
            stopped = f"stopped after the model timeout ({timeout:g} s)"
        rows = json.loads(rows_file.read_text()) if rows_file.is_file() else []
    for row in rows:
        row["load_at_start"] = load
    if stopped:
        rows.append({"model": folder.name, "error": stopped,
                     "model_wall_s": time.perf_counter() - started})
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default=str(DEFAULT_ROOT))
    parser.add_argument("--models", default=None, help="comma-separated folder names")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds one compile may take before it is stopped")
    parser.add_argument("--model-timeout", type=float, default=600.0,
                        help="seconds one model (every method and compile) may take")
    parser.add_argument("--jobs", type=int, default=None,
                        help="nvcc processes of the units' build (default: usable cores)")
    parser.add_argument("--no-nvcc", dest="nvcc", action="store_false")
    parser.add_argument("--no-host", dest="host", action="store_false")
    parser.add_argument("--no-whole", dest="whole", action="store_false",
                        help="skip nvcc on the whole file (the units' build only)")
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a child: this model folder
    parser.add_argument("--rows-to", help=argparse.SUPPRESS)
    raw = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(raw)
    args.methods = [m for m in args.methods.split(",") if m]
    if args.one:
        _one_model(Path(args.one), args, Path(args.rows_to))
        return 0

    root = Path(args.root)
    if not root.is_dir():
        print(f"{root}: no PEtab collection here (--root)", file=sys.stderr)
        return 2
    wanted = set(args.models.split(",")) if args.models else None
    folders = [f for f in sorted(root.iterdir())
               if f.is_dir() and (wanted is None or f.name in wanted)]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    from sbmlgpu.runtime import parallel_build

    report = {"benchmark": "ode_compile", "date": datetime.now(timezone.utc).isoformat(),
              "commit": commit, "command": " ".join(sys.argv), "timeout_s": args.timeout,
              "model_timeout_s": args.model_timeout, "cpus": os.cpu_count(),
              "jobs": args.jobs or parallel_build.jobs(), "build": parallel_build.BUILD,
              "rows": []}
    print(f"{'model':<34}{'states':>6}{'varied':>7} {'method':<7}{'src KiB':>9}"
          f"{'codegen':>9}{'units s (cpu)':>15}{'units':>6}{'total':>9}"
          f"{'whole s (cpu)':>15}{'g++ s (cpu)':>15}")
    child_argv = [a for a in raw if a]  # the same options for every model's process
    for folder in folders:
        rows = _in_a_process(folder, child_argv, args.model_timeout)
        for row in rows:
            if "method" not in row:
                print(_line(row), flush=True)
        report["rows"].extend(rows)
        (out / "ode_compile.json").write_text(json.dumps(report, indent=1, default=str))
    totals = [r["compile_s"] for r in report["rows"] if "compile_s" in r]
    if totals:
        over = sorted({r["model"] for r in report["rows"] if r.get("compile_s", 0) > 30})
        print(f"code generation + nvcc (units): slowest {max(totals):.1f} s; over 30 s: "
              f"{', '.join(over) or 'none'}")
    for tool, label in (("nvcc_units", "nvcc units"), ("nvcc", "nvcc whole"), ("host", "g++")):
        entries = [r[tool] for r in report["rows"] if tool in r]
        if entries:
            failed = sum(e.get("status") != "ok" for e in entries)
            worst = max((e["seconds"] for e in entries if e.get("status") == "ok"), default=0)
            worst_cpu = max((e["cpu_s"] for e in entries if e.get("status") == "ok"), default=0)
            print(f"{label}: slowest {worst:.1f} s wall, {worst_cpu:.1f} s CPU; "
                  f"{failed} of {len(entries)} stopped or failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
