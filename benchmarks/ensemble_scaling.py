#!/usr/bin/env python3
"""Ensembles on several GPUs of one host (issue 16): strong and weak scaling of ODE
and SSA ensembles, and whether the results stay the same member for member.

    python benchmarks/ensemble_scaling.py [--gpus 1 2 4] [--models lorenz petab ssa]
        [--members N | MODEL=N ...] [--repeats R] [--quick] [--out DIR] [--profile DIR]
    python benchmarks/ensemble_scaling.py --cpu-smoke      # no GPU: tiny, on the CPU path

Cases (--models):
- lorenz: sbml_models/lorenz.xml as benchmarks/ode_lorenz.py sets it up: rho =
  linspace(0, 21, M), t in [0, 1], endpoints saved; the ode backend, rk4 dt = 1e-3,
  double. M = 10^7 by default.
- petab: one PEtab problem (--petab-model, default Boehm_JProteomeRes2014) as
  benchmarks/ode_petab.py runs it (its helpers, imported): M parameter sets sampled
  within the PEtab bounds (seed 0), its first condition, 51 output times,
  rtol 1e-6, atol 1e-12, --method auto. M = 10^6 by default (every time course of
  every member comes back: 3.3 GB at 10^6 members for Boehm).
- ssa: sbml_models/decay_dimerisation.xml on the ssa backend, t in [0, 10], 11
  points, seed 1, double. M = 10^7 by default. Every trajectory comes back (2.6 GB
  at 10^7) unless they would not fit (--ssa-output auto: the reference run and the
  largest run together need more than half the available host memory), then the
  on-GPU summary (mean, sd, quantiles) is compared instead.

Runs, per case, for every GPU count N of --gpus (default 1, 2, ... every GPU of the
machine; 1 is always run: it is the reference), each through the public API,
`sbmlgpu.api.execute(network, time_course(...), backend, device=[0, ..., N-1])`
(what `sbmlgpu.run(..., device=[0, 1])` and `--devices 0 1` do: the scheduler
splits the batches over those devices):
- a warm-up, the strong run's own call, untimed: it compiles, loads the modules on
  every device and faults in the buffers, so the timed runs measure the ensemble;
- strong scaling: the same M members on N GPUs;
- weak scaling (N > 1): N x M members on N GPUs. ODE: the M-member table repeated N
  times, so that every GPU's share is the 1-GPU run's work and every copy must
  equal the 1-GPU result; SSA: N x M realisations of the same seed, of which the
  first M must be the 1-GPU run's (realisation i is keyed by (seed, i)).
Timing: `seconds` is the wall clock of the call (building the task and execute(),
as `sbmlgpu.run` would), the median of --repeats calls; `per_device` holds each
device's solver-kernel seconds and launches (CUDA events, the profiler's records)
and the batches and members it took (the scheduler's "batch" spans; ODE pilots
and second passes included); `kernel_s` is the slowest device's kernel seconds.
members/s = members / seconds; speed-up = (members/s on N) / (members/s on 1), so
T1 / TN for strong and N T1 / TN for weak scaling; efficiency = speed-up / N
(strong: T1 / (N TN)); kernel_speedup the same from kernel_s.

Correctness: every run is compared with the 1-GPU run member for member (time
courses and statuses, bit for bit, NaN equal to NaN): `identical`,
`members_compared`, `members_differing`, `max_abs_diff`. What the backends
promise is in the JSON (`cases[*].identity`): the ode backend integrates a member
from its parameters and member number alone; the ssa backend draws realisation i
from Philox keyed by (seed, i), "the same whatever the batch, the block size, the
GPU or the number of GPUs" (plugins/ssa/README.md; tests/test_ssa_gpu.py). On the
summary path only the statuses and the firing total are promised: the statistics
merge per-batch sums, whose order follows the batches, so they may differ in the
last bits, and their largest difference is reported. A broken promise is printed,
kept in the JSON (`promise_kept` false) and makes the exit status 1.

Output: DIR/ensemble_scaling.json (--out, else $OUT, else benchmarks/results):
`machine`, `commit`, `modified`, `command`, `settings`, `cases`, `rows` (one per
case, scaling and GPU count: case, model, backend, scaling, gpus, devices, members,
seconds, seconds_each, members_per_s, speedup, efficiency, kernel_s,
kernel_speedup (with kernel times), per_device, method, failed, identical,
members_compared, members_differing, max_abs_diff, promise_kept), and a table
printed at the end.

Without a GPU the script exits with status 2 and one line saying so, unless
--cpu-smoke (the same code path on the CPU with tiny ensembles and GPU counts 1 and
2 that name runs, not devices: the host is one worker) or --cpu (the CPU path at
the sizes asked).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ssa_common import MODELS, arguments, commit, describe, table, write_json

from ode_petab import ATOL, DEFAULT_ROOT, POINTS, RTOL, end_time, parameter_sets, petab_problem

#: ensemble sizes (M) by --quick / default / --cpu-smoke
SIZES = {"full": {"lorenz": 10**7, "petab": 10**6, "ssa": 10**7},
         "quick": {"lorenz": 1 << 20, "petab": 1 << 16, "ssa": 1 << 18},
         "smoke": {"lorenz": 64, "petab": 16, "ssa": 32}}
CASES = tuple(SIZES["full"])
SSA_SEED = 1
#: members compared at a time: no temporary of more than a few hundred MB
CHUNK = 1 << 18
ODE_IDENTITY = ("the ode backend integrates each member from its parameters and member "
                "number alone: identical time courses whatever the batches and GPUs")
SSA_IDENTITY = ("realisation i draws Philox4x32-10 keyed by (seed, i): identical "
                "trajectories whatever the batches and GPUs (plugins/ssa/README.md)")
SSA_SUMMARY_IDENTITY = ("summary: identical statuses and firing total promised; the "
                        "statistics merge per-batch sums in the batches' order, equal up "
                        "to rounding (their largest difference is reported)")


@dataclass
class Case:
    """One ensemble to scale: the model, its call, its M-member table."""

    name: str
    model: str
    backend: str
    network: object
    times: np.ndarray
    options: dict
    members: int  # M, the strong-scaling ensemble
    table: dict | None  # M parameter sets; None: M realisations of `seed` (SSA)
    identity: str
    seed: int = 0
    summary: bool = False
    kernel_prefix: str = "sbmlgpu_ode_"

    def parameters(self, copies: int) -> dict | None:
        """The table repeated `copies` times (built before the clock starts)."""
        if self.table is None:
            return None
        return {k: np.tile(v, copies) for k, v in self.table.items()}

    def describe(self) -> dict:
        return {"model": self.model, "backend": self.backend, "options": self.options,
                "members": self.members, "times": self.times.tolist(), "seed": self.seed,
                "output": "summary" if self.summary else "time courses",
                "varied": sorted(self.table) if self.table else [],
                "weak_table": ("the M-member table repeated N times" if self.table
                               else "N x M realisations of the same seed"),
                "identity": self.identity}


# -- the cases -------------------------------------------------------------------------------
def lorenz_case(members: int) -> Case:
    from sbmlgpu import load

    return Case("lorenz", "sbml_models/lorenz.xml", "ode", load(MODELS / "lorenz.xml"),
                np.array([0.0, 1.0]), {"method": "rk4", "dt": 1e-3, "precision": "double"},
                members, {"rho": np.linspace(0.0, 21.0, members)}, ODE_IDENTITY)


def petab_case(members: int, folder: Path) -> Case:
    from sbmlgpu import load

    problem = petab_problem(folder)
    network = load(str(problem["sbml"]))
    condition, sets, _ = parameter_sets(problem, network, members)
    times = np.linspace(0.0, end_time(problem, condition), POINTS)
    return Case("petab", folder.name, "ode", network, times,
                {"method": "auto", "rtol": RTOL, "atol": ATOL}, members, sets, ODE_IDENTITY)


def ssa_case(members: int, summary: bool) -> Case:
    from sbmlgpu import load

    return Case("ssa", "sbml_models/decay_dimerisation.xml", "ssa",
                load(MODELS / "decay_dimerisation.xml"), np.linspace(0.0, 10.0, 11),
                {"precision": "double"}, members, None,
                SSA_SUMMARY_IDENTITY if summary else SSA_IDENTITY, seed=SSA_SEED,
                summary=summary, kernel_prefix="ssa_")


def ssa_summary_needed(choice: str, members: int, most_gpus: int, times: int,
                       outputs: int) -> bool:
    """--ssa-output: trajectories unless the reference and the largest (weak) run
    together would take more than half the host memory available now."""
    if choice != "auto":
        return choice == "summary"
    from sbmlgpu.runtime.host_memory import available_memory

    need = (1 + most_gpus) * members * times * outputs * 8
    return need > available_memory() / 2


def make_case(name: str, members: int, args, most_gpus: int) -> Case:
    if name == "lorenz":
        return lorenz_case(members)
    if name == "petab":
        return petab_case(members, Path(args.petab_root) / args.petab_model)
    return ssa_case(members, ssa_summary_needed(args.ssa_output, members, most_gpus,
                                                times=11, outputs=3))


# -- one run ---------------------------------------------------------------------------------
def call(case: Case, copies: int, device, repeats: int):
    """(outcome of the last call, wall seconds of each call) of `repeats` calls of
    copies x M members."""
    from sbmlgpu.api import execute, time_course

    parameters = case.parameters(copies)
    seconds, outcome = [], None
    for _ in range(repeats):
        outcome = None  # drop the last result first: two of 10^7 members need not coexist
        started = time.perf_counter()
        task = time_course(times=case.times, parameters=parameters, n=case.members * copies,
                           seed=case.seed, summary=case.summary, progress=False)
        outcome = execute(case.network, task, case.backend, options=case.options,
                          device=device)
        seconds.append(time.perf_counter() - started)
    return outcome, seconds


def per_device(profiler, prefix: str) -> dict:
    """{device index: kernel_s, launches, batches, members} of one run's profile."""
    rows: dict = {}

    def row(index):
        return rows.setdefault(index, {"kernel_s": 0.0, "launches": 0, "batches": 0,
                                       "members": 0})

    for r in profiler.records if profiler else ():
        if r.kernel.startswith(prefix):
            row(r.device_index)["kernel_s"] += r.ms / 1e3
            row(r.device_index)["launches"] += 1
    for span in profiler.spans if profiler else ():
        if span.name == "batch" and span.device_index is not None:
            row(span.device_index)["batches"] += 1
            row(span.device_index)["members"] += span.meta.get("stop", 0) - span.meta.get(
                "start", 0)
    return {str(k): v for k, v in sorted(rows.items())}


# -- correctness -----------------------------------------------------------------------------
def compare(reference, result, copies: int) -> dict:
    """`result` against the 1-GPU `reference` member for member: `copies` blocks of
    the reference's size (a weak ODE run of the repeated table), else its first."""
    if reference.data is None:
        return compare_summaries(reference, result)
    m = len(reference.status)
    ref_data = np.asarray(reference.data).reshape(m, -1)
    data = np.asarray(result.data).reshape(len(result.status), -1)
    differing, worst = 0, 0.0
    for offset in range(0, copies * m, m):
        for start in range(0, m, CHUNK):
            stop = min(start + CHUNK, m)
            a, b = ref_data[start:stop], data[offset + start:offset + stop]
            same = ((a == b) | (np.isnan(a) & np.isnan(b))).all(axis=1)
            same &= reference.status[start:stop] == result.status[offset + start:offset + stop]
            if not same.all():
                differing += int((~same).sum())
                worst = max(worst, largest_gap(a, b))
    return {"identical": differing == 0, "members_compared": copies * m,
            "members_differing": differing, "max_abs_diff": worst, "promise_kept": differing == 0}


def largest_gap(a: np.ndarray, b: np.ndarray) -> float:
    gap = np.abs(np.asarray(a, float) - np.asarray(b, float))
    return float(np.max(gap, initial=0.0, where=~np.isnan(gap)))


def compare_summaries(reference, result) -> dict:
    """Summary runs: statuses (and the firing total) must match; the statistics of a
    strong run are compared too (a weak run's are over other members)."""
    m = len(reference.status)
    statuses = bool(np.array_equal(reference.status, result.status[:m]))
    row = {"members_compared": m, "statuses_identical": statuses}
    if len(result.status) != m:
        return {**row, "identical": statuses, "max_abs_diff": None, "promise_kept": statuses,
                "compared": "statuses of members 0..M-1 (the statistics cover other members)"}
    ours, theirs = (np.concatenate([s.mean.ravel(), s.sd.ravel(), s.quantile_values.ravel()])
                    for s in (reference.summary, result.summary))
    firings = reference.metadata.get("firings") == result.metadata.get("firings")
    exact = bool(np.array_equal(ours, theirs, equal_nan=True))
    return {**row, "identical": exact and statuses and firings, "firings_identical": firings,
            "max_abs_diff": largest_gap(ours, theirs), "promise_kept": statuses and firings}


# -- the scaling runs ------------------------------------------------------------------------
def measure(case: Case, gpus: int, copies: int, device, repeats: int, reference,
            profile_dir: str | None = None):
    """(row, result) of one timed run on `gpus` GPUs; compared with `reference`
    (None: this is the reference). With `profile_dir`, the last call's profile (every
    launch and host phase; sbmlgpu.profile.Profiler.from_json reads it) is written there."""
    outcome, seconds = call(case, copies, device, repeats)
    if profile_dir and outcome.profiler is not None:
        Path(profile_dir).mkdir(parents=True, exist_ok=True)
        scaling = "weak" if copies > 1 else "strong"
        outcome.profiler.to_json(Path(profile_dir) / f"{case.name}-{scaling}-{gpus}gpu.json")
    result, members = outcome.result, case.members * copies
    devices = per_device(outcome.profiler, case.kernel_prefix)
    kernel_s = max((d["kernel_s"] for d in devices.values()), default=0.0) or None
    median = statistics.median(seconds)
    row = {"case": case.name, "model": case.model, "backend": case.backend,
           "scaling": "weak" if copies > 1 else "strong", "gpus": gpus,
           "devices": result.metadata.get("device"), "members": members, "seconds": median,
           "seconds_each": seconds, "members_per_s": members / median, "kernel_s": kernel_s,
           "per_device": devices, "method": result.metadata.get("method"),
           "failed": int(result.n_failed)}
    if reference is None:
        row.update(identical=True, members_compared=0, members_differing=0, max_abs_diff=0.0,
                   promise_kept=True, compared="itself: the reference run")
    else:
        row.update(compare(reference, result, copies if case.table is not None else 1))
    return row, result


def add_scaling(row: dict, base: dict) -> None:
    """Speed-up and efficiency against the 1-GPU run (module doc)."""
    row["speedup"] = row["members_per_s"] / base["members_per_s"]
    row["efficiency"] = row["speedup"] / row["gpus"]
    if row["kernel_s"] and base["kernel_s"]:
        row["kernel_speedup"] = (row["members"] / row["kernel_s"]) / (
            base["members"] / base["kernel_s"])


def scale(case: Case, counts: list[int], device_for, repeats: int,
          profile_dir: str | None = None) -> list[dict]:
    """Every run of one case: per GPU count a warm-up, the strong run and (N > 1) the
    weak run; the 1-GPU run is the reference of all."""
    rows, base, reference = [], None, None
    for gpus in counts:
        device = device_for(gpus)
        for copies in ((1,) if gpus == 1 else (1, gpus)):
            if copies == 1:  # the warm-up: the strong run's own call
                print(f"{case.name}: warm-up on {gpus} GPU(s)", flush=True)
                call(case, 1, device, 1)
            row, result = measure(case, gpus, copies, device, repeats, reference,
                                  profile_dir)
            if gpus == 1:
                base, reference = row, result
            else:
                del result  # (10^7 members: keep only the reference)
            add_scaling(row, base)
            rows.append(row)
            print(progress_line(row), flush=True)
    return rows


def progress_line(row: dict) -> str:
    diff = "" if row["identical"] else f", max |diff| {row['max_abs_diff']}"
    kernel = f", kernel {row['kernel_s']:.3f} s" if row["kernel_s"] else ""
    return (f"{row['case']} {row['scaling']} {row['gpus']} GPU(s): {row['members']:,} members "
            f"in {row['seconds']:.3f} s ({row['members_per_s']:.4g}/s{kernel}), speed-up "
            f"{row['speedup']:.2f}, efficiency {row['efficiency']:.2f}, identical "
            f"{row['identical']}{diff}" + ("" if row["promise_kept"] else "  PROMISE BROKEN"))


# -- command line ----------------------------------------------------------------------------
def ensemble_sizes(items: list[str] | None, mode: str) -> dict[str, int]:
    """--members: N for every case, or CASE=N items, over the mode's defaults."""
    sizes = dict(SIZES[mode])
    for item in items or ():
        name, _, value = item.rpartition("=")
        names = [name] if name else list(CASES)
        if name and name not in CASES or not value.isdigit() or int(value) < 1:
            raise ValueError(f"--members {item!r}: use N or CASE=N with CASE in "
                             f"{', '.join(CASES)} and N >= 1")
        sizes.update({n: int(value) for n in names})
    return sizes


def gpu_counts(asked: list[int] | None, available: int, cpu: bool) -> list[int]:
    """The GPU counts to run: --gpus (1 added: the reference) or 1 .. every GPU;
    on the CPU path 1 and 2 unless asked (they name runs: the host is one worker)."""
    counts = sorted(set(asked or (range(1, available + 1) if not cpu else (1, 2))) | {1})
    if counts[0] < 1 or not cpu and counts[-1] > available:
        raise ValueError(f"--gpus {' '.join(map(str, asked or []))}: this machine has "
                         f"{available} GPU(s)")
    return counts


def quiet_gpus() -> list:
    """Every GPU, without the runtime's "running on the CPU path" warning where there
    is none: the script then says so itself, in one line, and stops."""
    from sbmlgpu import runtime

    runtime_log = logging.getLogger("sbmlgpu.runtime")
    level = runtime_log.level
    runtime_log.setLevel(logging.ERROR)
    try:
        return runtime.get_devices()
    finally:
        runtime_log.setLevel(level)


def parser() -> argparse.ArgumentParser:
    p = arguments(__doc__)  # --out, --cpu, --quick
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("--cpu-smoke", action="store_true",
                   help="no GPU needed: the same code path on the CPU, tiny ensembles")
    p.add_argument("--gpus", type=int, nargs="+", help="GPU counts [default: 1 .. all]")
    p.add_argument("--models", nargs="+", choices=CASES, default=list(CASES))
    p.add_argument("--members", nargs="+", metavar="N|CASE=N",
                   help="strong-scaling ensemble sizes [default: lorenz, ssa 10^7; "
                        "petab 10^6; --quick: 2^20, 2^18, 2^16]")
    p.add_argument("--repeats", type=int, default=1, help="timed calls per run (median)")
    p.add_argument("--petab-model", default="Boehm_JProteomeRes2014")
    p.add_argument("--petab-root", default=str(DEFAULT_ROOT))
    p.add_argument("--profile", metavar="DIR",
                   help="write each timed run's profile (launches and host phases) here")
    p.add_argument("--ssa-output", choices=("auto", "trajectories", "summary"),
                   default="auto")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = parser()
    args = p.parse_args(argv)
    cpu = args.cpu or args.cpu_smoke
    from sbmlgpu import runtime

    devices = [] if cpu else quiet_gpus()
    if not cpu and not devices:
        print(f"no GPU ({runtime.no_gpu_reason()}): nothing to scale; --cpu-smoke runs the "
              "same code path on the CPU with tiny ensembles", file=sys.stderr)
        return 2
    try:
        counts = gpu_counts(args.gpus, len(devices), cpu)
        sizes = ensemble_sizes(args.members, "smoke" if args.cpu_smoke else
                               "quick" if args.quick else "full")
    except ValueError as exc:
        p.error(str(exc))
    if args.repeats < 1:
        p.error("--repeats must be at least 1")

    def device_for(gpus: int):
        return "cpu" if cpu else list(range(gpus))

    machine = {**describe(devices[0] if devices else None),
               "gpus": [d.properties.name for d in devices]}
    report = {"benchmark": "ensemble_scaling", "machine": machine, **commit(),
              "command": [sys.argv[0], *argv],
              "settings": {"gpu_counts": counts, "repeats": args.repeats,
                           "path": "cpu" if cpu else "gpu", "cpu_smoke": args.cpu_smoke,
                           "quick": args.quick},
              "cases": {}, "rows": []}
    if cpu:
        print("CPU path: every run on the host (one worker); the GPU counts only name "
              "the runs", flush=True)
    for name in args.models:
        print(f"{name}: setting up {sizes[name]:,} members", flush=True)
        case = make_case(name, sizes[name], args, counts[-1])
        report["cases"][name] = case.describe()
        report["rows"] += scale(case, counts, device_for, args.repeats, args.profile)
        write_json(args.out, "ensemble_scaling", report)  # after every case

    print()
    print(table(report["rows"], [
        ("case", "case", "s"), ("scaling", "scaling", "s"), ("GPUs", "gpus", "d"),
        ("members", "members", ",d"), ("seconds", "seconds", ".3f"),
        ("members/s", "members_per_s", ".4g"), ("speed-up", "speedup", ".2f"),
        ("efficiency", "efficiency", ".2f"), ("kernel s", "kernel_s", ".3f"),
        ("kernel speed-up", "kernel_speedup", ".2f"), ("identical", "identical", ""),
        ("max |diff|", "max_abs_diff", ".3g")]))
    broken = [r for r in report["rows"] if not r["promise_kept"]]
    for r in broken:
        print(f"NOT IDENTICAL: {r['case']} {r['scaling']} {r['gpus']} GPU(s): "
              f"{r.get('members_differing', 'some')} of {r['members_compared']} members differ "
              f"(max |diff| {r['max_abs_diff']})", flush=True)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
