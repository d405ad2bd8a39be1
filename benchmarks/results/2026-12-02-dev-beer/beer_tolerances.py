#!/usr/bin/env python3
"""Scratch (issue 13): does Beer_MolBioSystems2014's objective disagree with
libRoadRunner's because of a bug or because neither is converged at rtol 1e-6?

    python3 benchmarks/results/2026-12-02-dev-beer/beer_tolerances.py [N] [PROBLEM]

N sets (benchmarks/petab_objective.py's sampler, seed 0), the objective on our CPU path
and libRoadRunner's (that benchmark's own code, in this process) at the benchmark's
tolerances (rtol 1e-6, atol 1e-12) and at tight ones (rtol 1e-10, atol 1e-14): how many
sets agree within 1e-3 (relative) pair by pair. JSON on stdout's last line."""

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from benchmarks import petab_objective as bench  # noqa: E402
from tests.shared_data import MODELS  # noqa: E402

TOLERANCES = {"loose": (1e-6, 1e-12), "tight": (1e-10, 1e-14)}


def main() -> None:
    from sbmlgpu.petab import objective
    from sbmlgpu.petab.values import sampled_sets

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    name = sys.argv[2] if len(sys.argv) > 2 else "Beer_MolBioSystems2014"
    yaml = MODELS / "petab-benchmark" / name / f"{name}.yaml"
    nll, ok, seconds = {}, {}, {}
    sets = None
    for label, (rtol, atol) in TOLERANCES.items():
        prepared = objective(yaml, device="cpu", options={"rtol": rtol, "atol": atol})
        sets = sampled_sets(prepared.problem, n, 0) if sets is None else sets
        started = time.perf_counter()
        result = prepared.evaluate(sets)
        seconds[f"ours_{label}"] = time.perf_counter() - started
        nll[f"ours_{label}"], ok[f"ours_{label}"] = result.nll, result.status == 0
        bench.RTOL, bench.ATOL = rtol, atol
        bench._init(str(yaml))
        taken, rr_nll, _, rr_ok = bench._work(sets)
        seconds[f"rr_{label}"] = taken
        nll[f"rr_{label}"], ok[f"rr_{label}"] = rr_nll, rr_ok & np.isfinite(rr_nll)
        print(label, {k: float(v) for k, v in seconds.items()}, flush=True)

    def agree(a: str, b: str) -> dict:
        both = ok[a] & ok[b] & np.isfinite(nll[a]) & np.isfinite(nll[b])
        rel = np.abs(nll[a][both] - nll[b][both]) / np.maximum(np.abs(nll[b][both]), 1e-300)
        return {"both": int(both.sum()), "within_1e-3": int((rel <= 1e-3).sum()),
                "max_rel": float(rel.max()) if rel.size else None}

    pairs = [("ours_loose", "rr_loose"), ("ours_tight", "rr_tight"),
             ("ours_loose", "ours_tight"), ("rr_loose", "rr_tight"),
             ("ours_loose", "rr_tight"), ("rr_loose", "ours_tight")]
    out = {"problem": name, "n": n, "seconds": seconds,
           "ok": {k: int(v.sum()) for k, v in ok.items()},
           "nll_min": {k: float(np.nanmin(np.where(ok[k], nll[k], np.nan))) for k in nll},
           "agree": {f"{a} vs {b}": agree(a, b) for a, b in pairs}}
    for key, value in out["agree"].items():
        print(f"{key:26} {value}", flush=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
