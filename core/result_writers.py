"""Core's result writers (CSV, NPZ, HDF5) and the readers that load NPZ and HDF5 back.

They reach users through the `sbmlgpu_result_writers` hook like any plugin's
writers: the plugin manager registers this module directly (core never imports a
plugin package, so it cannot use an entry point of its own for this).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .hookspecs import hookimpl
from .result_status import Status
from .result_summary import Summary, quantile_label

if TYPE_CHECKING:  # pragma: no cover
    from .results import Result

FORMAT_VERSION = 1


def _fmt(values) -> str:
    # repr of a Python float is the shortest text that reads back to the same double.
    return ",".join(map(repr, values))


def _summary_path(path: Path) -> Path:
    return path.with_name(f"{path.stem}_summary{path.suffix or '.csv'}")


def _write_summary_csv(result: Result, path: Path) -> None:
    summary = result.summary
    stats = summary.statistics()
    header = ["time"] + [f"{cid}_{name}" for cid in result.ids for name, _ in stats]
    # columns grouped per id: S1_mean, S1_sd, S1_q5, ..., S2_mean, ...
    block = np.stack([values for _, values in stats], axis=-1)  # (T, C, S)
    table = np.concatenate([result.times[:, None],
                            block.reshape(len(result.times), -1)], axis=1)
    with open(path, "w", encoding="utf-8") as out:
        out.write(",".join(header) + "\n")
        for row in table.tolist():
            out.write(_fmt(row) + "\n")


def write_csv(result: Result, path: Path) -> list[Path]:
    """Time first. One member: `time,S1,...`; several: `time,member,S1,...` (members
    one after another, numbered from 0); a summary: `time,S1_mean,S1_sd,S1_q5,...`,
    in `path` when only the summary was kept, else in `<stem>_summary.csv` beside it."""
    path = Path(path)
    written = []
    if result.data is None:
        _write_summary_csv(result, path)
        return [path]
    data = result.data
    with open(path, "w", encoding="utf-8") as out:
        if data.shape[0] == 1:
            out.write(",".join(["time", *result.ids]) + "\n")
            for t, row in zip(result.times.tolist(), data[0].tolist()):
                out.write(_fmt([t, *row]) + "\n")
        else:
            out.write(",".join(["time", "member", *result.ids]) + "\n")
            times = result.times.tolist()
            for m in range(data.shape[0]):
                for t, row in zip(times, data[m].tolist()):
                    out.write(f"{t!r},{m}," + _fmt(row) + "\n")
    written.append(path)
    if result.summary is not None:
        _write_summary_csv(result, _summary_path(path))
        written.append(_summary_path(path))
    return written


def _arrays(result: Result) -> dict[str, np.ndarray]:
    arrays = {
        "format_version": np.array(FORMAT_VERSION),
        "times": result.times,
        "ids": np.array(result.ids, dtype=str),
        "status": result.status,
        "status_names": np.array([s.name for s in Status], dtype=str),
        "metadata_json": np.array(json.dumps(result.metadata, default=str, sort_keys=True)),
        "messages_json": np.array(json.dumps({str(k): v for k, v in result.messages.items()})),
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


def _from_arrays(get, has) -> "Result":
    from .results import Result

    summary = None
    if has("summary_mean"):
        summary = Summary(get("summary_mean"), get("summary_sd"),
                          tuple(get("summary_quantiles").tolist()),
                          get("summary_quantile_values"), int(get("summary_n_used")),
                          int(get("summary_n_excluded")))
    return Result(times=get("times"), ids=tuple(str(i) for i in get("ids").tolist()),
                  data=get("data") if has("data") else None, status=get("status"),
                  summary=summary, metadata=json.loads(str(get("metadata_json"))),
                  messages={int(k): v for k, v in json.loads(str(get("messages_json"))).items()})


def write_npz(result: Result, path: Path) -> list[Path]:
    """One compressed .npz: times, ids, data (members, times, columns), status,
    summary_* arrays, metadata as JSON. `read_npz` loads it back."""
    path = Path(path)
    # np.savez appends .npz to a name without it; open the file ourselves so the
    # name we report is the name written.
    with open(path, "wb") as out:
        np.savez_compressed(out, **_arrays(result))
    return [path]


def read_npz(path: str | Path) -> "Result":
    with np.load(path, allow_pickle=False) as f:
        return _from_arrays(lambda k: f[k], lambda k: k in f.files)


def write_hdf5(result: Result, path: Path) -> list[Path]:
    """One HDF5 file with the same datasets as the NPZ (summary under /summary);
    metadata and messages as JSON attributes of the root group."""
    import h5py

    path = Path(path)
    arrays = _arrays(result)
    with h5py.File(path, "w") as f:
        for key in ("metadata_json", "messages_json"):
            f.attrs[key] = str(arrays.pop(key))
        for key in ("ids", "status_names"):
            f.create_dataset(key, data=np.array(arrays.pop(key).tolist(),
                                                dtype=h5py.string_dtype()))
        for key, values in arrays.items():
            big = values.ndim >= 2 and values.size > 1024
            f.create_dataset(key.replace("summary_", "summary/"), data=values,
                             compression="gzip" if big else None)
    return [path]


def read_hdf5(path: str | Path) -> "Result":
    import h5py

    with h5py.File(path, "r") as f:
        def get(key):
            if key.endswith("_json"):
                return f.attrs[key]
            values = f[key.replace("summary_", "summary/")][()]
            if key in ("ids", "status_names"):
                return np.array([v.decode() if isinstance(v, bytes) else v for v in values])
            return values

        def has(key):
            return key.endswith("_json") or key.replace("summary_", "summary/") in f

        return _from_arrays(get, has)


write_csv.suffix = ".csv"
write_npz.suffix = ".npz"
write_hdf5.suffix = ".h5"


@hookimpl
def sbmlgpu_result_writers():
    return {"csv": write_csv, "npz": write_npz, "hdf5": write_hdf5}


__all__ = ["write_csv", "write_npz", "write_hdf5", "read_npz", "read_hdf5",
           "quantile_label"]
