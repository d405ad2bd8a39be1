"""Numpy passes split over the host-memory threads (runtime/host_threads.py)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from sbmlgpu.runtime import host_threads, prefault


@pytest.fixture
def eight_threads(monkeypatch):
    monkeypatch.setattr(host_threads, "threads", lambda: 8)


@pytest.mark.parametrize("n,min_items,count", [(0, 10, 0), (5, 10, 1), (25, 10, 2),
                                               (81, 10, 8), (1000, 10, 8), (1001, 1, 8)])
def test_pieces_cover_the_items_in_order(eight_threads, n, min_items, count):
    parts = host_threads.pieces(n, min_items)
    assert len(parts) == count
    covered = [i for a, b in parts for i in range(a, b)]
    assert covered == list(range(n))
    sizes = [b - a for a, b in parts]
    assert all(size >= min(min_items, n) for size in sizes)
    assert not sizes or max(sizes) - min(sizes) <= 1


def test_the_pieces_run_on_the_pool_and_return_in_order(eight_threads):
    names = []

    def work(a, b):
        names.append(threading.current_thread().name)
        return (a, b)

    out = host_threads.over_pieces(work, 80, min_items=10)
    assert out == host_threads.pieces(80, 10)
    assert all(name.startswith(prefault.THREAD_PREFIX) for name in names)


def test_a_piece_that_fails_fails_the_call(eight_threads):
    def work(a, b):
        if a > 0:
            raise ValueError(f"piece at {a}")
        return a

    with pytest.raises(ValueError, match="piece at"):
        host_threads.over_pieces(work, 100, min_items=10)


def test_called_from_a_pool_thread_it_runs_there(eight_threads):
    """A pool thread waiting on the pool could leave no thread for the pieces."""
    def inner(a, b):
        return threading.current_thread().name

    def outer():
        return threading.current_thread().name, host_threads.over_pieces(inner, 100, 10)

    name, inner_names = prefault.pool().submit(outer).result(timeout=30)
    assert inner_names == [name] * 8


def test_a_split_numpy_pass_equals_the_whole(eight_threads):
    x = np.random.default_rng(0).random(100_003)
    out = np.empty_like(x)

    def work(a, b):
        np.log(x[a:b], out=out[a:b])

    host_threads.over_pieces(work, x.size, min_items=1000)
    assert np.array_equal(out, np.log(x))
