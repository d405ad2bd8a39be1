"""The host's cost around the kernels of a large ode ensemble, on a fake GPU whose
kernels do nothing (issue 13): what a run costs outside the device.

Two figures per model, each the best of --repeat runs after a warm-up run (compile,
method check and every cache filled, as in an estimation loop or a repeated run):
- objective: a repeated `sbmlgpu.petab.objective(yaml)(sets)` call on N sampled sets
  (Fujita, Brannmark, Sneyd by default);
- time course: a run of N members with every time course into host memory
  (`execute(network, time_course(...), "ode")`, Bachmann and Raia by default; the sets
  and time points of benchmarks/ode_petab.py).
The device is tests/fakes.py's FakeDevice (host memory); every kernel it is given does
nothing and downloads copy nothing (the transfers are not the host's work), so
statuses are ok and steps 0: the figures are the host's work alone (parameter table,
method check key, bundling plan, gathers and uploads of the table, scheduler, result
pages, result). --profile adds the top functions (own time) of a cProfile of one run.

    .venv/bin/python benchmarks/ode_host_overhead.py --out host_overhead.json

The machine's load (os.getloadavg) and core count are in the JSON: the figures are
single-process host time and move with it.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from tests.fakes import FakeDevice, FakeDriver, FakeKernel  # noqa: E402
from tests.shared_data import MODELS  # noqa: E402
from sbmlgpu.runtime.base import Module  # noqa: E402

PETAB = MODELS / "petab-benchmark"
OBJECTIVE_MODELS = ("Fujita_SciSignal2010", "Brannmark_JBC2010", "Sneyd_PNAS2002")
TIME_COURSE_MODELS = ("Bachmann_MSB2011", "Raia_CancerResearch2011")


class NullModule(Module):
    """Any kernel asked for: one that records its launch and computes nothing."""

    def __init__(self, log: list):
        self.log = log

    def function(self, name: str):
        return FakeKernel(name, log=self.log, ms=0.0)


class NullDevice(FakeDevice):
    """A FakeDevice whose every kernel does nothing, core's transpose included (the
    fake's numpy transpose would be the device's work, timed as the host's)."""

    def compile(self, source, *, options=(), name="kernel"):
        self.compiled.append(source)
        return NullModule(self.launches)

    def download(self, buffer, out) -> None:
        """Nothing copied: the device-to-host copy is the transfer's time, not the
        host's work around the kernels (it is the same before and after)."""


def fake_gpu() -> FakeDevice:
    from sbmlgpu import runtime

    device = NullDevice(free=120 << 30)
    runtime.get_driver = lambda: FakeDriver([device])
    return device


def timed(fn, repeat: int, profile: bool) -> dict:
    fn()  # warm-up: compile, method check, caches
    seconds = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        seconds.append(time.perf_counter() - started)
    row = {"best_s": min(seconds), "runs_s": seconds}
    if profile:
        prof = cProfile.Profile()
        prof.enable()
        fn()
        prof.disable()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(30)
        row["profile_top"] = text.getvalue().splitlines()[:60]
    return row


def objective_row(name: str, n: int, args) -> dict:
    from sbmlgpu.petab import objective
    from sbmlgpu.petab.values import sampled_sets

    from petab_objective import ATOL, RTOL

    prepared = objective(PETAB / name / f"{name}.yaml", device=[0],
                         options={"rtol": RTOL, "atol": ATOL})
    sets = sampled_sets(prepared.problem, n, 0)
    return {"model": name, "kind": "objective", "n": n,
            **timed(lambda: prepared.evaluate(sets), args.repeat, args.profile)}


def time_course_row(name: str, n: int, args) -> dict:
    import sbmlgpu
    from sbmlgpu.api import execute, time_course

    from ode_petab import ATOL, POINTS, RTOL, end_time, parameter_sets, petab_problem

    problem = petab_problem(PETAB / name)
    network = sbmlgpu.load(str(problem["sbml"]))
    condition, sets, _ = parameter_sets(problem, network, n)
    times = np.linspace(0.0, end_time(problem, condition), POINTS)

    def run():
        task = time_course(times=times, parameters=sets, progress=False)
        return execute(network, task, "ode", device=[0],
                       options={"method": "auto", "rtol": RTOL, "atol": ATOL})

    return {"model": name, "kind": "time course", "n": n,
            **timed(run, args.repeat, args.profile)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--objective", nargs="*", default=list(OBJECTIVE_MODELS))
    parser.add_argument("--time-course", nargs="*", default=list(TIME_COURSE_MODELS))
    parser.add_argument("--profile", action="store_true", help="add a cProfile of one run")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    if not PETAB.is_dir():
        print(f"no PEtab benchmark models at {PETAB}")
        return 1
    fake_gpu()
    rows = []
    for kind, names, make in (("objective", args.objective, objective_row),
                              ("time course", args.time_course, time_course_row)):
        for name in names:
            if not (PETAB / name).is_dir():
                rows.append({"model": name, "kind": kind, "missing": True})
                continue
            row = make(name, args.n, args)
            rows.append(row)
            print(f"{kind:12s} {name:28s} n={args.n}: best {row['best_s']:.3f} s "
                  f"(runs {', '.join(f'{s:.3f}' for s in row['runs_s'])})", flush=True)
    report = {"benchmark": "ode_host_overhead", "engine": "fake GPU (kernels do nothing)",
              "cores": os.cpu_count(), "load_average": os.getloadavg(), "rows": rows}
    if args.out:
        args.out.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
