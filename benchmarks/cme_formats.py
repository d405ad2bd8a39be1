"""CME steady state on the GPU (Maggioni et al. 2013): per model and state-space size,

- the enumeration's time and size; the matrix's nonzeros;
- per storage format (dia+sell, dia+ell, ell, csr): padding efficiency, bytes moved
  per Jacobi sweep (formats.py counts them as the paper does: every stored value and
  index once, x once per stored slot, d and p read and y written once per row),
  the time of a sweep, GB/s and that as a fraction of the copy bandwidth measured in
  the same run (a device-to-device copy, bytes read + written);
- cuSPARSE CSR (CuPy) on the same off-diagonal matrix: the SpMV alone and a whole
  sweep (SpMV + the Jacobi update as one CuPy elementwise kernel); our ratio to it;
- the time and iterations to the normalised residual `--tol` (1e-8) for damped
  Jacobi, multilevel aggregation, IDR(s) and auto (--solvers), each from the uniform vector,
  capped by --solve-seconds; the device memory in use.

    source .device/setup.sh && python3 benchmarks/cme_formats.py [--quick] [--huge]

Writes cme_formats.json into --out.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ssa_common import arguments, describe, gpu_device, table, write_json  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "sbml_models"
#: (model, bounds): the four models at Table-I-like sizes (3e5 - 1e7 states)
CASES = [
    ("cme_toggle_switch", {"Pa": 300, "Pb": 300}),
    ("cme_schnakenberg", {"X": 600, "Y": 600}),
    ("cme_brusselator", {"X": 3000, "Y": 3000}),
    ("cme_phage_lambda", {"CI": 30, "CI2": 30, "Cro": 20, "Cro2": 15}),
    ("cme_toggle_switch", {"Pa": 1600, "Pb": 1600}),
]
QUICK = [("cme_toggle_switch", {"Pa": 120, "Pb": 120}),
         ("cme_schnakenberg", {"X": 200, "Y": 200})]
HUGE = [("cme_toggle_switch", {"Pa": 5000, "Pb": 5000})]  # about 1e8 states
FORMATS = ("dia+sell", "dia+ell", "ell", "csr")


def copy_bandwidth(nbytes: int = 1 << 30, repeats: int = 20) -> float:
    """Bytes per second of a device-to-device copy, counting bytes read + written."""
    import cupy as cp

    a = cp.ones(nbytes // 8)
    b = cp.empty_like(a)
    b[...] = a
    start, end = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    for _ in range(repeats):
        b[...] = a
    end.record()
    end.synchronize()
    seconds = cp.cuda.get_elapsed_time(start, end) / 1e3 / repeats
    del a, b
    cp.get_default_memory_pool().free_all_blocks()
    return 2 * nbytes / seconds


def timed_sweeps(engine, p, sweeps: int) -> float:
    """Seconds per sweep of the engine's Jacobi (it waits for its launches)."""
    p = engine.jacobi(p, 10, 0.9)  # warm up
    engine.stream.synchronize()
    start = time.perf_counter()
    p = engine.jacobi(p, sweeps, 0.9)
    engine.stream.synchronize()  # jacobi returns once its launches are queued
    return (time.perf_counter() - start) / sweeps


def cusparse_times(offdiag, diag, sweeps: int) -> dict:
    """cuSPARSE CSR through CuPy on the same O: SpMV alone, and a whole damped sweep."""
    import cupy as cp
    import cupyx.scipy.sparse as cps

    o = cps.csr_matrix(offdiag)
    d = cp.asarray(diag)
    p = cp.full(offdiag.shape[0], 1.0 / offdiag.shape[0])
    update = cp.ElementwiseKernel("float64 p, float64 y, float64 d", "float64 out",
                                  "out = 0.1 * p + 0.9 * (y / -d)", "cme_cupy_update")
    start, end = cp.cuda.Event(), cp.cuda.Event()
    for _ in range(5):
        y = o @ p
    start.record()
    for _ in range(sweeps):
        y = o @ p
    end.record()
    end.synchronize()
    spmv = cp.cuda.get_elapsed_time(start, end) / 1e3 / sweeps
    start.record()
    for _ in range(sweeps):
        p = update(p, o @ p, d)
    end.record()
    end.synchronize()
    sweep = cp.cuda.get_elapsed_time(start, end) / 1e3 / sweeps
    del o, d, p, y
    cp.get_default_memory_pool().free_all_blocks()
    return {"cusparse_spmv_s": spmv, "cusparse_sweep_s": sweep}


def _kernel_totals(records) -> dict:
    """{kernel name: [launches, seconds]} of a solve, the largest first."""
    totals: dict = {}
    for r in records:
        entry = totals.setdefault(r.kernel, [0, 0.0])
        entry[0] += 1
        entry[1] += r.ms / 1e3
    return dict(sorted(totals.items(), key=lambda kv: -kv[1][1]))


def solve_times(engine, tol: float, seconds: float, solvers, profiler=None,
                idr: dict | None = None) -> dict:
    from sbmlgpu.plugins.cme.solvers import ConvergenceError, SolverSettings, solve

    out = {}
    n = engine.n
    idr = idr or {}
    for solver in solvers:
        # no stagnation test: plain Jacobi's time to tol is the anchor, however slow
        settings = SolverSettings(solver=solver, tol=tol, max_seconds=seconds,
                                  max_sweeps=10**9, max_cycles=10**6, stagnation=10**9,
                                  **idr)
        start = time.perf_counter()
        launches = len(profiler.records) if profiler is not None else 0
        try:
            s = solve(engine, np.full(n, 1.0 / n), settings)
            converged = True
        except ConvergenceError as e:
            s, converged = e.solution, False
        out[solver] = {"seconds": time.perf_counter() - start, "converged": converged,
                       "residual": s.residual, "sweeps": s.sweeps, "cycles": s.cycles,
                       "path": s.solver,
                       # the GPU's own time in that solve (kernels, from CUDA events):
                       # the rest of "seconds" is the host (launches, syncs, the
                       # coarsest level's LU, the residual downloads)
                       "kernel_seconds": (sum(r.ms for r in profiler.records[launches:])
                                          / 1e3 if profiler is not None else None),
                       "kernels_by_name": _kernel_totals(profiler.records[launches:])
                       if profiler is not None else None,
                       "seconds_per_cycle": (s.seconds / s.cycles if solver == "aggregation"
                                             and s.cycles else None)}
        print(f"    {solver:12s} {'ok ' if converged else 'NOT'} {out[solver]['seconds']:8.2f} s "
              f"residual {s.residual:.2e} sweeps {s.sweeps} cycles {s.cycles} ({s.solver}), "
              f"kernels {out[solver]['kernel_seconds'] or 0:.2f} s: "
              + ", ".join(f"{k} {v[1]:.2f} s" for k, v in
                          list((out[solver]['kernels_by_name'] or {}).items())[:5]),
              flush=True)
    return out


def measure(model_name: str, bounds: dict, device, args, bandwidth: float) -> list[dict]:
    from sbmlgpu import load
    from sbmlgpu.plugins.cme.gpu_engine import GpuEngine
    from sbmlgpu.profile import Profiler
    from sbmlgpu.plugins.cme.gpu_rates import propensities_device
    from sbmlgpu.plugins.cme.matrix import diagonal, offdiag_csr
    from sbmlgpu.plugins.cme.model import build
    from sbmlgpu.plugins.cme.statespace import enumerate_states

    model = build(load(MODELS / f"{model_name}.xml"))
    start = time.perf_counter()
    space = enumerate_states(model, bounds)
    enumerate_s = time.perf_counter() - start
    base = {"model": model_name, "bounds": bounds, "states": space.n,
            "reactions": len(space.reaction_ids), "enumerate_s": enumerate_s}
    print(f"{model_name} {bounds}: {space.n} states, enumerated in {enumerate_s:.2f} s",
          flush=True)
    prop, _ = propensities_device(model, space, device)
    rows = []
    host_prop = None
    for fmt in args.formats:
        row = dict(base, format=fmt)
        try:
            start = time.perf_counter()
            solving = fmt == args.solve_format and not args.no_solve
            # the profiler's events cost host time per launch: --no-profile times the
            # solves as a user runs them (no kernel breakdown then)
            profiler = Profiler() if solving and not args.no_profile else None
            engine = GpuEngine(fmt, space.sources, space.targets, prop, device=device,
                               solver="auto" if solving else "jacobi",
                               model_id=model.model_id, profiler=profiler)
            row["setup_s"] = time.perf_counter() - start
            f = engine.format
            p = engine.vector(np.full(space.n, 1.0 / space.n))
            sweep = timed_sweeps(engine, p, args.sweeps)
            row.update(nnz=f.nnz, stored=f.stored, padding_efficiency=f.padding_efficiency,
                       bytes_per_sweep=f.bytes_per_sweep, sweep_s=sweep,
                       gb_s=f.bytes_per_sweep / sweep / 1e9,
                       copy_fraction=f.bytes_per_sweep / sweep / bandwidth,
                       # the same without the x gathers (8 B per entry), which hit in
                       # L2 on a banded matrix: the bytes that must come from memory
                       compulsory_bytes=f.bytes_per_sweep - 8 * f.nnz,
                       compulsory_fraction=(f.bytes_per_sweep - 8 * f.nnz) / sweep / bandwidth,
                       device_used_gib=(device.properties.total_memory - device.free_memory())
                       / 2**30)
            print(f"  {fmt:9s} pad {f.padding_efficiency:.3f} {f.bytes_per_sweep / 1e6:9.1f} MB "
                  f"{sweep * 1e3:8.3f} ms {row['gb_s']:7.1f} GB/s "
                  f"{100 * row['copy_fraction']:5.1f} % of copy (paper's count), "
                  f"{100 * row['compulsory_fraction']:5.1f} % (compulsory bytes)", flush=True)
            if solving:
                if any(name in ("aggregation", "auto") for name in args.solvers):
                    start = time.perf_counter()
                    engine.levels()  # the hierarchy, built once, timed apart from the cycles
                    row["hierarchy_s"] = time.perf_counter() - start
                    print(f"    hierarchy built in {row['hierarchy_s']:.2f} s", flush=True)
                row["solve"] = solve_times(engine, args.tol, args.solve_seconds, args.solvers,
                                           profiler, {"idr_shadow": args.idr_shadow,
                                                      "idr_sweeps": args.idr_sweeps})
            engine.close()
        except Exception as exc:  # noqa: BLE001 -- a format that cannot run is a result
            row["error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
            print(f"  {fmt:9s} {row['error']}", flush=True)
        rows.append(row)
    if not args.no_cusparse:
        try:
            from sbmlgpu.plugins.cme.statespace import propensities_host

            host_prop = propensities_host(model, space)
            o = offdiag_csr(space, host_prop)
            c = cusparse_times(o, diagonal(space, host_prop), args.sweeps)
            for row in rows:
                row.update(c)
                if "sweep_s" in row:
                    row["vs_cusparse_sweep"] = c["cusparse_sweep_s"] / row["sweep_s"]
                    row["vs_cusparse_spmv"] = c["cusparse_spmv_s"] / row["sweep_s"]
            print(f"  cuSPARSE  spmv {c['cusparse_spmv_s'] * 1e3:8.3f} ms, sweep "
                  f"{c['cusparse_sweep_s'] * 1e3:8.3f} ms", flush=True)
        except Exception as exc:  # noqa: BLE001
            print(f"  cuSPARSE  {type(exc).__name__}: {exc}", flush=True)
    prop.free()
    return rows


def main() -> None:
    p = arguments(__doc__)
    p.add_argument("--huge", action="store_true", help="also the 1e8-state toggle switch")
    p.add_argument("--only-huge", action="store_true", help="only the 1e8-state case")
    p.add_argument("--formats", nargs="+", default=list(FORMATS))
    p.add_argument("--solve-format", default="dia+sell")
    p.add_argument("--solvers", nargs="+", default=["jacobi", "aggregation", "auto"])
    p.add_argument("--sweeps", type=int, default=200, help="sweeps per timing")
    p.add_argument("--idr-shadow", type=int, default=4, help="s of the idr solver")
    p.add_argument("--idr-sweeps", type=int, default=8,
                   help="Jacobi sweeps per application of the idr solver's operator")
    p.add_argument("--tol", type=float, default=1e-8)
    p.add_argument("--solve-seconds", type=float, default=120.0)
    p.add_argument("--no-solve", action="store_true")
    p.add_argument("--no-cusparse", action="store_true")
    p.add_argument("--no-profile", action="store_true",
                   help="solve without the profiler (no per-kernel times)")
    p.add_argument("--cases", type=int, nargs="+", default=None,
                   help="indices into CASES (default: all)")
    p.add_argument("--name", default="cme_formats", help="JSON file name (without .json)")
    args = p.parse_args()
    device = gpu_device(args.cpu)
    if device is None:
        sys.exit("cme_formats.py measures the GPU: no GPU here")
    bandwidth = copy_bandwidth()
    print(f"copy bandwidth {bandwidth / 1e9:.0f} GB/s (read + write)", flush=True)
    cases = QUICK if args.quick else ([] if args.only_huge else
                                      [CASES[i] for i in (args.cases or range(len(CASES)))])
    if args.huge or args.only_huge:
        cases = cases + HUGE
    rows = []
    for model_name, bounds in cases:
        rows += measure(model_name, bounds, device, args, bandwidth)
    print()
    print(table(rows, [("model", "model", "s"), ("states", "states", "d"),
                       ("format", "format", "s"), ("pad eff", "padding_efficiency", ".3f"),
                       ("ms/sweep", "sweep_s", ".3e"), ("GB/s", "gb_s", ".0f"),
                       ("copy %", "copy_fraction", ".1%"),
                       ("compulsory %", "compulsory_fraction", ".1%"),
                       ("x cuSPARSE sweep", "vs_cusparse_sweep", ".2f"),
                       ("x cuSPARSE SpMV", "vs_cusparse_spmv", ".2f")]))
    write_json(args.out, args.name, {"machine": describe(device),
                                         "copy_bandwidth_bytes_s": bandwidth,
                                         "tol": args.tol, "rows": rows})


if __name__ == "__main__":
    main()
