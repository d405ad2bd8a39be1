"""Core's result writers, keyed by (result kind, format), and the time-course tables.

They reach users through the `sbmlgpu_result_writers` hook like any plugin's
writers: the plugin manager registers this module directly (core never imports a
plugin package, so it cannot use an entry point of its own for this). NPZ and HDF5
are the same for every kind (io.py); each kind has its own CSV tables.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..hookspecs import hookimpl
from ..outputs import table_column
from . import io
from .status import Status
from .summary import Summary, quantile_label

if TYPE_CHECKING:  # pragma: no cover
    from .time_course import TimeCourseResult


def number_text(values) -> str:
    """Comma-separated numbers; repr of a Python float is the shortest text that reads
    back to the same double."""
    return ",".join(map(repr, values))


def companion(path: Path, name: str) -> Path:
    """`out/model.csv` + "members" -> `out/model.members.csv`."""
    return path.with_name(f"{path.stem}.{name}{path.suffix or '.csv'}")


def write_table(path: Path, header: list[str], rows) -> Path:
    """A CSV file of `header` and numeric `rows` (iterables of numbers)."""
    with open(path, "w", encoding="utf-8") as out:
        out.write(",".join(header) + "\n")
        for row in rows:
            out.write(number_text(row) + "\n")
    return path


# -- time courses ----------------------------------------------------------------------
def _columns(ids, *reserved: str) -> list[str]:
    """`ids` as column headers beside the table's own `reserved` columns."""
    return [table_column(i, reserved) for i in ids]


def _summary_path(path: Path) -> Path:
    return path.with_name(f"{path.stem}_summary{path.suffix or '.csv'}")


def _write_summary_csv(result: "TimeCourseResult", path: Path) -> None:
    stats = result.summary.statistics()
    header = ["time"] + [f"{cid}_{name}" for cid in _columns(result.ids, "time")
                         for name, _ in stats]
    # columns grouped per id: S1_mean, S1_sd, S1_q5, ..., S2_mean, ...
    block = np.stack([values for _, values in stats], axis=-1)  # (T, C, S)
    table = np.concatenate([result.times[:, None],
                            block.reshape(len(result.times), -1)], axis=1)
    write_table(path, header, table.tolist())


def _write_members_csv(result: "TimeCourseResult", path: Path) -> Path:
    ids = list(result.members)
    columns = np.column_stack([np.arange(result.n_members)]
                              + [result.members[i] for i in ids])
    with open(path, "w", encoding="utf-8") as out:
        out.write(",".join(["member", *_columns(ids, "member")]) + "\n")
        for row in columns.tolist():
            out.write(f"{int(row[0])}," + number_text(row[1:]) + "\n")
    return path


def write_time_course_csv(result: "TimeCourseResult", path: Path) -> list[Path]:
    """Time first. One member: `time,S1,...`; several: `time,member,S1,...` (members
    one after another, numbered from 0); a summary: `time,S1_mean,S1_sd,S1_q5,...`,
    in `path` when only the summary was kept, else in `<stem>_summary.csv` beside it.
    An ensemble that varied values also gets `<stem>.members.csv`: `member`, then the
    value of each varied id."""
    path = Path(path)
    written = [path]
    if result.data is None:
        _write_summary_csv(result, path)
    else:
        data = result.data
        with open(path, "w", encoding="utf-8") as out:
            if data.shape[0] == 1:
                out.write(",".join(["time", *_columns(result.ids, "time")]) + "\n")
                for t, row in zip(result.times.tolist(), data[0].tolist()):
                    out.write(number_text([t, *row]) + "\n")
            else:
                out.write(",".join(["time", "member", *_columns(result.ids, "time", "member")])
                          + "\n")
                times = result.times.tolist()
                for m in range(data.shape[0]):
                    for t, row in zip(times, data[m].tolist()):
                        out.write(f"{t!r},{m}," + number_text(row) + "\n")
        if result.summary is not None:
            _write_summary_csv(result, _summary_path(path))
            written.append(_summary_path(path))
    if result.members:
        written.append(_write_members_csv(result, companion(path, "members")))
    return written


def time_course_arrays(result: "TimeCourseResult") -> dict[str, Any]:
    arrays = {
        "times": result.times,
        "ids": np.array(result.ids, dtype=str),
        "status": result.status,
        "status_names": Status.names(),
        "messages_json": json.dumps({str(k): v for k, v in result.messages.items()}),
        "member_ids": np.array(list(result.members), dtype=str),
        "member_values": (np.stack([result.members[k] for k in result.members])
                          if result.members else np.zeros((0, result.n_members))),
    }
    if result.data is not None:
        arrays["data"] = result.data
    if result.summary is not None:
        s = result.summary
        arrays.update({"summary_mean": s.mean, "summary_sd": s.sd,
                       "summary_quantiles": np.array(s.quantiles, dtype=float),
                       "summary_quantile_values": s.quantile_values,
                       "summary_n_used": np.array(s.n_used),
                       "summary_n_excluded": np.array(s.n_excluded)})
    return arrays


def time_course_from_arrays(a: dict[str, Any], metadata: dict) -> "TimeCourseResult":
    from .time_course import TimeCourseResult

    summary = None
    if "summary_mean" in a:
        summary = Summary(a["summary_mean"], a["summary_sd"],
                          tuple(np.asarray(a["summary_quantiles"]).tolist()),
                          a["summary_quantile_values"], int(a["summary_n_used"]),
                          int(a["summary_n_excluded"]))
    member_ids = [str(i) for i in np.asarray(a["member_ids"]).tolist()]
    values = np.asarray(a["member_values"])
    return TimeCourseResult(
        times=a["times"], ids=tuple(str(i) for i in np.asarray(a["ids"]).tolist()),
        data=a.get("data"), status=Status.from_names(a["status"], a["status_names"]),
        summary=summary, metadata=metadata,
        messages={int(k): v for k, v in json.loads(str(a["messages_json"])).items()},
        members={k: values[j] for j, k in enumerate(member_ids)})


write_time_course_csv.suffix = ".csv"


def _csv_writer(cls):
    """The CSV writer of a result class that writes its own tables (`write_csv`)."""
    def write(result, path: Path) -> list[Path]:
        return result.write_csv(Path(path))

    write.__name__ = f"write_{cls.kind.replace('-', '_')}_csv"
    write.__doc__ = f"The CSV tables of a {cls.kind} result (see {cls.__name__}.write_csv)."
    write.suffix = cls.csv_suffix
    return write


@hookimpl
def sbmlgpu_result_writers():
    writers = {("time-course", "csv"): write_time_course_csv}
    for kind, cls in io.result_classes().items():
        if kind != "time-course":
            writers[(kind, "csv")] = _csv_writer(cls)
        writers[(kind, "npz")] = io.write_npz
        writers[(kind, "hdf5")] = io.write_hdf5
    return writers


__all__ = ["write_time_course_csv", "quantile_label", "companion", "write_table"]
