#!/usr/bin/env python3
# Scratch (issue 13, fifth session), kept for the figures of docs/benchmarks.md that cite it.
"""Profile the host work of a repeated objective call outside the ensembles (CPU path,
ensembles replayed from a cache so only the host's own work is timed)."""
import cProfile, pstats, sys, time
from pathlib import Path; sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.shared_data import MODELS
import sbmlgpu.api as api
from sbmlgpu.petab import objective
from sbmlgpu.petab.values import sampled_sets

name, n = sys.argv[1], int(sys.argv[2])
yaml = MODELS / "petab-benchmark" / name / f"{name}.yaml"
prepared = objective(yaml, device="cpu", options={"rtol": 1e-6, "atol": 1e-12})
sets = sampled_sets(prepared.problem, n, 0)
execute = api.execute
cache = []
def recording(*a, **k):
    out = execute(*a, **k); cache.append(out); return out
api.execute = recording
t = time.perf_counter(); prepared.evaluate(sets); print("first", time.perf_counter() - t)
cache.clear(); prepared.evaluate(sets)
calls = iter(list(cache))
api.execute = lambda *a, **k: next(calls)
p = cProfile.Profile(); t = time.perf_counter(); p.enable()
r = prepared.evaluate(sets)
p.disable(); print("replayed call", time.perf_counter() - t)
import numpy as np; print("status", np.unique(r.status, return_counts=True))
pstats.Stats(p).sort_stats("tottime").print_stats(25)
