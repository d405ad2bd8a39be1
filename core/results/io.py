"""NPZ and HDF5 for every result kind, and `read(path)` that loads any of them back.

A result gives its arrays by name (`Result.arrays()`: numpy arrays, numbers, strings,
and dicts as JSON under names ending in `_json`); these writers store them with the
result's kind, the format version and the metadata, so that `read` knows which class
rebuilds it. NPZ holds each array as it is; HDF5 holds each as a dataset (gzip for
large ones), strings as variable-length UTF-8, JSON as attributes of the root group.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import SbmlGpuError

FORMAT_VERSION = 2


class ResultFileError(SbmlGpuError):
    """A file `read()` cannot turn into a result: not NPZ/HDF5, not written by
    sbmlgpu, another format version, or a result kind this sbmlgpu does not know."""
_HEADER = ("kind", "format_version", "metadata_json")


def result_classes() -> dict[str, type]:
    """{kind: result class} of every kind core knows."""
    from .dbn import DbnResult
    from .distribution import StateDistribution
    from .paving import Paving
    from .time_course import TimeCourseResult

    return {cls.kind: cls for cls in (TimeCourseResult, StateDistribution, Paving, DbnResult)}


def _all_arrays(result) -> dict[str, Any]:
    arrays = dict(result.arrays())
    clash = [k for k in _HEADER if k in arrays]
    if clash:
        raise ValueError(f"{type(result).__name__}.arrays() uses reserved names {clash}")
    arrays["kind"] = np.array(result.kind)
    arrays["format_version"] = np.array(FORMAT_VERSION)
    arrays["metadata_json"] = np.array(json.dumps(result.metadata, default=_jsonable,
                                                  sort_keys=True))
    return arrays


def _jsonable(value):
    """JSON for what json does not know: numpy numbers and arrays, paths, the rest as text."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


def _rebuild(get, names, path) -> Any:
    missing = [k for k in _HEADER if k not in names]
    if missing:
        raise ResultFileError(f"{path}: not a result written by sbmlgpu (no "
                              f"{', '.join(missing)})")
    kind = str(get("kind"))
    classes = result_classes()
    if kind not in classes:
        raise ResultFileError(f"{path}: a result of kind {kind!r}, which this sbmlgpu does "
                              f"not know (known: {', '.join(classes)})")
    version = int(get("format_version"))
    if version != FORMAT_VERSION:
        raise ResultFileError(f"{path}: format version {version}; this sbmlgpu reads "
                              f"{FORMAT_VERSION}")
    arrays = {k: get(k) for k in names if k not in _HEADER}
    return classes[kind].from_arrays(arrays, json.loads(str(get("metadata_json"))))


def write_npz(result, path: Path) -> list[Path]:
    """One compressed .npz with every array of the result; `read` loads it back."""
    path = Path(path)
    # np.savez appends .npz to a name without it; open the file ourselves so the
    # name we report is the name written.
    with open(path, "wb") as out:
        np.savez_compressed(out, **{k: np.asarray(v) for k, v in _all_arrays(result).items()})
    return [path]


def read_npz(path: str | Path):
    try:
        archive = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ResultFileError(f"{path}: not a readable .npz ({exc})") from None
    with archive as f:
        return _rebuild(lambda k: f[k], f.files, path)


def write_hdf5(result, path: Path) -> list[Path]:
    """One HDF5 file: a dataset per array, JSON entries as attributes of the root."""
    import h5py

    path = Path(path)
    with h5py.File(path, "w") as f:
        for key, value in _all_arrays(result).items():
            value = np.asarray(value)
            if key.endswith("_json") or (value.dtype.kind == "U" and value.ndim == 0):
                f.attrs[key] = str(value)
            elif value.dtype.kind == "U":
                f.create_dataset(key, data=np.array(value.tolist(), dtype=h5py.string_dtype()))
                f[key].attrs["strings"] = True
            else:
                big = value.ndim >= 2 and value.size > 1024
                f.create_dataset(key, data=value, compression="gzip" if big else None)
    return [path]


def read_hdf5(path: str | Path):
    import h5py

    try:
        handle = h5py.File(path, "r")
    except OSError as exc:
        raise ResultFileError(f"{path}: not a readable HDF5 file ({exc})") from None
    with handle as f:
        def get(key):
            if key in f.attrs:
                return f.attrs[key]
            value = f[key][()]
            if f[key].attrs.get("strings", False):
                flat = [v.decode() if isinstance(v, bytes) else str(v)
                        for v in np.asarray(value).reshape(-1)]
                return np.array(flat, dtype=str).reshape(np.shape(value))
            return value

        return _rebuild(get, [*f.attrs.keys(), *f.keys()], path)


def read(path: str | Path):
    """The result in an NPZ or HDF5 file written by sbmlgpu, of whatever kind."""
    path = Path(path)
    if path.suffix.lower() == ".npz":
        return read_npz(path)
    if path.suffix.lower() in (".h5", ".hdf5"):
        return read_hdf5(path)
    raise ResultFileError(f"{path}: read() takes .npz or .h5/.hdf5 files")


write_npz.suffix = ".npz"
write_hdf5.suffix = ".h5"
