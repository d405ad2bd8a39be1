"""One dbn counting kernel under several builds (docs/benchmarks.md, "DBN, second round"):
block size, __launch_bounds__ blocks per SM, -prec-div=false and --use_fast_math, one
launch each over the same sampled trajectories with the ranges its own range kernel
found, timed by CUDA events; the counts of every build compared with the first's.

    python3 dbn_kernel_variants.py --model BIOMD0000000033 --n 1000000

The kernel text is what the dbn backend generates (plugins/dbn/kernels.py) for the
model's non-zero initial values sampled within +-20 %, 5 bins, float; the text's
__launch_bounds__ and nvcc's flags are what each variant changes. Launched through
PyCUDA directly (not the backend's runtime), so that the flags and bounds are the only
difference. Writes <model>_variants.json into --out (default $OUT or .).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from dbn_pathways import initial_value_samples
from ssa_common import MODELS

import sbmlgpu
from sbmlgpu.ode.model import KernelModel
from sbmlgpu.plugins.dbn.kernels import dbn_kernels
from sbmlgpu.plugins.dbn.structure import DbnStructure
from sbmlgpu.views.ode import ode_system

#: (name, threads per block, blocks per SM in __launch_bounds__ (0: none), nvcc flags)
VARIANTS = [
    ("base 256", 256, 0, []),
    ("256 minb2", 256, 2, []),
    ("128", 128, 0, []),
    ("128 minb4", 128, 4, []),
    ("64 minb8", 64, 8, []),
    ("base prec-div=false", 256, 0, ["-prec-div=false"]),
    ("256 minb2 prec-div=false", 256, 2, ["-prec-div=false"]),
    ("base fast-math", 256, 0, ["--use_fast_math"]),
    ("256 minb2 fast-math", 256, 2, ["--use_fast_math"]),
    ("256 minb3", 256, 3, []),
]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="BIOMD0000000033", help="a model of sbml_models/")
    p.add_argument("--n", type=int, default=1_000_000, help="trajectories")
    p.add_argument("--slices", type=int, default=100)
    p.add_argument("--steps", type=int, default=100, help="RK4 steps per slice")
    p.add_argument("--slice-time", type=float, default=1.0)
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    args = p.parse_args()
    path = MODELS / f"{args.model}.xml"
    samples = initial_value_samples(path)
    ode = ode_system(sbmlgpu.load(path))
    structure = DbnStructure.of(ode, (), 5, args.slices, 4096)
    kernels = dbn_kernels(KernelModel(ode, tuple(samples), structure.variables), structure,
                          "float", 256)
    try:
        import pycuda.autoinit  # noqa: F401
        import pycuda.driver as drv
        from pycuda.compiler import SourceModule
    except ImportError as exc:
        sys.exit(f"dbn_kernel_variants.py measures the GPU: PyCUDA does not load ({exc})")

    n, nv = args.n, len(structure.variables)
    rng = np.random.default_rng(1)
    table = np.ascontiguousarray(np.array(
        [rng.uniform(float(spec.split(":")[1]), float(spec.split(":")[2]), n)
         for spec in samples.values()], dtype=np.float32))
    times = (np.arange(args.slices + 1) * args.slice_time).astype(np.float32)
    dt = np.float32(args.slice_time / args.steps)

    def build(text, block, min_blocks, flags):
        bounds = f"{block}, {min_blocks}" if min_blocks else f"{block}"
        text = text.replace("__launch_bounds__(256)", f"__launch_bounds__({bounds})")
        t0 = time.time()
        module = SourceModule(text, options=flags, no_extern_c=True, arch="sm_90")
        return module, time.time() - t0

    d_table, d_times = drv.to_device(table), drv.to_device(times)
    status, steps = drv.mem_alloc(n), drv.mem_alloc(4 * n)
    settings = [np.float32(0), np.float32(0), dt, dt, dt,
                np.int64(2 * args.slices * (args.steps + 1) + 16), np.uint64(0), np.uintp(0),
                np.uint64(0)]
    module, _ = build(kernels.ranges.text, 256, 0, [])
    ranges_kernel = module.get_function(kernels.ranges.kernel)
    keys = np.empty(2 * nv, np.uint64)
    keys[0::2], keys[1::2] = np.iinfo(np.uint64).max, 0
    d_keys = drv.to_device(keys)
    ranges_kernel(np.int64(n), d_table, d_times, np.int32(len(times)), d_keys, np.uintp(0),
                  np.int64(0), status, steps, *settings, block=(256, 1, 1),
                  grid=((n + 255) // 256, 1))
    keys = drv.from_device(d_keys, keys.shape, np.uint64)
    top = np.uint64(1) << np.uint64(63)
    ranges = np.where(keys & top, keys ^ top, ~keys).view(np.float64).reshape(-1, 2).copy()
    d_ranges = drv.to_device(ranges)
    counts = drv.mem_alloc(4 * structure.count_elements)
    reference, rows = None, []
    for name, block, min_blocks, flags in VARIANTS:
        module, compile_s = build(kernels.counts.text, block, min_blocks, flags)
        f = module.get_function(kernels.counts.kernel)
        launch = [np.int64(n), d_table, d_times, np.int32(len(times)), counts, np.uintp(0),
                  d_ranges, np.uint32(1), status, steps, *settings]
        grid = ((n + block - 1) // block, 1)
        f(*launch, block=(block, 1, 1), grid=grid)  # warm up
        drv.Context.synchronize()
        drv.memset_d32(counts, 0, structure.count_elements)
        start, end = drv.Event(), drv.Event()
        start.record()
        f(*launch, block=(block, 1, 1), grid=grid)
        end.record()
        end.synchronize()
        got = drv.from_device(counts, (structure.count_elements,), np.uint32).astype(np.int64)
        differ = None if reference is None else int(np.abs(got - reference).sum())
        reference = got if reference is None else reference
        row = dict(name=name, ms=end.time_since(start), registers=f.num_regs,
                   local_bytes=f.local_size_bytes, compile_s=compile_s,
                   counts_differing_from_first=differ)
        print(row, flush=True)
        rows.append(row)
    with open(os.path.join(args.out, f"{args.model}_variants.json"), "w") as out:
        json.dump({"model": args.model, "n": n, "slices": args.slices, "steps": args.steps,
                   "rows": rows}, out, indent=1)


if __name__ == "__main__":
    main()
