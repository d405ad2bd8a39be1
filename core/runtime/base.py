"""The driver interface every GPU runtime implements (PyCUDA today, see pycuda_driver.py).

Backends and the scheduler talk only to these classes, so that another driver
(CuPy, cuda-python) can be added without touching them. Everything here is
importable without a GPU and without PyCUDA.

Beyond allocation, copies and synchronous launches, a Device gives streams and
asynchronous launches (streams.py), a pool of pinned host buffers (pinned.py) and
host memory mapped into the device (MappedBuffer). Their defaults here work on any
device, without overlap or pinning, so that a driver (or a fake in tests) that
implements only the abstract methods still runs code written against them.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ..errors import DeviceError

if TYPE_CHECKING:
    from .pinned import PinnedPool
    from .streams import PendingLaunch, Stream


class OutOfDeviceMemory(DeviceError):
    """An allocation or launch ran out of device memory; the scheduler retries smaller."""


@dataclass(frozen=True)
class DeviceProperties:
    name: str
    compute_capability: tuple[int, int]
    sm_count: int
    clock_khz: int  # SM clock
    memory_clock_khz: int
    memory_bus_width_bits: int
    total_memory: int  # bytes
    shared_memory_per_block: int  # bytes (default limit, without opt-in)
    shared_memory_per_block_optin: int
    shared_memory_per_sm: int
    registers_per_block: int
    registers_per_sm: int
    max_threads_per_block: int
    max_threads_per_sm: int
    warp_size: int = 32

    @property
    def arch(self) -> str:
        """nvcc's -arch value for this device, e.g. 'sm_90'."""
        return f"sm_{self.compute_capability[0]}{self.compute_capability[1]}"

    # FP32 / FP64 lanes per SM by compute capability (CUDA C Programming Guide,
    # "Arithmetic Instructions" throughput table). An FMA counts as two FLOPs.
    _LANES = {(6, 0): (64, 32), (7, 0): (64, 32), (8, 0): (64, 32), (9, 0): (128, 64),
              (7, 5): (64, 2), (8, 6): (128, 2), (8, 9): (128, 2), (12, 0): (128, 2)}

    def peak_flops(self, precision: str = "double") -> float:
        """Non-tensor peak FLOP/s at the reported SM clock (a lead, not a measurement)."""
        fp32, fp64 = self._LANES.get(self.compute_capability, (128, 2))
        lanes = fp64 if precision == "double" else fp32
        return 2.0 * lanes * self.sm_count * self.clock_khz * 1e3

    def peak_bandwidth(self) -> float:
        """Theoretical DRAM bandwidth in bytes/s (double data rate)."""
        return 2.0 * self.memory_clock_khz * 1e3 * self.memory_bus_width_bits / 8


@dataclass(frozen=True)
class KernelAttributes:
    """What the compiler gave a kernel; recorded with every launch."""

    registers: int
    shared_bytes: int  # static shared memory
    local_bytes: int  # per-thread local memory (spills and stack arrays)
    max_threads_per_block: int
    const_bytes: int = 0


@dataclass
class LaunchTiming:
    """Time of one launch from CUDA events, in milliseconds.

    started_at: host time (time.perf_counter()) at which the kernel started, from
    its events, for launches whose time is read after they end (launch_async);
    None where unknown (a synchronous launch ended when `launch` returned)."""

    ms: float
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_shared_bytes: int = 0
    started_at: float | None = None


class Buffer(ABC):
    """Device memory. `nbytes`; freed by `free()` or when garbage-collected.

    A GPU driver's buffers also have `device` (where the memory is) and `ptr` (its
    device address), which kernels and foreign libraries (cupy_interop.py) take."""

    nbytes: int

    @abstractmethod
    def free(self) -> None: ...


class AddressedBuffer(Buffer):
    """A buffer known by its address alone, which `free()` forgets (`_ptr = None`),
    so that a use after free is an error rather than a stray pointer."""

    kind = "buffer"  # for the message
    _ptr: int | None = None

    @property
    def ptr(self) -> int:
        if self._ptr is None:
            raise DeviceError(f"use of a freed {self.kind}")
        return self._ptr


class MappedBuffer(AddressedBuffer):
    """Page-locked host memory mapped into a device's address space (zero copy):
    `host` is the numpy array the host reads and writes, `ptr` the address a kernel
    gets. For small host<->kernel signals (a flag a persistent kernel polls, a
    counter of items done), not for bulk data: every device access crosses the link.

    Writes cross without any synchronisation, but not at once: a kernel reads a
    polled flag through a `volatile` pointer (or the compiler may read it once), and
    calls `__threadfence_system()` after writing what the host reads, so that the
    host never sees a counter ahead of the results it counts."""

    kind = "mapped buffer"
    host: np.ndarray


class Kernel(ABC):
    name: str
    attributes: KernelAttributes

    @abstractmethod
    def launch(self, grid: Sequence[int], block: Sequence[int], args: Sequence[Any],
               shared_bytes: int = 0, stream: Any = None) -> LaunchTiming:
        """Launch and time with CUDA events (synchronises on the end event). `args`:
        Buffers, numpy scalars (np.int32, np.float64, ...). `stream`: a Stream of
        this device (None: the default stream)."""

    def launch_async(self, grid: Sequence[int], block: Sequence[int], args: Sequence[Any],
                     shared_bytes: int = 0, *, stream: "Stream") -> "PendingLaunch":
        """Enqueue on `stream` and return at once; the handle's `timing()` (or
        `stream.synchronize()`) reads the time later. A driver without streams
        launches synchronously here and returns a handle already done."""
        from .streams import PendingLaunch

        timing = self.launch(grid, block, args, shared_bytes)
        return stream.track(PendingLaunch(f"kernel {self.name}", timing.grid, timing.block,
                                          timing.dynamic_shared_bytes, stream, timing=timing))


class Module(ABC):
    @abstractmethod
    def function(self, name: str) -> Kernel: ...


class Device(ABC):
    index: int
    properties: DeviceProperties

    @abstractmethod
    def activate(self) -> AbstractContextManager:
        """Make this device current on the calling thread for the `with` block."""

    @abstractmethod
    def free_memory(self) -> int: ...

    @abstractmethod
    def compile(self, source: str, *, options: Sequence[str] = (),
                name: str = "kernel") -> Module:
        """nvcc for this device's arch, through the on-disk cache."""

    @abstractmethod
    def alloc(self, nbytes: int) -> Buffer:
        """Raises OutOfDeviceMemory when the device cannot hold it."""

    @abstractmethod
    def to_device(self, array) -> Buffer: ...

    @abstractmethod
    def from_device(self, buffer: Buffer, shape, dtype) -> Any: ...

    def upload(self, buffer: Buffer, array) -> None:
        """Copy a host array into an existing buffer (at least as large)."""
        raise NotImplementedError(f"{type(self).__name__} cannot upload into a buffer")

    def download(self, buffer: Buffer, out) -> None:
        """Copy the first out.nbytes of `buffer` into the existing host array `out`
        (a device that can copy into it directly overrides this)."""
        out[...] = self.from_device(buffer, out.shape, out.dtype)

    @abstractmethod
    def synchronize(self) -> None: ...

    # --- asynchronous work and host memory (defaults work on any device) ----------------
    def stream(self) -> "Stream":
        """A new stream on this device (the default: a SerialStream, which runs each
        operation at once through the synchronous methods above)."""
        from .streams import SerialStream

        return SerialStream(self)

    def pinned_pool(self) -> "PinnedPool":
        """This device's pool of host staging buffers (made on first use)."""
        from .pinned import PinnedPool

        pool = self.__dict__.get("_pinned_pool")
        if pool is None:
            with _POOL_LOCK:
                pool = self.__dict__.setdefault(
                    "_pinned_pool", PinnedPool(self.allocate_pinned, label=repr(self)))
        return pool

    def allocate_pinned(self, nbytes: int) -> np.ndarray:
        """`nbytes` of host memory as a 1-D uint8 array, page-locked where the driver
        can (the default: ordinary memory). The pool calls this; use the pool."""
        return np.empty(int(nbytes), dtype=np.uint8)

    def map_host(self, shape, dtype) -> MappedBuffer:
        """Zeroed host memory of `shape` and `dtype` that kernels on this device can
        read and write (see MappedBuffer)."""
        raise DeviceError(f"{self!r} cannot map host memory into the device")

    def context_handle(self) -> int | None:
        """The address of the CUDA context this device's work runs in (None: no CUDA
        context), to check that another CUDA library uses the same one."""
        return None


_POOL_LOCK = threading.Lock()  # makes one pool per device when threads ask at once


class Driver(ABC):
    name: str

    @abstractmethod
    def devices(self) -> list[Device]: ...


@dataclass
class DeviceSelection:
    """Which devices a run may use: all (None) or a list of indices."""

    indices: Sequence[int] | None = None
    extra: dict = field(default_factory=dict)
