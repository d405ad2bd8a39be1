"""A large ode kernel built in units (sbmlgpu.runtime.parallel_build) on a real GPU
(`pytest -m gpu` on the GPU machine; skipped elsewhere): the linked cubin loads, runs,
and gives what the same kernel gives built for the host; and what the whole compile of
the same source gives on the GPU."""

from __future__ import annotations

import numpy as np
import pytest

from sbmlgpu.ode import codegen

from .test_ode_compile import ring
from .test_ode_compile_gpu import _run

pytestmark = pytest.mark.gpu


def test_a_kernel_built_in_units_runs_as_its_host_build_and_its_whole_build(
        gpu_device, monkeypatch, tmp_path):
    from sbmlgpu.runtime import parallel_build

    monkeypatch.setenv("SBMLGPU_CACHE_DIR", str(tmp_path))  # a fresh cubin cache: it builds
    monkeypatch.setenv(parallel_build.JOBS_ENV, "4")
    monkeypatch.setattr(codegen, "JACOBIAN_PART_ENTRIES", 60)  # the Jacobian in parts too
    builds = []
    real = parallel_build.compile_units

    def recording(units, *args, **kwargs):
        builds.append([u.name for u in units])
        return real(units, *args, **kwargs)

    monkeypatch.setattr(parallel_build, "compile_units", recording)
    net = ring(codegen.INLINE_MODEL_MAX + 16)
    split = _run(net, 2.0, [gpu_device.index])
    assert builds and "model_rhs" in builds[0] and "model_m_sparse_1" in builds[0]
    assert split.metadata["engine"] == "gpu" and split.ok.all()
    host = _run(net, 2.0, "cpu")
    assert np.allclose(split.data, host.data, rtol=1e-8, atol=1e-12)
    monkeypatch.setenv(parallel_build.UNITS_ENV, "0")  # the same source compiled whole
    whole = _run(ring(codegen.INLINE_MODEL_MAX + 16), 2.0, [gpu_device.index])
    assert len(builds) == 1 and whole.ok.all()
    assert np.allclose(split.data, whole.data, rtol=1e-8, atol=1e-12)
