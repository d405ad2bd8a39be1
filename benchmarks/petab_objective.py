#!/usr/bin/env python3
"""The PEtab objective of N parameter sets: sbmlgpu against libRoadRunner, both real.

    python benchmarks/petab_objective.py [--models A,B] [--n 100000] [--cores 16]
                                         [--time-budget S] [--repeats 2] [--seed 0]
                                         [--problem-budget S] [--cpu] [--out DIR]

Per problem of ../shared/models/petab-benchmark (or --root; --models picks some):
- the sets: N sampled within the PEtab bounds (`sbmlgpu petab --ensemble`'s sampler,
  --seed), the same for both simulators;
- ours: `sbmlgpu.petab.objective(yaml)` and its first call on the N sets (`first_s`:
  the problem read and prepared, code generated, kernels compiled or found in the
  compile cache, the N sets evaluated), then --repeats calls on the prepared objective
  with the same sets (`repeated_s`: each; `repeated_best_s`: the fastest; the second
  call builds the program of the method the first kept, the later ones reuse it);
  on the GPU the likelihood is reduced there (`reduced_on_device`);
- libRoadRunner (CVODE, rtol 1e-6, atol 1e-12, as our ode backend's defaults here):
  --cores processes, each with the SBML model loaded (not timed, as our compile is
  not in `repeated_s`); per set, every run of the problem (its preequilibration
  condition simulated over 0, 1, 10, ..., 1e6 and its state carried over; the
  simulation condition simulated at its own measurement times; t = inf rows at the
  state at 1e6), and the NLL and chi2 computed in numpy with the same formulas and
  terms as ours (sbmlgpu.petab's observables and likelihood); as many sets as fit in
  --time-budget seconds of the pool's time: sets/s. `nllh_max_rel_diff`: how far its
  NLL is from ours over the sets both finished (a check that both compute the same
  objective), `agreeing_sets` how many are within 1e-3;
- the speedups: sets/s of our first call and of our best repeated call over
  libRoadRunner's.
JSON to DIR/petab_objective.json (DIR: --out, else $OUT, else .), rewritten after
every problem: the rows of problems an earlier run wrote there and this one does not
measure are kept (each row has its own command and date), so one process per problem
into one folder loses nothing; a table is printed. Without a GPU (or with --cpu) ours runs the ode
backend's CPU path. benchmarks/ode_petab.py's objective stage calls `measure`.
Without the roadrunner package its figures are "not available".
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.shared_data import MODELS  # noqa: E402

DEFAULT_ROOT = MODELS / "petab-benchmark"
RTOL, ATOL = 1e-6, 1e-12
#: the times of a preequilibration or t = inf steady state (as sbmlgpu.petab's)
STEADY_END = 1e6
AGREE = 1e-3


# -- ours -------------------------------------------------------------------------------------
def ours(yaml: Path, n: int, seed: int, device, repeats: int) -> tuple[dict, object, dict]:
    """(figures, the first call's PetabResult, the sets) of sbmlgpu's objective."""
    from benchmarks.ode_petab import status_counts
    from sbmlgpu.petab import objective
    from sbmlgpu.petab.values import sampled_sets

    out: dict = {"sets": n}
    started = time.perf_counter()
    prepared = objective(yaml, device=device, options={"rtol": RTOL, "atol": ATOL})
    sets = sampled_sets(prepared.problem, n, seed)
    first = prepared.evaluate(sets)
    out["first_s"] = time.perf_counter() - started
    out["runs"] = len(prepared.runs.pairs)
    out["rows"] = len(prepared.problem.measurements)
    out["method"] = first.method
    out["reduced_on_device"] = first.reduced_on_device
    out["status_counts"] = status_counts(first.status)
    ok = first.status == 0
    out["best_nllh"] = float(np.min(first.nll[ok])) if ok.any() else None
    out["repeated_s"] = []
    for _ in range(repeats):
        started = time.perf_counter()
        again = prepared.evaluate(sets)
        out["repeated_s"].append(time.perf_counter() - started)
    out["first_sets_per_s"] = n / out["first_s"]
    if out["repeated_s"]:
        out["repeated_best_s"] = min(out["repeated_s"])
        out["sets_per_s"] = n / out["repeated_best_s"]
        # the kept method may differ from the first call's choice on other stages
        both = ok & (again.status == 0)
        out["repeated_equals_first"] = bool(np.array_equal(again.status, first.status) and
                                            np.allclose(again.nll[both], first.nll[both],
                                                        rtol=1e-9, atol=1e-9))
    return out, first, sets


# -- libRoadRunner ------------------------------------------------------------------------------
_W: dict = {}  # the worker's problem and model


def _init(yaml: str) -> None:
    import roadrunner

    from sbmlgpu.petab.observables import Formulas
    from sbmlgpu.petab.problem import load_problem
    from sbmlgpu.petab.simulate import Runs

    # CVODE's failures are counted (failures), not printed: they flood the log (sundials
    # writes itself, so a pool's worker closes its stdout and stderr)
    roadrunner.Logger.disableLogging()
    if mp.current_process().name != "MainProcess":
        for fd in (1, 2):
            os.dup2(os.open(os.devnull, os.O_WRONLY), fd)
    problem = load_problem(yaml)
    rr = roadrunner.RoadRunner(_sbml_for_conditions(problem, _sbml_path(yaml)))
    rr.integrator.relative_tolerance = RTOL
    rr.integrator.absolute_tolerance = ATOL
    formulas = Formulas(problem)
    _W.update(problem=problem, rr=rr, formulas=formulas, runs=Runs.of(problem),
              net=problem.network, conditions=_condition_cells(problem))


def _sbml_path(yaml) -> Path:
    """The problem's SBML file (load_problem checked that there is one)."""
    from sbmlgpu.petab.problem import petab_v1

    config = petab_v1().yaml.load_yaml(str(yaml))
    return Path(yaml).parent / config["problems"][0]["sbml_files"][0]


def _sbml_for_conditions(problem, path: Path) -> str:
    """The SBML text without the initial assignments of values a condition sets: the
    condition replaces the assignment (PEtab), which libRoadRunner's reset() would
    otherwise evaluate again."""
    import libsbml

    columns = [c for c in problem.problem.condition_df.columns
               if c in problem.network.initial_assignment_by_variable]
    if not columns:
        return path.read_text()
    document = libsbml.readSBMLFromFile(str(path))
    model = document.getModel()
    for column in columns:
        model.removeInitialAssignment(column)
        # a placeholder value (libRoadRunner wants one); every condition sets its own
        parameter = model.getParameter(column)
        if parameter is not None and not parameter.isSetValue():
            parameter.setValue(0.0)
        compartment = model.getCompartment(column)
        if compartment is not None and not compartment.isSetSize():
            compartment.setSize(1.0)
        species = model.getSpecies(column)
        if species is not None and not (species.isSetInitialAmount()
                                        or species.isSetInitialConcentration()):
            species.setInitialConcentration(0.0)
    return libsbml.writeSBMLToString(document)


def _selection(net, sid: str) -> str:
    """libRoadRunner's name of an SBML id's value ("[S]": a concentration)."""
    s = net.species_by_id.get(sid)
    if s is not None and not s.has_only_substance_units:
        return f"[{sid}]"
    return sid


def _apply(rr, net, values: dict[str, float]) -> None:
    """Current model values (parameters, compartments, species' SBML values); NaN:
    keep the model's. Initial values (init(...)) are never set: after one is set,
    libRoadRunner's reset() re-initialises every parameter and a run takes it seconds,
    so species are set after reset() (reset() computes the initial assignments from
    the parameters' current values)."""
    for sid, v in values.items():
        if np.isfinite(v):
            rr.setValue(_selection(net, sid), float(v))


def _condition_cells(problem) -> dict[str, dict[str, float | str]]:
    """{condition: {column: a number (NaN: keep the model's value) or a parameterId}},
    read once per worker (not in libRoadRunner's timed loop)."""
    table = problem.problem.condition_df
    out: dict[str, dict] = {}
    for condition in table.index:
        cells = {}
        for column in table.columns:
            if column == "conditionName":
                continue
            cell = table.at[condition, column]
            try:
                cells[column] = float(cell) if cell is not None else np.nan
            except (TypeError, ValueError):
                cells[column] = str(cell).strip()
        out[condition] = cells
    return out


def _condition(sets_row: dict[str, float], condition: str, species: bool) -> dict[str, float]:
    """The condition's species values (`species`) or its other values ({SBML id:
    value}; parameterIds resolved in this set; NaN: keep the model's value)."""
    net = _W["net"]
    return {column: sets_row.get(cell, np.nan) if isinstance(cell, str) else cell
            for column, cell in _W["conditions"][condition].items()
            if (column in net.species_by_id) == species}


def _simulate_set(sets_row: dict[str, float], ids: list[str]) -> tuple[np.ndarray, bool]:
    """(model values of `ids` at every measurement row (rows, len(ids)), ok)."""
    rr, runs, net = _W["rr"], _W["runs"], _W["net"]
    model = {pid: v for pid, v in sets_row.items() if net.kind_of(pid) is not None}
    selections = [_selection(net, i) for i in ids]
    values = np.full((len(runs.row_run), len(ids)), np.nan)
    for k, (pre, sim) in enumerate(runs.pairs):
        rows = np.flatnonzero(runs.row_run == k)
        times = runs.row_time[rows]
        first = pre if pre is not None else sim
        rr.resetAll()  # the model's values (an earlier run's condition undone)
        _apply(rr, net, model)
        _apply(rr, net, _condition(sets_row, first, species=False))
        rr.reset()
        _apply(rr, net, _condition(sets_row, first, species=True))
        if pre is not None:  # then the simulation condition, from the steady state
            rr.simulate(0.0, STEADY_END, 2)
            _apply(rr, net, _condition(sets_row, sim, species=False))
            _apply(rr, net, _condition(sets_row, sim, species=True))
        finite = np.isfinite(times)
        if finite.any():
            grid = np.unique(np.concatenate([[0.0], times[finite]]))
            if len(grid) == 1:
                grid = np.array([0.0, 1e-12])
            result = np.asarray(rr.simulate(times=grid, selections=["time", *selections]))
            where = np.searchsorted(grid, times[finite])
            values[rows[finite]] = result[where, 1:]
        if (~finite).any():
            result = np.asarray(rr.simulate(0.0, STEADY_END, 2,
                                            selections=["time", *selections]))
            values[rows[~finite]] = result[-1, 1:]
    return values, True


def _work(chunk: dict[str, np.ndarray]) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """(seconds, nll, chi2, ok) of the chunk's sets: simulated, then scored in numpy."""
    from sbmlgpu.petab.likelihood import terms
    from sbmlgpu.petab.prepared import _column

    started = time.perf_counter()
    problem, formulas = _W["problem"], _W["formulas"]
    ids = formulas.model_ids
    n = len(next(iter(chunk.values())))
    rows = len(problem.measurements)
    simulated = {sid: np.full((rows, n), np.nan) for sid in ids}
    ok = np.zeros(n, bool)
    for j in range(n):
        try:
            values, ok[j] = _simulate_set({k: float(v[j]) for k, v in chunk.items()}, ids)
        except Exception:  # noqa: BLE001 - CVODE's failure: this set has no objective
            continue
        for q, sid in enumerate(ids):
            simulated[sid][:, j] = values[:, q]
    sim, sigma = formulas.evaluate(simulated, chunk, n)
    meas = problem.measurements
    obs = problem.problem.observable_df
    oid = meas["observableId"].to_numpy()
    nll, chi2 = terms(meas["measurement"].to_numpy(float), sim, sigma,
                      _column(obs, "observableTransformation", "lin").reindex(oid)
                      .to_numpy().astype(str),
                      _column(obs, "noiseDistribution", "normal").reindex(oid)
                      .to_numpy().astype(str))
    return time.perf_counter() - started, nll.sum(axis=0), chi2.sum(axis=0), ok


#: sets timed (after a first one) to size libRoadRunner's share of the budget
SIZING_SETS = 8


def _ready(args) -> None:
    """A worker's first set, untimed, then the barrier: a first simulation in a process
    costs several sets' time (libRoadRunner's integrator set-up, numpy's first calls),
    which the clock must not charge to the sets timed."""
    barrier, first = args
    _work(first)
    barrier.wait(timeout=600)


def _take(sets: dict[str, np.ndarray], index) -> dict[str, np.ndarray]:
    return {k: np.broadcast_to(v, (len(next(iter(sets.values()))),))[index]
            for k, v in sets.items()}


def roadrunner(yaml: Path, sets: dict[str, np.ndarray], cores: int, budget: float) -> dict:
    """libRoadRunner's objective over as many of `sets` as fit in `budget` seconds."""
    if cores <= 0:  # asked not to run it: say so, whether or not it is installed
        return {"available": False, "why": "--cores 0"}
    try:
        import roadrunner as rr_module
    except Exception as exc:  # noqa: BLE001
        return {"available": False, "why": f"{type(exc).__name__}: {exc}"}
    n = len(next(iter(sets.values())))
    _init(str(yaml))  # here, to time a few sets: how many fit in the budget
    sys.stdout.flush()
    saved = [os.dup(1), os.dup(2)]
    for fd in (1, 2):  # CVODE's messages (see _init)
        os.dup2(os.open(os.devnull, os.O_WRONLY), fd)
    try:
        # the share that fills the budget, from a rate after a first set (which costs
        # several sets' time: sized from the first three, the share ran 1-2 s of a 4 s
        # budget, and libRoadRunner's rate moved by up to 1.46x between runs)
        _work(_take(sets, np.arange(1)))
        timed = max(1, min(SIZING_SETS, n - 1))
        started = time.perf_counter()
        _work(_take(sets, np.arange(1, 1 + timed) % n))
        per = max((time.perf_counter() - started) / timed, 1e-5)
    finally:
        for fd, copy in zip((1, 2), saved):
            os.dup2(copy, fd)
            os.close(copy)
    count = int(min(n, max(cores, budget * cores / per)))
    index = np.arange(count)
    chunks = [_take(sets, index[i::cores]) for i in range(cores) if len(index[i::cores])]
    # spawn, not fork: a forked child would inherit this process's CUDA context
    context = mp.get_context("spawn")
    with context.Manager() as manager, context.Pool(len(chunks), initializer=_init,
                                                    initargs=(str(yaml),)) as pool:
        # the workers initialise (import, load the problem and the model) while the pool
        # starts: every one must be ready before the clock starts, so each waits at a
        # barrier that opens only when all of them hold a task
        barrier = manager.Barrier(len(chunks))
        pool.map(_ready, [(barrier, _take(sets, np.arange(1)))] * len(chunks), chunksize=1)
        started = time.perf_counter()
        parts = pool.map(_work, chunks, chunksize=1)
        wall = time.perf_counter() - started
    nll = np.empty(count)
    ok = np.zeros(count, bool)
    for i, (_, part_nll, _, part_ok) in enumerate(parts):
        nll[index[i::cores]] = part_nll
        ok[index[i::cores]] = part_ok
    return {"available": True, "version": rr_module.__version__, "cores": cores,
            "sets": count, "seconds": wall, "sets_per_s": count / wall,
            "failures": int((~ok).sum()), "nll": nll, "ok": ok}


# -- one problem --------------------------------------------------------------------------------
def measure(yaml: Path, n: int, device, *, cores: int = 16, budget: float = 15.0,
            repeats: int = 2, seed: int = 0) -> dict:
    """Ours and libRoadRunner's objective of the same n sets (the module doc)."""
    out, first, sets = ours(yaml, n, seed, device, repeats)
    rr = roadrunner(yaml, sets, cores, budget)
    if rr.get("available"):
        nll, ok = rr.pop("nll"), rr.pop("ok")
        count = len(nll)
        both = ok & (first.status[:count] == 0) & np.isfinite(nll) & np.isfinite(
            first.nll[:count])
        diff = np.abs(nll[both] - first.nll[:count][both]) / np.maximum(
            np.abs(first.nll[:count][both]), 1.0)
        rr["compared_sets"] = int(both.sum())
        rr["nllh_max_rel_diff"] = float(diff.max()) if both.any() else None
        rr["agreeing_sets"] = int((diff <= AGREE).sum())
        out["speedup_first"] = out["first_sets_per_s"] / rr["sets_per_s"]
        if "sets_per_s" in out:
            out["speedup_repeated"] = out["sets_per_s"] / rr["sets_per_s"]
    out["roadrunner"] = rr
    return out


def problem_folders(root: Path, names: str | None) -> list[Path]:
    """The problem folders under `root`: every one, or the comma-separated `names`."""
    found = {p.name: p for p in root.iterdir() if p.is_dir()}
    wanted = set(names.split(",")) if names else set(found)
    if wanted - set(found):
        raise LookupError(f"no problem folder {', '.join(sorted(wanted - set(found)))} in "
                          f"{root}")
    return [found[name] for name in sorted(wanted)]


def _in_child(folder: Path, args) -> dict:
    """One problem measured by this script in a child process of its own session,
    stopped (the whole session: libRoadRunner's pool too) after --problem-budget s."""
    import signal
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, str(Path(__file__).resolve()), "--root", str(folder.parent),
                   "--models", folder.name, "--n", str(args.n), "--cores", str(args.cores),
                   "--time-budget", str(args.time_budget), "--repeats", str(args.repeats),
                   "--seed", str(args.seed), "--out", tmp] + (["--cpu"] if args.cpu else [])
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True, start_new_session=True)
        written = Path(tmp) / "petab_objective.json"
        try:
            log, _ = child.communicate(timeout=args.problem_budget)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            log, _ = child.communicate()
            if not written.exists():  # (its row written, only its exit was late: kept)
                return {"error": f"stopped after {args.problem_budget:g} s "
                                 f"(--problem-budget)", "log_tail": log[-2000:]}
        if not written.exists():
            return {"error": f"the child exited with status {child.returncode}",
                    "log_tail": log[-2000:]}
        rows = json.loads(written.read_text())["problems"]
        return {k: v for k, v in rows[0].items() if k not in ("problem", "command", "date")}


def _earlier_rows(path: Path, measured: set[str]) -> list[dict]:
    """The rows an earlier run wrote to `path` of problems this run does not measure
    (each with that run's command and date where its row lacks them); none where the
    file is missing or not this benchmark's JSON."""
    try:
        earlier = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(earlier, dict) or earlier.get("benchmark") != "petab_objective":
        return []
    kept = []
    for row in earlier.get("problems", []):
        if isinstance(row, dict) and row.get("problem") not in measured:
            kept.append({key: earlier.get(key) for key in ("command", "date", "device", "n")}
                        | row)
    return kept


def _fmt(v, f) -> str:
    return "n/a" if v is None else format(v, f) if isinstance(v, (int, float)) else str(v)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    arguments = [
        ("--root", str, str(DEFAULT_ROOT), "the PEtab problems' folder"),
        ("--models", str, None, "comma-separated problem folders [default: every one]"),
        ("--n", int, 100_000, "parameter sets"),
        ("--cores", int, min(16, os.cpu_count() or 1),
         "libRoadRunner processes (0: skip libRoadRunner)"),
        ("--time-budget", float, 15.0, "seconds of libRoadRunner work per problem"),
        ("--repeats", int, 2, "calls of the prepared objective after the first"),
        ("--seed", int, 0, "seed of the sampler"),
        ("--problem-budget", float, 0.0,
         "seconds per problem, each in a child process stopped at that time (its row "
         "then says so); 0: no limit, every problem in this process"),
        ("--out", str, os.environ.get("OUT", "."), "folder of petab_objective.json")]
    for flag, kind, default, text in arguments:
        parser.add_argument(flag, type=kind, default=default, help=text)
    parser.add_argument("--cpu", action="store_true", help="the CPU path even with a GPU")
    args = parser.parse_args(argv)

    from sbmlgpu import runtime

    devices = [] if args.cpu else runtime.get_devices()
    device = [devices[0].index] if devices else "cpu"
    try:
        folders = problem_folders(Path(args.root), args.models)
    except LookupError as exc:
        parser.error(str(exc))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    command = " ".join([sys.argv[0], *(argv if argv is not None else sys.argv[1:])])
    started = datetime.now(timezone.utc).isoformat()
    report = {"benchmark": "petab_objective", "date": started,
              "device": devices[0].properties.name if devices else "cpu", "n": args.n,
              "cores": args.cores, "rtol": RTOL, "atol": ATOL, "command": command,
              "problems": []}
    earlier = _earlier_rows(out / "petab_objective.json", {f.name for f in folders})
    if earlier:
        print(f"kept {len(earlier)} row(s) of earlier runs in {out / 'petab_objective.json'}")
    print(f"{'problem':<38}{'runs':>5}{'first s':>9}{'again s':>9}{'sets/s':>11}"
          f"{'RR sets/s':>11}{'×first':>8}{'×again':>8}{'RR diff':>9}")
    for folder in folders:
        yamls = sorted(folder.glob(f"{folder.name}.yaml")) or sorted(folder.glob("*.yaml"))
        row: dict = {"problem": folder.name, "command": command, "date": started,
                     "device": report["device"], "n": args.n}
        if args.problem_budget > 0:
            row.update(_in_child(folder, args))
        else:
            try:
                row.update(measure(yamls[0], args.n, device, cores=args.cores,
                                   budget=args.time_budget, repeats=args.repeats,
                                   seed=args.seed))
            except Exception as exc:  # noqa: BLE001 - the row says what failed
                row["error"] = f"{type(exc).__name__}: {exc}"
        report["problems"].append(row)
        report_out = {**report, "problems": earlier + report["problems"]}
        (out / "petab_objective.json").write_text(json.dumps(report_out, indent=1, default=str))
        rr = row.get("roadrunner", {})
        if "error" in row:
            print(f"{folder.name:<38} {row['error'][:200]}", flush=True)
            continue
        print(f"{folder.name:<38}{row['runs']:>5}{_fmt(row['first_s'], '.2f'):>9}"
              f"{_fmt(row.get('repeated_best_s'), '.2f'):>9}"
              f"{_fmt(row.get('sets_per_s'), '.0f'):>11}"
              f"{_fmt(rr.get('sets_per_s'), '.1f'):>11}"
              f"{_fmt(row.get('speedup_first'), '.1f'):>8}"
              f"{_fmt(row.get('speedup_repeated'), '.1f'):>8}"
              f"{_fmt(rr.get('nllh_max_rel_diff'), '.1e'):>9}", flush=True)
    print(f"wrote {out / 'petab_objective.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
