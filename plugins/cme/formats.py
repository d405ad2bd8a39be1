"""Storage formats of the CME generator's off-diagonal part O on the GPU (host side).

A = O + diag(d) in column convention (plugins/cme/statespace.py): row i of O holds the
incoming transitions of state i. From the enumeration's `sources` (R, n) int32 (-1:
none), row i has, for each reaction r with sources[r, i] >= 0, an entry in column
j = sources[r, i] whose value is prop[r, j]. Two reactions with the same net change
give two entries in one column: each keeps its own slot (a slot is filled from one
propensity), and every product sums them.

Formats (Maggioni, Berger-Wolf, Liang 2013, "GPU-based steady-state solution of the
chemical master equation"):

- "csr": row pointers (int64), column per entry; the baseline, and the structure the
  multilevel aggregation hierarchy is built from (aggregation.py).
- "ell": width W = the longest row; slot k of row i at k*n + i (column-major, so the
  threads of a warp, one row each, read consecutive words).
- "dia+ell": the offsets (column - row) present in at least `dia_fill` of the rows are
  dense bands (no indices; value 0 where a row lacks it), the rest ELL. Depth-first
  state order makes the reversible pairs' offsets (often -1, +1) fill up.
- "dia+sell": bands + warp-grained sliced ELL for the rest: slices of 32 row positions,
  each its own width, column-major within the slice; inside each block of 256 positions
  (one thread block) the rows are sorted by length, longest first, so that the slices
  of a block are as even as they can be. `perm[t]` is the row at position t (thread t
  writes row perm[t]); the bands are stored in position order too, so that their
  values stream contiguously. By default the rows are sorted only where the padding
  slots that saves (12 B each) outweigh the 4 B per row of reading perm (measured on
  DFS lattices, where rows are nearly even: sorting then costs more than it saves);
  unsorted, perm is left out and thread t writes row t.

Padding slots (-1 in the gather) hold 0 and, in ELL/SELL, the row's own index as
their column: the thread reads p_i anyway, so a padding slot costs its value and index
words but no extra x read, and the kernels need no branch.

Every format gives:
- `gathers`: per value array, the flat index r*n + j into prop (R, n) of each stored
  slot, or -1 for padding: one gather kernel fills any format from the propensities;
- `arrays`: the index arrays the kernels read (what is uploaded besides the values);
- nnz, stored slots, padding efficiency nnz / stored, memory bytes;
- bytes per Jacobi sweep, counted as the paper counts them (no cache: every x read is
  a memory read), values 8 B, indices 4 B, row/slice pointers 8 B:
    every format:  24 n                      p_i and d_i read, y_i written (8 B each)
    csr:           8 (n + 1) + nnz (8 + 4 + 8)          pointers; value, column, x_j
    ell:           W n (8 + 4) + nnz 8                  every slot; x_j per real entry
    dia (bands):   B n (8 + 8)                          value and x_{i+o} per band row
    sell:          S (8 + 4) + nnz_s 8 + 8 (slices + 1) [+ 4 n for perm]
  (S: stored SELL slots, nnz_s: its real entries, B: the number of bands);
- flops per sweep: 2 per entry (multiply-add) + 2 per row (the division and update);
- `spmv(values, x)`: y = O x in numpy, reading the stored layout exactly as the
  kernels do, so that CPU tests prove the layout against scipy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sbmlgpu.errors import OptionError

FORMATS = ("dia+sell", "dia+ell", "ell", "csr")
DEFAULT_FORMAT = "dia+sell"
#: a band is stored densely when at least this fraction of the rows have its offset.
#: Measured (tests/test_cme_formats.py, DFS-ordered lattices): the +-1 bands of the
#: reversible pairs are over 0.9 full, the other offsets far below 0.5, so anything in
#: 0.3..0.8 picks the same bands; 0.5 is the middle. A band row costs 16 B and an
#: ELL entry 20 B (12 B of padding when absent), so a band pays from about 0.6-0.8 full.
DEFAULT_DIA_FILL = 0.5
SLICE_ROWS = 32  # a warp
BLOCK_ROWS = 256  # the thread block within which SELL sorts its rows
VALUE_BYTES, INDEX_BYTES, POINTER_BYTES = 8, 4, 8
ROW_VECTOR_BYTES = 3 * VALUE_BYTES  # p_i, d_i read; y_i written
FILL_SAMPLE_ROWS = 1 << 18  # rows sampled to find the candidate bands of a large matrix
_CHUNK_ROWS = 1 << 21  # rows sorted per step while building (bounds the temporaries)


# ---------------------------------------------------------------------------------------
# rows of O as padded slot tables


@dataclass(frozen=True)
class RowSlots:
    """Each row's entries as a padded table, sorted by (column, reaction): cols (n, R)
    int32 with -1 after the last entry, reactions (n, R) int16 (-1 there too)."""

    n: int
    n_reactions: int
    cols: np.ndarray
    reactions: np.ndarray

    @property
    def lengths(self) -> np.ndarray:
        return (self.cols >= 0).sum(axis=1).astype(np.int32)

    @property
    def nnz(self) -> int:
        return int(np.count_nonzero(self.cols >= 0))

    def gather(self, cols: np.ndarray, reactions: np.ndarray) -> np.ndarray:
        """Flat indices r*n + j into prop, -1 where there is no entry."""
        flat = reactions.astype(np.int64) * self.n + cols
        return np.where(cols >= 0, flat, -1)


def row_slots(sources: np.ndarray) -> RowSlots:
    """The padded slot table of O from the enumeration's `sources` (R, n)."""
    sources = _checked_sources(sources)
    R, n = sources.shape
    cols = np.full((n, R), -1, np.int32)
    reactions = np.full((n, R), -1, np.int16)
    for a in range(0, n, _CHUNK_ROWS):
        block = sources[:, a:a + _CHUNK_ROWS].T  # (m, R): row-major per state
        key = np.where(block >= 0, block.astype(np.int64), np.int64(n))  # absent sorts last
        order = np.argsort(key, axis=1, kind="stable")  # by column, then reaction
        sorted_cols = np.take_along_axis(block, order, axis=1)
        present = sorted_cols >= 0
        cols[a:a + len(block)] = np.where(present, sorted_cols, -1)
        reactions[a:a + len(block)] = np.where(present, order, -1)
    return RowSlots(n, R, cols, reactions)


def _checked_sources(sources) -> np.ndarray:
    sources = np.asarray(sources)
    if sources.ndim != 2 or not np.issubdtype(sources.dtype, np.integer):
        raise OptionError("sources", f"expected an (R, n) integer array, got "
                          f"{sources.dtype} of shape {sources.shape}")
    R, n = sources.shape
    if n >= 2**31 - 1:
        raise OptionError("sources", f"{n} states: the kernels index states with int32 "
                          "(at most 2147483646)")
    if R >= 2**15:
        raise OptionError("sources", f"{R} reactions: at most 32767")
    if sources.size and (sources.min() < -1 or sources.max() >= n):
        bad = np.argwhere((sources < -1) | (sources >= n))[0]
        raise OptionError("sources", f"sources[{bad[0]}, {bad[1]}] = "
                          f"{sources[bad[0], bad[1]]} is not a state (0..{n - 1}) or -1")
    return sources.astype(np.int32, copy=False)


def _compact(cols: np.ndarray, reactions: np.ndarray, keep: np.ndarray):
    """The kept slots of each row moved to its front (order kept), -1 after them."""
    order = np.argsort(~keep, axis=1, kind="stable")
    kept = np.take_along_axis(keep, order, axis=1)
    c = np.where(kept, np.take_along_axis(cols, order, axis=1), -1).astype(np.int32)
    r = np.where(kept, np.take_along_axis(reactions, order, axis=1), -1).astype(np.int16)
    return c, r


# ---------------------------------------------------------------------------------------
# parts: a format is one part (csr, ell) or bands plus a part (dia+ell, dia+sell)


@dataclass(frozen=True)
class Part:
    kind: str
    n: int
    nnz: int
    stored: int
    arrays: dict[str, np.ndarray]  # index arrays, by the kernels' argument names
    gathers: dict[str, np.ndarray]  # value array name -> flat prop index per slot (-1 pad)

    def matrix_bytes(self) -> int:
        """Bytes one sweep reads for this part (the docstring's formula)."""
        raise NotImplementedError

    def add_product(self, values: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray):
        """y += (this part of O) x, reading the stored layout."""
        raise NotImplementedError

    @property
    def value_slots(self) -> int:
        return sum(len(g) for g in self.gathers.values())

    @property
    def memory_bytes(self) -> int:
        return self.value_slots * VALUE_BYTES + sum(a.nbytes for a in self.arrays.values())


@dataclass(frozen=True)
class CsrPart(Part):
    def matrix_bytes(self) -> int:
        return POINTER_BYTES * (self.n + 1) + self.nnz * (VALUE_BYTES + INDEX_BYTES + VALUE_BYTES)

    def add_product(self, values, x, y):
        indptr, col = self.arrays["csr_ptr"], self.arrays["csr_col"]
        rows = np.repeat(np.arange(self.n), np.diff(indptr))
        y += np.bincount(rows, values["csr_val"] * x[col], minlength=self.n)


@dataclass(frozen=True)
class EllPart(Part):
    width: int = 0

    def matrix_bytes(self) -> int:
        return self.stored * (VALUE_BYTES + INDEX_BYTES) + self.nnz * VALUE_BYTES

    def add_product(self, values, x, y):
        col = self.arrays["ell_col"].reshape(self.width, self.n)  # slot k of row i: k*n + i
        val = values["ell_val"].reshape(self.width, self.n)
        y += (val * x[col]).sum(axis=0)


@dataclass(frozen=True)
class DiaPart(Part):
    offsets: tuple[int, ...] = ()
    order: np.ndarray | None = None  # row at each position (None: position = row)

    def matrix_bytes(self) -> int:
        return len(self.offsets) * self.n * (VALUE_BYTES + VALUE_BYTES)

    def add_product(self, values, x, y):
        rows = np.arange(self.n) if self.order is None else self.order
        val = values["dia_val"].reshape(len(self.offsets), self.n)  # band b, position t
        for b, offset in enumerate(self.offsets):
            c = rows + offset
            inside = (c >= 0) & (c < self.n)
            y[rows[inside]] += val[b, inside] * x[c[inside]]


@dataclass(frozen=True)
class SellPart(Part):
    n_slices: int = 0
    permuted: bool = False

    def matrix_bytes(self) -> int:
        return (self.stored * (VALUE_BYTES + INDEX_BYTES) + self.nnz * VALUE_BYTES
                + POINTER_BYTES * (self.n_slices + 1) + (INDEX_BYTES * self.n if self.permuted
                                                         else 0))

    def positions(self) -> np.ndarray:
        """The row at each position (identity when not permuted)."""
        return self.arrays["sell_perm"] if self.permuted else np.arange(self.n, dtype=np.int32)

    def add_product(self, values, x, y):
        ptr, col, val = self.arrays["sell_ptr"], self.arrays["sell_col"], values["sell_val"]
        t = np.arange(self.n)
        s, lane = t // SLICE_ROWS, t % SLICE_ROWS
        width = (ptr[s + 1] - ptr[s]) // SLICE_ROWS
        rows = self.positions()
        for k in range(int(width.max(initial=0))):
            inside = k < width
            a = ptr[s[inside]] + k * SLICE_ROWS + lane[inside]  # the kernel's address
            y[rows[inside]] += val[a] * x[col[a]]


# ---------------------------------------------------------------------------------------
# formats


@dataclass(frozen=True)
class Format:
    """O in one storage format (see the module docstring)."""

    name: str
    n: int
    n_reactions: int
    parts: tuple[Part, ...]
    dia_fill: float | None = None
    band_fill: dict[int, float] = field(default_factory=dict)  # every offset's fill

    @property
    def nnz(self) -> int:
        return sum(p.nnz for p in self.parts)

    @property
    def stored(self) -> int:
        return sum(p.stored for p in self.parts)

    @property
    def padding_efficiency(self) -> float:
        return self.nnz / self.stored if self.stored else 1.0

    @property
    def bytes_per_sweep(self) -> int:
        return ROW_VECTOR_BYTES * self.n + sum(p.matrix_bytes() for p in self.parts)

    @property
    def flops_per_sweep(self) -> int:
        return 2 * self.nnz + 2 * self.n

    @property
    def memory_bytes(self) -> int:
        """Device bytes of the format: values and index arrays (not the gathers)."""
        return sum(p.memory_bytes for p in self.parts)

    @property
    def gathers(self) -> dict[str, np.ndarray]:
        return {k: g for p in self.parts for k, g in p.gathers.items()}

    @property
    def arrays(self) -> dict[str, np.ndarray]:
        return {k: a for p in self.parts for k, a in p.arrays.items()}

    def part(self, kind: str) -> Part | None:
        return next((p for p in self.parts if p.kind == kind), None)

    def values(self, prop: np.ndarray) -> dict[str, np.ndarray]:
        """The value arrays filled from prop (R, n) on the host, as the gather kernel
        fills them on the device."""
        flat = np.asarray(prop, dtype=np.float64).reshape(-1)
        if flat.size != self.n_reactions * self.n:
            raise OptionError("prop", f"expected ({self.n_reactions}, {self.n}) "
                              f"propensities, got {np.shape(prop)}")
        return {k: np.where(g >= 0, flat[np.maximum(g, 0)], 0.0)
                for k, g in self.gathers.items()}

    def spmv(self, values: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
        """y = O x following the stored layout."""
        y = np.zeros(self.n)
        for p in self.parts:
            p.add_product(values, np.asarray(x, dtype=np.float64), y)
        return y

    def summary(self) -> dict:
        """The figures a benchmark reports."""
        return {"format": self.name, "n": self.n, "nnz": self.nnz, "stored": self.stored,
                "padding_efficiency": self.padding_efficiency,
                "bytes_per_sweep": self.bytes_per_sweep, "flops_per_sweep": self.flops_per_sweep,
                "memory_bytes": self.memory_bytes,
                "bands": list(self.part("dia").offsets) if self.part("dia") else [],
                "dia_fill": self.dia_fill}


def build(name: str, sources, *, dia_fill: float = DEFAULT_DIA_FILL,
          sort_rows: bool | None = None, slots: RowSlots | None = None) -> Format:
    """O of `sources` (R, n) in format `name` (one of FORMATS). `slots`: the row table
    already built from the same sources (row_slots), to build several formats at once.
    sort_rows (dia+sell): sort the rows within each block of 256 by length (True), never
    (False), or where the padding slots it saves (12 B each) outweigh the 4 B per row
    that reading perm costs (None)."""
    if name not in FORMATS:
        raise OptionError("format", f"{name!r} is not a CME matrix format; choose one of "
                          f"{', '.join(FORMATS)}")
    if not 0.0 < dia_fill <= 1.0:
        raise OptionError("dia-fill", f"{dia_fill!r}: a fraction of the rows in (0, 1]")
    slots = slots or row_slots(sources)
    n, R = slots.n, slots.n_reactions
    if name == "csr":
        return Format(name, n, R, (_csr(slots),))
    if name == "ell":
        return Format(name, n, R, (_ell(slots, slots.cols, slots.reactions),))
    fill = band_fill(slots, dia_fill)
    offsets = tuple(sorted(o for o, f in fill.items() if f >= dia_fill))
    assigned, band_cols, band_reactions = _bands(slots, offsets)
    rest_cols, rest_reactions = _compact(slots.cols, slots.reactions,
                                         (slots.cols >= 0) & ~assigned)
    if name == "dia+ell":
        dia = _dia(slots, offsets, band_cols, band_reactions, None)
        return Format(name, n, R, (dia, _ell(slots, rest_cols, rest_reactions)), dia_fill, fill)
    sell = _sell(slots, rest_cols, rest_reactions, sort_rows)
    order = sell.arrays["sell_perm"] if sell.permuted else None
    dia = _dia(slots, offsets, band_cols, band_reactions, order)
    return Format(name, n, R, (dia, sell), dia_fill, fill)


def band_fill(slots: RowSlots, at_least: float = 0.0) -> dict[int, float]:
    """For every offset (column - row) present, the fraction of the rows that have it.
    Above FILL_SAMPLE_ROWS rows and with `at_least` > 0, only the offsets that an even
    sample of FILL_SAMPLE_ROWS rows puts at half of `at_least` or more are counted (over
    every row): sorting every entry's offset took most of a 10^7-state build."""
    n = slots.n
    if at_least > 0 and n > FILL_SAMPLE_ROWS:
        sample = np.linspace(0, n - 1, FILL_SAMPLE_ROWS).astype(np.int64)
        candidates = [o for o, f in _offset_counts(slots, sample).items()
                      if f / len(sample) >= at_least / 2]
        counts = {o: 0 for o in candidates}
        for a in range(0, n, _CHUNK_ROWS):
            rows = np.arange(a, min(n, a + _CHUNK_ROWS))
            offsets = slots.cols[rows].astype(np.int64) - rows[:, None]
            valid = slots.cols[rows] >= 0
            for o in candidates:
                counts[o] += int(np.count_nonzero(((offsets == o) & valid).any(axis=1)))
        return {o: c / n for o, c in sorted(counts.items())}
    counts: dict[int, int] = {}
    for a in range(0, n, _CHUNK_ROWS):
        part = _offset_counts(slots, np.arange(a, min(n, a + _CHUNK_ROWS)))
        for o, c in part.items():
            counts[o] = counts.get(o, 0) + c
    return {o: c / n for o, c in sorted(counts.items())}


def _offset_counts(slots: RowSlots, rows: np.ndarray) -> dict[int, int]:
    """{offset: rows among `rows` that have it} (a column repeated in a row counts once)."""
    cols = slots.cols[rows].astype(np.int64)
    first = cols >= 0
    first[:, 1:] &= cols[:, 1:] != cols[:, :-1]
    found, count = np.unique((cols - rows[:, None])[first], return_counts=True)
    return dict(zip(found.tolist(), count.tolist()))


def _bands(slots: RowSlots, offsets: tuple[int, ...]):
    """Which slots go to the bands (the first slot of each row at each band offset),
    and the bands' (columns, reactions) as (B, n) arrays (-1 where a row lacks it)."""
    n = slots.n
    rows = np.arange(n)[:, None]
    assigned = np.zeros(slots.cols.shape, bool)
    band_cols = np.full((len(offsets), n), -1, np.int32)
    band_reactions = np.full((len(offsets), n), -1, np.int16)
    for b, offset in enumerate(offsets):
        hit = (slots.cols >= 0) & (slots.cols == rows + offset)
        has = hit.any(axis=1)
        k = np.argmax(hit, axis=1)  # first slot with that column
        assigned[np.nonzero(has)[0], k[has]] = True
        band_cols[b, has] = slots.cols[has, k[has]]
        band_reactions[b, has] = slots.reactions[has, k[has]]
    return assigned, band_cols, band_reactions


def _csr(slots: RowSlots) -> CsrPart:
    present = slots.cols >= 0
    indptr = np.zeros(slots.n + 1, np.int64)
    np.cumsum(slots.lengths, out=indptr[1:])
    col = slots.cols[present]  # row by row, slot order
    gather = slots.gather(col, slots.reactions[present])
    return CsrPart("csr", slots.n, len(col), len(col), {"csr_ptr": indptr, "csr_col": col},
                   {"csr_val": gather})


def _ell(slots: RowSlots, cols: np.ndarray, reactions: np.ndarray) -> EllPart:
    n = slots.n
    present = cols >= 0
    width = int(present.sum(axis=1).max(initial=0))
    own = np.broadcast_to(np.arange(n, dtype=np.int32)[:, None], (n, width))
    col = np.where(present[:, :width], cols[:, :width], own).T  # (W, n): k*n + i
    gather = slots.gather(cols[:, :width], reactions[:, :width]).T
    return EllPart("ell", n, int(present.sum()), width * n,
                   {"ell_col": np.ascontiguousarray(col).reshape(-1)},
                   {"ell_val": np.ascontiguousarray(gather).reshape(-1)}, width=width)


def _dia(slots: RowSlots, offsets, band_cols, band_reactions, order) -> DiaPart:
    if order is not None:  # stored in position order: band b of position t
        band_cols, band_reactions = band_cols[:, order], band_reactions[:, order]
    gather = slots.gather(band_cols, band_reactions).reshape(-1)
    nnz = int(np.count_nonzero(band_cols >= 0))
    return DiaPart("dia", slots.n, nnz, len(offsets) * slots.n, {}, {"dia_val": gather},
                   offsets=tuple(int(o) for o in offsets), order=order)


def _slice_widths(lengths_by_position: np.ndarray, n_slices: int) -> np.ndarray:
    padded = np.zeros(n_slices * SLICE_ROWS, np.int64)
    padded[:len(lengths_by_position)] = lengths_by_position
    return padded.reshape(n_slices, SLICE_ROWS).max(axis=1)


def _sell(slots: RowSlots, cols: np.ndarray, reactions: np.ndarray,
          sort_rows: bool | None) -> SellPart:
    n, R = slots.n, slots.n_reactions
    lengths = (cols >= 0).sum(axis=1)
    # rows sorted by length, longest first, within each block of BLOCK_ROWS (stable)
    key = (np.arange(n) // BLOCK_ROWS) * (R + 1) + (R - lengths)
    perm = np.argsort(key, kind="stable").astype(np.int32)
    n_slices = -(-n // SLICE_ROWS)
    widths = _slice_widths(lengths[perm], n_slices)
    if sort_rows is None:  # sort when the slots it saves outweigh the perm it reads
        saved = SLICE_ROWS * int(_slice_widths(lengths, n_slices).sum() - widths.sum())
        sort_rows = saved * (VALUE_BYTES + INDEX_BYTES) > INDEX_BYTES * n
    if not sort_rows:
        perm = np.arange(n, dtype=np.int32)
        widths = _slice_widths(lengths, n_slices)
    permuted = bool(np.any(perm != np.arange(n)))
    ptr = np.zeros(n_slices + 1, np.int64)
    np.cumsum(widths * SLICE_ROWS, out=ptr[1:])
    stored = int(ptr[-1])
    col = np.zeros(stored, np.int32)  # lanes past the last row: never read
    gather = np.full(stored, -1, np.int64)
    t = np.arange(n)
    s, lane = t // SLICE_ROWS, t % SLICE_ROWS
    for k in range(int(widths.max(initial=0))):
        inside = k < widths[s]
        a = ptr[s[inside]] + k * SLICE_ROWS + lane[inside]
        rows = perm[inside]
        c, r = cols[rows, k], reactions[rows, k]
        col[a] = np.where(c >= 0, c, rows)  # padding: the row's own p_i
        gather[a] = slots.gather(c, r)
    arrays = {"sell_ptr": ptr, "sell_col": col}
    if permuted:
        arrays["sell_perm"] = perm
    return SellPart("sell", n, int((cols >= 0).sum()), stored, arrays, {"sell_val": gather},
                    n_slices=n_slices, permuted=permuted)
