"""Observable and noise formulas of a PEtab problem, evaluated at every measurement
row for every parameter set at once (numpy arrays of shape (rows, sets)).

A formula's symbols are: model ids (simulated values: a species' concentration
unless it has only substance units), `observableParameter{k}_{observableId}` and
`noiseParameter{k}_{observableId}` placeholders (the row's observableParameters /
noiseParameters cells: numbers or parameterIds), parameterIds of the parameter
table, and `time`.
"""

from __future__ import annotations

import math
import re

import numpy as np
import sympy as sp

from ..errors import OptionError
from .problem import PetabProblem
from .values import resolve, split_overrides

PLACEHOLDERS = (("observableParameter", "observableParameters"),
                ("noiseParameter", "noiseParameters"))


class Formulas:
    def __init__(self, problem: PetabProblem):
        from petab.v1.math import sympify_petab

        self.problem = problem
        obs = problem.problem.observable_df
        self.observable = {}
        self.noise = {}
        for oid, row in obs.iterrows():
            self.observable[oid] = self._parse(sympify_petab, row["observableFormula"], oid,
                                               "observableFormula")
            self.noise[oid] = self._parse(sympify_petab, row.get("noiseFormula", 1), oid,
                                          "noiseFormula")
        model_ids = set()
        for e in (*self.observable.values(), *self.noise.values()):
            model_ids |= {s.name for s in e.free_symbols
                          if problem.network.kind_of(s.name) is not None}
        #: model ids the formulas use (outputs of the simulation)
        self.model_ids = sorted(model_ids)
        self._functions: dict[tuple, object] = {}  # lambdified formulas (_values)

    def _parse(self, sympify, text, oid: str, column: str) -> sp.Expr:
        if text is None or (isinstance(text, float) and math.isnan(text)):
            raise OptionError("problem", f"{self.problem.path}: observable {oid} has no "
                                         f"{column}")
        try:
            return sp.sympify(sympify(text))
        except Exception as exc:  # noqa: BLE001 - petab's parser: typed, with the text
            raise OptionError("problem", f"{self.problem.path}: {column} of {oid} "
                                         f"{text!r} is not a formula ({exc})") from None

    @staticmethod
    def placeholders(expr: sp.Expr, kind: str, oid: str) -> int:
        pattern = re.compile(rf"^{kind}(\d+)_{re.escape(oid)}$")
        found = [int(m.group(1)) for s in expr.free_symbols if (m := pattern.match(s.name))]
        return max(found, default=0)

    def evaluate(self, simulated: dict[str, np.ndarray], sets: dict[str, np.ndarray],
                 n: int, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(simulation, sigma), each (len(rows), n), at the measurement rows `rows`
        (indices; None: every row), whose model values `simulated` holds in that order."""
        meas = self.problem.measurements
        rows = np.arange(len(meas)) if rows is None else np.asarray(rows, dtype=int)
        sim = np.full((len(rows), n), np.nan)
        sigma = np.full((len(rows), n), np.nan)
        obs_ids = np.asarray(meas["observableId"])[rows]
        times = np.asarray(meas["time"], dtype=float)[rows]
        for oid in self.observable:
            where = np.flatnonzero(obs_ids == oid)
            if not where.size:
                continue
            placeholders = self._placeholders(oid, rows[where], sets, n)
            y = self._values(self.observable[oid], oid, where, placeholders, simulated, sets,
                             n, times, None)
            sim[where] = y
            sigma[where] = self._values(self.noise[oid], oid, where, placeholders, simulated,
                                        sets, n, times, y)
        return sim, sigma

    def _placeholders(self, oid, where, sets, n) -> dict[str, np.ndarray]:
        """{placeholder name: (rows, n)} from the observableParameters and
        noiseParameters cells of the measurement rows `where` (a noise formula may use
        both kinds)."""
        meas = self.problem.measurements
        both = (*self.observable[oid].free_symbols, *self.noise[oid].free_symbols)
        out: dict[str, np.ndarray] = {}
        for kind, column in PLACEHOLDERS:
            count = max(self.placeholders(self.observable[oid], kind, oid),
                        self.placeholders(self.noise[oid], kind, oid))
            if not count:
                continue
            cells = (meas[column].to_numpy()[where] if column in meas.columns
                     else [None] * len(where))
            filled = np.full((count, len(where), n), np.nan)
            for r, cell in enumerate(cells):
                row = f"measurement row {where[r] + 2}"
                for k, entry in enumerate(split_overrides(cell, count, f"{row}, {column}")):
                    filled[k, r] = resolve(entry, sets, n, row)
            for s in both:
                m = re.match(rf"^{kind}(\d+)_{re.escape(oid)}$", s.name)
                if m:
                    out[s.name] = filled[int(m.group(1)) - 1]
        return out

    def _values(self, expr, oid, where, placeholders, simulated, sets, n, times, own):
        args: dict[sp.Symbol, np.ndarray] = {}
        for s in expr.free_symbols:
            name = s.name
            if name in simulated:
                args[s] = simulated[name][where]
            elif name in placeholders:
                args[s] = placeholders[name]
            elif own is not None and name == oid:
                args[s] = own
            elif name in sets:
                args[s] = np.broadcast_to(sets[name], (len(where), n))
            elif name in ("time", "t"):
                args[s] = np.broadcast_to(times[where][:, None], (len(where), n))
            else:
                raise OptionError("problem", f"{self.problem.path}: the formula of {oid} uses "
                                             f"{name!r}, which is neither a model id, a "
                                             f"parameterId nor a placeholder")
        symbols = tuple(sorted(args, key=lambda s: s.name))
        key = (oid, own is None, symbols)  # lambdify once per formula and symbols
        if key not in self._functions:
            self._functions[key] = sp.lambdify(symbols, expr, "numpy")
        with np.errstate(all="ignore"):
            out = self._functions[key](*[args[s] for s in symbols])
        return np.broadcast_to(np.asarray(out, dtype=float), (len(where), n))
