"""DBN approximation of the three pathway models (Hagiescu et al. 2013): trajectories
per second, RK4 steps per second, share of the GPU's FP32 peak, and the time of the
whole task (samples, range pass, counting pass, CPT assembly, inference), against the
paper's figures (../shared/BENCHMARKS.md: EGF-NGF 3e6 trajectories x 1e4 RK4 steps in
157 s on a Tesla S2050; the target is <= 2 s on one GPU).

Settings (Table II of the paper was not at hand; documented in docs/dbn.md): every
species with a non-zero initial value sampled uniformly within +-20 % of it, 5 bins,
T = 100 slices; EGF-NGF and the segmentation clock r = 100 steps per slice of 1 time
unit (T.r = 1e4), MLC phosphorylation (BIOMD0000000088, stiff: RK4 needs a step <=
3e-4) r = 20,000 steps per slice of 6 s (T.r = 2e6), at the paper's N.

The heterogeneous kernel's target (>= 1.5x the homogeneous kernel on the m88-size
model) is measured on "MLC phosphorylation, no event": BIOMD0000000088 with its one
event removed (a copy made by the script), since the heterogeneous kernel takes no
events; both kernels run that same model. `--slices` shortens every model's run.

Each model: a small warm-up run (compiles), then the task with default ranges (the
range pass, which keeps every value where they fit in device memory, then the counts
from those values, or a second integration where they do not: `integrations`), then
with the ranges given (the counting pass alone). The backend's defaults (nvcc's fast
math on; `--no-fast-math` for IEEE float division). FLOPs: RK4 steps x the kernel's
FLOPs per step (sbmlgpu.codegen.cost, an FMA counts two).
Writes dbn_pathways.json into --out.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from ssa_common import MODELS, arguments, describe, gpu_device, table, write_json  # noqa: E402

import sbmlgpu  # noqa: E402
from sbmlgpu.views.ode import ode_system  # noqa: E402

#: name, file, N, slices, slice time, steps per slice, paper N (BENCHMARKS.md)
CASES = [
    ("EGF-NGF", "BIOMD0000000033", 3_000_000, 100, 1.0, 100),
    ("segmentation clock", "BIOMD0000000201", 1_000_000, 100, 1.0, 100),
    ("MLC phosphorylation", "BIOMD0000000088", 30_000, 100, 6.0, 20_000),
    # the m88-size model of the heterogeneous target: BIOMD0000000088 without its one
    # event (t >= 300: s2 := 0.01), which the heterogeneous kernel does not take
    ("MLC phosphorylation, no event", "BIOMD0000000088:no-event", 30_000, 100, 6.0, 20_000),
]
PAPER_S = {"EGF-NGF": 157.0, "MLC phosphorylation": 4596.0}


def initial_value_samples(path, spread=0.2) -> dict[str, str]:
    ode = ode_system(sbmlgpu.load(path))
    index = {p: i for i, p in enumerate(ode.p_ids)}
    return {s: f"uniform:{(1 - spread) * float(v)!r}:{(1 + spread) * float(v)!r}"
            for s in ode.state_ids if s in index and (v := ode.p_values[index[s]]) != 0}


def run(path, device, n, slices, slice_time, steps, options, ranges=None):
    samples = initial_value_samples(path)  # the settings, not the task: not timed
    started = time.perf_counter()
    result = sbmlgpu.dbn(path, device=device.index, progress=False, ensemble=n,
                         sample=samples, slices=slices,
                         slice_time=slice_time, steps=steps, ranges=ranges or {},
                         options=options)
    return result, time.perf_counter() - started


def model_path(file: str, folder: Path) -> Path:
    """The shipped model, or `<id>:no-event`: a copy without its events in `folder`."""
    stem, _, variant = file.partition(":")
    path = MODELS / f"{stem}.xml"
    if variant != "no-event":
        return path
    import libsbml

    document = libsbml.readSBMLFromFile(str(path))
    model = document.getModel()
    while model.getNumEvents():
        model.removeEvent(0)
    out = folder / f"{stem}_no_event.xml"
    libsbml.writeSBMLToFile(document, str(out))
    return out


def measure(case, device, args) -> list[dict]:
    name, file, n, slices, slice_time, steps = case
    if args.quick:  # fewer trajectories and slices; the step stays (RK4's stability)
        n, slices = max(n // 100, 1000), max(slices // 10, 2)
    if args.slices:
        slices = args.slices
    folder = Path(tempfile.mkdtemp(prefix="dbn-models-"))
    path = model_path(file, folder)
    peak = device.properties.peak_flops("float")
    rows = []
    for kernel in args.kernels:
        options = {**kernel_options(kernel), "fast_math": args.fast_math}
        # compile and warm up both runs' kernels: a run compiles only what it launches
        # (without ranges the range pass and the replay, or the heterogeneous values
        # variant; with ranges the counting kernel)
        warm, _ = run(path, device, 1024, 2, slice_time, steps, options)
        run(path, device, 1024, 2, slice_time, steps, options,
            {v: (float(e[0]), float(e[-1])) for v, e in zip(warm.variables, warm.edges)})
        full, full_s = run(path, device, n, slices, slice_time, steps, options)
        counted, counted_s = full, None
        if not args.default_ranges_only:
            ranges = {v: (float(e[0]), float(e[-1]))
                      for v, e in zip(full.variables, full.edges)}
            counted, counted_s = run(path, device, n, slices, slice_time, steps, options,
                                     ranges)
        m = counted.metadata
        flops = m["all_rk4_steps"] * m["flops_per_step"]
        # the integrating kernel: the counting pass's with the ranges given; without,
        # the range pass's where the counts were replayed from its values
        kernel_s = (m["range_kernel_ms"] if counted_s is None and m.get("integrations") == 1
                    else m["count_kernel_ms"]) / 1e3
        err = full.inference_error()
        row = {"model": name, "file": file, "kernel": kernel, "trajectories": n,
               "slices": slices, "steps_per_slice": steps, "rk4_steps": m["all_rk4_steps"],
               "failed": m["failed_trajectories"], "task_s": full_s,
               "range_pass_s": full.metadata["range_pass_seconds"],
               "count_pass_s": full.metadata["count_pass_seconds"],
               "task_given_ranges_s": counted_s, "count_kernel_s": kernel_s,
               "integrations": full.metadata.get("integrations"),
               "range_kernel_s": full.metadata["range_kernel_ms"] / 1e3,
               "replay_kernel_s": (full.metadata["count_kernel_ms"] / 1e3
                                   if full.metadata.get("integrations") == 1 else None),
               "fast_math": bool(full.metadata.get("fast_math")),
               "trajectories_per_s": n / (counted_s or full_s), "steps_per_s": m["all_rk4_steps"] / kernel_s,
               "fp32_fraction": flops / kernel_s / peak, "flops_per_step": m["flops_per_step"],
               "sparse_variables": len(m["sparse_variables"]),
               "inference_tv_mean": err["mean"], "inference_tv_max": err["max"],
               "compute_warps": m.get("compute_warps"), "paper_s": PAPER_S.get(name)}
        rows.append(row)
        given = f"{counted_s:.2f} s" if counted_s is not None else "not run"
        print(f"{name} [{kernel}]: task {full_s:.2f} s ({row['integrations']} "
              f"integration(s); ranges given {given}, "
              f"integration kernel {kernel_s:.2f} s, {row['fp32_fraction']:.1%} of FP32 peak), "
              f"{m['failed_trajectories']} failed", flush=True)
    return rows


def kernel_options(kernel: str) -> dict:
    """`homogeneous`, `heterogeneous` (C by the cost model) or `heterogeneous:C`."""
    name, _, warps = kernel.partition(":")
    if name == "homogeneous":
        return {}
    return {"kernel": name, **({"warps": int(warps)} if warps else {})}


def main() -> None:
    p = arguments(__doc__)
    p.add_argument("--models", nargs="+", default=None, help="names or BIOMD ids to run")
    p.add_argument("--kernels", nargs="+", default=["homogeneous"],
                   help="homogeneous, heterogeneous (C by its cost model) and/or "
                        "heterogeneous:C (a sweep of C)")
    p.add_argument("--default-ranges-only", action="store_true",
                   help="skip the second run with the ranges given")
    p.add_argument("--name", default="dbn_pathways", help="JSON file name (without .json)")
    p.add_argument("--slices", type=int, default=0,
                   help="time slices of every model (0: its case's, the paper's T)")
    p.add_argument("--fast-math", action=argparse.BooleanOptionalAction, default=True,
                   help="the backend's fast_math option (default on, as the backend)")
    args = p.parse_args()
    device = gpu_device(args.cpu)
    if device is None:
        sys.exit("dbn_pathways.py measures the GPU: no GPU here")
    cases = [c for c in CASES if args.models is None or c[0] in args.models
             or c[1] in args.models]
    rows = []
    for case in cases:
        rows += measure(case, device, args)
        # after each model: a long run cut short keeps what it measured
        write_json(args.out, args.name, {"machine": describe(device), "rows": rows})
    print()
    print(table(rows, [("model", "model", "s"), ("kernel", "kernel", "s"),
                       ("N", "trajectories", "d"), ("task s", "task_s", ".2f"),
                       ("ranges given s", "task_given_ranges_s", ".2f"),
                       ("kernel s", "count_kernel_s", ".2f"),
                       ("passes", "integrations", "s"),
                       ("traj/s", "trajectories_per_s", ".3g"),
                       ("FP32 %", "fp32_fraction", ".1%"), ("C", "compute_warps", "s"),
                       ("paper s", "paper_s", "s")]))
    write_json(args.out, args.name, {"machine": describe(device), "rows": rows})


if __name__ == "__main__":
    main()
