"""distrib draws on a real GPU (`pytest -m gpu` on the GPU machine; skipped elsewhere).

The ssa and ode kernels draw from one sampler text (codegen/templates/distrib.cuh)
with one Philox stream per (seed, member), so the GPU draws what the same kernel
built for the host draws: the initial Poisson draws are integers and must agree
exactly (a last-ulp difference of CUDA's and glibc's log could only flip a rejection
test, which a few members are allowed); the laws hold on the GPU; and distrib cases
of the stochastic suite pass on the GPU."""

from __future__ import annotations

import numpy as np
import pytest

import sbmlgpu
from sbmlgpu.api import run
from sbmlgpu.testsuite.cases import find_cases
from sbmlgpu.testsuite.runner import RunConfig, run_case

from .shared_data import STOCHASTIC, needs_stochastic
from .test_distrib_backends import DEATH, MODEL, _within, document, draw

pytestmark = pytest.mark.gpu


def _x(backend, device, n, seed, text=MODEL):
    return run(sbmlgpu.load(text), backend=backend, times=[0.0, 1.0, 2.0], outputs=["X"],
               n=n, seed=seed, device=device, progress=False)


@pytest.mark.parametrize("backend", ["ssa", "ode"])
def test_gpu_draws_follow_their_laws_and_equal_the_host_builds(backend, gpu_device):
    n = 4000
    gpu = _x(backend, [gpu_device.index], n, seed=11)
    cpu = _x(backend, "cpu", n, seed=11)
    assert gpu.metadata["device"] != cpu.metadata["device"]
    assert gpu.n_failed == 0
    x = gpu.data[:, :, 0]
    _within(x[:, 0], 20, 20)  # X(0) ~ Poisson(20)
    decayed = 20 * np.exp(-1.0)  # at t = 2 the event adds Binomial(50, 0.3)
    _within(x[:, 2], decayed + 15, 2 * decayed + 10.5 + 20 * np.exp(-2.0))
    same = np.mean(gpu.data[:, 0, 0] == cpu.data[:, 0, 0])
    assert same >= 0.999, f"only {same:.4f} of the members drew the host's numbers"


def test_gpu_normal_draws_equal_the_host_build_to_rounding(gpu_device):
    text = document(draw("normal", 5, 2, 1, 8), reactions=DEATH)  # truncated to [1, 8]
    gpu = _x("ode", [gpu_device.index], 2000, seed=3, text=text)
    cpu = _x("ode", "cpu", 2000, seed=3, text=text)
    x = gpu.data[:, 0, 0]
    assert gpu.n_failed == 0 and x.min() >= 1 and x.max() <= 8
    np.testing.assert_allclose(x, cpu.data[:, 0, 0], rtol=1e-12)


@needs_stochastic
@pytest.mark.parametrize("number", ["00042", "00056", "00073", "00089"])
def test_distrib_cases_pass_on_the_gpu(number, gpu_device):
    (case,) = find_cases(STOCHASTIC / number)
    outcome = run_case(case, RunConfig(backend="ode", stochastic_runs=10_000, seed=0))
    assert outcome.status == "pass", outcome.line()
