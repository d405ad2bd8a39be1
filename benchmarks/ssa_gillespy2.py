"""The GillesPy2 anchor: its C++ SSA (SSACSolver) on every CPU core of this machine.

GillesPy2 runs the trajectories of one `run()` one after another in one process, so
the 16 cores are used by 16 worker processes, each with its own compiled solver
(built before timing starts) and its own seed, each running its share of the
trajectories; the time is the parent's wall clock from handing out the shares to
the last one coming back. Needs gillespy2 and SCons (its C++ build uses them);
without them the anchor reports 'not available' and why.

    python benchmarks/ssa_gillespy2.py sbml_models/BIOMD0000000035.xml --end 200 --points 201
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import time

_solver = None


def available() -> tuple[bool, str]:
    try:
        import gillespy2  # noqa: F401
    except Exception as exc:  # noqa: BLE001 -- any import failure means "not available"
        return False, f"gillespy2 does not import: {exc}"
    from importlib.util import find_spec

    if find_spec("SCons") is None:
        return False, "SCons is not installed (GillesPy2's C++ solver is built with it)"
    return True, ""


def _init(path: str, end: float, points: int) -> None:
    global _solver
    import gillespy2
    import numpy as np

    model, errors = gillespy2.import_SBML(path)
    if model is None:
        raise RuntimeError(f"GillesPy2 could not import {path}: {errors}")
    model.timespan(np.linspace(0.0, end, points))
    _solver = gillespy2.SSACSolver(model=model)  # compiles the C++ simulation
    _solver.run(number_of_trajectories=1, seed=1)  # and loads it once


def _share(args) -> float:
    count, seed = args
    started = time.perf_counter()
    _solver.run(number_of_trajectories=count, seed=seed)
    return time.perf_counter() - started


def measure(path: str, end: float, points: int, trajectories: int,
            cores: int | None = None) -> dict:
    """Trajectories per second of GillesPy2's SSACSolver on `cores` processes."""
    ok, why = available()
    if not ok:
        return {"available": False, "reason": why}
    cores = cores or os.cpu_count() or 1
    shares = [trajectories // cores + (1 if i < trajectories % cores else 0) for i in range(cores)]
    shares = [(s, 1000 + i) for i, s in enumerate(shares) if s]
    # spawn, not fork: the caller has usually created a CUDA context by now, and a
    # forked child inherits it (the PEtab benchmark's libRoadRunner pool hung on that)
    ctx = mp.get_context("spawn")
    with ctx.Pool(len(shares), initializer=_init, initargs=(str(path), end, points)) as pool:
        pool.map(_share, [(1, 1) for _ in shares], chunksize=1)  # every worker is warm
        started = time.perf_counter()
        per_worker = pool.map(_share, shares, chunksize=1)
        wall = time.perf_counter() - started
    import gillespy2

    return {"available": True, "gillespy2": gillespy2.__version__, "solver": "SSACSolver",
            "cores": len(shares), "trajectories": trajectories, "end": end, "points": points,
            "wall_s": wall, "trajectories_per_s": trajectories / wall,
            "slowest_worker_s": max(per_worker)}


if __name__ == "__main__":
    import argparse

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("model")
    p.add_argument("--end", type=float, default=200.0)
    p.add_argument("--points", type=int, default=201)
    p.add_argument("--trajectories", type=int, default=64)
    p.add_argument("--cores", type=int, default=None)
    args = p.parse_args()
    print(measure(args.model, args.end, args.points, args.trajectories, args.cores))
    sys.exit(0)
