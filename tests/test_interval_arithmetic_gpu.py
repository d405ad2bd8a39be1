"""templates/interval.cuh on a real GPU (`pytest -m gpu` on the GPU machine).

The op table (codegen/interval_selftest.py) run by the device: the directed scalar ops
(CUDA's _rd/_ru intrinsics) equal the host's emulation bit for bit wherever the host
reports no fallback, the basic interval ops equal the host's for moderate operands,
and the device's elementary functions enclose the true values (arb) as tightly as the
host's. The same kernel compiles in CI (tests/test_interval_arithmetic.py)."""

from __future__ import annotations

import numpy as np
import pytest

from sbmlgpu.codegen import interval_selftest as ops

from .test_interval_arithmetic import arb_precision  # noqa: F401 (autouse fixture: 200 bits)
from .test_interval_arithmetic import (ELEMENTARY, SCALAR_OPS, arb, elementary_samples,
                                       elementary_violations, encloses, needs_flint,
                                       operands, random_intervals)

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def device(gpu_device):
    return gpu_device


def same_bits(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Bit-identical (signs of zero included), or both NaN."""
    return (x.view(np.uint64) == y.view(np.uint64)) | (np.isnan(x) & np.isnan(y))


@pytest.mark.parametrize("op", SCALAR_OPS)
def test_device_directed_ops_equal_the_host_bit_for_bit(device, op):
    rows = operands(op, np.random.default_rng(200 + SCALAR_OPS.index(op)), 200_000)
    for direction in ("rd", "ru"):
        name = f"sbmlgpu_{op}_{direction}"
        gpu, cpu = ops.run_device(device, name, rows), ops.run_host(name, rows)
        exact = cpu[:, 1] == 0
        assert exact.mean() > 0.5
        differ = np.flatnonzero(exact & ~same_bits(gpu[:, 0], cpu[:, 0]))
        assert differ.size == 0, [(tuple(rows[i, :3]), gpu[i, 0], cpu[i, 0]) for i in differ[:10]]
        # in the host's fallback ranges the host is the same or one step further out
        fell_back = ~exact & ~np.isnan(gpu[:, 0])
        outward = cpu[fell_back, 0] <= gpu[fell_back, 0] if direction == "rd" \
            else cpu[fell_back, 0] >= gpu[fell_back, 0]
        assert outward.all()


@pytest.mark.parametrize("name", ["iv_add", "iv_sub", "iv_mul", "iv_div", "iv_sqr", "iv_sqrt",
                                  "iv_powi", "iv_scale", "iv_mid", "iv_rad", "iv_width"])
def test_device_basic_interval_ops_equal_the_host(device, name):
    """Moderate bounds (1e-40 to 1e40, and 0), where no host op falls back: products,
    quotients and sixth powers stay between 2^-900 and 2^1020."""
    rng = np.random.default_rng(300)
    xl, xh = random_intervals(rng, 20_000, 40)
    yl, yh = random_intervals(rng, 20_000, 40)
    c = rng.integers(-6, 7, xl.size).astype(float) if name == "iv_powi" else yl
    rows = ops.arguments(xl, xh, c, yh)
    bounds = np.abs(rows)
    rows = rows[np.all((bounds >= 1e-40) | (bounds == 0), axis=1)]
    assert len(rows) > 10_000
    gpu, cpu = ops.run_device(device, name, rows), ops.run_host(name, rows)
    assert same_bits(gpu, cpu).all(), np.flatnonzero(~same_bits(gpu, cpu).all(axis=1))[:10]


@pytest.mark.parametrize("name", list(ELEMENTARY))
@needs_flint
def test_device_elementary_functions_enclose_arb(device, name):
    lo, hi = elementary_samples(name, np.random.default_rng(400 + list(ELEMENTARY).index(name)),
                                2000)
    out = ops.run_device(device, name, ops.arguments(lo, hi))
    bad = elementary_violations(name, out, lo, hi)
    assert not bad, f"{len(bad)} of {len(out)}:\n" + "\n".join(bad[:20])


@needs_flint
def test_device_pi_bounds_equal_the_host(device):
    rows = ops.arguments(0.0)
    assert same_bits(ops.run_device(device, "sbmlgpu_iv_pi", rows),
                     ops.run_host("sbmlgpu_iv_pi", rows)).all()
    assert encloses(*ops.run_device(device, "sbmlgpu_iv_pi", rows)[0], arb.pi())
