#!/usr/bin/env python3
"""Real models (the PEtab benchmark collection): GPU ensembles against libRoadRunner.

    python benchmarks/ode_petab.py [--models A,B] [--n 100000] [--cores 16] [--out DIR]
                                   [--time-budget SECONDS] [--method auto]

For each model under ../shared/models/petab-benchmark (or --root):
- the SBML model and its first simulation condition (numeric overrides; an override
  naming a parameter takes that parameter's nominal value), output times
  linspace(0, t_max, 51) with t_max the last measurement time of that condition;
- 10^5 parameter sets (--n) within the PEtab bounds: estimated parameters uniform on
  their parameterScale (sbmlgpu.ensemble.sample_petab, seed 0), the others nominal;
- the `ode` backend on the GPU (method auto unless --method; rtol 1e-6, atol 1e-12,
  libRoadRunner's defaults): wall time of the whole run (nvcc's build of the
  ensemble's kernel cached beforehand by a 256-member run; code generation, the
  stiffness check, the pilot, transfers included) and kernel time from the profiler,
  trajectories/s, failures by status; and the same ensemble with --summary (mean,
  sd and quantiles computed on the GPU, no time courses copied back);
- libRoadRunner (CVODE) on --cores processes with the same tolerances, over as many of
  the same parameter sets as fit in --time-budget seconds: trajectories/s (if
  `roadrunner` imports; "not available" otherwise);
- agreement at the nominal parameters: max over outputs of max |a - b| / max |b|,
  GPU against libRoadRunner and against the CPU reference (sbmlgpu.reference).
Target (../shared/BENCHMARKS.md): >= 100x libRoadRunner on 16 cores. JSON to
DIR/ode_petab.json (DIR: --out, else $OUT, else .), one line per model printed.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import multiprocessing as mp
import os
import re
import sys
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# ../shared, ./shared or $SBMLGPU_SHARED, found as the tests find it
from tests.shared_data import MODELS  # noqa: E402

DEFAULT_ROOT = MODELS / "petab-benchmark"
RTOL, ATOL = 1e-6, 1e-12
POINTS = 51


# -- PEtab files --------------------------------------------------------------------------
def _yaml_lists(text: str) -> dict[str, list[str]]:
    """The few keys we need from a PEtab YAML file (no PyYAML needed)."""
    out: dict[str, list[str]] = {}
    key = None
    for line in text.splitlines():
        m = re.match(r"^\s*([A-Za-z_]+):\s*(\S.*)?$", line)
        if m and not line.strip().startswith("-"):
            key = m.group(1)
            if m.group(2):
                out.setdefault(key, []).append(m.group(2).strip())
            continue
        m = re.match(r"^\s*-\s*(\S.*)$", line)
        if m and key:
            out.setdefault(key, []).append(m.group(1).strip())
    return out


def petab_problem(folder: Path) -> dict:
    yamls = sorted(folder.glob("*.yaml"))
    if not yamls:
        raise FileNotFoundError(f"{folder}: no PEtab YAML file")
    spec = _yaml_lists(yamls[0].read_text())

    def first(key):
        values = spec.get(key) or []
        return folder / values[0] if values else None

    return {"sbml": first("sbml_files"), "parameters": first("parameter_file"),
            "conditions": first("condition_files"), "measurements": first("measurement_files")}


def _tsv(path: Path | None) -> list[dict]:
    if path is None or not path.is_file():
        return []
    with open(path, newline="", encoding="utf-8-sig") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def first_condition(problem: dict, nominal: dict[str, float]) -> tuple[str | None, dict]:
    rows = _tsv(problem["conditions"])
    if not rows:
        return None, {}
    row = rows[0]
    overrides = {}
    for key, text in row.items():
        if key in ("conditionId", "conditionName") or text is None or not text.strip():
            continue
        text = text.strip()
        try:
            overrides[key] = float(text)
        except ValueError:
            if text in nominal:
                overrides[key] = nominal[text]
    return row.get("conditionId"), overrides


def end_time(problem: dict, condition: str | None) -> float:
    times = []
    for row in _tsv(problem["measurements"]):
        if condition is None or row.get("simulationConditionId") == condition:
            try:
                t = float(row["time"])
            except (KeyError, ValueError):
                continue
            if math.isfinite(t):
                times.append(t)
    return max(times) if times and max(times) > 0 else 100.0


def parameter_sets(problem, network, n: int, seed: int = 0):
    """(varying sets, constant overrides, nominal overrides) restricted to model ids."""
    from sbmlgpu import ensemble
    from sbmlgpu.errors import OptionError

    table = ensemble.read_petab_parameters(problem["parameters"])
    nominal = {p.id: p.nominal for p in table}
    sets, _ = ensemble.sample_petab(problem["parameters"], n, seed, network)
    usable = {}
    for k, v in sets.items():
        try:
            ensemble.check_ids(network, [k])
        except OptionError:
            continue
        usable[k] = v
    condition, overrides = first_condition(problem, nominal)
    for k, v in overrides.items():
        try:
            ensemble.check_ids(network, [k])
        except OptionError:
            continue
        usable[k] = np.full(n, v)
    nominal_sets = {k: [nominal.get(k, float(v[0])) if k not in overrides else overrides[k]]
                    for k, v in usable.items()}
    return condition, usable, nominal_sets


# -- libRoadRunner --------------------------------------------------------------------------
_RR = None


def _rr_init(sbml_text: str):
    global _RR
    import roadrunner

    _RR = roadrunner.RoadRunner(sbml_text)
    _RR.integrator.relative_tolerance = RTOL
    _RR.integrator.absolute_tolerance = ATOL


def _rr_set(rr, sbml_id: str, value: float) -> None:
    species = set(rr.model.getFloatingSpeciesIds()) | set(rr.model.getBoundarySpeciesIds())
    rr.setValue(f"init({sbml_id})" if sbml_id in species else sbml_id, float(value))


def _rr_simulate(args):
    ids, rows, t_end, outputs = args
    rr = _RR
    start = time.perf_counter()
    results, failures = [], 0
    for row in rows:
        try:
            rr.resetAll()
            for k, v in zip(ids, row):
                _rr_set(rr, k, v)
            rr.reset()
            r = rr.simulate(0.0, t_end, POINTS, selections=["time", *outputs])
            results.append(np.asarray(r)[:, 1:])
        except Exception:  # noqa: BLE001 - count, go on
            failures += 1
            results.append(None)
    return time.perf_counter() - start, failures, results


def roadrunner_rate(sbml_text, ids, table, t_end, outputs, cores, budget):
    """trajectories/s of libRoadRunner on `cores` processes, and its nominal result."""
    try:
        import roadrunner  # noqa: F401
    except Exception as exc:  # noqa: BLE001
        return {"available": False, "why": f"{type(exc).__name__}: {exc}"}
    _rr_init(sbml_text)
    t = time.perf_counter()
    _rr_simulate((ids, table[:5], t_end, outputs))
    per = max((time.perf_counter() - t) / 5, 1e-5)
    count = int(min(len(table), max(cores, budget * cores / per)))
    chunks = [table[i::cores][: max(1, count // cores)] for i in range(cores)]
    # spawn, not fork: a forked child inherits this process's CUDA context and dies
    # on it ("cuCtxPushCurrent failed: initialization error")
    with mp.get_context("spawn").Pool(cores, initializer=_rr_init, initargs=(sbml_text,)) as pool:
        started = time.perf_counter()
        parts = pool.map(_rr_simulate, [(ids, c, t_end, outputs) for c in chunks])
        wall = time.perf_counter() - started
    done = sum(len(c) for c in chunks)
    return {"available": True, "version": getattr(sys.modules.get("roadrunner"), "__version__", "?"),
            "cores": cores, "trajectories": done, "seconds": wall,
            "trajectories_per_s": done / wall, "failures": sum(p[1] for p in parts)}


def roadrunner_nominal(sbml_text, nominal_sets, t_end, outputs):
    try:
        _rr_init(sbml_text)
    except Exception:  # noqa: BLE001
        return None
    ids = list(nominal_sets)
    row = [nominal_sets[k][0] for k in ids]
    _, failures, results = _rr_simulate((ids, [row], t_end, outputs))
    return None if failures else results[0]


# -- one model ---------------------------------------------------------------------------------
def rel_error(a, b) -> float:
    """max over outputs of max_t |a - b| / (max_t |b| + ATOL / RTOL): the solvers' own
    mixed error weight, so that an output that is zero to within the absolute
    tolerance (e.g. 0 against 1e-23) does not count as a disagreement of 1."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    scale = np.nanmax(np.abs(b), axis=0) + ATOL / RTOL
    return float(np.nanmax(np.abs(a - b) / scale))


def run_model(folder: Path, args, device) -> dict:
    import sbmlgpu
    from sbmlgpu.api import execute
    from sbmlgpu.plugins.ode.program import default_outputs
    from sbmlgpu.reference import simulate

    problem = petab_problem(folder)
    network = sbmlgpu.load(str(problem["sbml"]))
    row = {"model": folder.name, "species": len(network.species),
           "reactions": len(network.reactions)}
    from sbmlgpu import plugin_manager

    refused = plugin_manager.backend("ode").supports(network)
    if refused:
        row["refused"] = "; ".join(f"{f} ({', '.join(ids[:3])})" for f, ids in refused)
        return row
    condition, sets, nominal_sets = parameter_sets(problem, network, args.n)
    t_end = end_time(problem, condition)
    times = np.linspace(0.0, t_end, POINTS)
    outputs = list(default_outputs(network))
    row.update({"condition": condition, "t_end": t_end, "varied": sum(
        1 for v in sets.values() if np.ptp(v) > 0), "outputs": len(outputs)})
    options = {"method": args.method, "rtol": RTOL, "atol": ATOL}
    gpu_device = [device.index] if device is not None else "cpu"

    # nominal: GPU vs CPU reference (and libRoadRunner below)
    started = time.perf_counter()
    nominal = execute(network, "ode", times=times, parameters=nominal_sets, options=options,
                      device=gpu_device, progress=False)
    row["compile_and_first_run_s"] = time.perf_counter() - started
    ref = simulate(network, times, parameters={k: v[0] for k, v in nominal_sets.items()},
                   rtol=1e-10, atol=1e-14)
    if ref.ok and nominal.result.ok.all():
        row["nominal_vs_reference"] = rel_error(nominal.result.data[0], ref.evaluate(outputs))
    else:
        row["nominal_vs_reference"] = f"reference {ref.status}, gpu {nominal.result.statuses()[0].name}"

    # the ensemble's kernel differs from the nominal run's (columns that do not vary
    # become literals): compile it on 256 members of the same table first, so that the
    # timed run finds it in the cache (libRoadRunner's model loading is not timed either)
    started = time.perf_counter()
    execute(network, "ode", times=times, parameters={k: v[:256] for k, v in sets.items()},
            options=options, device=gpu_device, progress=False)
    row["ensemble_compile_s"] = time.perf_counter() - started

    # the ensemble
    started = time.perf_counter()
    outcome = execute(network, "ode", times=times, parameters=sets, options=options,
                      device=gpu_device, progress=False)
    wall = time.perf_counter() - started
    result = outcome.result
    kernel_ms = sum(r.ms for r in outcome.profiler.records
                    if r.kernel.startswith("sbmlgpu_ode_")) if outcome.profiler else None
    counts = np.bincount(result.status.astype(int), minlength=5)
    spans = outcome.profiler.spans if outcome.profiler else []
    row["gpu_wall_breakdown_s"] = {
        "execute": wall,
        "program_run": result.metadata.get("wall_seconds"),
        "batches": sum(sp.seconds for sp in spans if sp.name == "batch"),
        "compile": sum(sp.seconds for sp in spans if sp.category == "compile"),
        **{name: sum(sp.seconds for sp in spans if sp.name == name)
           for name in ("choose method", "generate kernel", "pilot", "allocate and upload",
                        "download time courses")},
        "kernels": (kernel_ms or 0.0) / 1e3,
    }
    if kernel_ms:
        row["gpu_kernel_trajectories_per_s"] = args.n / (kernel_ms / 1e3)
    row.update({"n": args.n, "gpu_wall_s": wall, "gpu_kernel_ms": kernel_ms,
                "gpu_trajectories_per_s": args.n / wall,
                "status_counts": {"ok": int(counts[0]), "max_steps": int(counts[1]),
                                  "step_size_underflow": int(counts[2]),
                                  "non_finite": int(counts[3]), "failed": int(counts[4])},
                "method": result.metadata.get("method"),
                "method_reason": result.metadata.get("method_reason"),
                "steps_mean": result.metadata.get("steps_mean"),
                "steps_max": result.metadata.get("steps_max"),
                "bundling": result.metadata.get("bundling")})

    # the same ensemble as statistics (mean, sd, quantiles per output and time) computed
    # on the GPU: the time courses never cross the bus (--summary)
    started = time.perf_counter()
    summarised = execute(network, "ode", times=times, parameters=sets, options=options,
                         summary=True, device=gpu_device, progress=False)
    row["gpu_summary_wall_s"] = time.perf_counter() - started
    spans = summarised.profiler.spans if summarised.profiler else []
    row["gpu_summary_breakdown_s"] = {
        name: sum(sp.seconds for sp in spans if sp.name == name)
        for name in ("batch", "choose method", "generate kernel", "pilot",
                     "allocate and upload", "statistics")}
    row["gpu_summary_trajectories_per_s"] = args.n / row["gpu_summary_wall_s"]

    sbml_text = Path(problem["sbml"]).read_text()
    # libRoadRunner's selection "S" is an amount, "[S]" a concentration; ours are SBML
    # values, so species that are concentrations are selected as "[S]"
    outputs = [f"[{o}]" if o in network.species_by_id and not network.species_value_is_amount(o)
               else o for o in outputs]
    ids = list(sets)
    table = np.column_stack([sets[k] for k in ids]) if ids else np.zeros((args.n, 0))
    rr = roadrunner_rate(sbml_text, ids, table, t_end, outputs, args.cores, args.time_budget)
    row["roadrunner"] = rr
    if rr.get("available"):
        row["speedup_vs_roadrunner"] = row["gpu_trajectories_per_s"] / rr["trajectories_per_s"]
        row["summary_speedup_vs_roadrunner"] = (row["gpu_summary_trajectories_per_s"]
                                                / rr["trajectories_per_s"])
        if "gpu_kernel_trajectories_per_s" in row:
            row["kernel_speedup_vs_roadrunner"] = (row["gpu_kernel_trajectories_per_s"]
                                                   / rr["trajectories_per_s"])
        rr_nominal = roadrunner_nominal(sbml_text, nominal_sets, t_end, outputs)
        if rr_nominal is not None:
            row["nominal_vs_roadrunner"] = rel_error(nominal.result.data[0], rr_nominal)
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default=str(DEFAULT_ROOT))
    parser.add_argument("--models", default=None, help="comma-separated folder names")
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--cores", type=int, default=min(16, os.cpu_count() or 1))
    parser.add_argument("--time-budget", type=float, default=15.0,
                        help="seconds of libRoadRunner work per model (rate measurement)")
    parser.add_argument("--method", default="auto")
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    args = parser.parse_args(argv)

    from sbmlgpu import runtime

    devices = runtime.get_devices()
    device = devices[0] if devices else None
    if device is None:
        print(f"no GPU ({runtime.no_gpu_reason()}): running the CPU path", file=sys.stderr)
    root = Path(args.root)
    folders = sorted(p for p in root.iterdir() if p.is_dir())
    if args.models:
        wanted = set(args.models.split(","))
        folders = [f for f in folders if f.name in wanted]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = {"benchmark": "ode_petab", "date": datetime.now(timezone.utc).isoformat(),
              "device": device.properties.name if device else "cpu", "n": args.n,
              "cores": args.cores, "rtol": RTOL, "atol": ATOL, "command": " ".join(sys.argv),
              "models": []}
    print(f"{'model':<38}{'method':>8}{'GPU traj/s':>12}{'RR traj/s':>11}{'speedup':>9}"
          f"{'summary':>8}{'kernel':>8}{'vs RR':>10}{'vs ref':>10}  failed")
    for folder in folders:
        try:
            row = run_model(folder, args, device)
        except Exception as exc:  # noqa: BLE001 - report and go on with the next model
            row = {"model": folder.name, "error": f"{type(exc).__name__}: {exc}",
                   "traceback": traceback.format_exc()[-2000:]}
        report["models"].append(row)
        (out / "ode_petab.json").write_text(json.dumps(report, indent=1, default=str))
        if "error" in row or "refused" in row:
            print(f"{row['model']:<38} {row.get('error') or 'refused: ' + row['refused']}",
                  flush=True)
            continue
        rr = row["roadrunner"]
        failed = args.n - row["status_counts"]["ok"]

        def fmt(v, f):
            return format(v, f) if isinstance(v, (int, float)) else str(v)[:9]

        print(f"{row['model']:<38}{row['method']:>8}{row['gpu_trajectories_per_s']:>12.0f}"
              f"{fmt(rr.get('trajectories_per_s', 'n/a'), '.1f'):>11}"
              f"{fmt(row.get('speedup_vs_roadrunner', 'n/a'), '.0f'):>9}"
              f"{fmt(row.get('summary_speedup_vs_roadrunner', 'n/a'), '.0f'):>8}"
              f"{fmt(row.get('kernel_speedup_vs_roadrunner', 'n/a'), '.0f'):>8}"
              f"{fmt(row.get('nominal_vs_roadrunner', 'n/a'), '.1e'):>10}"
              f"{fmt(row['nominal_vs_reference'], '.1e'):>10}  {failed}", flush=True)
    print(f"wrote {out / 'ode_petab.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
