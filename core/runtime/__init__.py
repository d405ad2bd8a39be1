"""GPU runtime behind a small driver interface (PyCUDA today).

    driver = get_driver()          # None: no PyCUDA or no GPU -> the CPU path
    devices = get_devices([0, 1])  # [] on the CPU path

Importing sbmlgpu never imports PyCUDA: `get_driver()` imports it on first use.
When there is no usable GPU it logs once, "no GPU found (reason): running on
the CPU path", and `no_gpu_reason()` keeps the reason. Setting SBMLGPU_NO_GPU=1
forces the CPU path.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Sequence

from ..errors import DeviceError
from .base import (  # noqa: F401 (re-exported)
    Buffer,
    Device,
    DeviceProperties,
    Driver,
    Kernel,
    KernelAttributes,
    LaunchTiming,
    Module,
    OutOfDeviceMemory,
)
from .host import HostCompileError  # noqa: F401 (re-exported)

log = logging.getLogger("sbmlgpu.runtime")

_lock = threading.Lock()
_state: dict = {"probed": False, "driver": None, "reason": None, "announce": True}


def get_driver() -> Driver | None:
    """The GPU driver, or None (logged once with the reason) when there is no GPU."""
    with _lock:
        if not _state["probed"]:
            _state["driver"], _state["reason"] = _probe()
            _state["probed"] = True
            if _state["driver"] is None and _state["announce"]:
                log.warning("no GPU found (%s): running on the CPU path", _state["reason"])
        return _state["driver"]


def no_gpu_reason() -> str | None:
    """Why get_driver() returned None (None when it found a GPU or was not called)."""
    return _state["reason"]


def get_devices(indices: Sequence[int] | None = None) -> list[Device]:
    """The devices to use: all (None) or those at `indices`; [] without a GPU."""
    with _lock:  # no GPU will be an error that says so: no "running on the CPU" note
        _state["announce"] = not indices
    try:
        driver = get_driver()
    finally:
        with _lock:
            _state["announce"] = True
    if driver is None:
        if indices:
            raise DeviceError(f"GPU devices {list(indices)} requested, but no GPU found "
                              f"({no_gpu_reason()})")
        return []
    devices = driver.devices()
    if indices is None:
        return devices
    chosen = []
    for i in indices:
        if not isinstance(i, int) or not 0 <= i < len(devices):
            raise DeviceError(f"no GPU device {i!r}: this machine has {len(devices)} "
                              f"(indices 0 to {len(devices) - 1})")
        if devices[i] not in chosen:
            chosen.append(devices[i])
    return chosen


def reset() -> None:
    """Forget the probe result (tests)."""
    with _lock:
        _state.update(probed=False, driver=None, reason=None, announce=True)


def _probe() -> tuple[Driver | None, str | None]:
    if os.environ.get("SBMLGPU_NO_GPU", "").strip() not in ("", "0"):
        return None, "SBMLGPU_NO_GPU is set"
    try:
        from .driver_host_memory import DriverHostMemory
        from .pycuda_driver import PyCudaDriver, import_pycuda
    except ImportError as e:  # pragma: no cover -- our own module always imports
        return None, f"runtime driver unavailable: {e}"
    try:
        cuda = import_pycuda()
    except ImportError as e:
        return None, f"PyCUDA is not installed or does not load: {e}"
    try:
        driver = PyCudaDriver(cuda, DriverHostMemory.load())
        if not driver.devices():
            return None, "the CUDA driver reports no devices"
    except DeviceError as e:
        return None, str(e)
    return driver, None


# --- asynchronous work, pinned and mapped host memory, CuPy (issue 9, point 5) ---------
from .base import MappedBuffer  # noqa: E402,F401 (re-exported)
from .cupy_interop import as_cupy, cupy_stream, from_cupy  # noqa: E402,F401
from .mapped import mapped_array  # noqa: E402,F401
from .pinned import PinnedPool  # noqa: E402,F401
from .streams import Event, PendingLaunch, SerialStream, Stream  # noqa: E402,F401
from .transfer import download_staged, upload_staged  # noqa: E402,F401
