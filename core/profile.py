"""Per-launch profiling: records, observers, a roofline summary, JSON and Chrome traces.

Every kernel launch becomes a `LaunchRecord` (what ran, where, with which
resources, how long by CUDA events, and how much work by the cost model), so that
"how fast" always comes with "of how fast it could be": the summary divides the
achieved FLOP/s and bytes/s by the device's peaks (from DeviceProperties, or a
measured override such as a STREAM-like copy, since the datasheet bandwidth is
rarely reached). Host phases (compile, transfer, a scheduler batch) are `Span`s,
so a Chrome trace (chrome://tracing, ui.perfetto.dev) shows where the wall time
went around the kernels: one process track per device plus one for the host.

Observers (callables taking a LaunchRecord) see each launch as it is recorded;
the plugin manager connects the `sbmlgpu_profile_record` hook through one.
Thread-safe: several device threads record into one Profiler.
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
import time
from dataclasses import asdict, astuple, dataclass, field
from typing import Any, Callable, Iterable

from .errors import OptionError

#: accepted spellings -> the two precisions DeviceProperties.peak_flops knows
# "float" and "double" are the names the code printer and the backends' options use
PRECISIONS = {"double": "double", "float64": "double", "fp64": "double", "f64": "double",
              "single": "single", "float": "single", "float32": "single", "fp32": "single",
              "f32": "single"}
FORMAT = "sbmlgpu-profile"
FORMAT_VERSION = 1


def normalize_precision(precision: str) -> str:
    try:
        return PRECISIONS[str(precision).lower()]
    except KeyError:
        raise OptionError("precision", f"{precision!r} is not one of: "
                          + ", ".join(sorted(PRECISIONS))) from None


def _dim3(value, name: str) -> tuple[int, int, int]:
    dims = tuple(int(v) for v in (value if isinstance(value, (tuple, list)) else (value,)))
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise OptionError(name, f"{value!r} is not 1 to 3 positive sizes")
    return dims + (1,) * (3 - len(dims))  # type: ignore[return-value]


@dataclass(frozen=True)
class LaunchRecord:
    """One kernel launch. `flops` and `bytes` come from the cost model (work the
    kernel had to do), not from counters; `start_s` is host time since the
    profiler started, used to place the launch in a trace."""

    kernel: str
    device_index: int
    device_name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    registers: int
    static_shared_bytes: int
    dynamic_shared_bytes: int
    local_bytes: int
    ms: float
    flops: float
    bytes: float
    precision: str
    start_s: float = 0.0
    meta: dict = field(default_factory=dict, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "grid", _dim3(self.grid, "grid"))
        object.__setattr__(self, "block", _dim3(self.block, "block"))
        object.__setattr__(self, "precision", normalize_precision(self.precision))
        for name in ("ms", "flops", "bytes"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise OptionError(name, f"{value!r} in the record of {self.kernel!r} is not "
                                  "a finite number >= 0")

    @property
    def shared_bytes(self) -> int:
        return self.static_shared_bytes + self.dynamic_shared_bytes

    @property
    def threads(self) -> int:
        return math.prod(self.grid) * math.prod(self.block)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["grid"], d["block"] = list(self.grid), list(self.block)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "LaunchRecord":
        return cls(**{**d, "grid": tuple(d["grid"]), "block": tuple(d["block"])})


@dataclass(frozen=True)
class Span:
    """A host-side phase: compile, transfer, a batch, ... (seconds since the
    profiler started). `device_index` None: a host-wide phase."""

    name: str
    start_s: float
    end_s: float
    category: str = "host"
    device_index: int | None = None
    thread: str = "main"
    meta: dict = field(default_factory=dict, compare=False)

    @property
    def seconds(self) -> float:
        return self.end_s - self.start_s

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Span":
        return cls(**d)


@dataclass(frozen=True)
class Peaks:
    """A device's peak FLOP/s by precision and peak bytes/s, and where they came from."""

    flops: dict  # {"double": ..., "single": ...}
    bandwidth: float
    device_name: str = ""
    source: str = "properties"  # or "measured" (or "properties+measured")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class KernelSummary:
    """One row of the summary: all launches of one kernel (on any device)."""

    kernel: str
    launches: int
    total_ms: float
    mean_ms: float
    gflops: float | None  # achieved GFLOP/s (None if no time was measured)
    gbytes_per_s: float | None
    flops_fraction: float | None  # of the peak of the precision used; None: peak unknown
    bandwidth_fraction: float | None
    precisions: tuple[str, ...]
    devices: tuple[int, ...]

    def to_dict(self) -> dict:
        return asdict(self)


def summarize(records: Iterable[LaunchRecord], peaks: dict[int, Peaks]) -> list[KernelSummary]:
    """Per kernel (in order of first launch). A fraction of peak is the work done
    over the work the devices could have done in the same time at peak, so that
    launches on different GPUs (different peaks) add up correctly."""
    groups: dict[str, list[LaunchRecord]] = {}
    for record in records:
        groups.setdefault(record.kernel, []).append(record)
    rows = []
    for kernel, group in groups.items():
        seconds = sum(r.ms for r in group) / 1e3
        flops = sum(r.flops for r in group)
        moved = sum(r.bytes for r in group)
        known = all(r.device_index in peaks for r in group)
        flops_fraction = bandwidth_fraction = None
        if known and seconds > 0:
            flops_at_peak = sum(r.ms / 1e3 * peaks[r.device_index].flops[r.precision]
                                for r in group)
            bytes_at_peak = sum(r.ms / 1e3 * peaks[r.device_index].bandwidth for r in group)
            flops_fraction = flops / flops_at_peak if flops_at_peak > 0 else None
            bandwidth_fraction = moved / bytes_at_peak if bytes_at_peak > 0 else None
        rows.append(KernelSummary(
            kernel, len(group), seconds * 1e3, seconds * 1e3 / len(group),
            flops / seconds / 1e9 if seconds > 0 else None,
            moved / seconds / 1e9 if seconds > 0 else None,
            flops_fraction, bandwidth_fraction,
            tuple(sorted({r.precision for r in group})),
            tuple(sorted({r.device_index for r in group}))))
    return rows


def format_summary(rows: list[KernelSummary]) -> str:
    """The summary as a plain-text table."""
    def num(value, fmt):
        return "-" if value is None else format(value, fmt)

    header = ("kernel", "launches", "total ms", "mean ms", "GFLOP/s", "% peak FP",
              "GB/s", "% peak BW")
    lines = [header]
    for r in rows:
        lines.append((r.kernel, str(r.launches), f"{r.total_ms:.3f}", f"{r.mean_ms:.4f}",
                      num(r.gflops, ".2f"),
                      num(None if r.flops_fraction is None else 100 * r.flops_fraction, ".1f"),
                      num(r.gbytes_per_s, ".2f"),
                      num(None if r.bandwidth_fraction is None else 100 * r.bandwidth_fraction,
                          ".1f")))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = []
    for n, line in enumerate(lines):
        out.append("  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                             for i, (cell, w) in enumerate(zip(line, widths))))
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def phase(profiler: "Profiler | None", name: str, **kwargs):
    """`profiler.span(name, ...)`, or nothing when there is no profiler: for code
    that times its phases only when asked to."""
    return profiler.span(name, **kwargs) if profiler is not None else contextlib.nullcontext()


def _device_index(device) -> int | None:
    if device is None:
        return None
    return device if isinstance(device, int) else int(device.index)


class Profiler:
    """Collects launches and spans of one run. See the module docstring.

        profiler = Profiler(observers=[print])
        with profiler.span("compile"):
            module = device.compile(source)
        timing = kernel.launch(grid, block, args)
        profiler.record_launch(kernel, timing, device, flops=..., bytes=...)
        print(profiler.summary_table()); profiler.to_chrome_trace("trace.json")
    """

    def __init__(self, observers: Iterable[Callable[[LaunchRecord], Any]] = (), *,
                 peaks: dict[int, Peaks] | None = None):
        self._origin = time.perf_counter()
        self._lock = threading.Lock()
        self._records: list[LaunchRecord] = []
        #: each span's fields, made a Span when read (`spans`): a run records several,
        #: and a frozen dataclass takes ~1.5 us to build (issue 13's fixed cost)
        self._spans: list[tuple] = []
        self._observers: list[Callable[[LaunchRecord], Any]] = list(observers)
        self._peaks: dict[int, Peaks] = dict(peaks or {})
        self._measured: set[int] = set()

    # --- observers ---------------------------------------------------------------
    def add_observer(self, observer: Callable[[LaunchRecord], Any]) -> None:
        """Call `observer(record)` for every launch recorded from now on."""
        if not callable(observer):
            raise OptionError("observer", f"{observer!r} is not callable")
        with self._lock:
            self._observers.append(observer)

    def remove_observer(self, observer: Callable[[LaunchRecord], Any]) -> None:
        with self._lock:
            self._observers.remove(observer)

    # --- recording ---------------------------------------------------------------
    def clock(self) -> float:
        """Seconds since this profiler started (the time base of records and spans)."""
        return time.perf_counter() - self._origin

    def record(self, record: LaunchRecord) -> LaunchRecord:
        """Keep `record` and show it to the observers (on the recording thread;
        an observer's exception propagates, as a pluggy hook's would)."""
        with self._lock:
            self._records.append(record)
            observers = list(self._observers)
        for observer in observers:
            observer(record)
        return record

    def record_launch(self, kernel, timing, device, *, flops: float = 0.0,
                      bytes: float = 0.0, precision: str = "double",
                      start_s: float | None = None, **meta) -> LaunchRecord:
        """Record a launch from the runtime's objects: `kernel` (runtime.base.Kernel:
        name, attributes), `timing` (LaunchTiming), `device` (Device).

        start_s: host time of the launch (`profiler.clock()` before it); by default
        when the kernel started by its events (`timing.started_at`, known for
        asynchronous launches), else the end of the launch minus its duration, since
        `Kernel.launch` returns only after the end event."""
        self.register_device(device)
        attributes = kernel.attributes
        if start_s is None and getattr(timing, "started_at", None) is not None:
            start_s = max(timing.started_at - self._origin, 0.0)
        if start_s is None:
            start_s = max(self.clock() - timing.ms / 1e3, 0.0)
        return self.record(LaunchRecord(
            kernel=kernel.name, device_index=int(device.index),
            device_name=device.properties.name, grid=timing.grid,
            block=timing.block, registers=int(attributes.registers),
            static_shared_bytes=int(attributes.shared_bytes),
            dynamic_shared_bytes=int(timing.dynamic_shared_bytes),
            local_bytes=int(attributes.local_bytes), ms=float(timing.ms), flops=float(flops),
            bytes=float(bytes), precision=precision, start_s=float(start_s), meta=meta))

    def record_pending(self, kernel, pending, device, **kwargs) -> None:
        """Record an asynchronous launch (`kernel.launch_async`'s handle) once its
        time is read, i.e. when its stream is synchronised: nothing waits here.
        Keyword arguments as for `record_launch`; observers then run on the thread
        that synchronises."""
        pending.on_done(lambda timing: self.record_launch(kernel, timing, device, **kwargs))

    def add_span(self, name: str, start_s: float, end_s: float, *, category: str = "host",
                 device=None, **meta) -> Span:
        return Span(*self._add_span(name, start_s, end_s, category, device, meta))

    def _add_span(self, name: str, start_s: float, end_s: float, category: str, device,
                  meta: dict) -> tuple:
        if not end_s >= start_s:
            raise OptionError("span", f"{name!r} ends ({end_s}) before it starts ({start_s})")
        fields = (name, float(start_s), float(end_s), category,
                  None if device is None else _device_index(device),
                  threading.current_thread().name, meta)
        with self._lock:
            self._spans.append(fields)
        return fields

    def span(self, name: str, *, category: str = "host", device=None,
             **meta) -> "_Timed":
        """Time the `with` block as a host phase; `device` (Device or index) puts it on
        that device's track. Recorded even when the block raises."""
        return _Timed(self, name, category, device, meta)

    # --- peaks -------------------------------------------------------------------
    def register_device(self, device) -> None:
        """Take the peaks of `device` from its properties, unless already known."""
        index = int(device.index)
        with self._lock:
            if index in self._peaks:
                return
            props = device.properties
            self._peaks[index] = Peaks({"double": props.peak_flops("double"),
                                        "single": props.peak_flops("single")},
                                       props.peak_bandwidth(), props.name, "properties")

    def set_peaks(self, device_index: int, *, flops: dict | None = None,
                  bandwidth: float | None = None, device_name: str | None = None) -> Peaks:
        """Override peaks with measured values (only those given; the rest stay)."""
        with self._lock:
            old = self._peaks.get(device_index)
            new_flops = dict(old.flops) if old else {}
            for precision, value in (flops or {}).items():
                new_flops[normalize_precision(precision)] = float(value)
            if bandwidth is None and old is None:
                raise OptionError("bandwidth", f"no peak bandwidth known for device "
                                  f"{device_index}; give one")
            for precision in ("double", "single"):
                if precision not in new_flops:
                    raise OptionError("flops", f"no {precision} peak known for device "
                                      f"{device_index}; give one")
            source = "measured" if old is None or old.source == "measured" else \
                "properties+measured"
            peaks = Peaks(new_flops, float(bandwidth if bandwidth is not None else old.bandwidth),
                          device_name or (old.device_name if old else ""), source)
            self._peaks[device_index] = peaks
            return peaks

    @property
    def peaks(self) -> dict[int, Peaks]:
        with self._lock:
            return dict(self._peaks)

    # --- reading -----------------------------------------------------------------
    @property
    def records(self) -> list[LaunchRecord]:
        with self._lock:
            return list(self._records)

    @property
    def spans(self) -> list[Span]:
        with self._lock:
            fields = list(self._spans)
        return [Span(*f) for f in fields]

    def span_seconds(self) -> dict[str, float]:
        """Every span's seconds summed by name (nested spans too), longest first: where
        a run's host time went, for benchmarks and profiles."""
        totals: dict[str, float] = {}
        for span in self.spans:
            totals[span.name] = totals.get(span.name, 0.0) + span.seconds
        return dict(sorted(totals.items(), key=lambda item: -item[1]))

    def summary(self) -> list[KernelSummary]:
        return summarize(self.records, self.peaks)

    def summary_table(self) -> str:
        return format_summary(self.summary())

    # --- writing -----------------------------------------------------------------
    def to_dict(self) -> dict:
        return {"format": FORMAT, "version": FORMAT_VERSION,
                "launches": [r.to_dict() for r in self.records],
                "spans": [s.to_dict() for s in self.spans],
                "peaks": {str(i): p.to_dict() for i, p in sorted(self.peaks.items())},
                "summary": [row.to_dict() for row in self.summary()]}

    def to_json(self, path) -> None:
        """Everything recorded, plus the summary, as strict JSON (no NaN)."""
        with open(path, "w") as out:
            json.dump(self.to_dict(), out, indent=1, allow_nan=False, default=_jsonable)

    @classmethod
    def from_json(cls, path) -> "Profiler":
        """A profiler holding what `to_json` wrote (no observers), to re-summarise."""
        with open(path) as source:
            data = json.load(source)
        if data.get("format") != FORMAT:
            raise OptionError("profile", f"{path} is not an sbmlgpu profile")
        peaks = {int(i): Peaks(**p) for i, p in data.get("peaks", {}).items()}
        profiler = cls(peaks=peaks)
        profiler._records = [LaunchRecord.from_dict(r) for r in data.get("launches", [])]
        profiler._spans = [astuple(Span.from_dict(s)) for s in data.get("spans", [])]
        return profiler

    def chrome_trace(self) -> dict:
        """The Chrome trace event format: complete ("X") events in microseconds.

        Tracks: process 0 is the host (one thread row per host thread); process
        i + 1 is device i, with row 0 for its kernels and row 1 for the host
        phases tied to it (batches, transfers)."""
        events: list[dict] = []
        records, spans, peaks = self.records, self.spans, self.peaks
        names = {r.device_index: r.device_name for r in records}
        for index, p in peaks.items():
            names.setdefault(index, p.device_name)
        devices = sorted(names.keys() | {s.device_index for s in spans
                                         if s.device_index is not None})
        threads: dict[str, int] = {}
        for s in spans:
            if s.device_index is None:
                threads.setdefault(s.thread, len(threads))

        def meta(kind: str, pid: int, tid: int, value) -> None:
            events.append({"name": kind, "ph": "M", "pid": pid, "tid": tid,
                           "args": {"name" if kind.endswith("name") else "sort_index": value}})

        meta("process_name", 0, 0, "host")
        meta("process_sort_index", 0, 0, 0)
        for thread, tid in threads.items():
            meta("thread_name", 0, tid, thread)
        for index in devices:
            pid = index + 1
            meta("process_name", pid, 0, f"GPU {index}: {names.get(index, '')}".rstrip(": "))
            meta("process_sort_index", pid, 0, pid)
            meta("thread_name", pid, 0, "kernels")
            meta("thread_name", pid, 1, "host phases")
        for r in records:
            args = {k: v for k, v in r.to_dict().items()
                    if k not in ("kernel", "start_s", "ms", "meta")}
            args.update(r.meta)
            events.append({"name": r.kernel, "cat": "kernel", "ph": "X",
                           "ts": r.start_s * 1e6, "dur": r.ms * 1e3,
                           "pid": r.device_index + 1, "tid": 0, "args": args})
        for s in spans:
            on_device = s.device_index is not None
            events.append({"name": s.name, "cat": s.category, "ph": "X",
                           "ts": s.start_s * 1e6, "dur": s.seconds * 1e6,
                           "pid": s.device_index + 1 if on_device else 0,
                           "tid": 1 if on_device else threads[s.thread],
                           "args": dict(s.meta, thread=s.thread)})
        return {"traceEvents": events, "displayTimeUnit": "ms",
                "otherData": {"format": FORMAT, "version": FORMAT_VERSION}}

    def to_chrome_trace(self, path) -> None:
        """Write `chrome_trace()`; open it in chrome://tracing or ui.perfetto.dev."""
        with open(path, "w") as out:
            json.dump(self.chrome_trace(), out, allow_nan=False, default=_jsonable)


class _Timed:
    """The context of `Profiler.span`: a class rather than a contextlib generator,
    which cost a span ~2.5 us more (a run records several; issue 13's fixed cost)."""

    __slots__ = ("profiler", "name", "category", "device", "meta", "started")

    def __init__(self, profiler: Profiler, name: str, category: str, device, meta: dict):
        self.profiler, self.name, self.category = profiler, name, category
        self.device, self.meta = device, meta

    def __enter__(self) -> None:
        self.started = time.perf_counter()  # profiler.clock() without its call

    def __exit__(self, *exc) -> None:
        profiler = self.profiler
        origin = profiler._origin  # noqa: SLF001
        profiler._add_span(self.name, self.started - origin,  # noqa: SLF001
                           time.perf_counter() - origin, self.category, self.device, self.meta)


def _jsonable(value):
    """numpy scalars and arrays in meta become plain JSON."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)
