"""Large ode kernels on a real GPU (`pytest -m gpu` on the GPU machine; skipped
elsewhere): the sparse LU as loops over index tables, loops kept as loops and fixed
parameters read at launch (tests/test_ode_compile.py checks them on the host) give on
the GPU what the same kernel gives built for the host, and a second run with other
fixed values uses the kernel compiled for the first."""

from __future__ import annotations

import numpy as np
import pytest

from sbmlgpu.ode import codegen, sparse_lu

from .test_ode_compile import ring

pytestmark = pytest.mark.gpu


def _run(net, k2, device):
    from sbmlgpu.api import run

    params = {"k1": np.linspace(0.3, 0.7, 256), "k2": np.full(256, k2)}
    return run(net, "ode", times=np.linspace(0.0, 5.0, 6), parameters=params,
               options={"method": "rodas4", "rtol": 1e-10, "atol": 1e-12,
                        **({"cpu_engine": "native"} if device == "cpu" else {})},
               device=device, progress=False)


@pytest.mark.parametrize("straight_line_max", [0, sparse_lu.STRAIGHT_LINE_MAX])
def test_large_kernels_on_the_gpu_equal_their_host_build(gpu_device, monkeypatch,
                                                         straight_line_max):
    from sbmlgpu.runtime.cache import default_cache

    monkeypatch.setattr(sparse_lu, "STRAIGHT_LINE_MAX", straight_line_max)
    net = ring(codegen.LITERALS_MAX_STATES + 16)
    first = _run(net, 2.0, [gpu_device.index])
    assert first.metadata["engine"] == "gpu" and first.ok.all()
    host = _run(net, 2.0, "cpu")
    assert np.allclose(first.data, host.data, rtol=1e-8, atol=1e-12)
    misses = default_cache().misses
    second = _run(net, 3.0, [gpu_device.index])  # other fixed values: no new compile
    assert default_cache().misses == misses
    assert second.metadata["kernel"] == first.metadata["kernel"]
    assert np.allclose(second.data, _run(net, 3.0, "cpu").data, rtol=1e-8, atol=1e-12)
