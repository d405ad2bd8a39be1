"""The key of the --method auto check's cache (plugins/ode/specialised.py values_key):
the parameter table's bytes hashed in fixed chunks on the host's threads. It must say
"same" exactly for the same table and time span, whatever the array's layout or the
machine's thread count, and "different" for any one value changed."""

from __future__ import annotations

import numpy as np
import pytest

from sbmlgpu.plugins.ode.specialised import KEY_CHUNK_BYTES, values_key
from sbmlgpu.runtime import host_threads

TIMES = np.linspace(0.0, 10.0, 11)


@pytest.fixture
def table():
    # 14 chunks, the last one partial: enough for the digests to be split over threads
    n = (13 * KEY_CHUNK_BYTES) // (8 * 2) + 5
    return np.random.default_rng(1).uniform(size=(2, n))


def test_the_same_values_give_the_same_key_whatever_the_arrays_layout(table):
    key = values_key(table, TIMES)
    assert values_key(table.copy(), TIMES) == key
    assert values_key(np.asfortranarray(table), TIMES) == key
    wider = np.zeros((2, 2 * table.shape[1]))
    wider[:, ::2] = table
    assert values_key(wider[:, ::2], TIMES) == key  # a strided view of the same values


@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_one_value_changed_anywhere_changes_the_key(table, where):
    key = values_key(table, TIMES)
    changed = table.copy()
    column = {"first": 0, "middle": table.shape[1] // 2, "last": -1}[where]
    changed[1, column] = np.nextafter(changed[1, column], 2.0)  # one ulp
    assert values_key(changed, TIMES) != key


def test_the_shape_and_the_time_span_are_part_of_the_key(table):
    key = values_key(table, TIMES)
    assert values_key(table.reshape(1, -1), TIMES) != key  # the same bytes, other members
    assert values_key(table, TIMES * 2) != key
    assert values_key(table, TIMES[1:]) != key
    empty = np.zeros((0, 5))
    assert values_key(empty, TIMES) == values_key(empty.copy(), TIMES)
    assert values_key(empty, TIMES) != values_key(np.zeros((0, 6)), TIMES)


@pytest.mark.parametrize("threads", [1, 3, 16])
def test_the_key_does_not_depend_on_the_number_of_threads(table, monkeypatch, threads):
    monkeypatch.setattr(host_threads, "threads", lambda: 1)
    serial = values_key(table, TIMES)
    monkeypatch.setattr(host_threads, "threads", lambda: threads)
    chunks = -(-table.nbytes // KEY_CHUNK_BYTES)
    assert len(host_threads.pieces(chunks, min_items=4)) == min(threads, chunks // 4)
    assert values_key(table, TIMES) == serial


def test_the_key_benchmark_times_both_keys_and_refuses_a_bad_shape(tmp_path, capsys):
    import json

    from benchmarks import ode_method_key

    assert ode_method_key.main(["--shapes", "3x1000,2x70000", "--repeat", "1",
                                "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "ode_method_key.json").read_text())["rows"]
    assert [(r["rows"], r["members"]) for r in rows] == [(3, 1000), (2, 70000)]
    assert all(r["anchor_s"] > 0 and r["values_key_s"] > 0 for r in rows)
    with pytest.raises(SystemExit):
        ode_method_key.main(["--shapes", "3by1000"])
    assert "is not ROWSxMEMBERS" in capsys.readouterr().err
