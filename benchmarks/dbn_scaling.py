#!/usr/bin/env python3
"""DBN approximation on several GPUs of one host (issue 16): EGF-NGF at the paper's N
on 1, 2, 4 ... GPUs, strong and weak scaling, and whether the CPT counts stay the same.

    python benchmarks/dbn_scaling.py [--gpus 1 2 4] [--members N] [--slices T]
        [--repeats R] [--quick] [--out DIR]
    python benchmarks/dbn_scaling.py --threads-per-gpu 2   # one GPU driven by 2 shares

The task is dbn_pathways.py's EGF-NGF case (BIOMD0000000033; every species with a
non-zero initial value sampled uniformly within +-20 %, 5 bins, T = 100 slices of 1
time unit, r = 100 RK4 steps each, N = 3e6 trajectories, the backend's defaults:
float, fast math, default ranges, so one integration where the values fit), run
through `sbmlgpu.dbn(..., device=[0, ..., G-1])`, which splits the trajectories
into one equal share per GPU (docs/dbn.md, "Several GPUs").

Per GPU count G: a warm-up call (compiles, loads the modules on every GPU), then:
- strong: the same N trajectories on G GPUs; every CPT count and the counted
  marginals compared with the 1-GPU run, which is the reference (`identical`);
- weak (G > 1): G x N trajectories on G GPUs (each GPU's share is the 1-GPU run's
  work). Their counts cannot equal the reference's (other trajectories); the
  trajectories counted must be all of them (`counted` = G x N minus failed).
`seconds`: the wall time of the call (the median of --repeats); speed-up =
(trajectories/s on G) / (trajectories/s on 1); efficiency = speed-up / G. The
backend's own range- and count-pass kernel times (the slowest GPU's) are kept.

--threads-per-gpu K (one GPU): the same task split into K shares that all drive GPU 0
from K host threads: a check of the split and of the counts on a machine with one
GPU, not a scaling figure.

Output: DIR/dbn_scaling.json (--out, else $OUT, else benchmarks/results): machine,
commit, command, settings, rows; a table at the end. Exit status 1 when a strong run's
counts differ from the reference's; 2 without a GPU.
"""

from __future__ import annotations

import copy
import statistics
import sys
import time

import numpy as np

from ssa_common import MODELS, arguments, commit, describe, table, write_json  # noqa: E402

from dbn_pathways import initial_value_samples  # noqa: E402

MODEL = MODELS / "BIOMD0000000033.xml"
N, SLICES, SLICE_TIME, STEPS = 3_000_000, 100, 1.0, 100


def run(devices: list[int], n: int, slices: int, samples: dict, repeats: int):
    """(result of the last call, wall seconds of each call)."""
    import sbmlgpu

    seconds, result = [], None
    for _ in range(repeats):
        result = None  # one result at a time
        started = time.perf_counter()
        result = sbmlgpu.dbn(MODEL, device=devices, progress=False, ensemble=n,
                             sample=samples, slices=slices, slice_time=SLICE_TIME,
                             steps=STEPS)
        seconds.append(time.perf_counter() - started)
    return result, seconds


def same_counts(a, b) -> tuple[bool, int]:
    """(every count, edge and counted marginal equal, the number of differing cells)."""
    differing = 0
    if not np.array_equal(a.edges, b.edges):
        return False, -1
    for v in a.variables:  # dense or sparse alike: each transition's dense table
        for s in range(len(a.times) - 1):
            x, y = a.dense_counts(v, s), b.dense_counts(v, s)
            differing += int(np.count_nonzero(x != y)) if x.shape == y.shape else x.size
    same_marginals = np.array_equal(a.counted, b.counted)
    return differing == 0 and same_marginals, differing


def row_of(gpus: int, scaling: str, n: int, result, seconds: list[float]) -> dict:
    m = result.metadata
    median = statistics.median(seconds)
    return {"gpus": gpus, "scaling": scaling, "trajectories": n, "seconds": median,
            "seconds_each": seconds, "trajectories_per_s": n / median,
            "devices": m["devices"], "per_device": m["trajectories_per_device"],
            "integrations": m["integrations"], "counted": m["counted_trajectories"],
            "failed": m["failed_trajectories"], "range_kernel_ms": m["range_kernel_ms"],
            "count_kernel_ms": m["count_kernel_ms"],
            "range_pass_s": m["range_pass_seconds"], "count_pass_s": m["count_pass_seconds"]}


def main(argv: list[str] | None = None) -> int:
    p = arguments(__doc__)
    p.add_argument("--gpus", type=int, nargs="+", help="GPU counts [default: 1 .. all]")
    p.add_argument("--members", type=int, default=None, help=f"N [default: {N:,}]")
    p.add_argument("--slices", type=int, default=SLICES)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--threads-per-gpu", type=int, default=0,
                   help="split over K shares on GPU 0 instead (a check, not scaling)")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = p.parse_args(argv)
    if args.cpu:
        p.error("--cpu: this benchmark measures GPUs (the CPU path is one worker)")
    from sbmlgpu import runtime

    gpus = runtime.get_devices()
    if not gpus:
        print(f"no GPU ({runtime.no_gpu_reason()}): nothing to scale", file=sys.stderr)
        return 2
    n = args.members or (N // 100 if args.quick else N)
    slices = max(args.slices // 10, 2) if args.quick else args.slices
    counts = sorted(set(args.gpus or range(1, len(gpus) + 1)) | {1})
    if counts[-1] > len(gpus):
        p.error(f"--gpus: this machine has {len(gpus)} GPU(s)")
    samples = initial_value_samples(MODEL)
    report = {"benchmark": "dbn_scaling", "machine": {**describe(gpus[0]),
                                                      "gpus": [g.properties.name
                                                               for g in gpus]},
              **commit(), "command": [sys.argv[0], *argv],
              "settings": {"model": "BIOMD0000000033", "trajectories": n, "slices": slices,
                           "slice_time": SLICE_TIME, "steps": STEPS, "bins": 5,
                           "samples": samples, "repeats": args.repeats,
                           "threads_per_gpu": args.threads_per_gpu},
              "rows": []}
    rows = report["rows"]
    if args.threads_per_gpu:
        counts = [1, args.threads_per_gpu]
    reference, base = None, None
    for g in counts:
        devices = list(range(g)) if not args.threads_per_gpu else [0]
        patch = _threads_on_one_gpu(g) if args.threads_per_gpu and g > 1 else None
        try:
            print(f"warm-up on {g} GPU(s)", flush=True)
            run(devices, min(n, 10_000), 2, samples, 1)
            for copies in ((1,) if g == 1 or args.threads_per_gpu else (1, g)):
                result, seconds = run(devices, n * copies, slices, samples, args.repeats)
                row = row_of(g, "weak" if copies > 1 else "strong", n * copies, result,
                             seconds)
                if reference is None:
                    reference, base = result, row
                    row.update(identical=True, cells_differing=0)
                elif copies == 1:
                    same, differing = same_counts(result, reference)
                    row.update(identical=same, cells_differing=differing)
                else:
                    row.update(identical=None, cells_differing=None)
                row["speedup"] = row["trajectories_per_s"] / base["trajectories_per_s"]
                row["efficiency"] = row["speedup"] / g
                rows.append(row)
                print(f"{row['scaling']} {g} GPU(s): {row['trajectories']:,} in "
                      f"{row['seconds']:.3f} s, speed-up {row['speedup']:.2f}, efficiency "
                      f"{row['efficiency']:.2f}, identical {row['identical']}", flush=True)
                write_json(args.out, "dbn_scaling", report)
        finally:
            if patch is not None:
                patch()
    print(table(rows, [("scaling", "scaling", "s"), ("GPUs", "gpus", "d"),
                       ("trajectories", "trajectories", ",d"), ("s", "seconds", ".3f"),
                       ("speed-up", "speedup", ".2f"), ("efficiency", "efficiency", ".2f"),
                       ("range kernel ms", "range_kernel_ms", ".0f"),
                       ("count kernel ms", "count_kernel_ms", ".0f"),
                       ("identical", "identical", "")]))
    return 1 if any(r["identical"] is False for r in rows) else 0


def _threads_on_one_gpu(k: int):
    """Make the dbn program split over k copies of GPU 0's Device (one context, k host
    threads); returns the undo."""
    from sbmlgpu.plugins.dbn import program

    original = program.DbnProgram._devices
    program.DbnProgram._devices = lambda self, scheduler, n: (
        [self.device] + [copy.copy(self.device) for _ in range(k - 1)])[:max(1, n)]

    def undo():
        program.DbnProgram._devices = original
    return undo


if __name__ == "__main__":
    sys.exit(main())
