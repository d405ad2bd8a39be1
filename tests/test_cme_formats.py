"""plugins/cme/formats.py: the storage formats of the CME generator's off-diagonal part.

Each format's numpy SpMV reads the stored layout exactly as the kernels do; it must
equal scipy's O @ x (O built straight from `sources`) on random sources arrays and on
a depth-first-ordered birth-death lattice. The layouts' own promises (ELL column-major,
SELL slices of 32, rows sorted within blocks of 256, bands where the fill is high,
padding pointing at the row itself) are checked directly, and so are the byte counts."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sps

from sbmlgpu.errors import OptionError
from sbmlgpu.plugins.cme import formats as F


def lattice(nx: int, ny: int) -> tuple[np.ndarray, np.ndarray]:
    """(sources, targets), each (4, n), of 0->X, X->0, 0->Y, Y->0 on the box [0, nx] x
    [0, ny], states in depth-first order from (0, 0) (reactions tried in model order)."""
    moves = [(1, 0), (-1, 0), (0, 1), (0, -1)]  # net change of each reaction
    index: dict[tuple[int, int], int] = {}
    stack = [(0, 0)]
    while stack:
        s = stack.pop()
        if s in index:
            continue
        index[s] = len(index)
        for dx, dy in reversed(moves):  # pushed last, explored first: reaction order
            t = (s[0] + dx, s[1] + dy)
            if 0 <= t[0] <= nx and 0 <= t[1] <= ny and t not in index:
                stack.append(t)
    sources = np.full((4, len(index)), -1, np.int32)
    targets = np.full((4, len(index)), -1, np.int32)
    for (x, y), i in index.items():
        for r, (dx, dy) in enumerate(moves):
            j = index.get((x - dx, y - dy))  # the state reaction r takes to (x, y)
            sources[r, i] = -1 if j is None else j
            k = index.get((x + dx, y + dy))  # where reaction r takes (x, y)
            targets[r, i] = -1 if k is None else k
    return sources, targets


def lattice_sources(nx: int, ny: int) -> np.ndarray:
    return lattice(nx, ny)[0]


def random_sources(rng, R: int, n: int, present: float = 0.6) -> np.ndarray:
    s = rng.integers(0, n, size=(R, n)).astype(np.int32)
    s[rng.random((R, n)) > present] = -1
    return s


def reference(sources: np.ndarray, prop: np.ndarray) -> sps.csr_matrix:
    r, i = np.nonzero(sources >= 0)
    j = sources[r, i]
    n = sources.shape[1]
    return sps.csr_matrix((prop[r, j], (i, j)), shape=(n, n))  # duplicates summed


def assert_close(a, b, rel=1e-14):
    scale = max(np.max(np.abs(b), initial=0.0), 1e-300)
    assert np.max(np.abs(a - b), initial=0.0) <= rel * scale


CASES = [("random", 7, 3, 500), ("random", 11, 6, 1000), ("random", 1, 1, 257),
         ("lattice", 0, 30, 20), ("lattice", 0, 63, 5)]


def sources_of(kind, seed, a, b):
    if kind == "lattice":
        return lattice_sources(a, b)
    return random_sources(np.random.default_rng(seed), a, b)


@pytest.mark.parametrize("name", F.FORMATS)
@pytest.mark.parametrize("kind,seed,a,b", CASES)
def test_spmv_follows_the_layout_and_equals_scipy(name, kind, seed, a, b):
    sources = sources_of(kind, seed, a, b)
    rng = np.random.default_rng(seed + 100)
    prop = rng.uniform(0.1, 10.0, size=sources.shape)
    x = rng.random(sources.shape[1])
    for sort_rows in ((None, True, False) if name == "dia+sell" else (None,)):
        fmt = F.build(name, sources, sort_rows=sort_rows)
        values = fmt.values(prop)
        assert_close(fmt.spmv(values, x), reference(sources, prop) @ x)
        assert fmt.nnz == np.count_nonzero(sources >= 0)


@pytest.mark.parametrize("name", F.FORMATS)
def test_a_wrong_value_in_any_slot_changes_the_product(name):
    """The reference SpMV really reads every real slot (so a layout error shows)."""
    sources = lattice_sources(12, 9)
    prop = np.random.default_rng(3).uniform(1, 2, sources.shape)
    fmt = F.build(name, sources)
    values = fmt.values(prop)
    x = np.random.default_rng(4).uniform(1, 2, sources.shape[1])
    good = fmt.spmv(values, x)
    for key, gather in fmt.gathers.items():
        real = np.nonzero(gather >= 0)[0]
        for slot in real[:: max(1, len(real) // 7)]:
            changed = {k: v.copy() for k, v in values.items()}
            changed[key][slot] += 1.0
            assert not np.allclose(fmt.spmv(changed, x), good, rtol=1e-12, atol=0)


def test_duplicate_columns_keep_one_slot_each():
    # reactions 0 and 2 both take state 3 to state 0 (same net change)
    sources = np.full((3, 5), -1, np.int32)
    sources[0, 0] = sources[2, 0] = 3
    sources[1, 4] = 0
    prop = np.arange(15, dtype=float).reshape(3, 5) + 1
    for name in F.FORMATS:
        fmt = F.build(name, sources)
        assert fmt.nnz == 3
        y = fmt.spmv(fmt.values(prop), np.eye(5)[3])
        assert y[0] == prop[0, 3] + prop[2, 3]


def test_ell_is_column_major_with_padding_on_the_row_itself():
    sources = np.array([[1, -1, 0], [2, 0, -1]], np.int32)  # rows: 0:{1,2} 1:{0} 2:{0}
    fmt = F.build("ell", sources)
    ell = fmt.part("ell")
    assert ell.width == 2 and fmt.stored == 6 and fmt.nnz == 4
    col = ell.arrays["ell_col"].reshape(2, 3)
    assert col[:, 0].tolist() == [1, 2]  # row 0's slots k=0,1 at k*n + 0
    assert col[1, 1] == 1 and col[1, 2] == 2  # padding: the row's own index
    assert fmt.gathers["ell_val"].reshape(2, 3)[1, 1:].tolist() == [-1, -1]
    assert fmt.gathers["ell_val"][0] == 0 * 3 + 1  # reaction 0, column 1
    assert fmt.padding_efficiency == pytest.approx(4 / 6)


def test_dfs_lattice_fills_the_unit_bands():
    sources = lattice_sources(30, 20)
    fill = F.band_fill(F.row_slots(sources))
    assert fill[1] > 0.9 and fill[-1] > 0.9
    fmt = F.build("dia+ell", sources)
    assert {-1, 1} <= set(fmt.part("dia").offsets)
    assert all(fill[o] >= F.DEFAULT_DIA_FILL for o in fmt.part("dia").offsets)
    assert all(f < F.DEFAULT_DIA_FILL for o, f in fill.items()
               if o not in fmt.part("dia").offsets)


def test_the_dia_fill_threshold_picks_the_bands_and_stays_correct():
    sources = lattice_sources(20, 15)
    prop = np.random.default_rng(1).uniform(0.5, 2, sources.shape)
    x = np.random.default_rng(2).random(sources.shape[1])
    want = reference(sources, prop) @ x
    seen = set()
    for threshold in (0.01, 0.3, 0.5, 0.8, 1.0):
        for name in ("dia+ell", "dia+sell"):
            fmt = F.build(name, sources, dia_fill=threshold)
            offsets = fmt.part("dia").offsets
            assert all(fmt.band_fill[o] >= threshold for o in offsets)
            assert_close(fmt.spmv(fmt.values(prop), x), want)
            seen.add(len(offsets))
    assert len(seen) > 1  # the threshold does change the split


def test_sell_slices_sort_rows_within_blocks_and_keep_their_widths():
    rng = np.random.default_rng(9)
    sources = random_sources(rng, 6, 700, present=0.5)
    fmt = F.build("dia+sell", sources, dia_fill=1.0, sort_rows=True)  # all in SELL
    sell = fmt.part("sell")
    assert sell.permuted
    perm = sell.arrays["sell_perm"]
    assert sorted(perm.tolist()) == list(range(700))
    lengths = (sources >= 0).sum(axis=0)
    for block in range(0, 700, F.BLOCK_ROWS):
        rows = perm[block:block + F.BLOCK_ROWS]
        assert set(rows.tolist()) == set(range(block, min(block + F.BLOCK_ROWS, 700)))
        assert np.all(np.diff(lengths[rows]) <= 0)  # longest first
    ptr = sell.arrays["sell_ptr"]
    widths = np.diff(ptr) // F.SLICE_ROWS
    assert np.all(np.diff(ptr) % F.SLICE_ROWS == 0)
    assert len(widths) == -(-700 // F.SLICE_ROWS)
    for s, w in enumerate(widths):
        assert w == lengths[perm[s * 32:(s + 1) * 32]].max()
    # sorting evens the slices: fewer stored slots than plain ELL of the same rows
    assert fmt.stored < F.build("ell", sources).stored


def test_sell_without_reordering_leaves_perm_out():
    sources = lattice_sources(10, 10)
    fmt = F.build("dia+sell", sources)
    sell = fmt.part("sell")
    if not sell.permuted:
        assert "sell_perm" not in sell.arrays and fmt.part("dia").order is None


def test_bytes_per_sweep_follow_the_documented_formula():
    sources = lattice_sources(25, 25)
    n, nnz = sources.shape[1], np.count_nonzero(sources >= 0)
    csr = F.build("csr", sources)
    assert csr.bytes_per_sweep == 24 * n + 8 * (n + 1) + 20 * nnz
    ell = F.build("ell", sources)
    assert ell.bytes_per_sweep == 24 * n + 12 * ell.stored + 8 * nnz
    de = F.build("dia+ell", sources)
    dia, rest = de.part("dia"), de.part("ell")
    assert de.bytes_per_sweep == 24 * n + 16 * len(dia.offsets) * n + 12 * rest.stored \
        + 8 * rest.nnz
    ds = F.build("dia+sell", sources)
    sell = ds.part("sell")
    assert ds.bytes_per_sweep == (24 * n + 16 * len(ds.part("dia").offsets) * n
                                  + 12 * sell.stored + 8 * sell.nnz
                                  + 8 * (sell.n_slices + 1) + (4 * n if sell.permuted else 0))
    # the dense bands save the index words: fewer bytes than CSR on a DFS lattice
    assert ds.bytes_per_sweep < csr.bytes_per_sweep
    assert ds.memory_bytes < csr.memory_bytes
    for fmt in (csr, ell, de, ds):
        assert 0 < fmt.padding_efficiency <= 1
        assert fmt.flops_per_sweep == 2 * nnz + 2 * n
        assert fmt.summary()["bytes_per_sweep"] == fmt.bytes_per_sweep


def test_csr_is_sorted_by_column_as_scipy_sorts_it():
    sources = random_sources(np.random.default_rng(5), 5, 300)
    fmt = F.build("csr", sources)
    ptr, col = fmt.arrays["csr_ptr"], fmt.arrays["csr_col"]
    prop = np.random.default_rng(6).random(sources.shape)
    for i in range(300):
        assert np.all(np.diff(col[ptr[i]:ptr[i + 1]]) >= 0)
    ref = reference(sources, prop)
    ref.sort_indices()
    merged = sps.csr_matrix((fmt.values(prop)["csr_val"], col, ptr), shape=(300, 300))
    merged.sum_duplicates()
    assert np.array_equal(merged.indptr, ref.indptr) and np.array_equal(merged.indices,
                                                                         ref.indices)


def test_row_slots_in_chunks_equal_one_pass(monkeypatch):
    sources = random_sources(np.random.default_rng(8), 4, 1000)
    whole = F.row_slots(sources)
    monkeypatch.setattr(F, "_CHUNK_ROWS", 64)
    chunked = F.row_slots(sources)
    assert np.array_equal(whole.cols, chunked.cols)
    assert np.array_equal(whole.reactions, chunked.reactions)
    assert F.band_fill(chunked) == F.band_fill(whole)


@pytest.mark.parametrize("bad,what", [
    (np.zeros(5, np.int32), "(R, n) integer"),
    (np.zeros((2, 5)), "(R, n) integer"),
    (np.array([[0, 7, -1]], np.int32), "sources[0, 1] = 7"),
    (np.array([[0, -2, -1]], np.int32), "sources[0, 1] = -2"),
])
def test_bad_sources_are_option_errors(bad, what):
    with pytest.raises(OptionError, match=__import__("re").escape(what)):
        F.build("csr", bad)


def test_unknown_format_and_bad_fill_are_option_errors():
    sources = lattice_sources(3, 3)
    with pytest.raises(OptionError, match="dia\\+sell, dia\\+ell, ell, csr"):
        F.build("hyb", sources)
    with pytest.raises(OptionError, match="dia-fill"):
        F.build("dia+ell", sources, dia_fill=0.0)
    with pytest.raises(OptionError, match="propensities"):
        F.build("csr", sources).values(np.ones((3, 16)))


def test_rows_are_sorted_only_where_it_saves_bytes():
    sources = lattice_sources(40, 30)  # rows nearly even after the bands
    chosen = F.build("dia+sell", sources)
    for sort_rows in (True, False):
        forced = F.build("dia+sell", sources, sort_rows=sort_rows)
        assert chosen.bytes_per_sweep <= forced.bytes_per_sweep
    uneven = random_sources(np.random.default_rng(2), 8, 2000, present=0.5)
    assert F.build("dia+sell", uneven, dia_fill=1.0).part("sell").permuted
    plain = F.build("dia+sell", uneven, dia_fill=1.0, sort_rows=False)
    assert not plain.part("sell").permuted and "sell_perm" not in plain.arrays
    prop = np.random.default_rng(3).random(uneven.shape)
    x = np.random.default_rng(4).random(2000)
    assert_close(plain.spmv(plain.values(prop), x), reference(uneven, prop) @ x)
