"""Runtime buffers as CuPy arrays and CuPy arrays as runtime buffers, without a copy.

Why: the CME backend compares its own sparse kernels with cuSPARSE baselines, which
CuPy (cupyx.scipy.sparse) reaches easily; the matrix and vectors already live in
our buffers, and copying gigabytes to hand them over would distort the comparison.

Contexts. PyCUDA here drives each device through its *primary* context
(`retain_primary_context`), which is the very context the CUDA runtime API, and so
CuPy, uses for that device: memory allocated by either is valid for the other,
and kernels of both run in one address space. Both number devices the same way
(CUDA_VISIBLE_DEVICES applies to both). `check_same_context(device)` verifies this
once per device: with our context current, CuPy must see that context and that
device. It fails if a context was created some other way (e.g. PyCUDA's
`make_context`, or `pycuda.autoinit`), in which case the pointers of one would be
invalid in the other.

Streams: CuPy runs on its current stream (the default stream unless changed); to
order CuPy work with our stream, run it under `with cupy_stream(stream):`.

CuPy is optional: it is imported here, on first use, and its absence is a
DeviceError saying so.
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

from ..errors import DeviceError
from .base import AddressedBuffer, Buffer

_lock = threading.Lock()
_checked: "weakref.WeakSet" = weakref.WeakSet()  # devices whose context agrees with CuPy's


def import_cupy():
    """The cupy module, or a DeviceError saying it is needed and missing."""
    try:
        import cupy
    except ImportError as e:
        raise DeviceError(f"CuPy is not installed or does not load ({e}); it is needed only "
                          "to hand device arrays to CuPy (e.g. the cuSPARSE baselines): "
                          "install the cupy wheel for your CUDA version") from None
    return cupy


def check_same_context(device) -> None:
    """DeviceError unless CuPy, called with `device` active, uses its context."""
    if device in _checked:
        return
    cupy = import_cupy()
    ours = device.context_handle()
    if ours is None:
        raise DeviceError(f"{device!r} has no CUDA context to share with CuPy")
    with device.activate():
        theirs = int(cupy.cuda.driver.ctxGetCurrent())
        their_device = int(cupy.cuda.runtime.getDevice())
    if theirs != ours or their_device != device.index:
        raise DeviceError(
            f"{device}: CuPy sees context {theirs:#x} on device {their_device}, but this "
            f"device's work runs in context {ours:#x} on device {device.index}; both must "
            "use the device's primary context (do not create PyCUDA contexts with "
            "make_context or pycuda.autoinit next to sbmlgpu)")
    with _lock:
        _checked.add(device)


class CupyBuffer(AddressedBuffer):
    """A CuPy array seen as a runtime Buffer of `device` (no copy): kernels and
    copies take it like any buffer. It keeps the array alive; `free()` lets go."""

    kind = "CuPy buffer"

    def __init__(self, device, array):
        self.device = device
        self.array = array
        self.nbytes = int(array.nbytes)
        self._ptr = int(array.data.ptr)

    def free(self) -> None:
        self.array, self._ptr = None, None


def as_cupy(buffer: Buffer, shape, dtype, *, offset: int = 0):
    """`buffer` (from `device.alloc`) as a C-ordered cupy.ndarray of `shape` and
    `dtype` starting at byte `offset`, sharing its memory. The array keeps the
    buffer alive; freeing the buffer explicitly while the array is used is an error."""
    device = getattr(buffer, "device", None)
    if device is None or not hasattr(buffer, "ptr"):
        raise DeviceError(f"a {type(buffer).__name__} is not device memory CuPy can use")
    cupy = import_cupy()
    check_same_context(device)
    dtype = np.dtype(dtype)
    shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(v) for v in shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if offset < 0 or offset + nbytes > buffer.nbytes:
        raise DeviceError(f"{device}: a {shape} {dtype} array at offset {offset} needs "
                          f"{offset + nbytes} bytes; the buffer has {buffer.nbytes}")
    memory = cupy.cuda.UnownedMemory(buffer.ptr, buffer.nbytes, buffer, device.index)
    return cupy.ndarray(shape, dtype, memptr=cupy.cuda.MemoryPointer(memory, int(offset)))


def from_cupy(array, device) -> CupyBuffer:
    """A C-contiguous cupy.ndarray on `device` as a Buffer (no copy)."""
    cupy = import_cupy()
    if not isinstance(array, cupy.ndarray):
        raise DeviceError(f"expected a cupy.ndarray, got a {type(array).__name__}")
    if not array.flags.c_contiguous:
        raise DeviceError("a CuPy array handed to a kernel must be C-contiguous "
                          "(cupy.ascontiguousarray makes one)")
    if int(array.device.id) != device.index:
        raise DeviceError(f"the CuPy array lives on device {int(array.device.id)}, "
                          f"not on {device}")
    check_same_context(device)
    return CupyBuffer(device, array)


def cupy_stream(stream):
    """Our Stream as a CuPy stream (`with cupy_stream(s): ...` orders CuPy's work on it)."""
    cupy = import_cupy()
    handle = getattr(stream, "handle", None)
    if handle is None:
        raise DeviceError(f"{stream!r} is not a CUDA stream CuPy can use")
    check_same_context(stream.device)
    try:
        return cupy.cuda.ExternalStream(handle, stream.device.index)
    except TypeError:  # CuPy before 13 takes only the pointer
        return cupy.cuda.ExternalStream(handle)
