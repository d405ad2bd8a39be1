"""An ensemble's parameter table kept on the device, and each bundled batch's columns
gathered from it there (codegen/templates/gather.cu).

A bundled run launches its members in the order of their predicted cost, so each
batch's (rows, b) table is a random-access gather of the ensemble's (rows, n) table.
On the host that gather is a cache miss per value: 0.2 s of a 1.35 s PEtab objective
call (Brannmark_JBC2010, 28 x 8e5 values, the H100's host), more than the bundling
saves on some problems. Uploaded once instead, the table costs one contiguous copy,
and each batch's columns one pass of device memory.

    resident = ResidentTable.upload(devices, table)   # after the plan, before the batches
    columns = resident.gather(device, members)        # DeviceColumns, or None: not there
    ...                                                # an engine launches on columns.buffer
    resident.free()

A device gets no copy when the table would take more than `share` of its free memory
(the batches need it more), or when the copy finds the memory taken: its batches
gather on the host as before.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from .base import OutOfDeviceMemory
from .core_kernels import core_kernel
from .transfer import upload_staged

TEMPLATE, KERNEL = "gather.cu", "sbmlgpu_gather_columns"
BLOCK = 256
MAX_BLOCKS = 65535
SHARE = 0.25  # of a device's free memory, at most, for the table
#: tables of at least this many bytes go up through pinned stages (upload_staged)
STAGED_BYTES = 64 << 20


@dataclass
class DeviceColumns:
    """A (rows, count) table of `dtype` in device memory (`buffer`, row-major), which
    whoever launches on it frees."""

    buffer: object
    rows: int
    count: int
    dtype: np.dtype

    @property
    def shape(self) -> tuple[int, int]:
        return (self.rows, self.count)

    @property
    def size(self) -> int:
        return self.rows * self.count

    @property
    def nbytes(self) -> int:
        return self.size * np.dtype(self.dtype).itemsize


class ResidentTable:
    """A (rows, n) table, one copy on each device that had room for it."""

    def __init__(self, rows: int, n: int, dtype, copies: dict):
        self.rows, self.n, self.dtype = int(rows), int(n), np.dtype(dtype)
        self._copies = copies  # device index -> (device, buffer)
        self._lock = threading.Lock()

    @classmethod
    def upload(cls, devices, table: np.ndarray, *, share: float = SHARE) -> "ResidentTable":
        table = np.ascontiguousarray(table)
        if table.ndim != 2:
            raise ValueError(f"a resident table is (rows, members), not shape {table.shape}")
        copies = {}
        try:
            for device in devices if table.size else ():
                if table.nbytes > share * device.free_memory():
                    continue
                try:
                    # a large table through pinned stages (transfer.py: the driver's
                    # pageable path ran at ~5 GB/s on the H200's host)
                    copies[device.index] = (device, upload_staged(device, table)
                                            if table.nbytes >= STAGED_BYTES
                                            else device.to_device(table))
                except OutOfDeviceMemory:
                    continue  # taken meanwhile (another process): gather on the host
        except BaseException:
            for _, buffer in copies.values():
                buffer.free()
            raise
        return cls(table.shape[0], table.shape[1], table.dtype, copies)

    def holds(self, device) -> bool:
        with self._lock:
            return device.index in self._copies

    def gather(self, device, members: np.ndarray | None, start: int = 0,
               stop: int | None = None) -> DeviceColumns | None:
        """The (rows, b) table of `members` on `device`, in their order, or with members
        None of the range start..stop-1; None when `device` holds no copy (the caller
        gathers on the host)."""
        with self._lock:
            held = self._copies.get(device.index)
        if held is None:
            return None
        if members is not None:
            members = np.asarray(members)
            if members.ndim != 1 or (members.size and (members.min() < 0
                                                       or members.max() >= self.n)):
                raise ValueError(f"members must be indices below {self.n}")
            b = int(members.size)
        else:
            stop = self.n if stop is None else int(stop)
            if not 0 <= int(start) <= stop <= self.n:
                raise ValueError(f"a range {start}..{stop} of members outside 0..{self.n}")
            b = stop - int(start)
        size = self.dtype.itemsize
        out = device.alloc(max(self.rows * b * size, size))
        try:
            if b and self.rows:
                ids = device.to_device(members.astype(np.uint64)) if members is not None \
                    else None
                try:
                    kernel = core_kernel(device, TEMPLATE, KERNEL, self.dtype, "gather_columns")
                    blocks = min(-(-b // BLOCK), MAX_BLOCKS)
                    kernel.launch((blocks,), (BLOCK,), [
                        np.int64(b), np.int32(self.rows), np.int64(self.n),
                        ids if ids is not None else np.uintp(0), np.int64(start), held[1], out])
                finally:
                    if ids is not None:
                        ids.free()
        except BaseException:
            out.free()
            raise
        return DeviceColumns(out, self.rows, b, self.dtype)

    def free(self) -> None:
        with self._lock:
            copies, self._copies = self._copies, {}
        for _, buffer in copies.values():
            buffer.free()

    def __enter__(self) -> "ResidentTable":
        return self

    def __exit__(self, *exc) -> None:
        self.free()
