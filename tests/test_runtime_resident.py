"""A table kept on the device and its columns gathered there (runtime/resident.py,
codegen/templates/gather.cu): on fake devices, whose gather is numpy (tests/fakes.py);
the CUDA kernel itself is compiled in test_codegen_templates and run in
test_runtime_gpu."""

from __future__ import annotations

import numpy as np
import pytest

from sbmlgpu.runtime.resident import DeviceColumns, ResidentTable

from .fakes import GATHER, FakeDevice


def _table(rows=5, n=300, dtype=np.float64):
    return np.random.default_rng(3).random((rows, n)).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gathered_columns_are_the_members_columns_in_their_order(dtype):
    device = FakeDevice()
    table = _table(dtype=dtype)
    members = np.random.default_rng(4).permutation(table.shape[1])[:77]
    with ResidentTable.upload([device], table) as resident:
        assert resident.holds(device)
        columns = resident.gather(device, members)
        assert isinstance(columns, DeviceColumns)
        assert columns.shape == (5, 77) and columns.nbytes == 5 * 77 * np.dtype(dtype).itemsize
        got = columns.buffer.view(dtype, columns.size).reshape(columns.shape)
        assert np.array_equal(got, table[:, members])
        columns.buffer.free()
    assert [launch[0] for launch in device.launches] == [GATHER]


def test_a_device_without_room_gets_no_copy_and_its_batches_gather_on_the_host():
    table = _table()
    roomy, tight = FakeDevice(0), FakeDevice(1, free=table.nbytes)  # 25 % of it: too little
    resident = ResidentTable.upload([roomy, tight], table)
    assert resident.holds(roomy) and not resident.holds(tight)
    assert resident.gather(tight, np.arange(3)) is None
    resident.free()
    assert not resident.holds(roomy)


def test_members_outside_the_table_are_refused():
    device = FakeDevice()
    with ResidentTable.upload([device], _table(n=10)) as resident:
        with pytest.raises(ValueError, match="below 10"):
            resident.gather(device, np.array([3, 10]))
        with pytest.raises(ValueError, match="below 10"):
            resident.gather(device, np.array([-1]))
    assert device.launches == []


def test_an_empty_batch_gathers_nothing():
    device = FakeDevice()
    with ResidentTable.upload([device], _table()) as resident:
        columns = resident.gather(device, np.array([], dtype=np.int64))
        assert columns.shape == (5, 0)
        columns.buffer.free()
    assert device.launches == []


def test_a_copy_that_finds_the_memory_taken_leaves_that_device_out():
    """Another process may take the memory between the check and the copy: that
    device's batches gather on the host; a failure of another kind frees every copy
    made and is raised."""
    table = _table()
    roomy, taken = FakeDevice(0), FakeDevice(1, alloc_limit=table.nbytes - 1)
    with ResidentTable.upload([roomy, taken], table) as resident:
        assert resident.holds(roomy) and not resident.holds(taken)
    assert roomy.live_buffers() == []

    class Broken(FakeDevice):
        def to_device(self, array):
            raise RuntimeError("the copy failed")

    first, broken = FakeDevice(0), Broken(1)
    with pytest.raises(RuntimeError, match="the copy failed"):
        ResidentTable.upload([first, broken], table)
    assert first.live_buffers() == []


def test_a_range_of_members_is_gathered_without_their_indices():
    """An unbundled batch: members None, the range start..stop-1."""
    device = FakeDevice()
    table = _table(rows=4, n=500)
    with ResidentTable.upload([device], table) as resident:
        columns = resident.gather(device, None, 120, 377)
        got = columns.buffer.view(np.float64, columns.size).reshape(columns.shape)
        assert np.array_equal(got, table[:, 120:377])
        columns.buffer.free()
        with pytest.raises(ValueError, match="outside 0..500"):
            resident.gather(device, None, 400, 501)
    assert device.live_buffers() == []


@pytest.mark.parametrize("staged_bytes", [1, 1 << 40])
def test_a_large_table_goes_up_through_pinned_stages(monkeypatch, staged_bytes):
    """Above STAGED_BYTES through transfer.upload_staged (pinned chunks), below it in one
    copy; the gathered columns are the same."""
    from sbmlgpu.runtime import resident as module

    calls = []
    real = module.upload_staged
    monkeypatch.setattr(module, "STAGED_BYTES", staged_bytes)
    monkeypatch.setattr(module, "upload_staged",
                        lambda device, table: calls.append(table.nbytes) or real(device, table))
    device = FakeDevice()
    table = _table()
    with ResidentTable.upload([device], table) as resident:
        columns = resident.gather(device, np.arange(10))
        got = columns.buffer.view(np.float64, columns.size).reshape(columns.shape)
        assert np.array_equal(got, table[:, :10])
        columns.buffer.free()
    assert calls == ([table.nbytes] if staged_bytes == 1 else [])
