"""Small host<->kernel signals in mapped memory, on a GPU or on the host path.

A persistent kernel polls a flag the host sets, or bumps a counter of boxes done
that the host shows as progress, without a copy or a synchronisation: the memory
is page-locked host memory mapped into the device (`Device.map_host`, see
base.MappedBuffer for the visibility rules). On the host path (device None) the
"kernel" is host code built with g++, and the same signal is ordinary memory whose
address it takes, so a backend asks for its signals in one way on both paths:

    flag = mapped_array(device, (1,), np.int32)      # device None on the host path
    kernel.launch_async(grid, block, [flag, ...], stream=stream)
    flag.host[0] = 1                                 # the kernel sees it while running
"""

from __future__ import annotations

import numpy as np

from .base import MappedBuffer


class HostMappedBuffer(MappedBuffer):
    """A signal on the host path: `host` is ordinary memory and `ptr` its address."""

    device = None
    kind = "host signal"

    def __init__(self, shape, dtype):
        self.host = np.zeros(shape, dtype=dtype)
        self.nbytes = self.host.nbytes
        self._ptr = int(self.host.ctypes.data)

    def free(self) -> None:
        self._ptr = None


def mapped_array(device, shape, dtype) -> MappedBuffer:
    """Zeroed memory of `shape` and `dtype` that the host and a kernel on `device`
    (None: host-built code) both read and write while the kernel runs."""
    if device is None:
        return HostMappedBuffer(shape, dtype)
    return device.map_host(shape, dtype)
