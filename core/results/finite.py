"""Which output columns of the members that succeeded hold a NaN or an infinite value:
one pass over the time courses, a block of whole members at a time, on threads.

Why not `np.isfinite(data[ok, :, j])` per column: each column's gather reads a value
every `columns * 8` bytes, so a result of C columns is read (in cache lines) about C
times over, and each gather copies; on a 10^5 x 51 x 25 result that was ~1 s after the
run (issue 13), 6 s with 138 columns. Here each block of members is read once, by one
sum: NaN and infinities propagate through a sum, so a finite sum proves the block
finite. Only a block whose sum is not finite (a failed member's unreached times, a
non-finite output, or finite values so large that their sum overflows) is looked at
value by value, and only that block's booleans are allocated. Numpy releases the GIL
in its reductions, so blocks run on several threads at once (the process's threads
for host-memory work, sbmlgpu.runtime.prefault).
"""

from __future__ import annotations

import numpy as np

from ..runtime.prefault import pool, threads

#: bytes of time courses per block: a few MiB, so that a block's second look (the
#: rare case) stays in cache and the threads share the work evenly
BLOCK_BYTES = 4 << 20
#: time courses of at most this many bytes are first checked whole, by np.isfinite: its
#: few KB of booleans cost less than the blocks' machinery (a small run's fixed cost)
SMALL_BYTES = 64 << 10

def non_finite_counts(data: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """(columns,) int64: per column of `data` (members, times, columns), how many
    members with `ok` True hold a NaN or infinite value in it at some time."""
    members, times, columns = data.shape
    counts = np.zeros(columns, np.int64)
    if not members or not times or not columns:
        return counts
    if data.nbytes <= SMALL_BYTES and np.isfinite(data).all():
        return counts  # the usual small result: every value finite
    ok = np.asarray(ok, dtype=bool)
    rows = max(1, BLOCK_BYTES // (times * columns * data.itemsize))
    blocks = [(start, min(start + rows, members)) for start in range(0, members, rows)]

    def scan(block: tuple[int, int]) -> np.ndarray | None:
        start, stop = block
        values = data[start:stop]
        with np.errstate(over="ignore", invalid="ignore"):  # inf and NaN are the point
            total = np.add.reduce(values, axis=None)
        if np.isfinite(total):
            return None
        kept = values[ok[start:stop]]
        return (~np.isfinite(kept).all(axis=1)).sum(axis=0) if len(kept) else None

    if len(blocks) < 2 or threads() < 2:
        return _add(counts, map(scan, blocks))
    return _add(counts, pool().map(scan, blocks))  # the process's host-memory threads


def _add(counts: np.ndarray, found) -> np.ndarray:
    for block in found:
        if block is not None:
            counts += block
    return counts
