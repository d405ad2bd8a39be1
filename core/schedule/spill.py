"""Where an ensemble's full time courses go: host memory, or a memory-mapped file.

The result (members, times, outputs) float64 is allocated once and every batch
writes its rows into it. Above a size limit it is a memory-mapped `.npy` file
instead, so that a result larger than memory is written batch by batch to disk and
read back page by page. A backend says where and how (`Spill`):

- `limit_bytes`: results larger than this are spilled (negative: always; inf: never);
- `directory`: where the file goes (None: the system's temporary folder);
- `keep`: keep the file and report its path (a user who asked for a folder wants
  the file), or unlink it at once, so that its pages go with the last reference to
  the result and nothing is left behind.
"""

from __future__ import annotations

import math
import os
import tempfile
from dataclasses import dataclass

import numpy as np

from ..errors import OptionError


@dataclass(frozen=True)
class Spill:
    limit_bytes: float = math.inf
    directory: str | None = None
    keep: bool = False
    prefix: str = "sbmlgpu-"
    option: str = "spill"  # the backend option that named `directory` (in errors)


@dataclass(frozen=True)
class Destination:
    """The array the batches fill, and the file behind it when spilled."""

    data: np.ndarray
    path: str | None = None  # the file (already gone unless `kept`)
    kept: bool = False

    @property
    def note(self) -> str:
        """One line for the result's metadata ('' in memory)."""
        if self.path is None:
            return ""
        where = "" if self.kept else " (unlinked)"
        return f"{self.data.nbytes / 1e9:.3g} GB of time courses memory-mapped from " \
               f"{self.path}{where}"


def destination(shape: tuple[int, ...], spill: Spill = Spill()) -> Destination:
    """A float64 array of `shape`, in memory or (larger than the limit) a file."""
    nbytes = math.prod(shape) * 8  # Python ints: no wrap-around, and np.prod costs ~3 us
    if nbytes <= spill.limit_bytes:
        return Destination(np.empty(shape, dtype=np.float64))
    if spill.directory is not None and not os.path.isdir(spill.directory):
        raise OptionError(spill.option, f"{spill.directory!r} is not a folder")
    fd, path = tempfile.mkstemp(prefix=spill.prefix, suffix=".npy", dir=spill.directory)
    os.close(fd)
    try:
        data = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64, shape=shape)
    except BaseException:
        os.unlink(path)
        raise
    if not spill.keep:
        os.unlink(path)  # the mapping keeps the pages; they go with the last reference
    return Destination(data, path, spill.keep)
