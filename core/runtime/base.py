"""The driver interface every GPU runtime implements (PyCUDA today, see pycuda_driver.py).

Backends and the scheduler talk only to these classes, so that another driver
(CuPy, cuda-python) can be added without touching them. Everything here is
importable without a GPU and without PyCUDA.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..errors import DeviceError


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
    """Time of one launch from CUDA events, in milliseconds."""

    ms: float
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_shared_bytes: int = 0


class Buffer(ABC):
    """Device memory. `nbytes`; freed by `free()` or when garbage-collected."""

    nbytes: int

    @abstractmethod
    def free(self) -> None: ...


class Kernel(ABC):
    name: str
    attributes: KernelAttributes

    @abstractmethod
    def launch(self, grid: Sequence[int], block: Sequence[int], args: Sequence[Any],
               shared_bytes: int = 0, stream: Any = None) -> LaunchTiming:
        """Launch and time with CUDA events (synchronises on the end event). `args`:
        Buffers, numpy scalars (np.int32, np.float64, ...)."""


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


class Driver(ABC):
    name: str

    @abstractmethod
    def devices(self) -> list[Device]: ...


@dataclass
class DeviceSelection:
    """Which devices a run may use: all (None) or a list of indices."""

    indices: Sequence[int] | None = None
    extra: dict = field(default_factory=dict)
