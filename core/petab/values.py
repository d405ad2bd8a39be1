"""Parameter sets of a PEtab problem and what the tables' cells mean for them.

A parameter set is {parameterId: one linear-scale value per set}: the nominal
values, N sets sampled within the bounds on each parameter's scale (core/ensemble.py's
sampler, Philox keyed by seed and id), or a table of sets. A cell of the condition
or measurement table is a number, empty (NaN: keep the model's value) or a
parameterId; `resolve` turns it into one value per set.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..ensemble import check_ensemble_size, read_table
from ..errors import OptionError
from .problem import PetabProblem


def nominal_sets(p: PetabProblem) -> dict[str, np.ndarray]:
    return {q.id: np.array([q.nominal]) for q in p.parameters}


def sampled_sets(p: PetabProblem, n: int, seed: int) -> dict[str, np.ndarray]:
    """n sets: estimated parameters uniform within their bounds on their scale, the
    others at their nominal value (core/ensemble.py's PetabParameter.sample)."""
    check_ensemble_size(n, len(p.parameters))
    return {q.id: q.sample(seed, int(n)) for q in p.parameters}


def table_sets(p: PetabProblem, table: str | Path | dict, option: str = "parameters"
               ) -> dict[str, np.ndarray]:
    """Sets from a table (rows = sets, columns = parameterIds, linear scale) or a
    mapping {parameterId: values}; parameters it leaves out stay nominal."""
    values = read_table(table, option) if not isinstance(table, dict) else {
        str(k): np.atleast_1d(np.asarray(v, dtype=float)) for k, v in table.items()}
    known = {q.id for q in p.parameters}
    unknown = [k for k in values if k not in known]
    if unknown:
        from ..ensemble import unknown_id_error

        raise unknown_id_error(option, unknown[0], known, "a parameterId of the PEtab "
                                                          "parameter table")
    lengths = {len(v) for v in values.values()}
    if len(lengths) != 1:
        raise OptionError(option, f"columns differ in length or the table is empty: "
                                  f"{ {k: len(v) for k, v in values.items()} }")
    n = lengths.pop()
    out = {q.id: np.full(n, q.nominal) for q in p.parameters}
    out.update({k: np.asarray(v, dtype=float) for k, v in values.items()})
    return out


def not_finite_sets(sets: dict[str, np.ndarray], n: int) -> np.ndarray | None:
    """The sets with a value that is NaN or infinite (a bool mask), or None where every
    value is finite. A NaN would reach a condition's cell as "empty" and leave the
    model's own value in place: such a set is not scored (prepared.evaluate). One sum
    per parameter decides the common case (a sum is finite only if every term is, or
    overflows: then the values are looked at one by one)."""
    bad = None
    for values in sets.values():
        v = np.asarray(values, dtype=float)
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is looked into
            total = np.add.reduce(v, axis=None)
        if np.isfinite(total):
            continue
        here = np.broadcast_to(~np.isfinite(v), (n,))
        bad = here.copy() if bad is None else bad | here
    return bad if bad is not None and bad.any() else None


def set_count(sets: dict[str, np.ndarray]) -> int:
    return len(next(iter(sets.values()))) if sets else 1


def resolve(cell, sets: dict[str, np.ndarray], n: int, where: str) -> np.ndarray:
    """One value per set of a table cell: a number (NaN when empty) or a parameterId."""
    value = resolve_cell(cell, sets, where)
    return np.full(n, value) if isinstance(value, float) else value


def resolve_cell(cell, sets: dict[str, np.ndarray], where: str) -> float | np.ndarray:
    """A table cell's value: a float (a number; NaN when empty), or a parameterId's
    values per set (an array)."""
    if cell is None:
        return math.nan
    if isinstance(cell, (int, float, np.integer, np.floating)):
        return float(cell)
    text = str(cell).strip()
    if not text or text.lower() == "nan":
        return math.nan
    try:
        return float(text)
    except ValueError:
        pass
    if text in sets:
        return np.asarray(sets[text], dtype=float)
    raise OptionError("problem", f"{where}: {text!r} is neither a number nor a parameterId "
                                 f"of the parameter table")


def split_overrides(cell, count: int, where: str) -> list:
    """The `;`-separated entries of an observableParameters/noiseParameters cell."""
    if cell is None or (isinstance(cell, float) and math.isnan(cell)):
        entries: list = []
    elif isinstance(cell, (int, float, np.integer, np.floating)):
        entries = [float(cell)]
    else:
        entries = [e.strip() for e in str(cell).split(";") if e.strip()]
    if entries and len(entries) != count:
        raise OptionError("problem", f"{where}: {len(entries)} values for {count} "
                                     f"placeholder(s)")
    if not entries and count:
        raise OptionError("problem", f"{where}: the formula has {count} placeholder(s) but "
                                     f"the cell gives no values")
    return entries
