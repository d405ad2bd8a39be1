"""The runtime on a real GPU (`pytest -m gpu` on the GPU machine; skipped elsewhere).

Devices, memory, launches with event timing, kernel attributes, the compile cache,
out-of-memory, and two end-to-end checks of generated code: the device Philox
stream equals the numpy twin, and printed expressions evaluated by the GPU's own
math library agree with sympy."""

from __future__ import annotations

import importlib.util
import math
import threading
from pathlib import Path

import numpy as np
import pytest

from sbmlgpu.codegen import philox
from sbmlgpu.codegen.printer import CudaPrinter
from sbmlgpu.codegen.templates import render

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def device(gpu_device):
    return gpu_device


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("SBMLGPU_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _selftest(device, precision="double", expressions=()):
    source = render("sbmlgpu.codegen", "selftest.cu", precision=precision,
                    expressions=list(expressions))
    return device.compile(source, name=f"selftest_{precision}")


def test_device_properties_are_sane(device):
    p = device.properties
    assert p.name and p.compute_capability >= (6, 0) and p.arch.startswith("sm_")
    assert p.sm_count > 0 and p.total_memory > 1 << 30 and p.warp_size == 32
    assert p.max_threads_per_block == 1024 and p.max_threads_per_sm >= 1024
    assert p.registers_per_block >= 32768 and p.shared_memory_per_block >= 48 * 1024
    assert p.shared_memory_per_block_optin >= p.shared_memory_per_block
    assert p.clock_khz > 0 and p.memory_clock_khz > 0 and p.memory_bus_width_bits > 0
    assert 1e11 < p.peak_bandwidth() < 1e14 and p.peak_flops("float") > p.peak_flops("double")
    assert 0 < device.free_memory() <= p.total_memory


def test_alloc_and_copy_round_trip(device):
    data = np.random.default_rng(0).normal(size=(1000, 7))
    buf = device.to_device(data)
    assert buf.nbytes == data.nbytes
    assert np.array_equal(device.from_device(buf, data.shape, data.dtype), data)
    device.upload(buf, data * 2)
    assert np.array_equal(device.from_device(buf, data.shape, data.dtype), data * 2)
    buf.free()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n,shape", [(1000, (7, 3)), (33, (1,)), (70_001, (5, 13))])
def test_member_major_transpose(device, dtype, n, shape):
    """Sizes that are not multiples of the 32 x 32 tile, one column, many members;
    into a fresh array and into rows of a larger one."""
    from sbmlgpu.runtime.layout import member_major

    data = np.random.default_rng(1).normal(size=(*shape, n)).astype(dtype)
    buf = device.to_device(data)
    try:
        expected = np.moveaxis(data, -1, 0)
        assert np.array_equal(member_major(device, buf, n, shape, dtype), expected)
        whole = np.zeros((n + 10, *shape), dtype)
        member_major(device, buf, n, shape, dtype, destination=whole[5:5 + n])
        assert np.array_equal(whole[5:5 + n], expected)
        assert not whole[:5].any() and not whole[5 + n:].any()
    finally:
        buf.free()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_columns_gathered_on_the_device(device, dtype):
    """A table kept on the GPU (runtime/resident.py): a bundled batch's columns, in
    launch order, equal the host's gather."""
    from sbmlgpu.runtime.resident import ResidentTable

    rng = np.random.default_rng(2)
    table = rng.normal(size=(9, 200_003)).astype(dtype)
    members = rng.permutation(table.shape[1])[:150_001]
    with ResidentTable.upload([device], table) as resident:
        assert resident.holds(device)
        columns = resident.gather(device, members)
        span = resident.gather(device, None, 1_000, 171_003)  # an unbundled batch's range
        try:
            got = device.from_device(columns.buffer, columns.shape, dtype)
            got_span = device.from_device(span.buffer, span.shape, dtype)
        finally:
            columns.buffer.free()
            span.buffer.free()
    assert np.array_equal(got, table[:, members])
    assert np.array_equal(got_span, table[:, 1_000:171_003])


def test_launch_timing_and_attributes(device, cache_dir):
    kernel = _selftest(device).function("sbmlgpu_axpy")
    a = kernel.attributes
    assert 0 < a.registers <= 255 and 0 < a.max_threads_per_block <= 1024
    assert a.local_bytes >= 0 and a.shared_bytes >= 0
    n = 1 << 22
    x, y = np.arange(n, dtype=np.float64), np.ones(n)
    dx, dy = device.to_device(x), device.to_device(y)
    timing = kernel.launch(((n + 255) // 256,), (256,), [np.int32(n), np.float64(3.0), dx, dy])
    assert timing.ms > 0 and timing.grid == ((n + 255) // 256, 1, 1) and timing.block == (256, 1, 1)
    assert np.array_equal(device.from_device(dy, (n,), np.float64), 3.0 * x + 1.0)
    # 24 bytes a thread in 4M threads: the timing is a real measurement, not a constant
    assert 3 * 8 * n / (timing.ms * 1e-3) < 2 * device.properties.peak_bandwidth()


def test_second_compile_hits_the_cache(device, cache_dir):
    from sbmlgpu.runtime.cache import default_cache

    _selftest(device, "float")
    cache = default_cache()
    assert cache.directory == cache_dir and cache.misses >= 1
    hits = cache.hits
    _selftest(device, "float")
    assert cache.hits == hits + 1
    assert list(cache_dir.glob("cubin/*.cubin"))


def test_absurd_allocation_is_out_of_device_memory(device):
    from sbmlgpu.runtime import OutOfDeviceMemory

    with pytest.raises(OutOfDeviceMemory):
        device.alloc(1 << 50)  # a pebibyte
    buf = device.alloc(1 << 20)  # and the device still works afterwards
    buf.free()


def test_several_host_threads_share_the_device(device):
    errors = []

    def work(seed):
        try:
            data = np.full(1000, float(seed))
            for _ in range(20):
                buf = device.to_device(data)
                assert device.from_device(buf, data.shape, data.dtype)[0] == seed
                buf.free()
        except Exception as e:  # noqa: BLE001 -- reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


@pytest.mark.parametrize("precision", ["double", "float"])
def test_device_philox_equals_numpy_twin(device, precision):
    kernel = _selftest(device, precision).function("sbmlgpu_rng_selftest")
    dtype = np.float64 if precision == "double" else np.float32
    n_items, per_item, seed, first = 3000, 9, 0xDEADBEEF12345, 10_000_000_000
    out = device.alloc(n_items * per_item * np.dtype(dtype).itemsize)
    kernel.launch(((n_items + 127) // 128,), (128,),
                  [out, np.uint64(seed), np.uint64(first), np.int32(n_items), np.int32(per_item)])
    got = device.from_device(out, (n_items, per_item), dtype)
    expected = philox.uniforms(seed, np.arange(first, first + n_items, dtype=np.uint64),
                               per_item, precision)
    assert np.array_equal(got, expected)


def _printer_cases():
    path = Path(__file__).with_name("test_codegen_printer.py")
    spec = importlib.util.spec_from_file_location("_printer_cases", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("precision, rel, floor", [("double", 1e-12, 1e-300),
                                                   ("float", 1e-5, 1e-6)])
def test_printed_expressions_on_the_device_match_sympy(device, precision, rel, floor):
    cases = _printer_cases()
    sym = {cases.x: "x", cases.y: "y", cases.z: "z"}
    printer = CudaPrinter(sym, precision=precision)
    exprs = cases.EXPRESSIONS
    module = _selftest(device, precision, [printer.print_value(e) for e in exprs])
    dtype = np.float64 if precision == "double" else np.float32
    points = np.array(cases.POINTS, dtype=dtype)
    out = device.alloc(len(points) * len(exprs) * points.itemsize)
    module.function("sbmlgpu_expressions").launch(
        (1,), (32,), [np.int32(len(points)), device.to_device(points), out])
    got = device.from_device(out, (len(points), len(exprs)), dtype).astype(float)
    bad = []
    for i, point in enumerate(points.astype(float)):
        for j, e in enumerate(exprs):
            ref = cases._reference(e, tuple(point))
            if precision == "float" and not math.isnan(ref) and ref != 0 \
                    and not 1e-30 < abs(ref) < 1e30:
                continue
            if not cases._agree(got[i, j], ref, rel, floor):
                bad.append(f"{e} at {tuple(point)}: GPU {got[i, j]!r}, sympy {ref!r}")
    assert not bad, "\n".join(bad)
