"""Page-locked host memory from the CUDA driver, allocated without holding the GIL.

Why: PyCUDA's pagelocked_empty calls cuMemHostAlloc while it holds Python's GIL, and
page-locking is slow: the driver maps and locks every page. On the H200 host, the
first run of a 10^5-member ensemble spent 30-45 ms more in its download than the
repeat (docs/benchmarks.md), the two 32 MiB staging blocks that the repeat found in
the pool (pinned.py). A thread that pins those blocks ahead (layout.stage_ahead)
saves that time only if the main thread can run meanwhile, e.g. the method check,
which is Python. ctypes releases the GIL for the length of a foreign call, so the
same cuMemHostAlloc called through ctypes runs beside the main thread.

The memory is the driver's own page-locked memory (CU_MEMHOSTALLOC_PORTABLE, as
pinned.py's blocks from PyCUDA are): asynchronous copies from any context treat it
as pinned, whoever allocated it. It is freed with cuMemFreeHost when the last array
viewing it is gone; at interpreter exit it is left to the operating system (the
contexts may be gone by then, and the process's memory goes with it).
"""

from __future__ import annotations

import ctypes
import weakref
from typing import Callable, ContextManager

import numpy as np

from ..errors import DeviceError

#: CU_MEMHOSTALLOC_PORTABLE: pinned for every context, not only the allocating one
PORTABLE = 0x01
#: the driver library every CUDA process loads (PyCUDA links against it)
LIBRARY = "libcuda.so.1"


class DriverHostMemory:
    """cuMemHostAlloc / cuMemFreeHost of `lib` (the driver library through ctypes, or
    a stand-in with the same two functions and cuGetErrorString)."""

    def __init__(self, lib):
        self.lib = lib

    @classmethod
    def load(cls, path: str = LIBRARY) -> "DriverHostMemory | None":
        """The process's CUDA driver library (`path`), or None where it does not load
        (then PyCUDA's own allocation is used)."""
        try:
            lib = ctypes.CDLL(path)
            lib.cuMemHostAlloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t,
                                           ctypes.c_uint]
            lib.cuMemHostAlloc.restype = ctypes.c_int
            lib.cuMemFreeHost.argtypes = [ctypes.c_void_p]
            lib.cuMemFreeHost.restype = ctypes.c_int
            lib.cuMemHostGetFlags.argtypes = [ctypes.POINTER(ctypes.c_uint), ctypes.c_void_p]
            lib.cuMemHostGetFlags.restype = ctypes.c_int
            lib.cuGetErrorString.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
            lib.cuGetErrorString.restype = ctypes.c_int
        except (OSError, AttributeError):
            return None
        return cls(lib)

    def allocate(self, nbytes: int, activate: Callable[[], ContextManager],
                 label: str) -> np.ndarray:
        """`nbytes` of page-locked memory as a 1-D uint8 array; `activate()` makes the
        device's context current on this thread for the call (cuMemHostAlloc needs
        one) and again for cuMemFreeHost: the finalizer keeps it, so it should hold
        the context and not the device object (which would then never be collected,
        nor its pool's blocks)."""
        nbytes = int(nbytes)
        if nbytes <= 0:
            raise DeviceError(f"{label}: cannot page-lock {nbytes} bytes of host memory")
        pointer = ctypes.c_void_p()
        with activate():
            code = self.lib.cuMemHostAlloc(ctypes.byref(pointer), nbytes, PORTABLE)
        if code != 0 or not pointer.value:
            raise DeviceError(f"{label}: cannot page-lock {nbytes} bytes of host memory: "
                              f"cuMemHostAlloc failed: {self._error(code)}")
        owner = (ctypes.c_uint8 * nbytes).from_address(pointer.value)
        # freed once nothing views the memory (a numpy view keeps `owner` alive)
        release = weakref.finalize(owner, _free, self.lib, pointer.value, activate)
        release.atexit = False
        return np.frombuffer(owner, dtype=np.uint8)

    def flags(self, array: np.ndarray, activate: Callable[[], ContextManager]) -> int | None:
        """The flags of `array`'s page-locked memory (cuMemHostGetFlags: those asked
        for, and DEVICEMAP added by a driver with unified addressing), or None where it
        is not the driver's page-locked memory."""
        flags = ctypes.c_uint()
        with activate():
            code = self.lib.cuMemHostGetFlags(ctypes.byref(flags),
                                              ctypes.c_void_p(array.ctypes.data))
        return int(flags.value) if code == 0 else None

    def _error(self, code: int) -> str:
        text = ctypes.c_char_p()
        try:
            if self.lib.cuGetErrorString(code, ctypes.byref(text)) == 0 and text.value:
                return text.value.decode(errors="replace")
        except Exception:  # noqa: BLE001 - the code alone then
            pass
        return f"CUDA error {code}"


def _free(lib, address: int, activate: Callable[[], ContextManager]) -> None:
    """cuMemFreeHost of `address` (called by the finalizer; an error here cannot be
    raised to anyone: a dead context has freed the memory already)."""
    try:
        with activate():
            lib.cuMemFreeHost(address)
    except Exception:  # noqa: BLE001 - see above
        pass
