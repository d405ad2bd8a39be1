#!/usr/bin/env python3
"""Lorenz ensemble (the DiffEqGPU.jl benchmark): our generated kernel against the anchors,
all in this one run on this one machine.

    python benchmarks/ode_lorenz.py [--out DIR] [--repeats 5] [--no-jax] [--quick]

Setup (as ../shared/anchors/lorenz_anchor.py): sbml_models/lorenz.xml, rho swept as
linspace(0, 21, N), sigma = 10, beta = 8/3, x0 = (1, 0, 0), t in [0, 1], endpoints
saved; N = 8 * 4^k from 8 to 8,388,608.

Rows, each timed by CUDA events around the kernel alone (median of --repeats launches
after a warm-up, as the anchor times its kernel):
- ours, RK4 dt = 1e-3 (1000 steps): fp64; fp32; fp32 with --use_fast_math (the hand
  kernel's fp32 build uses it, so that is the like-for-like fp32 comparison);
- ours, DOPRI5 rtol = atol = 1e-8 in fp64 (and fp32 at 1e-6, beyond which float32
  cannot resolve the error);
- the hand-written CUDA RK4 kernel of the anchor (its source copied below), compiled
  and launched through our runtime (PyCUDA), fp32 (--use_fast_math) and fp64;
- the plain JAX RK4 loop under vmap and diffrax Tsit5 at fixed dt (the anchor's code),
  if JAX/diffrax import (skipped with a note otherwise), at the anchor's sizes.
Reported: ms, trajectories/s, achieved GFLOP/s and fraction of the FP32/FP64 peak
(FLOPs from sbmlgpu's cost model of the generated RHS, the same count for the hand
kernel, which does the same arithmetic: 75 per RK4 step), and the ratios ours/anchor.
Also: a block-size sweep at the largest N, and `sbmlgpu.run` end to end (transfers,
result assembly) for context. JSON to DIR/ode_lorenz.json (DIR: --out, else $OUT,
else .).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# The anchor's hand-written kernel, verbatim from ../shared/anchors/lorenz_anchor.py.
HAND_SOURCE = r'''
template<typename T>
__device__ __forceinline__ void f(T x, T y, T z, T rho, T &dx, T &dy, T &dz){
  const T s = T(10), b = T(8.0/3.0);
  dx = s*(y-x); dy = x*(rho-z)-y; dz = x*y-b*z;
}
template<typename T>
__device__ void rk4(const T* rho_, T* outp, int n, int steps, T dt){
  int i = blockIdx.x*blockDim.x+threadIdx.x; if(i>=n) return;
  T x=1, y=0, z=0, rho=rho_[i];
  for(int k=0;k<steps;k++){
    T k1x,k1y,k1z,k2x,k2y,k2z,k3x,k3y,k3z,k4x,k4y,k4z;
    f(x,y,z,rho,k1x,k1y,k1z);
    f(x+T(0.5)*dt*k1x,y+T(0.5)*dt*k1y,z+T(0.5)*dt*k1z,rho,k2x,k2y,k2z);
    f(x+T(0.5)*dt*k2x,y+T(0.5)*dt*k2y,z+T(0.5)*dt*k2z,rho,k3x,k3y,k3z);
    f(x+dt*k3x,y+dt*k3y,z+dt*k3z,rho,k4x,k4y,k4z);
    x += dt/T(6)*(k1x+T(2)*k2x+T(2)*k3x+k4x);
    y += dt/T(6)*(k1y+T(2)*k2y+T(2)*k3y+k4y);
    z += dt/T(6)*(k1z+T(2)*k2z+T(2)*k3z+k4z);
  }
  outp[3*i]=x; outp[3*i+1]=y; outp[3*i+2]=z;
}
extern "C" __global__ void rk4f(const float* r, float* o, int n, int s, float dt){ rk4<float>(r,o,n,s,dt); }
extern "C" __global__ void rk4d(const double* r, double* o, int n, int s, double dt){ rk4<double>(r,o,n,s,dt); }
'''
HAND_BLOCK = 256
ANCHOR_SIZES = (1024, 65536, 1 << 20, 1 << 23)
STEPS, DT = 1000, 1e-3


MAX_N = 8 * 4**10  # 8,388,608


def sizes(quick: bool, max_n: int = MAX_N) -> list[int]:
    out = [n for n in (8 * 4**k for k in range(11)) if n <= max_n]  # 8 ... 8,388,608
    return out[::2] + ([out[-1]] if len(out) % 2 == 0 else []) if quick else out


def median_ms(launch, repeats: int) -> tuple[float, list[float]]:
    launch()  # warm-up (and first-touch of the module)
    times = [launch() for _ in range(repeats)]
    return float(np.median(times)), times


class Ours:
    """One variant of our generated kernel, launched directly (buffers reused)."""

    def __init__(self, device, method, precision, fast_math=False, rtol=1e-8, atol=1e-8,
                 block=128):
        import sbmlgpu
        from sbmlgpu.ode.model import KernelModel
        from sbmlgpu.plugins.ode.program import kernel_source
        from sbmlgpu.views import ode_system

        net = sbmlgpu.load(str(ROOT / "sbml_models" / "lorenz.xml"))
        model = KernelModel(ode_system(net), ("rho",), ("x", "y", "z"))
        self.source = kernel_source(model, method, precision, block_size=block)
        options = ("--use_fast_math",) if fast_math else ()
        self.kernel = device.compile(self.source.text, options=options,
                                     name=self.source.name).function(self.source.kernel)
        self.device, self.method, self.precision = device, method, precision
        self.fast_math, self.block = fast_math, block
        self.rtol, self.atol = rtol, atol
        self.dtype = np.float64 if precision == "double" else np.float32

    @property
    def label(self) -> str:
        extra = " fast-math" if self.fast_math else ""
        tol = f" rtol={self.rtol:g}" if self.method != "rk4" else ""
        return f"ours {self.method} {'fp64' if self.precision == 'double' else 'fp32'}{extra}{tol}"

    def run(self, rho: np.ndarray, repeats: int) -> dict:
        d, real, n = self.device, self.dtype, len(rho)
        table = d.to_device(rho.astype(real))
        times = d.to_device(np.array([0.0, 1.0], dtype=real))
        out = d.alloc(2 * 3 * n * np.dtype(real).itemsize)
        status = d.alloc(n)
        steps = d.alloc(4 * n)
        args = [np.int64(n), table, times, np.int32(2), out, status, steps, real(self.rtol),
                real(self.atol), real(0), real(0), real(DT), np.int64(10**7), np.uint64(0),
                np.uintp(0), np.uint64(0), np.int64(0), np.int64(0),
                np.int64(-1)]  # no limits, every member to the end (limits.cuh)
        grid = ((n + self.block - 1) // self.block,)
        try:
            ms, all_ms = median_ms(lambda: self.kernel.launch(grid, (self.block,), args).ms,
                                   repeats)
            final = d.from_device(out, (2, 3, n), real)[1].T  # (n, 3) at t = 1
            st = d.from_device(status, (n,), np.int8)
            taken = d.from_device(steps, (n,), np.int32).astype(np.int64)
        finally:
            for b in (table, times, out, status, steps):
                b.free()
        flops = float(taken.sum()) * self.source.flops_per_step
        return {"ms": ms, "all_ms": all_ms, "final": final, "failed": int((st != 0).sum()),
                "steps_total": int(taken.sum()), "flops": flops,
                "registers": self.kernel.attributes.registers,
                "local_bytes": self.kernel.attributes.local_bytes}


class Hand:
    def __init__(self, device):
        self.modules = {
            "fp32": device.compile(HAND_SOURCE, options=("-std=c++17", "--use_fast_math"),
                                   name="lorenz_anchor_f32").function("rk4f"),
            "fp64": device.compile(HAND_SOURCE, options=("-std=c++17",),
                                   name="lorenz_anchor_f64").function("rk4d"),
        }
        self.device = device

    def run(self, which: str, rho: np.ndarray, repeats: int) -> dict:
        d = self.device
        real = np.float32 if which == "fp32" else np.float64
        n = len(rho)
        r = d.to_device(rho.astype(real))
        o = d.alloc(3 * n * np.dtype(real).itemsize)
        kernel = self.modules[which]
        args = [r, o, np.int32(n), np.int32(STEPS), real(DT)]
        grid = ((n + HAND_BLOCK - 1) // HAND_BLOCK,)
        try:
            ms, all_ms = median_ms(lambda: kernel.launch(grid, (HAND_BLOCK,), args).ms, repeats)
            final = d.from_device(o, (n, 3), real)
        finally:
            r.free()
            o.free()
        return {"ms": ms, "all_ms": all_ms, "final": final,
                "registers": kernel.attributes.registers}


def jax_timings(sizes_, repeats: int) -> dict:
    """The anchor's JAX RK4 loop and diffrax Tsit5 (fixed dt), ms by (kind, dtype, N)."""
    try:
        import diffrax
        import jax
        import jax.numpy as jnp
    except Exception as exc:  # noqa: BLE001 - optional
        return {"skipped": f"JAX/diffrax not importable: {type(exc).__name__}: {exc}"}
    jax.config.update("jax_enable_x64", True)

    def make(dtype, kind):
        def vf(t, u, rho):
            x, y, z = u[0], u[1], u[2]
            return jnp.stack([10 * (y - x), x * (rho - z) - y, x * y - (8 / 3) * z]).astype(dtype)
        if kind == "tsit5":
            term = diffrax.ODETerm(vf)

            def solve(rho):
                sol = diffrax.diffeqsolve(term, diffrax.Tsit5(), t0=0.0, t1=1.0, dt0=1e-3,
                                          y0=jnp.array([1.0, 0.0, 0.0], dtype=dtype), args=rho,
                                          saveat=diffrax.SaveAt(t1=True),
                                          stepsize_controller=diffrax.ConstantStepSize(),
                                          max_steps=1001)
                return sol.ys[-1]
        else:
            def solve(rho):
                dt = dtype(1e-3)

                def body(k, u):
                    k1 = vf(0, u, rho)
                    k2 = vf(0, u + 0.5 * dt * k1, rho)
                    k3 = vf(0, u + 0.5 * dt * k2, rho)
                    k4 = vf(0, u + dt * k3, rho)
                    return u + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
                return jax.lax.fori_loop(0, 1000, body, jnp.array([1.0, 0.0, 0.0], dtype=dtype))
        return jax.jit(jax.vmap(solve))

    out = {"device": str(jax.devices()[0])}
    for kind in ("rk4loop", "tsit5"):
        for dtype in (jnp.float32, jnp.float64):
            f = make(dtype, kind)
            name = jnp.dtype(dtype).name
            for n in sizes_:
                rho = jnp.linspace(0, 21, n, dtype=dtype)
                try:
                    f(rho).block_until_ready()
                    ts = []
                    for _ in range(max(1, min(repeats, 3))):
                        t = time.perf_counter()
                        f(rho).block_until_ready()
                        ts.append(time.perf_counter() - t)
                    out[f"{kind}_{name}_{n}"] = 1000 * float(np.median(ts))
                    print(f"  JAX {kind} {name} N={n}: {out[f'{kind}_{name}_{n}']:.2f} ms",
                          flush=True)
                except Exception as exc:  # noqa: BLE001 - report and go on
                    out[f"{kind}_{name}_{n}"] = None
                    out[f"error_{kind}_{name}_{n}"] = repr(exc)[:300]
                    break
    return out


def end_to_end(device, n: int) -> dict:
    """`sbmlgpu.run` wall time: compile (cached), transfers, result assembly."""
    import sbmlgpu
    from sbmlgpu.api import run

    net = sbmlgpu.load(str(ROOT / "sbml_models" / "lorenz.xml"))
    rows = {}
    for precision in ("float", "double"):
        options = {"method": "rk4", "precision": precision}
        run(net, "ode", times=[0.0, 1.0], parameters={"rho": np.linspace(0, 21, 1024)},
            options=options, device=[device.index], progress=False)  # compile, warm
        t = time.perf_counter()
        result = run(net, "ode", times=[0.0, 1.0], parameters={"rho": np.linspace(0, 21, n)},
                     options=options, device=[device.index], progress=False)
        rows[precision] = {"seconds": time.perf_counter() - t, "members": n,
                           "failed": result.n_failed}
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-jax", action="store_true")
    parser.add_argument("--quick", action="store_true", help="fewer sizes")
    parser.add_argument("--max-n", type=int, default=MAX_N, help="largest ensemble")
    args = parser.parse_args(argv)

    from sbmlgpu import runtime

    devices = runtime.get_devices()
    if not devices:
        print(f"no GPU: {runtime.no_gpu_reason()}", file=sys.stderr)
        return 2
    device = devices[0]
    props = device.properties
    peaks = {"fp32": props.peak_flops("float"), "fp64": props.peak_flops("double")}
    print(f"{props.name}: {props.sm_count} SMs at {props.clock_khz / 1e6:.2f} GHz; "
          f"peak FP32 {peaks['fp32'] / 1e12:.1f}, FP64 {peaks['fp64'] / 1e12:.1f} TFLOP/s",
          flush=True)

    variants = {
        "rk4_fp64": Ours(device, "rk4", "double"),
        "rk4_fp32": Ours(device, "rk4", "float"),
        "rk4_fp32_fast": Ours(device, "rk4", "float", fast_math=True),
        "dopri5_fp64": Ours(device, "dopri5", "double", rtol=1e-8, atol=1e-8),
        "dopri5_fp32": Ours(device, "dopri5", "float", rtol=1e-6, atol=1e-6),
    }
    hand = Hand(device)
    rk4_flops_per_step = variants["rk4_fp64"].source.flops_per_step
    rows = []
    for n in sizes(args.quick, args.max_n):
        rho = np.linspace(0, 21, n)
        h = {w: hand.run(w, rho, args.repeats) for w in ("fp32", "fp64")}
        hand_flops = float(n) * STEPS * rk4_flops_per_step
        for key, variant in variants.items():
            r = variant.run(rho, args.repeats)
            precision = "fp64" if variant.precision == "double" else "fp32"
            row = {"variant": key, "label": variant.label, "N": n, "ms": r["ms"],
                   "all_ms": r["all_ms"], "failed": r["failed"], "steps_total": r["steps_total"],
                   "gflops": r["flops"] / r["ms"] / 1e6,
                   "fraction_of_peak": r["flops"] / (r["ms"] / 1e3) / peaks[precision],
                   "registers": r["registers"], "local_bytes": r["local_bytes"],
                   "trajectories_per_s": n / (r["ms"] / 1e3)}
            if variant.method == "rk4":
                ref = h[precision]
                row["hand_ms"] = ref["ms"]
                row["hand_fraction_of_peak"] = hand_flops / (ref["ms"] / 1e3) / peaks[precision]
                row["speed_vs_hand"] = ref["ms"] / r["ms"]  # >= 0.9 is the target
                diff = np.abs(r["final"].astype(float) - ref["final"].astype(float))
                row["max_abs_diff_vs_hand"] = float(np.nanmax(diff))
            rows.append(row)
            extra = (f"  hand {row['hand_ms']:.3f} ms  ours/hand speed {row['speed_vs_hand']:.3f}"
                     if "hand_ms" in row else "")
            print(f"N={n:>8}  {variant.label:<32} {r['ms']:9.3f} ms  "
                  f"{100 * row['fraction_of_peak']:5.1f}% peak{extra}", flush=True)

    # block size sweep at the largest N (our default is 128)
    sweep = []
    n = sizes(args.quick, args.max_n)[-1]
    rho = np.linspace(0, 21, n)
    for block in (64, 128, 256, 512):
        for precision, fast in (("float", True), ("double", False)):
            v = Ours(device, "rk4", precision, fast_math=fast, block=block)
            r = v.run(rho, args.repeats)
            sweep.append({"block": block, "label": v.label, "ms": r["ms"],
                          "registers": r["registers"]})
            print(f"block {block:>4}: {v.label:<32} {r['ms']:9.3f} ms", flush=True)

    jax = {"skipped": "--no-jax"} if args.no_jax else jax_timings(
        [s for s in ANCHOR_SIZES if s <= sizes(args.quick, args.max_n)[-1]], args.repeats)
    comparisons = []
    if "skipped" not in jax:
        for row in rows:
            if row["variant"] not in ("rk4_fp32_fast", "rk4_fp64") or row["N"] not in ANCHOR_SIZES:
                continue
            name = "float32" if row["variant"] == "rk4_fp32_fast" else "float64"
            loop = jax.get(f"rk4loop_{name}_{row['N']}")
            tsit = jax.get(f"tsit5_{name}_{row['N']}")
            comparisons.append({"N": row["N"], "precision": name, "ours_ms": row["ms"],
                                "jax_loop_ms": loop, "diffrax_ms": tsit,
                                "speedup_vs_jax_loop": loop / row["ms"] if loop else None,
                                "speedup_vs_diffrax": tsit / row["ms"] if tsit else None})
    e2e = end_to_end(device, sizes(args.quick, args.max_n)[-1])

    report = {
        "benchmark": "ode_lorenz", "date": datetime.now(timezone.utc).isoformat(),
        "device": {"name": props.name, "sm_count": props.sm_count,
                   "clock_ghz": props.clock_khz / 1e6, "peak_fp32": peaks["fp32"],
                   "peak_fp64": peaks["fp64"]},
        "host": platform.node(), "command": " ".join(sys.argv),
        "flops_per_rk4_step": rk4_flops_per_step,
        "flops_per_rhs": variants["rk4_fp64"].source.flops_per_rhs,
        "rows": rows, "block_sweep": sweep, "jax": jax, "vs_jax": comparisons,
        "end_to_end": e2e,
        "targets": {"speed_vs_hand": 0.9, "speedup_vs_jax_loop": 30, "speedup_vs_diffrax": 1000},
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "ode_lorenz.json").write_text(json.dumps(report, indent=1, default=float))

    print("\nN = %d" % sizes(args.quick, args.max_n)[-1])
    print(f"{'variant':<34}{'ms':>10}{'% peak':>9}{'hand ms':>10}{'vs hand':>9}")
    for row in rows:
        if row["N"] != sizes(args.quick, args.max_n)[-1]:
            continue
        hand_ms = f"{row['hand_ms']:.3f}" if "hand_ms" in row else "-"
        vs = f"{row['speed_vs_hand']:.3f}" if "speed_vs_hand" in row else "-"
        print(f"{row['label']:<34}{row['ms']:>10.3f}{100 * row['fraction_of_peak']:>9.1f}"
              f"{hand_ms:>10}{vs:>9}")
    for c in comparisons:
        print(f"N={c['N']} {c['precision']}: ours {c['ours_ms']:.3f} ms, JAX loop "
              f"{c['jax_loop_ms']} ms (x{c['speedup_vs_jax_loop'] or float('nan'):.0f}), "
              f"diffrax {c['diffrax_ms']} ms (x{c['speedup_vs_diffrax'] or float('nan'):.0f})")
    if "skipped" in jax:
        print(f"JAX: {jax['skipped']}")
    print(f"end to end (sbmlgpu.run, {sizes(args.quick, args.max_n)[-1]} members): "
          + ", ".join(f"{k} {v['seconds']:.2f} s" for k, v in e2e.items()))
    print(f"wrote {out / 'ode_lorenz.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
