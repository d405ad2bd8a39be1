"""A progress bar over items that shows up only for runs worth watching.

tqdm's `delay` keeps it hidden for the first seconds, so short runs print nothing.
Where stderr is not a terminal (CI logs, pipes, batch jobs) a bar would be noise, and
no output at all made long runs look hung: `LineReport` prints a plain line instead,
after the same delay and then every 10 % or 10 s, whichever comes first.
A progress bar must never break a run: if tqdm is missing or fails, there is none.
"""

from __future__ import annotations

import sys
import threading
import time

#: seconds before a bar appears (the brief: runs longer than about 2 s)
DEFAULT_DELAY = 2.0
#: where stderr is not a terminal: a line every this many seconds or this fraction done
LINE_SECONDS = 10.0
LINE_FRACTION = 0.1


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # closed or not a file
        return False


class LineReport:
    """Progress as lines for a log: the part of tqdm's interface that Progress uses
    (update, total, set_postfix_str, close). A heartbeat thread prints a line every
    `seconds` even while no item finishes (one long batch, a realisation that fires
    and fires), so that a long run never looks hung."""

    def __init__(self, total: int, desc: str, delay: float, file, *,
                 seconds: float = LINE_SECONDS, fraction: float = LINE_FRACTION,
                 clock=time.monotonic, heartbeat: bool = True):
        self.total, self.desc, self.file = total, desc, file
        self.delay, self.seconds, self.fraction, self.clock = delay, seconds, fraction, clock
        self.n, self.postfix = 0, ""
        self.started = clock()
        self._last_time: float | None = None  # of the last line printed
        self._last_n = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        if heartbeat:
            threading.Thread(target=self._beat, daemon=True, name="sbmlgpu-progress").start()

    def _beat(self) -> None:
        while not self._stop.wait(min(self.seconds, max(self.delay, 0.1))):
            self.update(0)

    def _line(self, now: float) -> None:
        share = f" ({100 * self.n / self.total:.0f} %)" if self.total else ""
        extra = f", {self.postfix}" if self.postfix else ""
        print(f"sbmlgpu: progress: {self.n:,} of {self.total:,} {self.desc}{share} after "
              f"{now - self.started:.0f} s{extra}", file=self.file, flush=True)
        self._last_time, self._last_n = now, self.n

    def update(self, n: int) -> None:
        with self._lock:
            self.n += n
            now = self.clock()
            if now - self.started < self.delay:
                return
            if self._last_time is None or now - self._last_time >= self.seconds \
                    or self.n - self._last_n >= self.fraction * self.total:
                try:
                    self._line(now)
                except (OSError, ValueError):  # stderr closed: no more lines
                    self._stop.set()

    def set_postfix_str(self, text: str, refresh: bool = False) -> None:
        self.postfix = text

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            if self._last_time is not None and self._last_n != self.n:
                try:
                    self._line(self.clock())  # the end of a run whose progress was shown
                except (OSError, ValueError):
                    pass


class Progress:
    """Counts finished items; thread-safe (several device threads report into it)."""

    def __init__(self, total: int, *, enabled: bool = True, delay: float = DEFAULT_DELAY,
                 desc: str = "items", file=None):
        self.total = total
        self.done = 0
        self._lock = threading.Lock()
        self._bar = None
        if enabled and total > 0:
            stream = file if file is not None else sys.stderr
            try:
                if not _is_terminal(stream):
                    self._bar = LineReport(total, desc, delay, stream)
                else:
                    from tqdm import tqdm

                    self._bar = tqdm(total=total, desc=desc, unit="item", unit_scale=True,
                                     delay=delay, dynamic_ncols=True, file=stream)
            except Exception:  # noqa: BLE001 - a progress bar is never worth a failed run
                self._bar = None

    def advance(self, items: int) -> None:
        with self._lock:
            self.done += items
            if self._bar is not None:
                try:
                    self._bar.update(items)
                except Exception:  # noqa: BLE001 - see the module docstring
                    self._bar = None

    def grow(self, items: int, queued: int | None = None) -> None:
        """For work that grows while it runs (run_queue): `items` more to do, and
        `queued` waiting now, shown beside the count. Shown at the next `advance`,
        so that the bar still appears only after its delay."""
        with self._lock:
            self.total += items
            if self._bar is not None:
                try:
                    self._bar.total = self.total
                    if queued is not None:
                        self._bar.set_postfix_str(f"{queued} queued", refresh=False)
                except Exception:  # noqa: BLE001 - see the module docstring
                    self._bar = None

    def close(self) -> None:
        with self._lock:
            if self._bar is not None:
                try:
                    self._bar.close()
                except Exception:  # noqa: BLE001
                    pass
                self._bar = None

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
