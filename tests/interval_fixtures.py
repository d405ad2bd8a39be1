"""Shared by the interval backend's tests: the shipped Sharma models, their right-hand
sides in numpy for many parameter sets at once, high-accuracy point solutions and
bounded-error data made from them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy.integrate import solve_ivp

MODELS = Path(__file__).resolve().parent.parent / "sbml_models"
LV = MODELS / "lotka_volterra.xml"
SEIR = MODELS / "seir_linear.xml"
LV_PARAMETERS = {"p1": 1.0, "p2": 0.01, "p3": 1.0, "p4": 0.02, "x1": 50.0, "x2": 50.0}
SEIR_PARAMETERS = {"p1": 0.5, "p2": 0.1, "p3": 0.4, "p4": 0.2, "N": 1000.0,
                   "x1": 700.0, "x2": 0.0, "x3": 300.0, "x4": 0.0}


def _lv(values: dict, m: int):
    def f(_t, y):
        x1, x2 = y[:m], y[m:]
        return np.concatenate([x1 * (values["p1"] - values["p2"] * x2),
                               -x2 * (values["p3"] - values["p4"] * x1)])
    return f, np.concatenate([values["x1"] * np.ones(m), values["x2"] * np.ones(m)]), 2


def _seir(values: dict, m: int):
    def f(_t, y):
        x1, x2, x3, x4 = (y[i * m:(i + 1) * m] for i in range(4))
        p1, p2, p3, p4, n = (values[k] for k in ("p1", "p2", "p3", "p4", "N"))
        return np.concatenate([p1 * n - (p1 + p2) * x1, p2 * x1 - (p1 + p3) * x2,
                               p3 * x2 - (p1 + p4) * x3, p4 * x3 - p1 * x4])
    y0 = np.concatenate([values[k] * np.ones(m) for k in ("x1", "x2", "x3", "x4")])
    return f, y0, 4


SYSTEMS = {"lv": (_lv, LV_PARAMETERS), "seir": (_seir, SEIR_PARAMETERS)}


BLOW_UP = 1e8  # a solution this large has left every data interval of the tests


def solve(model: str, times, allow_blow_up: bool = False, **varied) -> np.ndarray:
    """Point solutions for m parameter sets at once: `varied` maps ids to arrays of m
    values (others nominal). Returns (m, len(times), n_states). DOP853 at rtol 1e-12:
    its error is far below the widths the tests compare against. allow_blow_up: a
    solution that passes BLOW_UP is stopped there and reads +inf afterwards."""
    build, nominal = SYSTEMS[model]
    m = len(next(iter(varied.values()))) if varied else 1
    values = {k: np.broadcast_to(np.asarray(varied.get(k, v), dtype=float), (m,))
              for k, v in nominal.items()}
    f, y0, n = build(values, m)
    times = np.asarray(times, dtype=float)
    sol = solve_ivp(f, (0.0, float(times[-1])), y0, t_eval=times, method="DOP853",
                    rtol=1e-12, atol=1e-12)
    if sol.success:
        return sol.y.reshape(n, m, len(times)).transpose(1, 2, 0)
    assert allow_blow_up, sol.message
    out = np.full((m, len(times), n), np.inf)
    for j in range(m):  # one at a time: the ones that blow up stop at BLOW_UP
        f, y0, _ = build({k: v[j:j + 1] for k, v in values.items()}, 1)
        big = lambda _t, y: BLOW_UP - np.max(np.abs(y))  # noqa: E731
        big.terminal = True
        one = solve_ivp(f, (0.0, float(times[-1])), y0, t_eval=times, method="DOP853",
                        rtol=1e-12, atol=1e-12, events=big)
        assert one.success or one.status == 1, one.message
        out[j, :one.y.shape[1]] = one.y.T
    return out


def write_data(path: Path, model: str, times, ids_and_errors: dict, **truth) -> Path:
    """Bounded-error data from the solution at `truth`: value +- error per id."""
    names = {"lv": ("x1", "x2"), "seir": ("x1", "x2", "x3", "x4")}[model]
    y = solve(model, times, **{k: [v] for k, v in truth.items()})[0]
    with open(path, "w", encoding="utf-8") as out:
        out.write("time,id,lower,upper\n")
        for k, t in enumerate(np.asarray(times, dtype=float).tolist()):
            for sid, error in ids_and_errors.items():
                v = float(y[k, names.index(sid)])
                out.write(f"{t!r},{sid},{v - error!r},{v + error!r}\n")
    return path


def worst_margin(model: str, data_path: Path, points: dict) -> np.ndarray:
    """For m parameter sets (`points`: id -> m values): the smallest distance by which
    each one's solution stays inside the data intervals, over every measurement
    (negative: it leaves one by that much)."""
    import csv

    with open(data_path, encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    times = np.unique([float(r["time"]) for r in rows])
    y = solve(model, times, allow_blow_up=True, **points)
    names = {"lv": ("x1", "x2"), "seir": ("x1", "x2", "x3", "x4")}[model]
    out = np.full(len(y), np.inf)
    for r in rows:
        k = int(np.searchsorted(times, float(r["time"])))
        v = y[:, k, names.index(r["id"])]
        out = np.minimum(out, np.minimum(v - float(r["lower"]), float(r["upper"]) - v))
    return out
