"""Estimation: which parameter values are consistent with bounded-error data
(`sbmlgpu estimate`), answered by a paving of the unknowns' search box.

The data are bounded-error measurements: at `time` the SBML value of `id` lies in
[lower, upper]. The interval backend (issue "interval parameter estimation") may add
fields; until then they are the DESIGN's: unknowns with boxes, data, epsilon, and
initial values known only as intervals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Sequence

import numpy as np

from ..errors import OptionError
from ..results import Paving
from ..settings import interval, pair, setting
from ..text_table import read_records
from .base import Task

if TYPE_CHECKING:  # pragma: no cover
    from ..ir import Network

DATA_COLUMNS = ("time", "id", "lower", "upper")


@dataclass(frozen=True)
class Measurements:
    """Bounded-error data, one entry per row: `id`'s value at `time` lies in [lower, upper]."""

    time: np.ndarray
    id: tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray

    def __len__(self) -> int:
        return len(self.time)

    @property
    def ids(self) -> tuple[str, ...]:
        """The measured ids, each once, in order of first appearance."""
        return tuple(dict.fromkeys(self.id))


def read_measurements(source: str | Path | Sequence, option: str = "data") -> Measurements:
    """Measurements from a CSV file (header `time,id,lower,upper`) or from rows of
    (time, id, lower, upper)."""
    if isinstance(source, (str, Path)):
        path = Path(source)
        header, records = read_records(path, option)
        missing = [c for c in DATA_COLUMNS if c not in header]
        if missing:
            raise OptionError(option, f"{path}: the header must have the columns "
                                      f"{','.join(DATA_COLUMNS)} (missing: "
                                      f"{', '.join(missing)})")
        rows = [(row["time"], row["id"], row["lower"], row["upper"],
                 f"{path}, line {k}") for k, row in enumerate(records, start=2)]
    else:
        rows = [(*tuple(r), f"row {k}") for k, r in enumerate(source)]
    if not rows:
        raise OptionError(option, "the data have no rows")
    times, ids, lowers, uppers = [], [], [], []
    for row in rows:
        if len(row) != 5:
            raise OptionError(option, f"{row[-1]}: need time, id, lower, upper")
        t, sbml_id, low, high, where = row
        try:
            t, low, high = float(t), float(low), float(high)
        except (TypeError, ValueError):
            raise OptionError(option, f"{where}: time, lower and upper must be numbers") \
                from None
        if not (math.isfinite(t) and t >= 0):
            raise OptionError(option, f"{where}: time {t!r} must be finite and >= 0")
        if math.isnan(low) or math.isnan(high) or low > high:
            raise OptionError(option, f"{where}: need lower <= upper (got {low!r}, {high!r})")
        sbml_id = str(sbml_id).strip()
        if not sbml_id:
            raise OptionError(option, f"{where}: the id is empty")
        times.append(t)
        ids.append(sbml_id)
        lowers.append(low)
        uppers.append(high)
    return Measurements(np.array(times), tuple(ids), np.array(lowers), np.array(uppers))


@dataclass
class Estimation(Task):
    kind: ClassVar[str] = "estimation"
    command: ClassVar[str] = "estimate"
    function: ClassVar[str] = "estimate"
    title: ClassVar[str] = "the parameter values consistent with bounded-error data (a paving)"
    description: ClassVar[str] = (
        "Find the values of the unknown parameters of MODEL for which every simulated "
        "output stays inside its data interval at every measured time, as a paving of "
        "the search box into feasible, undetermined and rejected boxes.")
    result_class: ClassVar[type] = Paving
    default_backend: ClassVar[str | None] = "interval"

    data: Any = setting(None, "bounded-error measurements: CSV with the header "
                              "time,id,lower,upper (id: an SBML id whose value is measured)",
                        required=True, metavar="DATA.csv")
    unknown: dict[str, tuple[float, float]] = setting(
        {}, "an unknown parameter and the interval to search (repeatable)",
        parse=pair(interval, "LOW:HIGH"), collect="dict", metavar="ID=LOW:HIGH")
    epsilon: float | None = setting(None, "boxes whose every edge is narrower than this are "
                                          "not bisected further", minimum=0.0, required=True)
    initial: dict[str, tuple[float, float]] = setting(
        {}, "an initial value known only to lie in an interval (repeatable)",
        parse=pair(interval, "LOW:HIGH"), collect="dict", metavar="ID=LOW:HIGH")
    measurements: Measurements | None = field(default=None, init=False, repr=False,
                                              metadata={"cli": False, "help": ""})

    def check(self) -> None:
        if not self.unknown:
            raise OptionError("unknown", "name at least one unknown parameter: "
                                         "--unknown ID=LOW:HIGH")
        self.unknown = {k: _interval(v, "unknown", k) for k, v in dict(self.unknown).items()}
        for sbml_id, (low, high) in self.unknown.items():
            if not low < high:
                raise OptionError("unknown", f"{sbml_id}: the search interval [{low}, {high}] "
                                             f"is empty or a point")
        self.initial = {k: _interval(v, "initial", k) for k, v in dict(self.initial).items()}
        if not self.epsilon > 0:
            raise OptionError("epsilon", f"{self.epsilon!r} must be positive")
        both = sorted(set(self.unknown) & set(self.initial))
        if both:
            raise OptionError("initial", f"{', '.join(both)} is both unknown and an initial "
                                         f"interval")
        self.measurements = read_measurements(self.data)

    def check_network(self, network: "Network") -> None:
        from ..ensemble import check_ids, unknown_id_error

        check_ids(network, self.unknown, option="unknown")
        check_ids(network, self.initial, option="initial")
        known = [*network.species_by_id, *network.parameter_by_id, *network.compartment_by_id]
        for sbml_id in self.measurements.ids:
            if network.kind_of(sbml_id) is None:
                raise unknown_id_error("data", sbml_id, known, "an id")

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        out["data"] = (str(self.data) if isinstance(self.data, (str, Path))
                       else f"{len(self.measurements or ())} rows")
        out.pop("measurements", None)
        return out


def _interval(value, option: str, sbml_id: str) -> tuple[float, float]:
    try:
        low, high = (float(v) for v in value)
    except (TypeError, ValueError):
        raise OptionError(option, f"{sbml_id}: {value!r} is not a (low, high) pair") from None
    if not (math.isfinite(low) and math.isfinite(high)) or low > high:
        raise OptionError(option, f"{sbml_id}: need finite low <= high, got {value!r}")
    return low, high
