#!/usr/bin/env python3
"""Real models (the PEtab benchmark collection): GPU ensembles against libRoadRunner.

    python benchmarks/ode_petab.py [--models A,B] [--n 100000] [--cores 16] [--out DIR]
                                   [--time-budget S] [--model-budget S] [--objective-n N]
                                   [--no-objective] [--method auto] [--cpu]

Every folder under ../shared/models/petab-benchmark (or --root; --models picks some),
each in its own process, stopped after --model-budget seconds (everything included);
its row then keeps the stages it finished and says in which it stopped, and a model
that fails to load or compile is a row with its error, so that one model can neither
crash the script nor eat the session. Per model:
- the SBML model and its first simulation condition (numeric overrides; an override
  naming a parameter takes that parameter's nominal value), output times
  linspace(0, t_max, 51) with t_max the last measurement time of that condition;
- --n parameter sets within the PEtab bounds: estimated parameters uniform on their
  parameterScale (sbmlgpu.ensemble.sample_petab, seed 0), the others nominal;
- compile: code generation, the nvcc build and a 64-member run of the same table
  with the nominal set first (`compile_s`; member 0 gives the nominal agreement:
  max over outputs of max |a - b| / max |b| against the CPU reference and
  libRoadRunner); the method chosen (`--method auto` unless --method) for those
  members (`compile_method`). With --method auto the other method's kernel is built
  too (`compile_other_s`): the whole ensemble's own method check may choose it (on
  other members), and its nvcc build would otherwise fall inside the timed run; so
  are the --summary statistics kernels (`compile_summary_s`);
- the `ode` backend on the GPU (rtol 1e-6, atol 1e-12, libRoadRunner's defaults):
  wall time of the whole run (the stiffness check, the pilot, transfers, every time
  course in host memory), the solver kernels' time from the profiler, failures by
  status, the slowest member's steps and the longest launch (which bounds its time);
  its breakdown (`gpu_wall_breakdown_s`: the phases of program.run, `program_run`
  being the backend's program.run itself, the second pass on the host's threads
  among them, `unnamed` what none covers) and that of the time outside program.run
  (`gpu_outside_breakdown_s`: preparing the run, dressing the result and its notes'
  non-finite scan), from the profiler's spans (sbmlgpu.api names them); what its
  passes did (`passes`: the members past --pass-steps, where and with which method
  they ran, each later stage's members and seconds);
- "repeat": the same ensemble run again on the loaded network (the first result
  dropped first), reported apart from the first (`gpu_repeat`, "repeat/s" and
  "×repeat" printed last): a second run, with the method check, kernel and views
  cached; with --profile-repeat LINES, under cProfile: its top functions and every
  span kept in the row (`gpu_repeat.cprofile`, `gpu_repeat.spans_s`); then the same
  ensemble with --summary (statistics on the GPU);
- libRoadRunner (CVODE) on --cores processes with the same tolerances, over as many
  of the same parameter sets as fit in --time-budget seconds (if `roadrunner`
  imports; "not available" otherwise; --cores 0 skips it);
- the PEtab objective of N = --objective-n or --n sets, every condition, ours
  (`sbmlgpu.petab.objective`: a first call and repeated calls; on the GPU the
  likelihood is reduced there) against libRoadRunner's objective of the same sets
  on --cores processes, measured (benchmarks/petab_objective.py's `measure`).
Target (../shared/BENCHMARKS.md): >= 100x libRoadRunner on 16 cores. JSON to
DIR/ode_petab.json (DIR: --out, else $OUT, else .), rewritten after every model;
one line per model printed. Without a GPU (or with --cpu) the same runs take the
ode backend's CPU path.
"""

from __future__ import annotations

import argparse
import cProfile
import csv
import io
import json
import math
import multiprocessing as mp
import os
import pstats
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
#: the methods --method auto chooses from (the compile stage builds both)
OTHER_METHODS = ("dopri5", "rodas4")


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

    return {"yaml": yamls[0], "sbml": first("sbml_files"), "parameters": first("parameter_file"),
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


def _rr_init(sbml_text: str, first=None):
    """Load the model; `first`: _rr_simulate's arguments for a first trajectory, run
    untimed (a first simulation in a process costs several trajectories' time, which
    the clock must not charge to those timed)."""
    global _RR, _RR_SPECIES
    import roadrunner

    _RR = roadrunner.RoadRunner(sbml_text)
    _RR.integrator.relative_tolerance = RTOL
    _RR.integrator.absolute_tolerance = ATOL
    _RR_SPECIES = set(_RR.model.getFloatingSpeciesIds()) | set(_RR.model.getBoundarySpeciesIds())
    if first is not None:
        _rr_simulate(first)


def rr_selections(network, ids) -> list[str]:
    """libRoadRunner's names for SBML ids: its "S" is a species' amount, "[S]" its
    concentration; ours are SBML values, so species that are concentrations are "[S]"."""
    return [f"[{i}]" if i in network.species_by_id and not network.species_value_is_amount(i)
            else i for i in ids]


def _rr_simulate(args):
    """`names`: rr_selections of the varied ids. Parameters (and compartments) are set,
    then reset() computes the initial state from them, then the species' initial values
    are set as current values: setting init(S) instead makes libRoadRunner's reset()
    put every parameter back to its SBML file value (found 2026-11-24; before that fix
    sets that vary a species ran at the file's parameter values)."""
    names, rows, t_end, outputs = args
    rr = _RR
    rows = np.asarray(rows, dtype=float).reshape(len(rows), len(names))
    is_species = [n.strip("[]") in _RR_SPECIES for n in names]
    values = [k for k, s in enumerate(is_species) if not s]
    species = [k for k, s in enumerate(is_species) if s]
    start = time.perf_counter()
    results, failures = [], 0
    for row in rows:
        try:
            rr.resetAll()
            for k in values:
                rr.setValue(names[k], float(row[k]))
            rr.reset()
            for k in species:
                rr.setValue(names[k], float(row[k]))
            r = rr.simulate(0.0, t_end, POINTS, selections=["time", *outputs])
            results.append(np.asarray(r)[:, 1:])
        except Exception:  # noqa: BLE001 - count, go on
            failures += 1
            results.append(None)
    return time.perf_counter() - start, failures, results


def _worker_pid(_) -> int:
    time.sleep(0.05)  # long enough that one worker cannot take every task
    return os.getpid()


def _wait_for_workers(pool, cores: int, most_s: float = 120.0) -> float:
    """Seconds until `cores` distinct workers have answered (each has run its
    initializer by then), at most `most_s` (a large model's load can take seconds)."""
    started = time.perf_counter()
    seen: set[int] = set()
    while len(seen) < cores and time.perf_counter() - started < most_s:
        seen.update(pool.map(_worker_pid, range(cores), chunksize=1))
    return time.perf_counter() - started


def roadrunner_rate(sbml_text, ids, table, t_end, outputs, cores, budget):
    """trajectories/s of libRoadRunner on `cores` processes, and its nominal result."""
    try:
        import roadrunner  # noqa: F401
    except Exception as exc:  # noqa: BLE001
        return {"available": False, "why": f"{type(exc).__name__}: {exc}"}
    first = (ids, table[:1], t_end, outputs)
    _rr_init(sbml_text, first)  # (the share is sized from a rate after a first one)
    t = time.perf_counter()
    _rr_simulate((ids, table[1:6], t_end, outputs))
    per = max((time.perf_counter() - t) / max(len(table[1:6]), 1), 1e-5)
    count = int(min(len(table), max(cores, budget * cores / per)))
    chunks = [table[i::cores][: max(1, count // cores)] for i in range(cores)]
    # spawn, not fork: a forked child inherits this process's CUDA context and dies
    # on it ("cuCtxPushCurrent failed: initialization error")
    with mp.get_context("spawn").Pool(cores, initializer=_rr_init,
                                      initargs=(sbml_text, first)) as pool:
        # the clock starts once every worker is up (spawned, roadrunner imported, the
        # model loaded): a Pool returns before its workers have started, and timing
        # from there charged libRoadRunner ~1 s of start-up per run (before 2026-11-24)
        ready = _wait_for_workers(pool, cores)
        started = time.perf_counter()
        parts = pool.map(_rr_simulate, [(ids, c, t_end, outputs) for c in chunks])
        wall = time.perf_counter() - started
    done = sum(len(c) for c in chunks)
    return {"available": True, "workers_ready_s": ready, "version": getattr(sys.modules.get("roadrunner"), "__version__", "?"),
            "cores": cores, "trajectories": done, "seconds": wall,
            "trajectories_per_s": done / wall, "failures": sum(p[1] for p in parts)}


def roadrunner_nominal(sbml_text, nominal_sets, t_end, outputs, network):
    try:
        _rr_init(sbml_text)
    except Exception:  # noqa: BLE001
        return None
    ids = list(nominal_sets)
    row = [nominal_sets[k][0] for k in ids]
    _, failures, results = _rr_simulate((rr_selections(network, ids), [row], t_end, outputs))
    return None if failures else results[0]


# -- one model ---------------------------------------------------------------------------------
def rel_error(a, b) -> float:
    """max over outputs of max_t |a - b| / (max_t |b| + ATOL / RTOL): the solvers' own
    mixed error weight, so that an output that is zero to within the absolute
    tolerance (e.g. 0 against 1e-23) does not count as a disagreement of 1."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    scale = np.nanmax(np.abs(b), axis=0) + ATOL / RTOL
    return float(np.nanmax(np.abs(a - b) / scale))


def status_counts(status) -> dict[str, int]:
    """{status name: members} of the statuses that occur."""
    from sbmlgpu.results import Status

    codes, counts = np.unique(np.asarray(status, dtype=int), return_counts=True)
    return {Status(int(c)).name: int(k) for c, k in zip(codes, counts)}


def _seconds(spans, *names) -> dict[str, float]:
    return {name: sum(sp.seconds for sp in spans if sp.name == name) for name in names}


#: the phases of program.run named in the breakdown (ode backend, sbmlgpu.profile spans)
RUN_PHASES = ("parameter table", "choose method", "generate kernel", "pilot",
              "bundling plan", "allocate and upload", "fault in result pages",
              "download time courses", "build the result")
#: phases of program.run outside its batches that a run may have or not (a GPU run's
#: passes on the host's threads, plugins/ode/passes.py; the cost model of the next run;
#: a kernel built ahead of the run), named so that they are not `unnamed` (Weber_BMC2015,
#: 2026-12-03: 0.72 s of a 0.92 s repeat was unnamed, with 17 members past --pass-steps)
OPTIONAL_PHASES = ("second pass on host threads", "fallback on host threads",
                   "fit the next run's cost model", "wait for the kernel built ahead")
#: the phases beside the batches, which `unnamed` is what is left of program.run after
BESIDE_BATCHES = ("parameter table", "choose method", "generate kernel", "pilot",
                  "bundling plan", "build the result", *OPTIONAL_PHASES)


def wall_breakdown(profiler, meta: dict, wall: float) -> tuple[dict, dict]:
    """(the breakdown of a whole run, that of its time outside program.run), in
    seconds, from the profiler's spans (sbmlgpu.api's "prepare the run",
    "program.run", "dress the result" and its "time course notes"). `program_run` is
    the backend's program.run (the "program.run" span; the result's wall_seconds,
    which runs to the start of the dressing, where that span is missing);
    `unnamed` what no named phase of it covers."""
    spans = profiler.spans if profiler else []
    records = profiler.records if profiler else []
    kernels = sum(r.ms for r in records if r.kernel.startswith("sbmlgpu_ode_")) / 1e3
    named = _seconds(spans, "program.run")["program.run"]
    program_run = named if any(sp.name == "program.run" for sp in spans) \
        else meta.get("wall_seconds")
    inside = {
        "execute": wall, "program_run": program_run,
        "batches": sum(sp.seconds for sp in spans if sp.name == "batch"),
        "compile": sum(sp.seconds for sp in spans if sp.category == "compile"),
        **_seconds(spans, *RUN_PHASES, *OPTIONAL_PHASES), "kernels": kernels}
    if program_run is not None:
        inside["unnamed"] = program_run - inside["batches"] - inside["compile"] - sum(
            inside[name] for name in BESIDE_BATCHES)
    outside = _seconds(spans, "prepare the run", "dress the result", "time course notes")
    if program_run is not None:
        outside["outside"] = wall - program_run
        outside["unnamed"] = outside["outside"] - outside["prepare the run"] \
            - outside["dress the result"]
    return inside, outside


def passes(meta: dict) -> dict:
    """What a run's passes did (plugins/ode/passes.py's report: the members past
    --pass-steps, where and with which method they ran, each later stage's members and
    seconds)."""
    return {k: v for k, v in meta.items()
            if k.startswith(("first_pass", "second_pass", "later_passes"))}


class StackSampler:
    """Every thread's innermost frames every SAMPLE_S while it runs (sys._current_frames):
    where a run's wall time goes that cProfile, which sees the calling thread alone,
    cannot say (a background thread holding the GIL, a wait on a lock)."""

    SAMPLE_S = 0.002
    DEPTH = 16

    def __init__(self):
        import collections
        import threading

        self.counts = collections.Counter()
        self.samples = 0
        self._stop = threading.Event()
        self._me = None
        self._thread = threading.Thread(target=self._run, daemon=True, name="stack-sampler")
        self._thread.start()

    def _run(self) -> None:
        import threading

        self._me = threading.get_ident()
        while not self._stop.wait(self.SAMPLE_S):
            names = {t.ident: t.name for t in threading.enumerate()}
            self.samples += 1
            for ident, frame in sys._current_frames().items():
                if ident == self._me:
                    continue
                where = []
                while frame is not None and len(where) < self.DEPTH:
                    code = frame.f_code
                    where.append(f"{Path(code.co_filename).name}:{frame.f_lineno} {code.co_name}")
                    frame = frame.f_back
                self.counts[(names.get(ident, str(ident)), " < ".join(where))] += 1

    def stop(self, lines: int) -> dict:
        """{samples, sample_s, top: [[thread, frames, samples], ...]} (the `lines` most
        frequent)."""
        self._stop.set()
        self._thread.join()
        return {"samples": self.samples, "sample_s": self.SAMPLE_S,
                "top": [[name, where, count]
                        for (name, where), count in self.counts.most_common(lines)]}


def profile_text(profiler: cProfile.Profile, lines: int) -> str:
    """The top `lines` functions of a cProfile run, by cumulative and by own time."""
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("cumulative").print_stats(lines)
    stats.sort_stats("tottime").print_stats(lines)
    return text.getvalue()


def run_model(folder: Path, args, device, save) -> dict:
    """Every measurement of one model; `save(row, stage)` after each stage (the
    parent keeps what a model that runs past its budget got done)."""
    import sbmlgpu
    from sbmlgpu import plugin_manager
    from sbmlgpu.api import execute, time_course
    from sbmlgpu.outputs import default_outputs
    from sbmlgpu.reference import simulate

    problem = petab_problem(folder)
    row = {"model": folder.name}
    save(row, "load")
    started = time.perf_counter()
    network = sbmlgpu.load(str(problem["sbml"]))
    row.update({"species": len(network.species), "reactions": len(network.reactions),
                "load_s": time.perf_counter() - started})
    refused = plugin_manager.backend("ode").supports(network)
    if refused:
        row["refused"] = "; ".join(f"{f} ({', '.join(ids[:3])})" for f, ids in refused)
        return row
    condition, sets, nominal_sets = parameter_sets(problem, network, args.n)
    t_end = end_time(problem, condition)
    times = np.linspace(0.0, t_end, POINTS)
    outputs = list(default_outputs(network))
    row.update({"condition": condition, "t_end": t_end, "varied": sum(
        1 for v in sets.values() if np.ptp(v) > 0), "outputs": len(outputs), "n": args.n})
    options = {"method": args.method, "rtol": RTOL, "atol": ATOL}
    gpu_device = [device.index] if device is not None else "cpu"

    def run(parameters, summary=False, method=None):
        task = time_course(times=times, parameters=parameters, summary=summary,
                           progress=False)
        return execute(network, task, "ode", device=gpu_device,
                       options={**options, "method": method or options["method"]})

    # compile: the ensemble's kernel (columns that do not vary become literals, so it
    # differs from a one-member run's) on 64 members of the same table with the
    # nominal set first, so that the timed run finds it in the cache and member 0
    # gives the nominal agreement (libRoadRunner's model loading is not timed either)
    save(row, "compile")
    warm = {k: np.concatenate([np.asarray(nominal_sets[k], float), v[:63]])
            for k, v in sets.items()}
    started = time.perf_counter()
    first = run(warm)
    row["compile_s"] = time.perf_counter() - started  # generation, nvcc, 64 members
    row["method"] = row["compile_method"] = first.result.metadata.get("method")
    if args.method == "auto":  # the ensemble's check may choose the other method
        started = time.perf_counter()
        for other in OTHER_METHODS:
            if other != row["compile_method"]:
                run(warm, method=other)
        row["compile_other_s"] = time.perf_counter() - started
    # and the statistics kernels of --summary (built on their first use: the summary
    # stage's "statistics" held their nvcc build, 0.5 s, until 2026-11-24)
    started = time.perf_counter()
    run(warm, summary=True)
    row["compile_summary_s"] = time.perf_counter() - started
    ref = simulate(network, times, parameters={k: v[0] for k, v in nominal_sets.items()},
                   rtol=1e-10, atol=1e-14)
    if ref.ok and first.result.status[0] == 0:
        row["nominal_vs_reference"] = rel_error(first.result.data[0], ref.evaluate(outputs))
    else:
        row["nominal_vs_reference"] = (f"reference {ref.status}, ours "
                                       f"{first.result.statuses()[0].name}")

    # the ensemble, every time course into host memory
    save(row, "ensemble")
    sampler = StackSampler() if args.sample_first else None
    started = time.perf_counter()
    try:
        outcome = run(sets)
    finally:
        if sampler is not None:
            row["gpu_first_stacks"] = sampler.stop(args.sample_first)
    wall = time.perf_counter() - started
    result = outcome.result
    meta = result.metadata
    records = outcome.profiler.records if outcome.profiler else []
    kernel_ms = sum(r.ms for r in records if r.kernel.startswith("sbmlgpu_ode_"))
    row["gpu_wall_breakdown_s"], row["gpu_outside_breakdown_s"] = wall_breakdown(
        outcome.profiler, meta, wall)
    row.update({
        "gpu_wall_s": wall, "gpu_trajectories_per_s": args.n / wall,
        "gpu_kernel_ms": kernel_ms or None,
        "gpu_kernel_trajectories_per_s": args.n / (kernel_ms / 1e3) if kernel_ms else None,
        "status_counts": status_counts(result.status),
        "method": meta.get("method"), "method_reason": meta.get("method_reason"),
        "bundling": meta.get("bundling"), "steps_mean": meta.get("steps_mean"),
        # the slowest member: its steps; its time is bounded by the longest launch
        # (a warp runs as long as its slowest member) and by any wall-time budget
        "slowest_member": {"steps": meta.get("steps_max"),
                           "longest_launch_s": max((r.ms for r in records
                                                    if r.kernel.startswith("sbmlgpu_ode_")),
                                                   default=0.0) / 1e3,
                           **{k: v for k, v in meta.items()
                              if k.startswith(("slowest", "budget", "wall_budget"))}},
        "passes": passes(meta),
        "kernel_registers": meta.get("kernel_registers"),
        "kernel_local_bytes": meta.get("kernel_local_bytes")})

    # the same ensemble again on the loaded network (kernel, views, method check
    # cached), the first result dropped first, as a user's second run would
    save(row, "repeat")
    del outcome, result
    profiler = cProfile.Profile() if args.profile_repeat > 0 else None
    started = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    try:
        again = run(sets)
    finally:
        if profiler is not None:
            profiler.disable()
    repeat_wall = time.perf_counter() - started
    inside, outside = wall_breakdown(again.profiler, again.result.metadata, repeat_wall)
    row["gpu_repeat"] = {"wall_s": repeat_wall, "trajectories_per_s": args.n / repeat_wall,
                         "breakdown_s": inside, "outside_breakdown_s": outside,
                         "passes": passes(again.result.metadata)}
    if profiler is not None:
        # where a repeat's time goes that no phase names (a span covers only what
        # the backend marks; cProfile sees every Python call, threads' calls excepted)
        row["gpu_repeat"]["spans_s"] = \
            again.profiler.span_seconds() if again.profiler else {}
        # cProfile's overhead is in this repeat's wall time and rate
        row["gpu_repeat"]["profiled"] = True
        row["gpu_repeat"]["cprofile"] = profile_text(profiler, args.profile_repeat)
    del again

    # the same ensemble as statistics computed on the GPU (--summary)
    save(row, "summary")
    started = time.perf_counter()
    summarised = execute(network, time_course(times=times, parameters=sets, summary=True,
                                              progress=False),
                         "ode", options=options, device=gpu_device)
    row["gpu_summary_wall_s"] = time.perf_counter() - started
    spans = summarised.profiler.spans if summarised.profiler else []
    row["gpu_summary_breakdown_s"] = _seconds(spans, "batch", "choose method",
                                              "generate kernel", "pilot",
                                              "allocate and upload", "statistics")
    row["gpu_summary_trajectories_per_s"] = args.n / row["gpu_summary_wall_s"]

    # libRoadRunner on --cores processes over the same sets, time-budgeted
    save(row, "roadrunner")
    sbml_text = Path(problem["sbml"]).read_text()
    rr_outputs = rr_selections(network, outputs)
    ids = list(sets)
    table = np.column_stack([sets[k] for k in ids]) if ids else np.zeros((args.n, 0))
    rr = roadrunner_rate(sbml_text, rr_selections(network, ids), table, t_end, rr_outputs,
                         args.cores,
                         args.time_budget) if args.cores > 0 else {
        "available": False, "why": "--cores 0"}
    row["roadrunner"] = rr
    if rr.get("available"):
        rate = rr["trajectories_per_s"]
        row["speedup_vs_roadrunner"] = row["gpu_trajectories_per_s"] / rate
        row["summary_speedup_vs_roadrunner"] = row["gpu_summary_trajectories_per_s"] / rate
        if row["gpu_kernel_trajectories_per_s"]:
            row["kernel_speedup_vs_roadrunner"] = row["gpu_kernel_trajectories_per_s"] / rate
        row["gpu_repeat"]["speedup_vs_roadrunner"] = row["gpu_repeat"]["trajectories_per_s"] \
            / rate
        rr_nominal = roadrunner_nominal(sbml_text, nominal_sets, t_end, rr_outputs, network)
        if rr_nominal is not None and first.result.status[0] == 0:
            row["nominal_vs_roadrunner"] = rel_error(first.result.data[0], rr_nominal)

    # the PEtab objective of the same number of sets, every condition of the problem
    if args.objective:
        save(row, "objective")
        from benchmarks.petab_objective import measure

        row["objective"] = measure(problem["yaml"], args.objective_n or args.n, gpu_device,
                                   cores=args.cores, budget=args.time_budget)
    return row


# -- one model per process, within a time budget ------------------------------------------------
def run_one(args) -> int:
    """The child: one model (--one NAME), its row written to --row-out after every
    stage, so that what it got done survives a kill at the budget."""
    from sbmlgpu import runtime

    devices = [] if args.cpu else runtime.get_devices()
    device = devices[0] if devices else None
    folder = Path(args.root) / args.one
    target = Path(args.row_out)

    def save(row, stage):
        row["stage"] = stage
        _write_atomically(target, row)

    row: dict = {"model": folder.name}
    try:
        row = run_model(folder, args, device, save)
        row["stage"] = "done"
    except Exception as exc:  # noqa: BLE001 - the row says what failed and where
        row = {**_read_row(target, row), "error": f"{type(exc).__name__}: {exc}",
               "traceback": traceback.format_exc()[-2000:]}
    _write_atomically(target, row)
    return 0


def _write_atomically(target: Path, row: dict) -> None:
    """The row as JSON, whole or not at all (a kill at the budget may come at any time)."""
    scratch = target.with_suffix(".part")
    scratch.write_text(json.dumps(row, default=str))
    os.replace(scratch, target)


def _read_row(target: Path, default: dict) -> dict:
    try:
        return json.loads(target.read_text())
    except (OSError, ValueError):
        return dict(default)


def run_in_child(folder: Path, args, argv: list[str]) -> dict:
    """One model in a child process, killed (with the processes it started) after
    --model-budget seconds: the row then holds the stages it finished and says in
    which it stopped."""
    import signal
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory(prefix="ode-petab-") as scratch:
        target = Path(scratch) / "row.json"
        command = [sys.executable, str(Path(__file__).resolve()), *argv, "--one", folder.name,
                   "--row-out", str(target)]
        started = time.perf_counter()
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 start_new_session=True, text=True)
        try:
            log, _ = child.communicate(timeout=args.model_budget)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            log, _ = child.communicate()
            timed_out = True
        row = _read_row(target, {"model": folder.name, "stage": "start"})
    row["model_wall_s"] = time.perf_counter() - started
    if timed_out and row["stage"] != "done":  # (done, then killed on its way out: kept)
        row["error"] = (f"stopped at the model budget ({args.model_budget:g} s) in stage "
                        f"{row['stage']!r}")
    elif child.returncode != 0 or row.get("stage") != "done" and "error" not in row \
            and "refused" not in row:
        row["error"] = f"the model's process exited with {child.returncode}: " + \
            (log or "").strip()[-600:]
    return row


def _fmt(v, f) -> str:
    if v is None:
        return "n/a"
    return format(v, f) if isinstance(v, (int, float)) and not isinstance(v, bool) \
        else str(v)[:9]


def print_row(row: dict) -> None:
    if "refused" in row or ("error" in row and "gpu_trajectories_per_s" not in row):
        print(f"{row['model']:<38} {row.get('error') or 'refused: ' + row['refused']}",
              flush=True)
        return
    rr = row.get("roadrunner", {})
    objective = row.get("objective", {})
    failed = sum(v for k, v in row.get("status_counts", {}).items() if k != "ok")
    print(f"{row['model']:<38}{_fmt(row.get('compile_s'), '.1f'):>8}{str(row.get('method')):>8}"
          f"{_fmt(row.get('gpu_trajectories_per_s'), '.0f'):>11}"
          f"{_fmt(row.get('gpu_summary_trajectories_per_s'), '.0f'):>11}"
          f"{_fmt(objective.get('sets_per_s', 'n/a'), '.0f'):>11}"
          f"{_fmt(row.get('gpu_kernel_trajectories_per_s'), '.0f'):>11}"
          f"{_fmt(rr.get('trajectories_per_s', 'n/a'), '.1f'):>10}"
          f"{_fmt(row.get('speedup_vs_roadrunner', 'n/a'), '.0f'):>7}"
          f"{_fmt(row.get('summary_speedup_vs_roadrunner', 'n/a'), '.0f'):>7}"
          f"{_fmt(objective.get('speedup_repeated', 'n/a'), '.0f'):>7}"
          f"{_fmt(row.get('kernel_speedup_vs_roadrunner', 'n/a'), '.0f'):>7}"
          f"{_fmt(row.get('slowest_member', {}).get('steps'), 'd'):>10}  {failed:<7}"
          f"{_fmt(row.get('gpu_repeat', {}).get('trajectories_per_s'), '.0f'):>11}"
          f"{_fmt(row.get('gpu_repeat', {}).get('speedup_vs_roadrunner', 'n/a'), '.0f'):>8}"
          + (f"  [{row['error']}]" if "error" in row else ""), flush=True)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default=str(DEFAULT_ROOT))
    parser.add_argument("--models", default=None, help="comma-separated folder names "
                                                       "[default: every folder]")
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--cores", type=int, default=min(16, os.cpu_count() or 1),
                        help="libRoadRunner processes (0: skip libRoadRunner)")
    parser.add_argument("--time-budget", type=float, default=15.0,
                        help="seconds of libRoadRunner work per model (rate measurement)")
    parser.add_argument("--model-budget", type=float, default=120.0,
                        help="wall seconds per model, everything included; a model past it "
                             "is stopped and its row keeps the stages it finished")
    parser.add_argument("--no-objective", dest="objective", action="store_false",
                        help="skip the PEtab objective (sbmlgpu petab --ensemble N)")
    parser.add_argument("--objective-n", type=int, default=None,
                        help="parameter sets of the objective run [default: --n]")
    parser.add_argument("--method", default="auto")
    parser.add_argument("--cpu", action="store_true", help="the CPU path even with a GPU")
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument("--profile-repeat", type=int, default=0, metavar="LINES",
                        help="run the repeat under cProfile and keep its top LINES "
                             "functions and every span in the row (gpu_repeat.cprofile, "
                             "gpu_repeat.spans_s) [default: 0, off]")
    parser.add_argument("--sample-first", type=int, default=0, metavar="LINES",
                        help="sample every thread's stack every 2 ms during the first "
                             "ensemble run and keep the LINES most frequent "
                             "(gpu_first_stacks) [default: 0, off]")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the child: one model
    parser.add_argument("--row-out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.profile_repeat < 0:
        parser.error(f"--profile-repeat must be 0 (off) or a number of lines, not "
                     f"{args.profile_repeat}")
    if args.sample_first < 0:
        parser.error(f"--sample-first must be 0 (off) or a number of lines, not "
                     f"{args.sample_first}")
    if args.one:
        return run_one(args)

    from sbmlgpu import runtime

    devices = [] if args.cpu else runtime.get_devices()
    device = devices[0] if devices else None
    if device is None:
        print("running the CPU path" + ("" if args.cpu else f" (no GPU: "
                                        f"{runtime.no_gpu_reason()})"), file=sys.stderr)
    root = Path(args.root)
    folders = sorted(p for p in root.iterdir() if p.is_dir())
    if args.models:
        wanted = set(args.models.split(","))
        missing = wanted - {f.name for f in folders}
        if missing:
            parser.error(f"no model folder {', '.join(sorted(missing))} in {root}")
        folders = [f for f in folders if f.name in wanted]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = {"benchmark": "ode_petab", "date": datetime.now(timezone.utc).isoformat(),
              "device": device.properties.name if device else "cpu", "n": args.n,
              "cores": args.cores, "rtol": RTOL, "atol": ATOL,
              "command": " ".join([sys.argv[0], *argv]), "models": []}
    print(f"{'model':<38}{'compile':>8}{'method':>8}{'whole/s':>11}{'summary/s':>11}"
          f"{'objective':>11}{'kernel/s':>11}{'RR traj/s':>10}{'×whole':>7}{'×summ':>7}"
          f"{'×obj':>7}{'×kern':>7}{'max steps':>10}  failed {'repeat/s':>11}{'×repeat':>8}")
    for folder in folders:
        row = run_in_child(folder, args, argv)
        report["models"].append(row)
        (out / "ode_petab.json").write_text(json.dumps(report, indent=1, default=str))
        print_row(row)
    print(f"wrote {out / 'ode_petab.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
