"""A progress bar over items that shows up only for runs worth watching.

tqdm's `delay` keeps it hidden for the first seconds, so short runs print nothing;
`disable=None` lets tqdm hide it when stderr is not a terminal (CI logs, pipes).
A progress bar must never break a run: if tqdm is missing or fails, there is none.
"""

from __future__ import annotations

import sys
import threading

#: seconds before a bar appears (the brief: runs longer than about 2 s)
DEFAULT_DELAY = 2.0


class Progress:
    """Counts finished items; thread-safe (several device threads report into it)."""

    def __init__(self, total: int, *, enabled: bool = True, delay: float = DEFAULT_DELAY,
                 desc: str = "items", file=None):
        self.total = total
        self.done = 0
        self._lock = threading.Lock()
        self._bar = None
        if enabled and total > 0:
            try:
                from tqdm import tqdm

                self._bar = tqdm(total=total, desc=desc, unit="item", unit_scale=True,
                                 delay=delay, disable=None, dynamic_ncols=True,
                                 file=file if file is not None else sys.stderr)
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
