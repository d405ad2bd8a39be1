"""One numpy pass over many items, split into pieces that run on the process's
host-memory threads (prefault.pool): numpy releases the GIL inside its loops, so the
pieces of a log, a multiply or a copy run at once.

Why: the host work around a large ensemble is a handful of such passes over 10^5 -
10^6 members (the bundling plan's prediction, the parameter table), single-threaded
by default, and the GPU machine's cores run them 2-3x slower than a workstation's
(issue 13: a PEtab objective call of 8 x 10^5 members spent 0.16 s in its plan there).

    over_pieces(lambda a, b: work(a, b), n)   # work(a, b) on items a..b-1, pieces in order

A piece runs on the calling thread when there is one piece, or when the caller is
itself one of the pool's threads (waiting there on the pool could leave no thread to
run the pieces).
"""

from __future__ import annotations

import threading
from typing import Callable, TypeVar

from .prefault import THREAD_PREFIX, pool, threads

T = TypeVar("T")

#: pieces hold at least this many items (a pass over fewer is not worth a thread)
MIN_ITEMS = 1 << 16


def pieces(n: int, min_items: int = MIN_ITEMS) -> list[tuple[int, int]]:
    """[(start, stop)] covering 0..n-1 in order: one per thread at most, their sizes
    within one of each other and none smaller than `min_items` (one piece for fewer
    items; none for n = 0)."""
    n = int(n)
    if n <= 0:
        return []
    count = max(1, min(threads(), n // max(1, int(min_items))))
    bounds = [n * k // count for k in range(count + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


def over_pieces(work: Callable[[int, int], T], n: int, min_items: int = MIN_ITEMS) -> list[T]:
    """[work(start, stop) for each piece of 0..n-1], the pieces run on the pool's
    threads; the first exception raised by a piece is raised here."""
    parts = pieces(n, min_items)
    if len(parts) < 2 or threading.current_thread().name.startswith(THREAD_PREFIX):
        return [work(a, b) for a, b in parts]
    return list(pool().map(lambda part: work(*part), parts))
