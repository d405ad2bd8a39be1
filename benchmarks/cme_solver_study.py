#!/usr/bin/env python3
"""Why the CME's aggregation solver is not 10x Jacobi, and what might be: a CPU study.

    python benchmarks/cme_solver_study.py [--model toggle|schnakenberg|brusselator]
                                          [--bound N] [--tol 1e-8] [--out DIR]

On one CME generator built by the cme backend's own pieces (plugins/cme: enumeration,
host propensities, CSR), from the uniform vector to the normalised residual --tol
(the solvers' test, ||A p||_inf / (||A||_inf ||p||_inf)), scipy on the host:

- `jacobi`: damped Jacobi (w = 0.9), the baseline (sweeps);
- `vcycle` / `wcycle`: the multilevel aggregation of plugins/cme (runs of 4
  consecutive states, iterate-weighted coarse chains, damped Jacobi smoothing, 4 + 4
  sweeps per level), as V- and W-cycles (cycles; work in fine-sweep equivalents: a
  level's sweeps weighted by its size, plus one per level for its coarse values);
- `twolevel`: the same cycle with only the first coarse level, solved exactly
  (sparse LU): what the coarse correction can do at best;
- `gmres-tg` / `gmres-sa`: restarted GMRES(5) on A e = -A p0 (p0 after 200 Jacobi
  sweeps), right-preconditioned by a linear two-grid cycle (2 + 2 Jacobi sweeps; the
  coarse level exact, bordered by sum = 0) whose interpolation is the aggregation's
  (diag(p0) P / P^T p0, `tg`), or smoothed aggregation (P and R each smoothed by one
  Jacobi step, `sa`; De Sterck et al., SIAM J. Sci. Comput. 32(1), 2010, "Smoothed
  aggregation multigrid for Markov chains"): preconditioner applications.
- `large-64` / `large-256` / `large-1024`: GMRES(20) with the same two-grid cycle, 4 + 4
  sweeps, aggregates of 64, 256 or 1,024 consecutive states (a coarse level that
  could be solved exactly at 10^7-10^8 states): applications and work.

- `idr`: the backend's own IDR(s) solver (plugins/cme/solvers.py: IDR(4) on
  (I - J^8) p = 0, J the damped Jacobi sweep), and `bicgstab`: BiCGStab on the same
  operator, k = 8 (what was tried before IDR): Jacobi sweeps; a Krylov method needs
  no coarse level, so these are solvers, not bounds.

- `kcycle`: what `gmres-tg` becomes with the coarse level no longer exact (Notay's
  K-cycle): flexible GMRES(30) at the top, preconditioned by the linear aggregation
  cycle of every level (runs of 4, weights of p0, 2 + 2 Jacobi sweeps), each coarse
  level solved by 2 flexible GMRES iterations preconditioned by the next, the
  coarsest (at most 400 states) exactly: work in fine-sweep equivalents, the 200
  Jacobi sweeps of p0 included.

The exact coarse solves make `twolevel` and `gmres-*` a bound, not a solver: none of
them is built in plugins/cme, nor is `kcycle`. JSON to DIR/cme_solver_study_<model>_<bound>.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sps
from scipy.sparse.linalg import LinearOperator, gmres, splu

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MODELS = {"toggle": ("cme_toggle_switch", ("Pa", "Pb")),
          "schnakenberg": ("cme_schnakenberg", ("X", "Y")),
          "brusselator": ("cme_brusselator", ("X", "Y"))}
MAX_CYCLES = 400
MAX_APPLIES = 600


class Stop(Exception):
    """The residual reached the tolerance inside a callback."""


def generator(model_name: str, bound: int):
    from sbmlgpu import load
    from sbmlgpu.plugins.cme.cpu_engine import CpuEngine
    from sbmlgpu.plugins.cme.matrix import diagonal, offdiag_csr
    from sbmlgpu.plugins.cme.model import build
    from sbmlgpu.plugins.cme.statespace import enumerate_states, propensities_host

    name, species = MODELS[model_name]
    model = build(load(ROOT / "sbml_models" / f"{name}.xml"))
    space = enumerate_states(model, {s: bound for s in species})
    prop = propensities_host(model, space)
    return CpuEngine(offdiag_csr(space, prop), diagonal(space, prop))


def normalised_residual(a, norm: float, x: np.ndarray) -> float:
    x = x / x.sum()
    return float(np.abs(a @ x).max() / (norm * np.abs(x).max()))


def jacobi(engine, a, tol: float, max_sweeps: int = 2_000_000) -> dict:
    p = np.full(engine.n, 1.0 / engine.n)
    sweeps = 0
    while sweeps < max_sweeps:
        p = engine.jacobi(p, 100, 0.9)
        sweeps += 100
        engine.normalise(p)
        if normalised_residual(a, engine.norm_inf, p) <= tol:
            return {"sweeps": sweeps, "converged": True}
    return {"sweeps": sweeps, "converged": False}


def cycles(engine, a, tol: float, gamma: int, depth: int | None = None,
           exact_coarsest: bool = False) -> dict:
    """Aggregation cycles of plugins/cme (its levels' smooth / coarsen / prolong), the
    coarse level visited gamma times; `depth` levels (the last solved directly)."""
    from sbmlgpu.plugins.cme.solvers import SolverSettings, coarsest_solution

    s = SolverSettings()
    levels = engine.levels()
    levels = levels[:depth] if depth else levels
    n0 = levels[0].n
    work = [0.0]

    def direct(level):
        m = (level.matrix() + sps.diags(level.diag)).tolil()
        m[-1, :] = 1.0
        b = np.zeros(level.n)
        b[-1] = 1.0
        q = np.clip(splu(m.tocsc()).solve(b), 0.0, None)
        return q / q.sum()

    def cycle(k, p):
        level = levels[k]
        if k == len(levels) - 1:
            return direct(level) if exact_coarsest else \
                level.vector_like(coarsest_solution(level.dense()))
        share = level.n / n0
        p = level.smooth(p, s.smooth_sweeps, s.omega)
        pc = level.coarsen(p)
        work[0] += share * (2 * s.smooth_sweeps + 1)
        qc = pc
        for _ in range(gamma if k + 1 < len(levels) - 1 else 1):
            qc = cycle(k + 1, qc)
        p = level.prolong(p, qc, pc)
        return level.smooth(p, s.smooth_sweeps, s.omega)

    p = np.full(n0, 1.0 / n0)
    history = []
    for count in range(1, MAX_CYCLES + 1):
        p = cycle(0, p)
        engine.normalise(p)
        history.append(normalised_residual(a, engine.norm_inf, p))
        if history[-1] <= tol or not math.isfinite(history[-1]) \
                or history[-1] > 1e3 * min(history):
            break
    half = len(history) // 2
    rate = (history[-1] / history[half]) ** (1.0 / max(1, len(history) - 1 - half))
    return {"cycles": count, "work_sweeps": work[0], "converged": history[-1] <= tol,
            "residual": history[-1], "rate_per_cycle": rate}


def aggregation_operators(w: np.ndarray, size: int = 4):
    """(restriction P^T, interpolation diag(w) P / P^T w) of runs of `size` consecutive
    states weighted by w: the linear form of plugins/cme's aggregation (size 4)."""
    n = len(w)
    pa = sps.csr_matrix((np.ones(n), (np.arange(n), np.arange(n) // size)),
                        shape=(n, -(-n // size)))
    restriction = pa.T.tocsr()
    return restriction, (sps.diags(w) @ pa @ sps.diags(1.0 / (restriction @ w))).tocsr()


def preconditioned_gmres(engine, a, tol: float, smoothed: bool, size: int = 4,
                         sweeps: int = 2, restart: int = 5) -> dict:
    """GMRES(`restart`) on A e = -A p0 (p0 after 200 Jacobi sweeps), right-preconditioned
    by a two-grid cycle: `sweeps` + `sweeps` damped Jacobi sweeps around an exact coarse
    level of runs of `size` consecutive states (module doc: `gmres-tg`, `gmres-sa`;
    `large-<size>`: aggregates large enough for the coarse level to be solved exactly
    at 10^7-10^8 states, for the slow global mode, the toggle switch's switching, that
    Jacobi sweeps and their Krylov spaces do not resolve). Work in fine-sweep
    equivalents: 200 for p0, then per application 2 x sweeps + 2 (the residual before
    the coarse solve, GMRES's product with A) and GMRES's orthogonalisation (restart / 2
    vector updates an iteration, each counted as 1/5 sweep: a sweep reads ~5 nonzeros
    a row)."""
    n = engine.n
    d = engine.diag
    inverse = 1.0 / np.where(d != 0, d, -1.0)
    p0 = engine.jacobi(np.full(n, 1.0 / n), 200, 0.9)
    p0 /= p0.sum()
    w = np.maximum(p0, 1e-300)
    restriction, interpolation = aggregation_operators(w, size)
    nc = restriction.shape[0]
    if smoothed:
        step = sps.eye(n) - 0.7 * sps.diags(inverse) @ a
        interpolation = (step @ interpolation).tocsr()
        restriction = (restriction @ (sps.eye(n) - 0.7 * a @ sps.diags(inverse))).tocsr()
    coarse = (restriction @ a @ interpolation).tocsc()
    bordered = sps.bmat([[coarse, np.ones((nc, 1))], [np.ones((1, nc)), None]]).tocsc()
    lu = splu(bordered)
    applies = [0]

    def smooth(r, x):
        for _ in range(sweeps):
            x = x + 0.7 * inverse * (r - a @ x)
        return x

    def apply(r):
        applies[0] += 1
        x = smooth(r, np.zeros(n))
        ec = lu.solve(np.r_[restriction @ (r - a @ x), 0.0])[:nc]
        return smooth(r, x + interpolation @ ec)

    best = [math.inf]

    def check(xk):
        best[0] = min(best[0], normalised_residual(a, engine.norm_inf, p0 + xk))
        if best[0] <= tol:
            raise Stop

    try:
        gmres(a, -(a @ p0), M=LinearOperator((n, n), matvec=apply), rtol=1e-30, atol=0.0,
              restart=restart, maxiter=max(1, MAX_APPLIES // restart), callback=check,
              callback_type="x")
    except Stop:
        pass
    return {"applies": applies[0], "converged": best[0] <= tol, "residual": best[0],
            "coarse_states": nc, "coarse_nnz_per_row": coarse.nnz / nc,
            "work_sweeps": 200 + applies[0] * (2 * sweeps + 2 + restart / 2 / 5)}


def _fgmres(a, b, precondition, iterations: int, work: list, share: float) -> np.ndarray:
    """`iterations` steps of flexible GMRES (right preconditioning that may change from
    step to step) on a x = b from 0; `work[0]` += `share` per product with a."""
    beta = float(np.linalg.norm(b))
    if beta == 0:
        return np.zeros_like(b)
    basis, directions = [b / beta], []
    h = np.zeros((iterations + 1, iterations))
    for j in range(iterations):
        z = precondition(basis[j])
        directions.append(z)
        v = a @ z
        work[0] += share
        for i in range(j + 1):
            h[i, j] = v @ basis[i]
            v = v - h[i, j] * basis[i]
        h[j + 1, j] = np.linalg.norm(v)
        if h[j + 1, j] == 0:
            iterations = j + 1
            break
        basis.append(v / h[j + 1, j])
    rhs = np.zeros(iterations + 1)
    rhs[0] = beta
    y = np.linalg.lstsq(h[:iterations + 1, :iterations], rhs, rcond=None)[0]
    return sum(y[i] * directions[i] for i in range(iterations))


def kcycle(engine, a, tol: float, sweeps: int = 2, inner: int = 2, restart: int = 30,
           coarsest: int = 400) -> dict:
    n0 = engine.n
    p0 = engine.jacobi(np.full(n0, 1.0 / n0), 200, 0.9)
    p0 /= p0.sum()
    w = np.maximum(p0, 1e-300)
    levels, level = [], a
    while level.shape[0] > coarsest:  # the linear aggregation hierarchy, weights of p0
        restriction, interpolation = aggregation_operators(w)
        d = level.diagonal()
        levels.append((level, interpolation, restriction, 1.0 / np.where(d != 0, d, -1.0)))
        level, w = (restriction @ level @ interpolation).tocsr(), restriction @ w
    nc = level.shape[0]
    last = splu(sps.bmat([[level, np.ones((nc, 1))], [np.ones((1, nc)), None]]).tocsc())
    work = [200.0]

    def cycle(k, r):
        if k == len(levels):
            return last.solve(np.r_[r, 0.0])[:-1]
        m, interpolation, restriction, inverse = levels[k]
        share = m.shape[0] / n0
        x = np.zeros_like(r)
        for _ in range(sweeps):
            x = x + 0.7 * inverse * (r - m @ x)
        coarse_r = restriction @ (r - m @ x)
        if k + 1 == len(levels):
            correction = cycle(k + 1, coarse_r)
        else:
            coarse = levels[k + 1][0]
            correction = _fgmres(coarse, coarse_r, lambda v: cycle(k + 1, v), inner, work,
                                 coarse.shape[0] / n0)
        x = x + interpolation @ correction
        for _ in range(sweeps):
            x = x + 0.7 * inverse * (r - m @ x)
        work[0] += share * (2 * sweeps + 2)
        return x

    x, outer = p0.copy(), 0
    residual = normalised_residual(a, engine.norm_inf, x)
    while residual > tol and outer < 60:
        work[0] += 1.0  # the residual -a x
        x = x + _fgmres(a, -(a @ x), lambda v: cycle(0, v), restart, work, 1.0)
        outer += 1
        residual = normalised_residual(a, engine.norm_inf, x)
    return {"outer": outer, "work_sweeps": work[0], "converged": residual <= tol,
            "residual": residual, "levels": [lv[0].shape[0] for lv in levels] + [nc]}


def idr(engine, tol: float) -> dict:
    from sbmlgpu.plugins.cme.solvers import ConvergenceError, SolverSettings, solve

    try:
        s = solve(engine, np.full(engine.n, 1.0 / engine.n),
                  SolverSettings(solver="idr", tol=tol, max_sweeps=200_000))
    except ConvergenceError as error:
        s = error.solution
    return {"sweeps": s.sweeps, "converged": s.converged, "residual": s.residual}


def bicgstab(engine, a, tol: float, k: int = 8, max_sweeps: int = 60_000) -> dict:
    """BiCGStab (van der Vorst 1992) on F(x) = x - J^k(x) = 0 from the uniform vector,
    the test on x normalised after every iteration; a zero or non-finite rho, omega
    or denominator is a breakdown."""
    sweeps = [0]

    def apply(v):
        sweeps[0] += k
        return v - engine.jacobi(v, k, 0.9)

    x = np.full(engine.n, 1.0 / engine.n)
    r = -apply(x)
    shadow = r.copy()
    rho = alpha = omega = 1.0
    v = direction = np.zeros(engine.n)
    residual = math.inf
    while sweeps[0] < max_sweeps:
        rho_new = float(shadow @ r)
        if not (rho_new != 0 and math.isfinite(rho_new) and omega != 0):
            return {"sweeps": sweeps[0], "converged": False, "residual": residual,
                    "breakdown": True}
        direction = r + (rho_new / rho) * (alpha / omega) * (direction - omega * v)
        v = apply(direction)
        alpha = rho_new / float(shadow @ v)
        s = r - alpha * v
        t = apply(s)
        tt = float(t @ t)
        omega = float(t @ s) / tt if tt > 0 else 0.0
        x = x + alpha * direction + omega * s
        r = s - omega * t
        rho = rho_new
        residual = normalised_residual(a, engine.norm_inf, x)
        if not math.isfinite(residual):
            return {"sweeps": sweeps[0], "converged": False, "residual": residual,
                    "breakdown": True}
        if residual <= tol:
            return {"sweeps": sweeps[0], "converged": True, "residual": residual}
    return {"sweeps": sweeps[0], "converged": False, "residual": residual}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=sorted(MODELS), default="toggle")
    parser.add_argument("--bound", type=int, default=100)
    parser.add_argument("--tol", type=float, default=1e-8)
    parser.add_argument("--skip", nargs="*", default=[],
                        choices=["jacobi", "vcycle", "wcycle", "twolevel", "gmres-tg",
                                 "gmres-sa", "kcycle", "idr", "bicgstab", "large-64",
                                 "large-256", "large-1024"])
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    args = parser.parse_args(argv)
    if args.bound < 1 or not args.tol > 0:
        parser.error(f"--bound must be at least 1 and --tol positive, not {args.bound}, "
                     f"{args.tol}")
    engine = generator(args.model, args.bound)
    a = (engine.offdiag + sps.diags(engine.diag)).tocsr()
    row = {"benchmark": "cme_solver_study", "model": args.model, "bound": args.bound,
           "states": engine.n, "tol": args.tol, "levels": [lv.n for lv in engine.levels()]}
    print(f"{args.model} at {args.bound}: {engine.n} states, levels {row['levels']}",
          flush=True)
    studies = {
        "jacobi": lambda: jacobi(engine, a, args.tol),
        "vcycle": lambda: cycles(engine, a, args.tol, gamma=1),
        "wcycle": lambda: cycles(engine, a, args.tol, gamma=2),
        "twolevel": lambda: cycles(engine, a, args.tol, gamma=1, depth=2, exact_coarsest=True),
        "gmres-tg": lambda: preconditioned_gmres(engine, a, args.tol, smoothed=False),
        "gmres-sa": lambda: preconditioned_gmres(engine, a, args.tol, smoothed=True),
        "kcycle": lambda: kcycle(engine, a, args.tol),
        "idr": lambda: idr(engine, args.tol),
        "bicgstab": lambda: bicgstab(engine, a, args.tol),
        **{f"large-{size}": (lambda size=size: preconditioned_gmres(
            engine, a, args.tol, smoothed=False, size=size, sweeps=4, restart=20))
           for size in (64, 256, 1024)}}
    for name, study in studies.items():
        if name in args.skip:
            continue
        started = time.perf_counter()
        row[name] = {**study(), "seconds": time.perf_counter() - started}
        print(f"  {name:9s} {row[name]}", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"cme_solver_study_{args.model}_{args.bound}.json"
    path.write_text(json.dumps(row, indent=1))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
