"""The semantic suite's pass criterion: |C - U| <= abs + rel * |C| at every point,
C the expected and U the simulated value. NaN expected is met by NaN only; an
infinite expected value by the same infinity only."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Worst:
    """The point that misses its tolerance by the most (or comes closest to it)."""

    variable: str
    time: float
    got: float
    expected: float
    ratio: float  # |C - U| / (abs + rel |C|); inf for a NaN/inf mismatch

    def as_dict(self) -> dict:
        return {"variable": self.variable, "time": self.time, "got": _json(self.got),
                "expected": _json(self.expected), "error_over_tolerance": _json(self.ratio)}


def _json(v: float):
    v = float(v)
    return v if np.isfinite(v) else str(v)


def point_ratios(got: np.ndarray, expected: np.ndarray, absolute: float,
                 relative: float) -> np.ndarray:
    """Error over tolerance at each point: <= 1 passes. 0 where both are the same
    NaN or infinity, inf for a mismatch of that kind."""
    got = np.asarray(got, dtype=float)
    expected = np.asarray(expected, dtype=float)
    with np.errstate(invalid="ignore", over="ignore"):
        tol = absolute + relative * np.abs(expected)
        err = np.abs(expected - got)
        ratio = np.where(tol > 0, err / np.where(tol > 0, tol, 1.0),
                         np.where(err == 0, 0.0, np.inf))
    special = ~np.isfinite(expected) | ~np.isfinite(got)
    same = (np.isnan(expected) & np.isnan(got)) | (np.isinf(expected) & (expected == got))
    ratio = np.where(special, np.where(same, 0.0, np.inf), ratio)
    return ratio


def compare(times: np.ndarray, got: dict[str, np.ndarray], expected: dict[str, np.ndarray],
            absolute: float, relative: float) -> tuple[bool, Worst | None]:
    """(passed, worst point) over all variables of `expected`."""
    worst = None
    for name, exp in expected.items():
        ratios = point_ratios(got[name], exp, absolute, relative)
        if ratios.size == 0:
            continue
        k = int(np.argmax(ratios))
        if worst is None or ratios[k] > worst.ratio:
            worst = Worst(name, float(times[k]), float(got[name][k]), float(exp[k]),
                          float(ratios[k]))
    passed = worst is None or worst.ratio <= 1.0
    return passed, worst
