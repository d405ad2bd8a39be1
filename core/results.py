"""The Result of a run: time courses of an ensemble, per-member status, summary, metadata.

Its parts: result_status.py (Status), result_summary.py (Summary), result_writers.py
(CSV, NPZ, HDF5 writers and readers), result_plot.py (plots).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .result_status import Status
from .result_summary import DEFAULT_QUANTILES, Summary


@dataclass
class Result:
    """What every backend's `Program.run()` returns.

    `data` has shape (members, times, columns) — one member is (1, times, columns) —
    or is None when only the `summary` was kept (`--summary` on a large ensemble).
    `status` holds one `Status` per member; `messages` the solver's own words for
    members that failed. `metadata`: model, backend, device, options, seed, ...

    `result["S1"]` is the (members, times) array of column S1.
    """

    times: np.ndarray
    ids: tuple[str, ...]
    data: np.ndarray | None
    status: np.ndarray | None = None
    summary: Summary | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    messages: dict[int, str] = field(default_factory=dict)

    def __post_init__(self):
        self.times = np.asarray(self.times, dtype=float).reshape(-1)
        self.ids = tuple(str(i) for i in self.ids)
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
            if status.size and (status.min() < 0 or status.max() > max(Status)):
                raise ValueError(f"status codes must be in 0..{int(max(Status))}")
            self.status = status.astype(np.int8)
        else:
            self.status = np.array([Status.parse(s) for s in status], dtype=np.int8)
        if self.data is not None and len(self.status) != self.data.shape[0]:
            raise ValueError(f"{len(self.status)} statuses for {self.data.shape[0]} members")
        if self.summary is not None and self.summary.mean.shape != shape:
            raise ValueError(f"summary has shape {self.summary.mean.shape}; expected {shape}")
        self.messages = {int(k): str(v) for k, v in self.messages.items()}

    # -- shape and lookups ------------------------------------------------------
    @property
    def n_members(self) -> int:
        return len(self.status)

    @property
    def ok(self) -> np.ndarray:
        """Boolean mask of the members that reached the end time."""
        return self.status == Status.ok

    @property
    def n_failed(self) -> int:
        return int((~self.ok).sum())

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
            close = [i for i in self.ids if i.lower() == sbml_id.lower()]
            close += [i for i in difflib.get_close_matches(sbml_id, self.ids, n=3)
                      if i not in close]
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise KeyError(f"no column {sbml_id!r} in this result (columns: "
                           f"{', '.join(self.ids[:20])}{' ...' if len(self.ids) > 20 else ''})"
                           f"{hint}") from None

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
                       metadata=dict(self.metadata), messages=dict(self.messages))

    # -- output -------------------------------------------------------------------
    def write(self, path: str | Path, format: str | None = None) -> list[Path]:
        """Write with the writer registered for `format` (default: from the file
        suffix); returns the files written."""
        from .plugin_manager import writer_for

        path = Path(path)
        writer = writer_for(format or path.suffix.lstrip(".") or "csv")
        written = writer(self, path)
        return [Path(p) for p in written] if written else [path]

    def to_csv(self, path: str | Path) -> list[Path]:
        from .result_writers import write_csv
        return write_csv(self, Path(path))

    def to_npz(self, path: str | Path) -> list[Path]:
        from .result_writers import write_npz
        return write_npz(self, Path(path))

    def to_hdf5(self, path: str | Path) -> list[Path]:
        from .result_writers import write_hdf5
        return write_hdf5(self, Path(path))

    def plot(self, path: str | Path | None = None, ids: Sequence[str] | None = None,
             max_members: int = 5):
        """Time courses (matplotlib, Agg); ensembles as mean ± sd band plus a few
        members. Saves to `path` if given; returns the Figure."""
        from .result_plot import plot_result
        return plot_result(self, path, ids=ids, max_members=max_members)

    def __repr__(self) -> str:
        kept = "summary only" if self.data is None else f"{self.n_members} member(s)"
        failed = f", {self.n_failed} failed" if self.n_failed else ""
        return (f"Result({kept}{failed}, {len(self.times)} times "
                f"[{self.times[0]:g}..{self.times[-1]:g}], columns {list(self.ids)[:8]}"
                f"{'...' if len(self.ids) > 8 else ''})")


# The readers live with the writers; imported last because they import Result.
from .result_writers import read_hdf5, read_npz  # noqa: E402

__all__ = ["Result", "Status", "Summary", "DEFAULT_QUANTILES", "read_npz", "read_hdf5"]
