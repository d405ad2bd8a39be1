#!/usr/bin/env python3
# Scratch (issue 13, fifth session), kept for the figures of docs/benchmarks.md that cite it.
import sys, warnings; warnings.simplefilter("ignore")
from pathlib import Path; sys.path.insert(0, str(Path(__file__).resolve().parents[3])); sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import numpy as np
import petab_objective as po
from tests.shared_data import MODELS
from sbmlgpu.petab.problem import load_problem
from sbmlgpu.petab.values import sampled_sets
name = sys.argv[1]; n = int(sys.argv[2]); js = [int(a) for a in sys.argv[3].split(",")]
yaml = MODELS / "petab-benchmark" / name / f"{name}.yaml"
po._init(str(yaml))
sets = sampled_sets(load_problem(yaml), n, 0)
for j in js:
    chunk = {k: np.atleast_1d(v)[[j]] if np.ndim(v) else np.array([v]) for k, v in sets.items()}
    t, nll, chi2, ok = po._work(chunk)
    print(j, ok, nll, f"{t:.3f}s")
