#!/usr/bin/env python3
"""Interval parameter estimation (SIVIA) on the thesis's cases, against Sharma's K20
times (../shared/BENCHMARKS.md: LV 0.85 s, SEIR-2P 12.6 s, SEIR-3P 26.5 s; target
>= 50x on one GPU at the same epsilon).

    python benchmarks/interval_sivia.py [--cases lv seir2 seir3] [--kernels K ...]
        [--repeat 3] [--with-cpu] [--cpu] [--quick] [--points N] [--epsilon E]
        [--data DIR] [--out DIR] [--order 6 --batch 0 ... (the interval backend's options)]

The data and the cases come from benchmarks/interval_data.py (written into
OUT/interval_data, or read from --data DIR). Every case runs as
`sbmlgpu.estimate(model, backend="interval", data=..., unknown=..., epsilon=...,
options={...}, device=...)`: first a warm-up that evaluates one box (it compiles
the kernel and keeps its source in OUT/interval_sources/CASE), then --repeat timed
runs. --kernels: the values of the backend's option `kernel` where it has one
(default: all of them); without that option the backend's one kernel. --with-cpu:
the same case, once, on the host engine on every core (OpenMP), and the ratio of
the two times. --cpu: the host engine only. --quick: fewer data points (100) and a
larger epsilon (a smoke test; no ratio to the thesis is computed then, nor with
--points or --epsilon).

One JSON per case, OUT/interval_sivia_CASE.json: `machine` (date, host, cores, GPU),
`commit`, `command`, `case` (model, data, unknowns, epsilon, truth, the thesis's
times), `settings` (quick, points, epsilon, repeat, options), `rows` (one per
kernel, then the CPU row) and `cpu_over_gpu` ({kernel: ratio} with --with-cpu).
A row has the keys ROW_KEYS:

- engine (gpu / native), kernel, device; wall_s (the median of the timed
  `estimate` calls, end to end), wall_seconds (each), run_s (the median of the
  search's own time, the paving's statistics `seconds`)
- the paving's statistics of the last run: boxes_evaluated, boxes_feasible,
  boxes_undetermined, boxes_rejected, boxes_integration_failed, boxes_per_second,
  kernel_seconds, launches, taylor_steps, data_enclosures (enclosures evaluated at
  data times inside steps: one per time checked alone, one per span), complete,
  stopped_by; volume_feasible,
  volume_undetermined
- truth_verdict: where the parameters the data were made with fall (feasible or
  undetermined; `rejected` would be a soundness failure and is printed as one)
- thesis_k20_s, speedup_vs_k20 (thesis_k20_s / wall_s; None unless the case runs
  at the thesis's data and epsilon), thesis_cpu8_s
- registers, local_bytes, shared_bytes, max_threads_per_block: the compiled GPU
  kernel's attributes (CUDA's NUM_REGS, LOCAL_SIZE_BYTES, ... through PyCUDA), one
  entry per kernel of the source in `kernel_attributes`; None on the host.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import re
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from ssa_common import (arguments, commit, describe, gpu_device, table,  # noqa: E402
                        write_json)

import interval_data  # noqa: E402
import sbmlgpu  # noqa: E402
from sbmlgpu.cli_options import add_backend_options, collected_options  # noqa: E402
from sbmlgpu.plugins.interval.backend import IntervalBackend  # noqa: E402
from sbmlgpu.plugins.interval.options import IntervalOptions  # noqa: E402

QUICK_POINTS = 100
QUICK_EPSILON = {"lv": 1e-3, "seir2": 1e-2, "seir3": 2e-2}
ROW_KEYS = ("case", "engine", "kernel", "device", "epsilon", "times", "repeat", "wall_s",
            "wall_seconds", "run_s", "boxes_evaluated", "boxes_feasible",
            "boxes_undetermined", "boxes_rejected", "boxes_integration_failed",
            "boxes_per_second", "kernel_seconds", "launches", "taylor_steps",
            "data_enclosures", "complete",
            "stopped_by", "volume_feasible", "volume_undetermined", "truth_verdict",
            "thesis_k20_s", "speedup_vs_k20", "thesis_cpu8_s", "registers", "local_bytes",
            "shared_bytes", "max_threads_per_block", "kernel_attributes")
STATISTICS = ("boxes_evaluated", "boxes_feasible", "boxes_undetermined", "boxes_rejected",
              "boxes_integration_failed", "boxes_per_second", "kernel_seconds", "launches",
              "taylor_steps", "data_enclosures", "complete", "stopped_by")
KERNEL_OPTION = "kernel"


def kernel_choices() -> list[str] | None:
    """The values of the backend's option `kernel`, or None where it has no such option."""
    for f in dataclasses.fields(IntervalOptions):
        if f.name == KERNEL_OPTION:
            return list(f.metadata.get("choices") or [f.default])
    return None


@contextmanager
def quiet(logger: str):
    """The warm-up's one-box search warns that it stopped early: by design here."""
    log = logging.getLogger(logger)
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def estimate(case: dict, epsilon: float, options: dict, device, keep_source=None):
    started = time.perf_counter()
    paving = sbmlgpu.estimate(case["model"], backend="interval", data=case["data"],
                              unknown=case["unknown"], epsilon=epsilon, options=options,
                              device="cpu" if device is None else device.index,
                              keep_source=keep_source, progress=False)
    return paving, time.perf_counter() - started


def kernel_attributes(device, folder: Path) -> dict[str, dict]:
    """{kernel: NUM_REGS, LOCAL_SIZE_BYTES, ...} of every `extern "C" __global__` entry
    of the sources the warm-up kept, compiled as the engine compiles them (the compile
    cache answers: the run compiled the same text)."""
    from sbmlgpu.plugins.interval import engines

    out = {}
    for path in sorted(folder.glob("*.cu")):
        text = path.read_text(encoding="utf-8")
        names = re.findall(r'extern\s+"C"\s+__global__\s+(?:__launch_bounds__\([^)]*\)\s+)?'
                           r'void\s+(\w+)\s*\(', text)
        if not names:
            continue
        module = device.compile(text, name=path.name,
                                options=getattr(engines, "NVCC_OPTIONS", ()))
        for name in names:
            a = module.function(name).attributes
            out[name] = {"registers": a.registers, "local_bytes": a.local_bytes,
                         "shared_bytes": a.shared_bytes,
                         "max_threads_per_block": a.max_threads_per_block}
    return out


def measure(case: dict, kernel: str | None, device, settings: dict, out: Path) -> dict:
    """One engine (and kernel) on one case: warm-up, then settings['repeat'] timed runs."""
    options = dict(settings["options"])
    if kernel is not None:
        options[KERNEL_OPTION] = kernel
    label = kernel or "default"
    sources = out / "interval_sources" / f"{case['name']}-{label}-{'gpu' if device else 'cpu'}"
    with quiet("sbmlgpu.interval"):
        estimate(case, settings["epsilon"], {**options, "max_boxes": 1}, device, sources)
    runs = [estimate(case, settings["epsilon"], options, device)
            for _ in range(settings["repeat"])]
    paving = runs[-1][0]
    stats = paving.statistics
    walls = [wall for _, wall in runs]
    wall = statistics.median(walls)
    truth = [case["truth"][u] for u in paving.ids]
    row = {"case": case["name"], "engine": paving.metadata.get("engine"),
           "kernel": kernel or paving.metadata.get("kernel"),
           "device": paving.metadata.get("device"), "epsilon": settings["epsilon"],
           "times": settings["times"], "repeat": settings["repeat"], "wall_s": wall,
           "wall_seconds": walls,
           "run_s": statistics.median(p.statistics["seconds"] for p, _ in runs),
           **{k: stats.get(k) for k in STATISTICS},
           "volume_feasible": paving.volumes["feasible"],
           "volume_undetermined": paving.volumes["undetermined"],
           "truth_verdict": paving.contains(truth),
           "thesis_k20_s": case["thesis_k20_seconds"],
           "speedup_vs_k20": (case["thesis_k20_seconds"] / wall
                              if settings["thesis_settings"] else None),
           "thesis_cpu8_s": case["thesis_cpu8_seconds"]}
    attributes = kernel_attributes(device, sources) if device is not None else {}
    first = next(iter(attributes.values()), {})
    row.update({k: first.get(k) for k in ("registers", "local_bytes", "shared_bytes",
                                          "max_threads_per_block")},
               kernel_attributes=attributes or None)
    if row["truth_verdict"] == "rejected":
        print(f"SOUNDNESS FAILURE: {case['name']}: the true parameters {truth} were rejected",
              file=sys.stderr, flush=True)
    print(f"{case['name']} [{row['engine']}, {row['kernel']}]: {wall:.3f} s, "
          f"{row['boxes_evaluated']} boxes ({row['boxes_per_second']:.4g}/s), truth "
          f"{row['truth_verdict']}", flush=True)
    return row


def case_settings(case: dict, args, options: dict) -> dict:
    epsilon = args.epsilon or (QUICK_EPSILON[case["name"]] if args.quick else case["epsilon"])
    full = interval_data.DATASETS[case["dataset"]].points
    return {"quick": args.quick, "times": case["times"], "epsilon": epsilon,
            "repeat": args.repeat, "options": options,
            # the ratio to the thesis only where its data and epsilon are used
            "thesis_settings": case["times"] == full and epsilon == case["epsilon"]}


def parser():
    p = arguments(__doc__)
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("--cases", nargs="+", default=list(interval_data.CASES),
                   choices=list(interval_data.CASES))
    p.add_argument("--kernels", nargs="+", default=None,
                   help="values of the interval backend's option `kernel` to compare "
                        "(default: all it offers; without that option: its one kernel)")
    p.add_argument("--repeat", type=int, default=3, help="timed runs per case and kernel")
    p.add_argument("--with-cpu", action="store_true",
                   help="also run each case once on the host engine (every core)")
    p.add_argument("--points", type=int, default=None,
                   help="measurement times per dataset (default: the thesis's; "
                        f"--quick: {QUICK_POINTS})")
    p.add_argument("--epsilon", type=float, default=None, help="epsilon for every case")
    p.add_argument("--data", default=None,
                   help="a folder written by interval_data.py (default: made in OUT)")
    add_backend_options(p, IntervalBackend())
    return p


def main(argv=None) -> None:
    args = parser().parse_args(argv)
    if args.repeat < 1:
        sys.exit("--repeat must be at least 1")
    if args.epsilon is not None and not args.epsilon > 0:
        sys.exit("--epsilon must be positive")
    options = collected_options(args)
    IntervalOptions.from_mapping(options)  # a bad option fails here, before any run
    choices = kernel_choices()
    if args.kernels and choices is None:
        sys.exit(f"the interval backend has no option {KERNEL_OPTION!r}: leave out --kernels")
    device = gpu_device(args.cpu)
    # the host engine runs one loop whatever the option says: one row, not one a kernel
    kernels = args.kernels or (choices if device is not None else None) or [None]
    out = Path(args.out)
    data = Path(args.data) if args.data else out / "interval_data"
    if args.data is None:
        points = args.points or (QUICK_POINTS if args.quick else None)
        interval_data.build_cases(data, args.cases, points)
    cases = {c["name"]: c for c in interval_data.load_cases(data)}
    missing = [c for c in args.cases if c not in cases]
    if missing:
        sys.exit(f"{data}: no case {', '.join(missing)} (write it with interval_data.py)")
    if args.with_cpu and device is None:
        print("--with-cpu: every run is on the host engine already (--cpu or no GPU)")
    machine = {**describe(device), "omp_num_threads": os.environ.get("OMP_NUM_THREADS")}
    header = {"machine": machine, **commit(), "command": [sys.executable, *sys.argv]}
    rows = []
    for name in args.cases:
        case = cases[name]
        settings = case_settings(case, args, options)
        case_rows = [measure(case, k, device, settings, out) for k in kernels]
        ratios = None
        if args.with_cpu and device is not None:
            cpu = measure(case, None, None, {**settings, "repeat": 1}, out)
            ratios = {r["kernel"]: cpu["wall_s"] / r["wall_s"] for r in case_rows}
            case_rows.append(cpu)
        rows += case_rows
        # after each case: a long run cut short keeps what it measured
        write_json(args.out, f"interval_sivia_{name}",
                   {**header, "case": case, "settings": settings, "rows": case_rows,
                    "cpu_over_gpu": ratios})
    print()
    print(table(rows, [("case", "case", "s"), ("engine", "engine", "s"),
                       ("kernel", "kernel", "s"), ("eps", "epsilon", "g"),
                       ("wall s", "wall_s", ".3f"), ("kernel s", "kernel_seconds", ".3f"),
                       ("boxes", "boxes_evaluated", "d"), ("boxes/s", "boxes_per_second", ".4g"),
                       ("feasible", "boxes_feasible", "d"),
                       ("undet.", "boxes_undetermined", "d"), ("steps", "taylor_steps", "d"),
                       ("encl.", "data_enclosures", "d"), ("truth", "truth_verdict", "s"),
                       ("K20 s", "thesis_k20_s", "g"), ("x K20", "speedup_vs_k20", ".1f"),
                       ("regs", "registers", "d"), ("local B", "local_bytes", "d")]))


if __name__ == "__main__":
    main()
