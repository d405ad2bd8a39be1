"""sbmlgpu.runtime.layout.member_major: time courses from (columns, members) on the device
into (members, columns) rows of a result, through pinned staging where the device pins
host memory (a fake here; the real copy on the GPU machine with `pytest -m gpu`)."""

from __future__ import annotations

import numpy as np
import pytest

from sbmlgpu.runtime.layout import member_major, pins_host_memory

from .fakes import FakeDevice as PlainDevice  # host buffers: plain memory


class PinningDevice(PlainDevice):
    """A device whose driver allocates the staging buffers itself (as PyCUDA pins them)."""

    def allocate_pinned(self, nbytes):
        return np.empty(int(nbytes), np.uint8)


@pytest.mark.parametrize("kind", [PlainDevice, PinningDevice])
def test_rows_of_the_result_get_the_transposed_time_courses(kind):
    fake = kind()
    n, shape = 300, (7, 3)
    columns = np.random.default_rng(1).normal(size=(7 * 3, n))  # the kernel's layout
    result = np.full((n + 2,) + shape, np.nan)
    rows = result[1:-1]
    out = member_major(fake, fake.to_device(columns), n, shape, np.float64, destination=rows)
    assert out is rows
    np.testing.assert_array_equal(rows, columns.T.reshape((n,) + shape))
    assert np.isnan(result[0]).all() and np.isnan(result[-1]).all()
    pool = fake.pinned_pool()
    if kind is PinningDevice:  # through the pinned chunks, which go back to the pool
        assert pins_host_memory(fake) and pool.misses >= 1 and pool.in_use_bytes == 0
        assert all(d.dtype == np.uint8 and d.ndim == 1 for d in fake.downloads)
    else:  # straight into the rows, as before staging existed
        assert not pins_host_memory(fake) and pool.misses == 0
        assert len(fake.downloads) == 1 and fake.downloads[0] is rows


def test_devices_that_are_not_base_devices_copy_directly():
    class Duck:
        pass

    assert not pins_host_memory(Duck())


@pytest.mark.gpu
def test_staged_member_major_on_the_gpu(gpu_device):
    assert pins_host_memory(gpu_device)
    n, shape = 100_003, (11, 4)
    columns = np.random.default_rng(2).normal(size=(44, n))
    buffer = gpu_device.to_device(columns)
    result = np.full((n + 1,) + shape, np.nan)
    pool = gpu_device.pinned_pool()
    used = pool.hits + pool.misses
    member_major(gpu_device, buffer, n, shape, np.float64, destination=result[1:])
    np.testing.assert_array_equal(result[1:], columns.T.reshape((n,) + shape))
    assert np.isnan(result[0]).all()
    assert pool.hits + pool.misses > used and pool.in_use_bytes == 0
    buffer.free()
