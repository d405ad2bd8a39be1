"""The result of a time course: an ensemble's time courses (or their summary), one status
per member, the values each member was given, metadata.

Its parts: status.py (Status), summary.py (Summary), writers.py (CSV; NPZ and HDF5
through io.py), plot.py (plots).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, Sequence

import numpy as np

from .base import Result, close_ids
from .finite import non_finite_counts
from .status import Status
from .summary import DEFAULT_QUANTILES, Summary


@dataclass
class TimeCourseResult(Result):
    """What a backend's `Program.run()` returns for a TimeCourse task.

    `data` has shape (members, times, columns) — one member is (1, times, columns) —
    or is None when only the `summary` was kept (`--summary` on a large ensemble).
    `status` holds one `Status` per member; `messages` the solver's own words for
    members that failed. `members`: {SBML id: the value each member was given} for
    every id the ensemble varied (empty for one run at the model's values).
    `metadata`: model, backend, device, options, seed, ...

    `result["S1"]` is the (members, times) array of column S1.
    """

    kind: ClassVar[str] = "time-course"

    times: np.ndarray
    ids: tuple[str, ...]
    data: np.ndarray | None
    status: np.ndarray | None = None
    summary: Summary | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    messages: dict[int, str] = field(default_factory=dict)
    members: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self):
        self.times = np.asarray(self.times, dtype=float).reshape(-1)
        self.ids = tuple(map(str, self.ids))
        if len(set(self.ids)) != len(self.ids):
            raise ValueError(f"result columns repeat an id: {self.ids}")
        shape = (len(self.times), len(self.ids))
        if self.data is not None:
            data = np.asarray(self.data, dtype=float)
            if data.ndim == 2:
                data = data[None]
            if data.ndim != 3 or data.shape[1:] != shape:
                raise ValueError(f"result data has shape {data.shape}; expected "
                                 f"(members, {shape[0]} times, {shape[1]} columns)")
            self.data = data
        if self.status is None:
            if self.data is None:
                raise ValueError("a result without data needs a status per member")
            self.status = np.zeros(self.data.shape[0], np.int8)
        status = np.asarray(self.status).reshape(-1)
        if status.dtype.kind in "iu":  # codes already (large ensembles: no Python loop)
            if status.size and not Status.all_defined(status):
                raise ValueError(f"status codes must be defined ones: "
                                 f"{', '.join(f'{s.name}={int(s)}' for s in Status)}")
            self.status = status.astype(np.int8)
        else:
            self.status = np.array([Status.parse(s) for s in status], dtype=np.int8)
        if self.data is not None and len(self.status) != self.data.shape[0]:
            raise ValueError(f"{len(self.status)} statuses for {self.data.shape[0]} members")
        if self.summary is not None and self.summary.mean.shape != shape:
            raise ValueError(f"summary has shape {self.summary.mean.shape}; expected {shape}")
        self.messages = {int(k): str(v) for k, v in self.messages.items()}
        self.members = {str(k): np.asarray(v, dtype=float).reshape(-1)
                        for k, v in (self.members or {}).items()}
        for sbml_id, values in self.members.items():
            if values.size != len(self.status):
                raise ValueError(f"members[{sbml_id!r}] has {values.size} values for "
                                 f"{len(self.status)} members")

    # -- shape and lookups ------------------------------------------------------
    @property
    def n_members(self) -> int:
        return len(self.status)

    @property
    def ok(self) -> np.ndarray:
        """Boolean mask of the members that reached the end time."""
        return self.status == int(Status.ok)  # a plain int: numpy's fast path

    @property
    def n_failed(self) -> int:
        return int((~self.ok).sum())

    def non_finite_outputs(self, own_times: np.ndarray | None = None) -> dict[str, int]:
        """{column: how many ok members have a NaN or infinite value in it}. A member's
        status speaks for its states; an output computed from them (a concentration in
        a compartment of size 0, acos of a value beyond 1) may still be non-finite, and
        that is the model's own value, so it is reported rather than failed.
        `own_times`: each member's count of output times where members end at their
        own time (TimeCourse.own_times): only those are looked at (the later are NaN
        by design)."""
        if self.data is None or not len(self.ids):
            return {}
        # one pass in blocks of members (data may be a memmap): finite.py says why
        if own_times is None:
            counts = non_finite_counts(self.data, self.ok)
        else:
            # per stretch of neighbouring members of one count (a PEtab run's members
            # are neighbours): views, not copies of a result of GBs; where the counts
            # change from member to member, per count (at most one per output time)
            counts = np.zeros(len(self.ids), np.int64)
            own_times = np.asarray(own_times)
            cuts = np.flatnonzero(own_times[1:] != own_times[:-1]) + 1
            ok = self.ok
            if len(cuts) < 4 * self.data.shape[1]:
                for start, stop in zip([0, *cuts], [*cuts, len(own_times)]):
                    counts += non_finite_counts(self.data[start:stop, :int(own_times[start])],
                                                ok[start:stop])
            else:
                for count in np.unique(own_times):
                    mine = np.flatnonzero(own_times == count)
                    counts += non_finite_counts(self.data[mine, :int(count)], ok[mine])
        return {name: int(k) for name, k in zip(self.ids, counts) if k}

    def statuses(self) -> list[Status]:
        return [Status(int(s)) for s in self.status]

    def failures(self) -> list[tuple[int, Status, str]]:
        """(member, status, message) for every member that failed."""
        # np.flatnonzero: a 10^7-member ensemble must not loop in Python over the ok ones
        failed = np.flatnonzero(np.asarray(self.status) != int(Status.ok))
        return [(int(i), Status(int(self.status[i])),
                 self.messages.get(int(i), Status(int(self.status[i])).message)) for i in failed]

    def index(self, sbml_id: str) -> int:
        try:
            return self.ids.index(sbml_id)
        except ValueError:
            raise KeyError(f"no column {sbml_id!r} in this result (columns: "
                           f"{', '.join(self.ids[:20])}{' ...' if len(self.ids) > 20 else ''})"
                           f"{close_ids(sbml_id, self.ids)}") from None

    def __contains__(self, sbml_id: object) -> bool:
        return sbml_id in self.ids

    def keys(self) -> tuple[str, ...]:
        return self.ids

    def __getitem__(self, sbml_id: str) -> np.ndarray:
        """The (members, times) time courses of one column."""
        j = self.index(sbml_id)
        if self.data is None:
            raise KeyError(f"this result kept only the ensemble summary; use "
                           f"result.summary_of({sbml_id!r})")
        return self.data[:, :, j]

    def member(self, i: int) -> np.ndarray:
        """The (times, columns) table of member i."""
        if self.data is None:
            raise KeyError("this result kept only the ensemble summary")
        return self.data[i]

    def summary_of(self, sbml_id: str) -> dict[str, np.ndarray]:
        """{'mean': ..., 'sd': ..., 'q5': ...} arrays over time for one column."""
        if self.summary is None:
            raise KeyError("this result has no summary; call result.with_summary()")
        j = self.index(sbml_id)
        return {name: values[:, j] for name, values in self.summary.statistics()}

    # -- derived results --------------------------------------------------------
    def with_summary(self, quantiles: Sequence[float] = DEFAULT_QUANTILES,
                     keep_members: bool = True) -> "Result":
        """This result with its summary computed over the ok members; without the
        member time courses when `keep_members` is False."""
        if self.data is None:
            if self.summary is None:
                raise ValueError("a result with neither data nor summary")
            return self
        summary = Summary.of(self.data, self.ok, tuple(quantiles))
        return replace(self, summary=summary, data=self.data if keep_members else None,
                       metadata=dict(self.metadata), messages=dict(self.messages),
                       members=dict(self.members))

    # -- output -------------------------------------------------------------------
    def arrays(self) -> dict[str, Any]:
        from .writers import time_course_arrays
        return time_course_arrays(self)

    @classmethod
    def from_arrays(cls, arrays: dict[str, Any], metadata: dict[str, Any]) -> "TimeCourseResult":
        from .writers import time_course_from_arrays
        return time_course_from_arrays(arrays, metadata)

    def plot(self, path: str | Path | None = None, ids: Sequence[str] | None = None,
             max_members: int = 5):
        """Time courses (matplotlib, Agg); ensembles as mean ± sd band plus a few
        members. Saves to `path` if given; returns the Figure."""
        from .plot import plot_result
        return plot_result(self, path, ids=ids, max_members=max_members)

    def __repr__(self) -> str:
        kept = "summary only" if self.data is None else f"{self.n_members} member(s)"
        failed = f", {self.n_failed} failed" if self.n_failed else ""
        return (f"TimeCourseResult({kept}{failed}, {len(self.times)} times "
                f"[{self.times[0]:g}..{self.times[-1]:g}], columns {list(self.ids)[:8]}"
                f"{'...' if len(self.ids) > 8 else ''})")
