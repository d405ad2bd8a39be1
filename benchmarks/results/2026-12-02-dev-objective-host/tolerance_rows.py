#!/usr/bin/env python3
# Scratch (issue 13, fifth session), kept for the figures of docs/benchmarks.md that cite it.
import sys, warnings; warnings.simplefilter("ignore")
from pathlib import Path; sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
import numpy as np
from tests.shared_data import MODELS
from sbmlgpu.petab import objective
from sbmlgpu.petab.values import sampled_sets
name = sys.argv[1]; n = int(sys.argv[2]); method = sys.argv[3] if len(sys.argv) > 3 else "rodas4"
yaml = MODELS / "petab-benchmark" / name / f"{name}.yaml"
res = {}
for label, tol, m in [("loose", (1e-6, 1e-12), method), ("tight", (1e-10, 1e-14), "rodas4")]:
    prep = objective(yaml, device="cpu", options={"rtol": tol[0], "atol": tol[1], "method": m})
    sets = sampled_sets(prep.problem, n, 0)
    res[label] = prep.evaluate(sets)
a, b = res["loose"], res["tight"]
both = (a.status == 0) & (b.status == 0)
rel = np.abs(a.nll - b.nll) / np.maximum(np.abs(b.nll), 1e-300)
bad = np.flatnonzero(both & (rel > 1e-3))
print("differ", len(bad), "of", both.sum())
meas = a.problem.measurements
for j in bad[:6]:
    sa, sb = a.simulation[:, j], b.simulation[:, j]
    r = np.abs(sa - sb) / np.maximum(np.abs(sb), 1e-12)
    k = np.argsort(-r)[:3]
    print(j, f"nll {a.nll[j]:.6g} vs {b.nll[j]:.6g}", [(meas['observableId'].iloc[i], float(meas['time'].iloc[i]), f"{sa[i]:.4g}", f"{sb[i]:.4g}") for i in k])
