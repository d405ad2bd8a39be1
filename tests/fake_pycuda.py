"""A stand-in for pycuda.driver that behaves like its documented API, so that the
PyCUDA driver's own logic (contexts, errors, arguments, copies, streams) runs without
a GPU (tests/test_runtime_driver.py, tests/test_runtime_async.py; the `driver`
fixture of conftest.py is sbmlgpu's PyCudaDriver over it).

Its streams run their operations only when something waits for them (an event or
the stream is synchronised), as a real GPU may, so that a caller that reads a copy
before waiting for it sees stale data here too."""

from __future__ import annotations

import threading
import types
from collections import deque

import numpy as np


def make_fake_cuda(n_devices=2, memory=1 << 20):
    cuda = types.SimpleNamespace()

    class Error(Exception):
        pass

    cuda.Error = Error
    cuda.MemoryError = type("MemoryError", (Error,), {})
    cuda.LogicError = type("LogicError", (Error,), {})
    cuda.LaunchError = type("LaunchError", (Error,), {})
    names = ["MULTIPROCESSOR_COUNT", "CLOCK_RATE", "MEMORY_CLOCK_RATE", "GLOBAL_MEMORY_BUS_WIDTH",
             "MAX_SHARED_MEMORY_PER_BLOCK", "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN",
             "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR", "MAX_REGISTERS_PER_BLOCK",
             "MAX_REGISTERS_PER_MULTIPROCESSOR", "MAX_THREADS_PER_BLOCK",
             "MAX_THREADS_PER_MULTIPROCESSOR", "WARP_SIZE", "UNIFIED_ADDRESSING"]
    cuda.device_attribute = types.SimpleNamespace(**{n: n for n in names})
    values = dict(MULTIPROCESSOR_COUNT=132, CLOCK_RATE=1_980_000, MEMORY_CLOCK_RATE=2_619_000,
                  GLOBAL_MEMORY_BUS_WIDTH=5120, MAX_SHARED_MEMORY_PER_BLOCK=49152,
                  MAX_SHARED_MEMORY_PER_BLOCK_OPTIN=232448,
                  MAX_SHARED_MEMORY_PER_MULTIPROCESSOR=233472, MAX_REGISTERS_PER_BLOCK=65536,
                  MAX_REGISTERS_PER_MULTIPROCESSOR=65536, MAX_THREADS_PER_BLOCK=1024,
                  MAX_THREADS_PER_MULTIPROCESSOR=2048, WARP_SIZE=32, UNIFIED_ADDRESSING=1)
    cuda.function_attribute = types.SimpleNamespace(
        NUM_REGS="regs", SHARED_SIZE_BYTES="shared", LOCAL_SIZE_BYTES="local",
        MAX_THREADS_PER_BLOCK="maxthreads", CONST_SIZE_BYTES="const",
        MAX_DYNAMIC_SHARED_SIZE_BYTES="maxdyn")
    stacks = threading.local()
    memory_of = {}  # ptr -> bytearray
    state = {"next": 4096, "pushes": 0, "launches": [], "async_copies": [], "streams": 0}
    cuda.state = state

    def stack():
        if not hasattr(stacks, "s"):
            stacks.s = []
        return stacks.s

    class Context:
        def __init__(self, device):
            self.device = device
            self.handle = 0xC0DE00 + device.i  # one primary context per device

        def push(self):
            stack().append(self)
            state["pushes"] += 1

        @staticmethod
        def pop():
            if not stack():
                raise cuda.LogicError("context stack empty")
            stack().pop()

        @staticmethod
        def synchronize():
            need_context()

    cuda.Context = Context

    def need_context():
        if not stack():
            raise cuda.LogicError("no current context")
        return stack()[-1]

    class Device:
        @staticmethod
        def count():
            return n_devices

        def __init__(self, i):
            self.i = i

        def name(self):
            return "NVIDIA H200"

        def compute_capability(self):
            return (9, 0)

        def total_memory(self):
            return memory

        def get_attribute(self, which):
            return values[which]

        def retain_primary_context(self):
            return Context(self)

    cuda.Device = Device
    cuda.init = lambda: None

    class Allocation:
        def __init__(self, ptr):
            self.ptr = ptr

        def __int__(self):
            return self.ptr

        def free(self):
            need_context()
            memory_of.pop(self.ptr)

    def mem_alloc(n):
        need_context()
        if n > memory - sum(len(b) for b in memory_of.values()):
            raise cuda.MemoryError("cuMemAlloc failed: out of memory")
        ptr = state["next"]
        state["next"] += n + 256
        memory_of[ptr] = bytearray(n)
        return Allocation(ptr)

    cuda.mem_alloc = mem_alloc
    cuda.mem_get_info = lambda: (memory - sum(len(b) for b in memory_of.values()), memory)

    def locate(ptr, size):
        """The allocation holding [ptr, ptr + size) and the offset of ptr in it."""
        for base, data in memory_of.items():
            if base <= int(ptr) and int(ptr) + size <= base + len(data):
                return data, int(ptr) - base
        raise cuda.LogicError(f"invalid device pointer {int(ptr):#x} for {size} bytes")

    def memcpy_htod(ptr, host):
        need_context()
        data = np.ascontiguousarray(host).view(np.uint8).ravel()
        target, at = locate(ptr, data.size)
        target[at:at + data.size] = data.tobytes()

    def memcpy_dtoh(host, ptr):
        need_context()
        view = host.view(np.uint8).reshape(-1)
        source, at = locate(ptr, view.size)
        view[:] = np.frombuffer(bytes(source[at:at + view.size]), dtype=np.uint8)

    cuda.memcpy_htod, cuda.memcpy_dtoh = memcpy_htod, memcpy_dtoh

    def is_pinned(array):
        base = array
        while base is not None and not isinstance(base, HostAllocation):
            base = getattr(base, "base", None)
        return base is not None

    def enqueue(stream, op):
        if stream is None:
            op()
        else:
            stream.ops.append(op)

    def memcpy_htod_async(ptr, host, stream=None):
        need_context()
        state["async_copies"].append(("htod", is_pinned(host)))
        enqueue(stream, lambda: memcpy_htod(ptr, host))

    def memcpy_dtoh_async(host, ptr, stream=None):
        need_context()
        state["async_copies"].append(("dtoh", is_pinned(host)))
        enqueue(stream, lambda: memcpy_dtoh(host, ptr))

    cuda.memcpy_htod_async, cuda.memcpy_dtoh_async = memcpy_htod_async, memcpy_dtoh_async

    class Stream:
        def __init__(self, flags=0):
            need_context()
            self.ops = deque()
            state["streams"] += 1
            self.handle = 0x5000 + state["streams"]

        def run(self, until=None):
            while self.ops:
                op = self.ops.popleft()
                op()
                if op is until:
                    return

        def synchronize(self):
            if state.get("fail_running"):
                raise cuda.LaunchError("an illegal memory access was encountered")
            self.run()

        def is_done(self):
            return not self.ops

        def wait_for_event(self, event):
            self.ops.append(event.synchronize)

    cuda.Stream = Stream

    class Event:
        clock = [0.0]

        def record(self, stream=None):
            need_context()
            self.stream, self.t = stream, None

            def reach():
                Event.clock[0] += 1.25
                self.t = Event.clock[0]
            self.reach = reach
            enqueue(stream, reach)
            return self

        def synchronize(self):
            if state.get("fail_running"):
                raise cuda.LaunchError("an illegal memory access was encountered")
            if self.t is None:
                self.stream.run(until=self.reach)
            return self

        def query(self):
            return self.t is not None

        def time_since(self, other):
            if self.t is None or other.t is None:
                raise cuda.LogicError("cuEventElapsedTime failed: device not ready")
            return self.t - other.t

    cuda.Event = Event

    class HostAllocation(bytearray):
        """pagelocked_empty's array.base (PagelockedHostAllocation)."""

        def __init__(self, nbytes, flags):
            super().__init__(nbytes)
            self.flags, self.freed = flags, False

        def get_device_pointer(self):
            if state.get("no_device_pointer"):
                raise cuda.LogicError("cuMemHostGetDevicePointer failed: invalid value")
            return 0x7F00_0000_0000 + id(self) % 4096

        def free(self):
            need_context()
            self.freed = True

    cuda.host_alloc_flags = types.SimpleNamespace(PORTABLE=1, DEVICEMAP=2, WRITECOMBINED=4)

    def pagelocked_empty(shape, dtype, order="C", mem_flags=0):
        need_context()
        if state.get("fail_pin"):
            raise cuda.MemoryError("cuMemHostAlloc failed: out of memory")
        dtype = np.dtype(dtype)
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        allocation = HostAllocation(int(np.prod(shape)) * dtype.itemsize, mem_flags)
        state.setdefault("pinned", []).append(allocation)
        return np.ndarray(shape, dtype, buffer=allocation)

    def pagelocked_zeros(shape, dtype, order="C", mem_flags=0):
        array = pagelocked_empty(shape, dtype, order, mem_flags)
        array.fill(0)
        return array

    cuda.pagelocked_empty, cuda.pagelocked_zeros = pagelocked_empty, pagelocked_zeros

    class Function:
        def __init__(self, name):
            self.name = name
            self.attrs = {"regs": 40, "shared": 0, "local": 0, "maxthreads": 768, "const": 0}

        def get_attribute(self, which):
            return self.attrs[which]

        def set_attribute(self, which, value):
            self.attrs[which] = value

        def __call__(self, *args, grid, block, shared=0, stream=None):
            need_context()
            state["launches"].append((self.name, args, grid, block, shared))
            if state.get("fail_launch"):
                raise cuda.LaunchError("too many resources requested for launch")
            if self.name == "sbmlgpu_axpy":
                enqueue(stream, lambda: axpy(*args))

    def axpy(n, a, x, y):
        xs = np.frombuffer(bytes(memory_of[int(x)]), dtype=np.float64)
        ys = np.frombuffer(bytes(memory_of[int(y)]), dtype=np.float64).copy()
        ys[:int(n)] += float(a) * xs[:int(n)]
        memory_of[int(y)][:] = ys.tobytes()

    class Module:
        def __init__(self, cubin):
            self.cubin = cubin

        def get_function(self, name):
            if name.encode() not in self.cubin:
                raise cuda.LogicError("cuModuleGetFunction failed: named symbol not found")
            return Function(name)

    def module_from_buffer(cubin):
        need_context()
        return Module(cubin)

    cuda.module_from_buffer = module_from_buffer
    cuda.stack = stack
    return cuda
