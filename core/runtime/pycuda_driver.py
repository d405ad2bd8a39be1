"""The PyCUDA implementation of the driver interface (base.py).

Imported only by `runtime.get_driver()`, so importing sbmlgpu never imports
PyCUDA. Each device uses its retained primary context (the one the CUDA runtime
API would use); `activate()` pushes it on the calling thread's context stack and
pops it after, so several host threads can drive several devices at once. Every
method that touches the device activates it itself.

CUDA errors become typed errors: out of memory -> OutOfDeviceMemory (the
scheduler retries with smaller batches), anything else -> DeviceError naming
the device, the kernel and the launch shape.

Streams and events are in pycuda_streams.py. Pinned staging buffers are
page-locked PORTABLE (pinned for every context) by cuMemHostAlloc through ctypes,
which releases the GIL (driver_host_memory.py), or by PyCUDA's pagelocked_empty where
the driver library does not load that way; mapped
memory is pagelocked with DEVICEMAP, and its device address comes from
get_device_pointer(), or is the host address itself where the driver does not give
one: with unified addressing (every 64-bit process) all page-locked host memory is
accessible from every device at its host address (CUDA driver API, "Unified
Addressing").
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Sequence

import numpy as np

from ..errors import DeviceError
from .base import (
    Buffer,
    Device,
    DeviceProperties,
    Driver,
    Kernel,
    KernelAttributes,
    LaunchTiming,
    MappedBuffer,
    Module,
    OutOfDeviceMemory,
)
from .cache import default_cache
from .driver_host_memory import DriverHostMemory
from .pycuda_streams import PyCudaEvent, PyCudaStream
from .streams import PendingLaunch

#: Dynamic shared memory a kernel gets without opting in (all GPUs since sm_20).
_DEFAULT_DYNAMIC_SHARED = 48 * 1024


def import_pycuda():
    """pycuda.driver, or ImportError saying why it does not load."""
    try:
        import pycuda.driver as cuda
    except (ImportError, OSError, RuntimeError) as e:
        raise ImportError(str(e)) from e
    return cuda


class PyCudaDriver(Driver):
    name = "pycuda"

    def __init__(self, cuda=None, host_memory: DriverHostMemory | None = None):
        """`host_memory`: page-locked allocations through the driver library without
        the GIL (driver_host_memory.py); None: PyCUDA's pagelocked_empty."""
        self.cuda = cuda or import_pycuda()
        try:
            self.cuda.init()
            count = self.cuda.Device.count()
        except self.cuda.Error as e:
            raise DeviceError(f"the CUDA driver did not start: {e}") from None
        self._devices = [PyCudaDevice(self.cuda, i, host_memory) for i in range(count)]

    def devices(self) -> list[Device]:
        return list(self._devices)


def _properties(cuda, dev) -> DeviceProperties:
    def attribute(name: str, default: int = 0) -> int:
        which = getattr(cuda.device_attribute, name, None)
        if which is None:
            return default
        try:
            return int(dev.get_attribute(which))
        except cuda.Error:
            return default

    return DeviceProperties(
        name=dev.name(),
        compute_capability=tuple(int(v) for v in dev.compute_capability()),
        sm_count=attribute("MULTIPROCESSOR_COUNT"),
        clock_khz=attribute("CLOCK_RATE"),
        memory_clock_khz=attribute("MEMORY_CLOCK_RATE"),
        memory_bus_width_bits=attribute("GLOBAL_MEMORY_BUS_WIDTH"),
        total_memory=int(dev.total_memory()),
        shared_memory_per_block=attribute("MAX_SHARED_MEMORY_PER_BLOCK"),
        shared_memory_per_block_optin=attribute("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
        shared_memory_per_sm=attribute("MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"),
        registers_per_block=attribute("MAX_REGISTERS_PER_BLOCK"),
        registers_per_sm=attribute("MAX_REGISTERS_PER_MULTIPROCESSOR"),
        max_threads_per_block=attribute("MAX_THREADS_PER_BLOCK"),
        max_threads_per_sm=attribute("MAX_THREADS_PER_MULTIPROCESSOR"),
        warp_size=attribute("WARP_SIZE", 32),
    )


class PyCudaBuffer(Buffer):
    def __init__(self, device: "PyCudaDevice", allocation, nbytes: int):
        self.device = device
        self.allocation = allocation
        self.nbytes = nbytes

    @property
    def ptr(self) -> int:
        if self.allocation is None:
            raise DeviceError("use of a freed device buffer")
        return int(self.allocation)

    def free(self) -> None:
        if self.allocation is not None:
            with self.device.activate():
                self.allocation.free()
            self.allocation = None


class PyCudaMappedBuffer(MappedBuffer):
    """Page-locked host memory mapped into `device` (see base.MappedBuffer)."""

    def __init__(self, device: "PyCudaDevice", host: np.ndarray, ptr: int):
        self.device, self.host, self.nbytes = device, host, host.nbytes
        self._ptr = ptr

    def free(self) -> None:
        """Unpin and free now (no array taken from `host` may be used afterwards)."""
        if self._ptr is not None:
            self._ptr = None
            allocation, self.host = self.host.base, None
            with self.device.activate():
                allocation.free()


class PyCudaKernel(Kernel):
    def __init__(self, device: "PyCudaDevice", module: "PyCudaModule", function, name: str):
        self.device, self.module, self.name = device, module, name
        self._function = function
        fa = device.cuda.function_attribute
        get = function.get_attribute
        self.attributes = KernelAttributes(
            registers=int(get(fa.NUM_REGS)),
            shared_bytes=int(get(fa.SHARED_SIZE_BYTES)),
            local_bytes=int(get(fa.LOCAL_SIZE_BYTES)),
            max_threads_per_block=int(get(fa.MAX_THREADS_PER_BLOCK)),
            const_bytes=int(get(fa.CONST_SIZE_BYTES)),
        )
        self._dynamic_shared_limit = _DEFAULT_DYNAMIC_SHARED

    def launch(self, grid: Sequence[int], block: Sequence[int], args: Sequence[Any],
               shared_bytes: int = 0, stream: Any = None) -> LaunchTiming:
        cuda = self.device.cuda
        if isinstance(stream, PyCudaStream):
            stream = self._own(stream).raw
        start, end, grid3, block3, where = self._enqueue(grid, block, args, shared_bytes,
                                                         stream)
        with self.device.activate():
            try:
                end.synchronize()
            except cuda.Error as e:
                raise DeviceError(f"{where}: failed while running: {e}") from None
            ms = end.time_since(start)
        return LaunchTiming(ms=float(ms), grid=grid3, block=block3,
                            dynamic_shared_bytes=int(shared_bytes))

    def launch_async(self, grid: Sequence[int], block: Sequence[int], args: Sequence[Any],
                     shared_bytes: int = 0, *, stream) -> PendingLaunch:
        stream = self._own(stream)
        start, end, grid3, block3, where = self._enqueue(grid, block, args, shared_bytes,
                                                         stream.raw)
        return stream.track(PendingLaunch(
            where, grid3, block3, int(shared_bytes), stream, PyCudaEvent(self.device, start),
            PyCudaEvent(self.device, end), args=list(args)))

    def _own(self, stream) -> PyCudaStream:
        if not isinstance(stream, PyCudaStream) or stream.device is not self.device:
            raise DeviceError(f"kernel {self.name}: launch on a stream of {self.device} "
                              f"(device.stream()), not on {stream!r}")
        return stream

    def _enqueue(self, grid, block, args, shared_bytes, raw_stream):
        """Record the start event, launch, record the end event; nothing waits."""
        cuda = self.device.cuda
        grid3, block3 = _dim3(grid, "grid", self.name), _dim3(block, "block", self.name)
        threads = block3[0] * block3[1] * block3[2]
        if threads > self.attributes.max_threads_per_block:
            raise DeviceError(
                f"kernel {self.name}: a block of {threads} threads is more than the "
                f"{self.attributes.max_threads_per_block} it can run with "
                f"{self.attributes.registers} registers per thread")
        values = [self._argument(i, a) for i, a in enumerate(args)]
        where = f"kernel {self.name} (grid {grid3}, block {block3}) on {self.device}"
        with self.device.activate():
            if shared_bytes > self._dynamic_shared_limit:
                self._opt_in_shared(int(shared_bytes), where)
            start, end = cuda.Event(), cuda.Event()
            try:
                start.record(raw_stream)
                self._function(*values, grid=grid3, block=block3, shared=int(shared_bytes),
                               stream=raw_stream)
                end.record(raw_stream)
            except cuda.MemoryError as e:
                raise OutOfDeviceMemory(f"{where}: out of memory at launch: {e}") from None
            except cuda.Error as e:
                raise DeviceError(f"{where}: launch failed: {e}") from None
        return start, end, grid3, block3, where

    def _opt_in_shared(self, nbytes: int, where: str) -> None:
        cuda = self.device.cuda
        limit = self.device.properties.shared_memory_per_block_optin
        if nbytes + self.attributes.shared_bytes > limit:
            raise OutOfDeviceMemory(f"{where}: {nbytes} bytes of dynamic shared memory "
                                    f"(+{self.attributes.shared_bytes} static) exceed the "
                                    f"device's {limit} per block")
        try:
            self._function.set_attribute(
                cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes)
        except cuda.Error as e:
            raise DeviceError(f"{where}: cannot allow {nbytes} bytes of shared memory: {e}") \
                from None
        self._dynamic_shared_limit = nbytes

    def _argument(self, i: int, value):
        # any buffer of this device with an address: allocations, mapped host memory,
        # CuPy arrays wrapped by cupy_interop.from_cupy
        if isinstance(value, Buffer) and hasattr(value, "ptr"):
            if getattr(value, "device", None) is not self.device:
                raise DeviceError(f"kernel {self.name}: argument {i} lives on {value.device}, "
                                  f"not on {self.device}")
            return np.uintp(value.ptr)
        if isinstance(value, np.number):
            return value
        raise DeviceError(f"kernel {self.name}: argument {i} is a {type(value).__name__}; "
                          f"pass a device Buffer or a numpy scalar (np.int32, np.float64, ...) "
                          f"so that its C type is explicit")


class PyCudaModule(Module):
    def __init__(self, device: "PyCudaDevice", module, name: str):
        self.device, self.name = device, name
        self._module = module
        self._kernels: dict[str, PyCudaKernel] = {}

    def function(self, name: str) -> Kernel:
        if name not in self._kernels:
            cuda = self.device.cuda
            with self.device.activate():
                try:
                    function = self._module.get_function(name)
                except cuda.Error:
                    raise DeviceError(f"module {self.name} has no kernel {name!r} "
                                      f'(declare it extern "C" __global__)') from None
                self._kernels[name] = PyCudaKernel(self.device, self, function, name)
        return self._kernels[name]


class PyCudaDevice(Device):
    def __init__(self, cuda, index: int, host_memory: DriverHostMemory | None = None):
        self.cuda = cuda
        self.index = index
        self._host_memory = host_memory
        self._device = cuda.Device(index)
        self.properties = _properties(cuda, self._device)
        self._context = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"GPU {self.index} ({self.properties.name})"

    def _primary_context(self):
        with self._lock:
            if self._context is None:
                try:
                    self._context = self._device.retain_primary_context()
                except self.cuda.Error as e:
                    raise DeviceError(f"{self}: cannot create a context: {e}") from None
            return self._context

    @contextmanager
    def activate(self):
        context = self._primary_context()
        context.push()
        try:
            yield self
        finally:
            self.cuda.Context.pop()

    def _context_activation(self):
        """activate() of this device's context that holds the context alone, not this
        object (for a finalizer: driver_host_memory.py)."""
        context, cuda = self._primary_context(), self.cuda

        @contextmanager
        def activate():
            context.push()
            try:
                yield
            finally:
                cuda.Context.pop()

        return activate

    def free_memory(self) -> int:
        with self.activate():
            free, _total = self.cuda.mem_get_info()
        return int(free)

    def compile(self, source: str, *, options: Sequence[str] = (),
                name: str = "kernel") -> Module:
        cubin = default_cache().compile(source, arch=self.properties.arch,
                                        options=tuple(options), name=name)
        with self.activate():
            try:
                module = self.cuda.module_from_buffer(cubin)
            except self.cuda.Error as e:
                raise DeviceError(f"{self}: cannot load the compiled {name}: {e}") from None
        return PyCudaModule(self, module, name)

    def alloc(self, nbytes: int) -> Buffer:
        nbytes = int(nbytes)
        if nbytes < 0 or nbytes >= 2**63:
            raise DeviceError(f"{self}: cannot allocate {nbytes} bytes")
        with self.activate():
            try:
                # cuMemAlloc rejects 0 bytes; an empty buffer still gets an address.
                allocation = self.cuda.mem_alloc(max(nbytes, 1))
            except self.cuda.MemoryError as e:
                free, total = self.cuda.mem_get_info()
                raise OutOfDeviceMemory(f"{self}: cannot allocate {nbytes} bytes "
                                        f"({free} of {total} free): {e}") from None
            except self.cuda.Error as e:
                raise DeviceError(f"{self}: allocating {nbytes} bytes failed: {e}") from None
        return PyCudaBuffer(self, allocation, nbytes)

    def to_device(self, array) -> Buffer:
        host = np.ascontiguousarray(array)
        buffer = self.alloc(host.nbytes)
        self.upload(buffer, host)
        return buffer

    def upload(self, buffer: Buffer, array) -> None:
        host = np.ascontiguousarray(array)
        if host.nbytes > buffer.nbytes:
            raise DeviceError(f"{self}: {host.nbytes} bytes do not fit a {buffer.nbytes}-byte buffer")
        if host.nbytes:
            with self.activate():
                self._guard(lambda: self.cuda.memcpy_htod(buffer.ptr, host), "copy to device")

    def from_device(self, buffer: Buffer, shape, dtype) -> np.ndarray:
        out = np.empty(shape, dtype=dtype)
        self.download(buffer, out)
        return out

    def download(self, buffer: Buffer, out: np.ndarray) -> None:
        """Straight into `out` when it is C-contiguous (e.g. a block of rows of the
        result), without an intermediate array."""
        if not (isinstance(out, np.ndarray) and out.flags.c_contiguous):
            return super().download(buffer, out)
        if out.nbytes > buffer.nbytes:
            raise DeviceError(f"{self}: reading {out.nbytes} bytes from a "
                              f"{buffer.nbytes}-byte buffer")
        if out.nbytes:
            with self.activate():
                self._guard(lambda: self.cuda.memcpy_dtoh(out, buffer.ptr), "copy from device")

    def synchronize(self) -> None:
        with self.activate():
            self._guard(self.cuda.Context.synchronize, "synchronize")

    def stream(self) -> PyCudaStream:
        return PyCudaStream(self)

    def allocate_pinned(self, nbytes: int) -> np.ndarray:
        if self._host_memory is not None:  # without the GIL (driver_host_memory.py)
            return self._host_memory.allocate(nbytes, self._context_activation(), repr(self))
        flags = self.cuda.host_alloc_flags.PORTABLE
        with self.activate():
            return self._host_guard(
                lambda: self.cuda.pagelocked_empty((int(nbytes),), np.uint8, mem_flags=flags),
                nbytes)

    def map_host(self, shape, dtype) -> MappedBuffer:
        cuda = self.cuda
        shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(v) for v in shape)
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        if not shape or nbytes <= 0:
            raise DeviceError(f"{self}: mapped memory of shape {shape} and {np.dtype(dtype)} "
                              "holds nothing; ask for at least one element")
        flags = cuda.host_alloc_flags.DEVICEMAP | cuda.host_alloc_flags.PORTABLE
        with self.activate():
            host = self._host_guard(
                lambda: cuda.pagelocked_zeros(shape, dtype, mem_flags=flags), nbytes)
            try:
                ptr = int(host.base.get_device_pointer())
            except cuda.Error as e:
                if not self._unified_addressing():
                    raise DeviceError(f"{self}: cannot map host memory into the device: "
                                      f"{e}") from None
                ptr = int(host.ctypes.data)  # see the module docstring
        return PyCudaMappedBuffer(self, host, ptr)

    def context_handle(self) -> int:
        return int(self._primary_context().handle)

    def _unified_addressing(self) -> bool:
        which = getattr(self.cuda.device_attribute, "UNIFIED_ADDRESSING", None)
        try:
            return which is not None and bool(self._device.get_attribute(which))
        except self.cuda.Error:
            return False

    def _host_guard(self, call, nbytes: int):
        try:
            return call()
        except self.cuda.Error as e:
            raise DeviceError(f"{self}: cannot page-lock {nbytes} bytes of host memory: "
                              f"{e}") from None

    def _guard(self, call, what: str):
        try:
            return call()
        except self.cuda.MemoryError as e:
            raise OutOfDeviceMemory(f"{self}: {what}: {e}") from None
        except self.cuda.Error as e:
            raise DeviceError(f"{self}: {what} failed: {e}") from None


def _dim3(shape: Sequence[int], what: str, kernel: str) -> tuple[int, int, int]:
    dims = tuple(int(v) for v in shape)
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise DeviceError(f"kernel {kernel}: {what} {tuple(shape)} must be 1 to 3 positive sizes")
    return dims + (1,) * (3 - len(dims))
