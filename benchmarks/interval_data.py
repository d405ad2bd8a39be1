#!/usr/bin/env python3
"""The bounded-error data and the cases of the interval benchmarks (Sharma's NCSU
thesis, "Parameter Estimation for System Biology Models on GPU Clusters"; issue 11).

    python benchmarks/interval_data.py --out DIR [--points N]

writes DIR/lv.csv, DIR/seir.csv (`time,id,lower,upper`) and DIR/interval_cases.json
(per case: model, data, unknowns with their search boxes, epsilon, the thesis's
times). `build_cases(DIR)` does the same from Python; benchmarks/interval_sivia.py
runs the cases.

The data are the model's own solution at its nominal parameters (the values in the
SBML file), computed by scipy's DOP853 at rtol = atol = 1e-12, each value widened by
the error bound on both sides: the truth lies inside every interval, so the true
parameters must never be excluded. No noise is added (the thesis's noise, if any,
is not known here; a centred interval is the case where the truth is easiest to
check).

- LV (sbml_models/lotka_volterra.xml; p = (1, 0.01, 1, 0.02), x(0) = (50, 50)):
  1,400 points at step 0.0005 (t = 0.0005 .. 0.7), x1 measured, error +-1.5.
  Unknowns p2, p4 in [-1, 1] each (issue 11), epsilon 1e-5.
- SEIR (sbml_models/seir_linear.xml; p = (0.5, 0.1, 0.4, 0.2), x(0) = (700, 0, 300, 0)):
  1,000 points at step 0.01 (t = 0.01 .. 10), error +-5. Which states the thesis
  measures is not known here: all four, x1..x4, are measured. Which two or three of
  p2..p4 the thesis estimates and in which ranges is not known either; our choice:
  SEIR-2P estimates p2, p3 and SEIR-3P p2, p3, p4, each in [0, 1] (rates of a linear
  compartment model are non-negative; the box holds the truth well inside it).
  epsilon 5e-4 for both.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # noqa -- run as a script from anywhere
MODELS = ROOT / "sbml_models"
CASES_FILE = "interval_cases.json"
#: the accuracy of the "truth": far below the error bounds (1.5 and 5)
RTOL = ATOL = 1e-12


@dataclass(frozen=True)
class Dataset:
    """Measurements of `measured` at t = step, 2 step, ..., points * step."""

    name: str
    model: str  # file in sbml_models/
    measured: tuple[str, ...]
    error: float  # half-width of every data interval
    step: float
    points: int

    @property
    def path(self) -> Path:
        return MODELS / self.model

    def times(self, points: int | None = None) -> np.ndarray:
        """The data's times; `points`: fewer of them, spread evenly over the same span
        (every k-th time, the last one kept), for smoke tests."""
        # rounded: the nearest doubles to the decimal times (0.0015, not 0.0015000000000000002)
        times = np.round(self.step * np.arange(1, self.points + 1), 12)
        if points is None or points >= self.points:
            return times
        if points < 1:
            raise ValueError(f"points must be >= 1, not {points}")
        return times[np.linspace(0, self.points - 1, points).round().astype(int)]


@dataclass(frozen=True)
class Case:
    """One benchmark: a dataset, the unknowns with their search boxes, epsilon, and
    the thesis's times for it (../shared/BENCHMARKS.md: a K20 GPU, an 8-core CPU)."""

    name: str
    dataset: str
    unknown: dict[str, tuple[float, float]]
    epsilon: float
    thesis_k20_seconds: float
    thesis_cpu8_seconds: float
    notes: str = field(default="")


DATASETS = {
    "lv": Dataset("lv", "lotka_volterra.xml", ("x1",), 1.5, 0.0005, 1400),
    "seir": Dataset("seir", "seir_linear.xml", ("x1", "x2", "x3", "x4"), 5.0, 0.01, 1000),
}
CASES = {
    "lv": Case("lv", "lv", {"p2": (-1.0, 1.0), "p4": (-1.0, 1.0)}, 1e-5, 0.85, 4.14,
               "unknowns and box as issue 11 (the thesis's [-1, 1]^2)"),
    "seir2": Case("seir2", "seir", {"p2": (0.0, 1.0), "p3": (0.0, 1.0)}, 5e-4, 12.6, 574.0,
                  "which two unknowns the thesis uses is not known here: p2, p3 chosen"),
    "seir3": Case("seir3", "seir", {"p2": (0.0, 1.0), "p3": (0.0, 1.0), "p4": (0.0, 1.0)},
                  5e-4, 26.5, 2134.0, "p2, p3, p4: the three rates besides p1"),
}


def true_values(model: str | Path, times, ids) -> dict[str, np.ndarray]:
    """The SBML value of each id at `times` at the model's nominal parameters, from
    the ODE view's right-hand side integrated by DOP853 at rtol = atol = 1e-12."""
    import sympy as sp
    from scipy.integrate import solve_ivp

    import sbmlgpu
    from sbmlgpu.views.ode import ode_system

    ode = ode_system(sbmlgpu.load(str(model)))
    nominal = dict(zip(ode.p, ode.p_values))
    t = ode.t
    rhs = sp.lambdify((t, ode.x), [sp.sympify(f).subs(nominal) for f in ode.rhs], "numpy")
    x0 = [float(sp.sympify(e).subs(nominal).subs(t, 0)) for e in ode.x0]
    times = np.asarray(times, dtype=float)
    solution = solve_ivp(lambda s, x: rhs(s, x), (0.0, float(times[-1])), x0,
                         method="DOP853", t_eval=times, rtol=RTOL, atol=ATOL)
    if not solution.success:
        raise RuntimeError(f"{model}: DOP853 failed: {solution.message}")
    out = {}
    for sbml_id in ids:
        value = sp.lambdify((t, ode.x), sp.sympify(ode.value(sbml_id)).subs(nominal), "numpy")
        out[sbml_id] = np.broadcast_to(np.asarray(value(times, solution.y), float),
                                       times.shape).copy()
    return out


def data_rows(dataset: Dataset, points: int | None = None) -> list[tuple[float, str, float, float]]:
    """(time, id, lower, upper): the truth +- the dataset's error, time-major."""
    times = dataset.times(points)
    truth = true_values(dataset.path, times, dataset.measured)
    return [(float(t), sbml_id, float(truth[sbml_id][k] - dataset.error),
             float(truth[sbml_id][k] + dataset.error))
            for k, t in enumerate(times) for sbml_id in dataset.measured]


def write_data(dataset: Dataset, path: str | Path, points: int | None = None) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(("time", "id", "lower", "upper"))
        # repr: every double written exactly, so the file holds the intervals computed
        writer.writerows((repr(t), i, repr(lo), repr(hi))
                         for t, i, lo, hi in data_rows(dataset, points))
    return path


def build_cases(out: str | Path, names=None, points: int | None = None) -> list[dict]:
    """Write the data the cases `names` (default: all) need into `out`, and the cases
    as `out`/interval_cases.json; returns the cases as written. `points`: fewer
    measurement times per dataset (a smoke test), spread over the same span."""
    out = Path(out)
    names = list(CASES) if names is None else list(names)
    unknown = sorted(set(names) - set(CASES))
    if unknown:
        raise ValueError(f"unknown case(s) {', '.join(unknown)}; cases: {', '.join(CASES)}")
    files = {}
    for name in dict.fromkeys(CASES[n].dataset for n in names):
        dataset = DATASETS[name]
        files[name] = write_data(dataset, out / f"{name}.csv", points)
    cases = []
    for n in names:
        case, dataset = CASES[n], DATASETS[CASES[n].dataset]
        cases.append({
            **asdict(case),
            "unknown": {k: list(v) for k, v in case.unknown.items()},
            # relative to the repository (the model) and to this file (the data), so
            # that the folder can travel with the tree to another machine
            "model": str(dataset.path.relative_to(ROOT)),
            "data": files[case.dataset].name,
            "measured": list(dataset.measured), "error": dataset.error,
            "times": len(dataset.times(points)), "step": dataset.step,
            "truth": nominal_values(dataset.path, case.unknown),
        })
    (out / CASES_FILE).write_text(json.dumps({"cases": cases}, indent=1) + "\n",
                                  encoding="utf-8")
    return cases


def nominal_values(model: Path, ids) -> dict[str, float]:
    """The file's values of `ids`: the parameters the data were made with."""
    import sbmlgpu
    from sbmlgpu.views.ode import ode_system

    ode = ode_system(sbmlgpu.load(str(model)))
    return {i: float(ode.p_values[ode.p_ids.index(i)]) for i in ids}


def load_cases(folder: str | Path) -> list[dict]:
    """The cases written by build_cases, with `model` and `data` as absolute paths."""
    folder = Path(folder)
    cases = json.loads((folder / CASES_FILE).read_text(encoding="utf-8"))["cases"]
    for case in cases:
        case["model"] = str(ROOT / case["model"])
        case["data"] = str(folder / case["data"])
        case["unknown"] = {k: tuple(v) for k, v in case["unknown"].items()}
    return cases


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="folder for the CSV files and the JSON")
    p.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES),
                   help="which cases (default: all)")
    p.add_argument("--points", type=int, default=None,
                   help="fewer measurement times, spread over the same span (smoke tests)")
    args = p.parse_args()
    for case in build_cases(args.out, args.cases, args.points):
        print(f"{case['name']}: {case['model']}, {case['times']} times of "
              f"{', '.join(case['measured'])} +-{case['error']:g} in {case['data']}; unknowns "
              + ", ".join(f"{k} in [{lo:g}, {hi:g}]" for k, (lo, hi) in case["unknown"].items())
              + f"; epsilon {case['epsilon']:g}")
    print(f"wrote {Path(args.out) / CASES_FILE}")


if __name__ == "__main__":
    main()
