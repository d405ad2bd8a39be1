#!/usr/bin/env python3
"""Where a repeated call of `sbmlgpu.petab.objective` spends its time.

    python benchmarks/petab_objective_profile.py PROBLEM[,PROBLEM...] [--n 100000]
                                                 [--cpu] [--top 28]
                                                 [--option NAME=VALUE ...]

Per problem of ../shared/models/petab-benchmark: the objective prepared, a first and
a second call on --n sampled sets (compiles, the kept method's program), then a third
call measured: its wall time; for each ensemble it ran (sbmlgpu.api.execute: the
preequilibration, the time courses, the t = inf steady states) its wall time, times,
members, solver kernels' seconds, method and the profiler's spans by name; the time
outside those ensembles (the host's work on the problem: conditions, formulas,
likelihood); and cProfile's `--top` functions by cumulative and by own time (main
thread only: threads' work shows as lock waits). Printed; the lines `=== `, `  execute` and
`  outside` are the summary (docs/benchmarks.md quotes them).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.shared_data import MODELS  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("problems", help="comma-separated problem folders")
    parser.add_argument("--n", type=int, default=100_000, help="parameter sets")
    parser.add_argument("--cpu", action="store_true", help="the CPU path even with a GPU")
    parser.add_argument("--top", type=int, default=28, help="cProfile lines")
    parser.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                        help="an ode backend option for every run (repeatable), e.g. "
                             "lane_refill=false or bundling=false")
    args = parser.parse_args(argv)
    try:
        options = dict(_option(text) for text in args.option)
    except ValueError as exc:
        parser.error(str(exc))
    missing = [name for name in args.problems.split(",")
               if not (MODELS / "petab-benchmark" / name / f"{name}.yaml").is_file()]
    if missing or args.n < 1:
        parser.error(f"no problem {', '.join(missing)} in {MODELS / 'petab-benchmark'}"
                     if missing else f"--n must be at least 1, not {args.n}")

    import sbmlgpu.api as api
    from sbmlgpu import runtime
    from sbmlgpu.petab import objective
    from sbmlgpu.petab.values import sampled_sets

    devices = [] if args.cpu else runtime.get_devices()
    device = [devices[0].index] if devices else "cpu"
    ensembles: list[dict] = []
    execute = api.execute

    def measured(*a, **k):
        started = time.perf_counter()
        outcome = execute(*a, **k)
        profiler = outcome.profiler
        spans = profiler.span_seconds() if profiler else {}
        ensembles.append({
            "wall": time.perf_counter() - started, "times": len(a[1].times),
            "members": int(outcome.result.status.shape[0]),
            "kernels_s": sum(r.ms for r in (profiler.records if profiler else [])) / 1e3,
            "method": outcome.result.metadata.get("method"),
            "lanes": str(outcome.result.metadata.get("lanes", "")).split(":")[0],
            "steps_mean": outcome.result.metadata.get("steps_mean"),
            "steps_max": outcome.result.metadata.get("steps_max"),
            "second_pass_members": outcome.result.metadata.get("second_pass_members"),
            "kernel_local_bytes": outcome.result.metadata.get("kernel_local_bytes"),
            "grid": [list(r.grid) for r in (profiler.records if profiler else [])
                     if r.kernel.startswith("sbmlgpu_ode_")][:1],
            "bundling": outcome.result.metadata.get("bundling"),
            # what the refill rule estimated (docs/ode.md): lanes, and the gain of the order
            **{k: v for k, v in (outcome.result.metadata.get("bundling_info") or {}).items()
               if k.startswith("refill_")},
            "spans": {k: round(v, 4) for k, v in spans.items()}})
        return outcome

    api.execute = measured  # sbmlgpu.petab.simulate imports it at each call
    try:
        for name in args.problems.split(","):
            yaml = MODELS / "petab-benchmark" / name / f"{name}.yaml"
            prepared = objective(yaml, device=device,
                                 options={"rtol": 1e-6, "atol": 1e-12, **options})
            sets = sampled_sets(prepared.problem, args.n, 0)
            started = time.perf_counter()
            prepared.evaluate(sets)
            first = time.perf_counter() - started
            prepared.evaluate(sets)  # the kept method's program
            ensembles.clear()
            profile = cProfile.Profile()
            started = time.perf_counter()
            profile.enable()
            result = prepared.evaluate(sets)
            profile.disable()
            wall = time.perf_counter() - started
            print(f"=== {name}: first {first:.2f}s repeated {wall:.3f}s method {result.method} "
                  f"runs {len(prepared.runs.pairs)}")
            for ensemble in ensembles:
                print("  execute", json.dumps(ensemble))
            print(f"  outside execute: {wall - sum(e['wall'] for e in ensembles):.3f}s")
            for order in ("cumulative", "tottime"):  # the call chain, then who spends
                text = io.StringIO()
                pstats.Stats(profile, stream=text).sort_stats(order).print_stats(args.top)
                print(text.getvalue(), flush=True)
    finally:
        api.execute = execute
    return 0


def _option(text: str) -> tuple[str, object]:
    """NAME=VALUE: VALUE as JSON where it reads as JSON (true, 3, 1e-3), else the text."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise ValueError(f"--option {text!r}: write NAME=VALUE")
    try:
        return name.replace("-", "_"), json.loads(value)
    except json.JSONDecodeError:
        return name.replace("-", "_"), value


if __name__ == "__main__":
    sys.exit(main())
