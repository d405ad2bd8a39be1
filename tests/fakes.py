"""Stand-ins for sbmlgpu.runtime.base (Device, Buffer, Module, Kernel, Driver), so that
code written for a GPU runs in tests on a machine without one; and a Terminal.

Device memory is host memory (HostBuffer). A FakeDevice implements base.Device's
abstract methods and `upload`, and records downloads; base's own defaults (the copy
of a download, serial streams, the pinned pool, no mapped memory) stay in force, so
that tests exercise them as a driver without those features would.

What a kernel computes is particular to each test: the device's `compile` runs
core's transpose (sbmlgpu_member_major) and column gather (sbmlgpu_gather_columns)
in numpy and hands any other source to the factory the test gives (e.g. a host
build of the generated kernel, an emulator in numpy), which returns a FakeModule of FakeKernels. Every launch is recorded in the
device's `launches`.

conftest.py has a `fake_device` fixture (a fresh FakeDevice)."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import threading
import weakref
from typing import Callable, Iterable

import numpy as np

from sbmlgpu.runtime.base import (Buffer, Device, DeviceProperties, Driver, Kernel,
                                  KernelAttributes, LaunchTiming, Module, OutOfDeviceMemory)

# An H200-like device: the one set of properties every fake device has, unless a test
# changes a field (`properties(...)`).
PROPERTIES = DeviceProperties(
    name="Fake H200", compute_capability=(9, 0), sm_count=132, clock_khz=1_980_000,
    memory_clock_khz=3_200_000, memory_bus_width_bits=6144, total_memory=141 << 30,
    shared_memory_per_block=48 << 10, shared_memory_per_block_optin=227 << 10,
    shared_memory_per_sm=228 << 10, registers_per_block=65536, registers_per_sm=65536,
    max_threads_per_block=1024, max_threads_per_sm=2048)

ATTRIBUTES = KernelAttributes(registers=32, shared_bytes=0, local_bytes=0,
                              max_threads_per_block=1024)


def properties(**changes) -> DeviceProperties:
    """PROPERTIES with the given fields changed."""
    return dataclasses.replace(PROPERTIES, **changes)


def real_type(source: str):
    """The numpy type of `real_t` in a generated CUDA source."""
    return np.float64 if "typedef double real_t" in source else np.float32


class HostBuffer(Buffer):
    """`nbytes` of "device" memory: `data`, a zeroed uint8 array (one byte at least, so
    that an empty buffer still has an address)."""

    def __init__(self, nbytes: int):
        self.nbytes = int(nbytes)
        self.data = np.zeros(max(self.nbytes, 1), np.uint8)

    @property
    def ptr(self) -> int:
        """The host address of `data` (what a kernel argument would carry)."""
        return int(self.data.ctypes.data)

    def view(self, dtype, count: int | None = None) -> np.ndarray:
        """The first `count` items as `dtype` (all of the buffer: None), sharing its memory."""
        size = self.nbytes if count is None else count * np.dtype(dtype).itemsize
        return self.data[:size].view(dtype)

    def free(self) -> None:
        self.data = None  # a use after free fails loudly


MEMBER_MAJOR = "sbmlgpu_member_major"  # core's transpose (core/codegen/templates/transpose.cu)
GATHER = "sbmlgpu_gather_columns"  # core's column gather (core/codegen/templates/gather.cu)

_active = threading.local()


def active_device() -> "FakeDevice | None":
    """The fake device activated on the calling thread (None outside `activate()`)."""
    return getattr(_active, "device", None)


class FakeDevice(Device):
    """A device over host memory.

    free: what free_memory() reports. alloc_limit: the largest allocation that
    succeeds (None: any); a larger one raises OutOfDeviceMemory, as a full GPU would.
    compile: `compile(device, source) -> Module`, what the test makes of a source
    (None: compiling is not part of the test and fails). name: changes the name in
    `properties`.
    Records: `compiled` (the sources), `launches` (kernel name, grid, block, dynamic
    shared bytes; kept by the kernels of `compile`), `downloads` (the host arrays
    download() filled), `activating_threads`, `allocated` (the buffers still
    referenced; those not freed: `live_buffers()`)."""

    def __init__(self, index: int = 0, *, properties: DeviceProperties = PROPERTIES,
                 name: str | None = None, free: int = 1 << 30, alloc_limit: int | None = None,
                 compile: Callable[["FakeDevice", str], Module] | None = None):
        self.index = index
        self.properties = properties if name is None else \
            dataclasses.replace(properties, name=name)
        self.free = free
        self.alloc_limit = alloc_limit
        self.module_factory = compile
        self.compiled: list[str] = []
        self.launches: list[tuple] = []
        self.downloads: list[np.ndarray] = []
        self.activating_threads: set[int] = set()
        # every buffer alloc() made that is still referenced (a real driver frees the
        # others when they are collected, as base.Buffer says): live_buffers()
        self.allocated: "weakref.WeakSet[HostBuffer]" = weakref.WeakSet()

    def __repr__(self) -> str:
        return f"FakeDevice({self.index}, {self.properties.name!r})"

    @contextlib.contextmanager
    def activate(self):
        self.activating_threads.add(threading.get_ident())
        previous, _active.device = active_device(), self
        try:
            yield self
        finally:
            _active.device = previous

    def free_memory(self) -> int:
        return self.free

    def compile(self, source, *, options=(), name="kernel") -> Module:
        self.compiled.append(source)
        if MEMBER_MAJOR in source:  # core's transpose, which every backend's GPU path runs
            real = real_type(source)
            return FakeModule([MEMBER_MAJOR], lambda _: MemberMajor(real, log=self.launches))
        if GATHER in source:  # core's column gather (runtime/resident.py)
            real = real_type(source)
            return FakeModule([GATHER], lambda _: GatherColumns(real, log=self.launches))
        if self.module_factory is None:
            raise NotImplementedError(f"{self!r} was given nothing to compile {name} with")
        return self.module_factory(self, source)

    def alloc(self, nbytes) -> HostBuffer:
        if self.alloc_limit is not None and nbytes > self.alloc_limit:
            raise OutOfDeviceMemory(f"{self!r}: {nbytes} bytes asked, at most "
                                    f"{self.alloc_limit} at once")
        buffer = HostBuffer(nbytes)
        self.allocated.add(buffer)
        return buffer

    def live_buffers(self) -> list[HostBuffer]:
        """The buffers allocated here and not freed yet."""
        return [buffer for buffer in self.allocated if buffer.data is not None]

    def to_device(self, array) -> HostBuffer:
        host = np.ascontiguousarray(array)
        buffer = self.alloc(host.nbytes)
        self.upload(buffer, host)
        return buffer

    def upload(self, buffer, array) -> None:
        host = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        assert host.size <= buffer.nbytes, (host.size, buffer.nbytes)
        buffer.data[:host.size] = host

    def from_device(self, buffer, shape, dtype) -> np.ndarray:
        count = int(np.prod(shape))
        return buffer.view(dtype, count).reshape(shape).copy()

    def download(self, buffer, out) -> None:
        """base.Device's download, recording the host array it fills (`downloads`)."""
        assert out.nbytes <= buffer.nbytes, (out.nbytes, buffer.nbytes)
        self.downloads.append(out)
        super().download(buffer, out)

    def synchronize(self) -> None:
        pass


class FakeDriver(Driver):
    """A driver that finds the given devices."""

    name = "fake"

    def __init__(self, devices: list[Device]):
        self._devices = list(devices)

    def devices(self) -> list[Device]:
        return self._devices


def dim3(extent) -> tuple[int, int, int]:
    """A launch's grid or block as CUDA has it: three extents, missing ones 1."""
    extent = tuple(int(e) for e in extent)
    return extent + (1,) * (3 - len(extent))


class FakeKernel(Kernel):
    """A kernel that records each launch in `log` (e.g. its device's `launches`), does
    what `run` does (subclasses; nothing here) and reports `ms` as its time."""

    def __init__(self, name: str, *, log: list | None = None,
                 attributes: KernelAttributes = ATTRIBUTES, ms: float = 1.0):
        self.name, self.attributes, self.ms = name, attributes, ms
        self.log = [] if log is None else log

    def launch(self, grid, block, args, shared_bytes=0, stream=None) -> LaunchTiming:
        grid, block = dim3(grid), dim3(block)
        self.log.append((self.name, grid, block, shared_bytes))
        self.run(grid, block, args, shared_bytes)
        return LaunchTiming(self.ms, grid, block, shared_bytes)

    def run(self, grid, block, args, shared_bytes) -> None:
        """What the kernel computes: with `args` as the GPU kernel gets them."""


class FakeModule(Module):
    """The kernels `names`, each made by `make(name)` when asked for; asking for
    another name fails the test, naming those there are."""

    def __init__(self, names: Iterable[str], make: Callable[[str], Kernel]):
        self.names, self.make = tuple(names), make

    def function(self, name: str) -> Kernel:
        assert name in self.names, f"no kernel {name}: {list(self.names)}"
        return self.make(name)


class MemberMajor(FakeKernel):
    """What core's transpose.cu computes, with its arguments: src (cols, n) -> dst
    (n, cols), for `real` (np.float64 or np.float32) values."""

    def __init__(self, real, **kw):
        super().__init__(MEMBER_MAJOR, **kw)
        self.real = real

    def run(self, grid, block, args, shared_bytes) -> None:
        n, cols, src, dst = args
        assert isinstance(n, np.int64) and isinstance(cols, np.int32), (type(n), type(cols))
        n, cols = int(n), int(cols)
        assert src.nbytes >= n * cols * np.dtype(self.real).itemsize <= dst.nbytes
        dst.view(self.real, n * cols)[:] = src.view(self.real, n * cols).reshape(cols, n).T.ravel()


class GatherColumns(FakeKernel):
    """What core's gather.cu computes, with its arguments: out (rows, b) = the columns
    `members` of table (rows, n) (members null: first .. first + b - 1), for `real`
    values."""

    def __init__(self, real, **kw):
        super().__init__(GATHER, **kw)
        self.real = real

    def run(self, grid, block, args, shared_bytes) -> None:
        b, rows, n, members, first, table, out = args
        assert isinstance(b, np.int64) and isinstance(rows, np.int32) \
            and isinstance(n, np.int64) and isinstance(first, np.int64), \
            (type(b), type(rows), type(n), type(first))
        b, rows, n = int(b), int(rows), int(n)
        ids = members.view(np.uint64, b).astype(np.intp) if isinstance(members, HostBuffer) \
            else int(first) + np.arange(b)  # a null pointer: the range from first
        assert ids.size == 0 or ids.max() < n
        source = table.view(self.real, rows * n).reshape(rows, n)
        out.view(self.real, rows * b).reshape(rows, b)[...] = source[:, ids]


class Terminal(io.StringIO):
    """A text stream that says it is a terminal (as progress bars want) and keeps what
    is written to it (getvalue())."""

    def isatty(self):
        return True
