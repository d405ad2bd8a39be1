"""PyCUDA streams and events (the Stream and Event of streams.py).

Each call activates the stream's device on the calling thread, as every method of
pycuda_driver does, so a stream can be driven from any thread. Copies use
memcpy_htod_async / memcpy_dtoh_async, which are asynchronous for page-locked host
memory and synchronous (still correct) for pageable memory.
"""

from __future__ import annotations

import numpy as np

from ..errors import DeviceError
from .base import Buffer
from .streams import Event, Stream


class PyCudaEvent(Event):
    def __init__(self, device, event):
        self.device = device
        self.event = event  # pycuda.driver.Event

    def synchronize(self) -> None:
        # the message is the driver's alone: PendingLaunch puts the kernel before it
        with self.device.activate():
            try:
                self.event.synchronize()
            except self.device.cuda.Error as e:
                raise DeviceError(str(e)) from None

    def query(self) -> bool:
        with self.device.activate():
            return bool(self.device._guard(self.event.query, "query an event"))

    def elapsed_ms(self, since: Event) -> float:
        if not isinstance(since, PyCudaEvent) or since.device is not self.device:
            raise DeviceError(f"{self.device}: events of another device or driver cannot "
                              "be compared")
        with self.device.activate():
            return float(self.device._guard(lambda: self.event.time_since(since.event),
                                            "read an event's time"))


class PyCudaStream(Stream):
    def __init__(self, device):
        super().__init__(device)
        with device.activate():
            self.raw = device._guard(device.cuda.Stream, "create a stream")
        self._set_anchor()

    @property
    def handle(self) -> int:
        """The CUstream, for other CUDA libraries (e.g. cupy.cuda.ExternalStream)."""
        return int(self.raw.handle)

    def _record(self) -> Event:
        cuda = self.device.cuda
        with self.device.activate():
            event = self.device._guard(lambda: cuda.Event().record(self.raw), "record an event")
        return PyCudaEvent(self.device, event)

    def _wait(self, event: Event) -> None:
        if not isinstance(event, PyCudaEvent) or event.device is not self.device:
            raise DeviceError(f"{self.device}: a stream waits only for events of its device")
        with self.device.activate():
            self.device._guard(lambda: self.raw.wait_for_event(event.event), "wait for an event")

    def _synchronize(self) -> None:
        with self.device.activate():
            try:
                self.raw.synchronize()
            except self.device.cuda.Error as e:
                raise DeviceError(f"{self.device}: stream failed: {e}") from None

    def query(self) -> bool:
        with self.device.activate():
            return bool(self.device._guard(self.raw.is_done, "query a stream"))

    def _upload(self, buffer: Buffer, host: np.ndarray, offset: int) -> None:
        cuda = self.device.cuda
        with self.device.activate():
            self.device._guard(lambda: cuda.memcpy_htod_async(buffer.ptr + offset, host,
                                                              self.raw), "copy to device")

    def _download(self, buffer: Buffer, out: np.ndarray, offset: int) -> None:
        cuda = self.device.cuda
        with self.device.activate():
            self.device._guard(lambda: cuda.memcpy_dtoh_async(out, buffer.ptr + offset,
                                                              self.raw), "copy from device")
