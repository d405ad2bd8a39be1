"""Host side of the counts: the dense CPTs out of the kernel's count buffer, the
sparse CPTs of the variables with too many parents counted from bin records, and
the counted marginals.

Sparse counting (one batch of records at a time, merged at the end): for variable v
and transition s, the parents' bins at s of every finite member are the rows of a
matrix; grouping its rows (group_rows) gives the visited configurations, and v's bin
at s+1 the column each member adds one to.
"""

from __future__ import annotations

import numpy as np

from .structure import DbnStructure


def dense_counts(buffer: np.ndarray, structure: DbnStructure) -> dict[str, np.ndarray]:
    """Variable -> (slices, K**len(parents), K) int64, from the kernel's buffer."""
    s, k = structure, structure.bins
    out = {}
    for v in s.dense:
        size = s.slices * s.rows(v) * k
        block = buffer[s.offsets[v]:s.offsets[v] + size]
        out[v] = block.astype(np.int64).reshape(s.slices, s.rows(v), k)
    return out


def group_rows(rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct rows, sorted lexicographically; each row's group): numpy.unique(rows,
    axis=0, return_inverse=True) for rows of digits 0..k-1, but fast. Each row becomes
    base-k integer keys, the first digit most significant, as many digits per 64-bit
    word as fit (a 28-parent configuration of 5 bins takes two words), so that the
    order of the keys is the rows' lexicographic order; numpy.unique's axis=0 compares
    rows as byte strings and took minutes on BIOMD0000000088's records."""
    n, width = rows.shape
    if n == 0:
        return rows[:0], np.zeros(0, np.intp)
    digits = max(1, int(np.floor(63 / np.log2(max(k, 2)))))
    while digits > 1 and k ** digits >= 2**63:  # the float estimate may be one too many
        digits -= 1
    words = []
    for start in range(0, width, digits):
        key = np.zeros(n, np.uint64)
        for j in range(start, min(start + digits, width)):
            key = key * np.uint64(k) + rows[:, j].astype(np.uint64)
        words.append(key)
    if len(words) == 1:
        keys, first, inverse = np.unique(words[0], return_index=True, return_inverse=True)
        return rows[first], inverse.reshape(-1)
    order = np.lexsort(words[::-1])  # lexsort's last key is the primary one
    new = np.ones(n, bool)
    new[1:] = np.any([np.diff(w[order]) != 0 for w in words], axis=0)
    inverse = np.empty(n, np.intp)
    inverse[order] = np.cumsum(new) - 1
    return rows[order[new]], inverse


class SparseCounter:
    """Accumulates the sparse variables' counts over batches of bin records."""

    def __init__(self, structure: DbnStructure):
        self.structure = structure
        # variable -> transition -> list of (configs, counts) of the batches so far
        self._parts = {v: [[] for _ in range(structure.slices)] for v in structure.sparse}

    def add(self, records: np.ndarray, ok: np.ndarray) -> None:
        """records: (b, slices + 1, variables) bins of one batch; ok: (b,) the members
        that finished (the others are never counted)."""
        s, k = self.structure, self.structure.bins
        records = records[ok]
        for v in s.sparse:
            pa = list(s.parent_indices(v))
            own = s.variables.index(v)
            for t in range(s.slices):
                rows = records[:, t, pa]
                nxt = records[:, t + 1, own]
                valid = np.all(rows < k, axis=1) & (nxt < k)
                if not valid.any():
                    continue
                configs, inverse = group_rows(rows[valid], k)
                cells = inverse * k + nxt[valid].astype(np.intp)
                counts = np.bincount(cells, minlength=len(configs) * k).reshape(-1, k)
                self._parts[v][t].append((configs, counts.astype(np.int64)))

    @classmethod
    def merged(cls, counters: list["SparseCounter"]) -> "SparseCounter":
        """One counter holding the batches of all of `counters` (of one structure),
        as if they had been added to it: finish() merges them into sorted unique
        configurations, so the result does not depend on which counter had which."""
        out = cls(counters[0].structure)
        for counter in counters:
            for v, transitions in counter._parts.items():
                for t, parts in enumerate(transitions):
                    out._parts[v][t].extend(parts)
        return out

    def finish(self) -> dict[str, tuple[list[np.ndarray], list[np.ndarray]]]:
        """Variable -> (configs per transition, counts per transition): unique rows,
        lexicographically sorted, counts summed over the batches."""
        s, k = self.structure, self.structure.bins
        dtype = np.uint8 if k <= 255 else np.uint16
        out = {}
        for v in s.sparse:
            configs_t, counts_t = [], []
            for parts in self._parts[v]:
                if not parts:
                    configs_t.append(np.zeros((0, len(s.parents[v])), dtype))
                    counts_t.append(np.zeros((0, k), np.int64))
                    continue
                if len(parts) == 1:  # one batch: already distinct and sorted
                    unique, merged = parts[0]
                else:
                    configs = np.concatenate([c for c, _ in parts])
                    counts = np.concatenate([n for _, n in parts])
                    unique, inverse = group_rows(configs, k)
                    merged = np.zeros((len(unique), k), np.int64)
                    np.add.at(merged, inverse, counts)
                configs_t.append(unique.astype(dtype))
                counts_t.append(merged)
            out[v] = (configs_t, counts_t)
        return out


def counted_marginals(structure: DbnStructure, dense: dict[str, np.ndarray],
                      sparse: dict[str, tuple[list, list]], n_counted: int) -> np.ndarray:
    """(slices + 1, variables, K) fractions of the counted members in each bin: at
    slice s+1 the column sums of a variable's CPT of transition s, at slice 0 its own
    digit of the parent configurations of transition 0."""
    s, k = structure, structure.bins
    out = np.zeros((s.slices + 1, len(s.variables), k))
    for j, v in enumerate(s.variables):
        own = s.parents[v].index(v)
        if v in dense:
            counts = dense[v]
            out[1:, j, :] = counts.sum(axis=1)
            by_parent = counts[0].sum(axis=1).reshape((k,) * len(s.parents[v]))
            other = tuple(a for a in range(by_parent.ndim) if a != own)
            out[0, j, :] = by_parent.sum(axis=other)
        else:
            configs, counts = sparse[v]
            for t in range(s.slices):
                out[t + 1, j, :] = counts[t].sum(axis=0)
            if configs and len(configs[0]):
                np.add.at(out[0, j], configs[0][:, own].astype(np.intp), counts[0].sum(axis=1))
    return out / max(n_counted, 1)
