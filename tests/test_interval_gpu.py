"""The interval backend on the GPU (`pytest -m gpu`): the kernel is the host build's
text, and the arithmetic is the same bit for bit (directed-rounding intrinsics on the
device, exact emulation on the host; no FMA contraction on either side), so on models
without elementary functions the GPU gives the host's enclosures and paving exactly.
Enclosures are also checked against point solutions directly."""

from __future__ import annotations

import numpy as np
import pytest

import sbmlgpu
from sbmlgpu.plugins.interval.backend import IntervalBackend
from sbmlgpu.sbml.load import load

from .interval_fixtures import LV, SEIR, solve, write_data

pytestmark = pytest.mark.gpu


def enclose(path, device, ids, lower, upper, times):
    return IntervalBackend().compile(load(path), None, device).enclose(ids, lower, upper,
                                                                        times)


def test_gpu_enclosures_equal_the_host_build_and_contain_point_solutions(gpu_device):
    rng = np.random.default_rng(5)
    times = np.linspace(0.0, 0.7, 15)
    centre = np.array([0.01, 0.02])
    lower = centre * (1 - 0.02 * rng.random((64, 2)))
    upper = centre * (1 + 0.02 * rng.random((64, 2)))
    on_gpu = enclose(LV, gpu_device, ("p2", "p4"), lower, upper, times)
    on_host = enclose(LV, None, ("p2", "p4"), lower, upper, times)
    np.testing.assert_array_equal(on_gpu, on_host)
    points = lower[:, None, :] + rng.random((64, 40, 2)) * (upper - lower)[:, None, :]
    y = solve("lv", times, p2=points[..., 0].ravel(), p4=points[..., 1].ravel())
    y = y.reshape(64, 40, len(times), 2)
    slack = 1e-7 * (1 + np.abs(y))
    assert np.all(y >= on_gpu[:, None, ..., 0] - slack)
    assert np.all(y <= on_gpu[:, None, ..., 1] + slack)


@pytest.mark.parametrize("case", ["lv", "seir"])
def test_gpu_paving_equals_the_host_paving(gpu_device, tmp_path, case):
    if case == "lv":
        data = write_data(tmp_path / "lv.csv", "lv", np.linspace(0.02, 0.5, 25), {"x1": 4.0})
        settings = dict(unknown={"p2": (-0.2, 0.2), "p4": (-0.2, 0.2)}, epsilon=2e-3)
        path, truth = LV, [0.01, 0.02]
    else:
        data = write_data(tmp_path / "seir.csv", "seir", np.linspace(0.1, 5.0, 50),
                          {"x1": 5.0, "x2": 5.0, "x3": 5.0, "x4": 5.0})
        settings = dict(unknown={"p2": (0.0, 1.0), "p3": (0.0, 1.0)}, epsilon=1e-3)
        path, truth = SEIR, [0.1, 0.4]
    # the same presplit on both (its default depends on the device)
    runs = {device: sbmlgpu.estimate(str(path), "interval", data=str(data), progress=False,
                                     device=device, options={"presplit": 6, "kernel": "multi"},
                                     **settings)
            for device in (gpu_device.index, "cpu")}
    gpu, cpu = runs[gpu_device.index], runs["cpu"]
    assert gpu.metadata["engine"] == "gpu" and cpu.metadata["engine"] == "native"
    for paving in (gpu, cpu):
        assert paving.contains(truth) != "rejected"

    def rows(p):
        table = np.column_stack([p.verdict, p.lower, p.upper])
        return table[np.lexsort(table.T[::-1])]
    np.testing.assert_array_equal(rows(gpu), rows(cpu))
    for key in ("boxes_evaluated", "boxes_feasible", "boxes_rejected", "boxes_bisected"):
        assert gpu.statistics[key] == cpu.statistics[key], key
