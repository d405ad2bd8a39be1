"""delay() on a real GPU with the history ring in global memory (`pytest -m gpu` on
the GPU machine; skipped elsewhere).

Before the ring moved out of the thread (templates/delay.cuh), it was local memory,
which the driver reserves for every thread that can be resident: ~270,000 threads on
an H100, so the largest ring (448 KB) asked ~124 GB at launch and failed "out of
memory", and each process running a default delay kernel held 7-18 GB (15 suite
processes on one GPU failed). These tests fail that way without the change."""

from __future__ import annotations

import numpy as np
import pytest

from sbmlgpu.results import Status

from .ode_helpers import needs_compiler
from .shared_data import SEMANTIC, needs_semantic
from .test_ode_delay_ring import lagged_feedback

pytestmark = pytest.mark.gpu

GiB = 1 << 30
#: the delay cases of the semantic suite run in one process (events, delay() in
#: rules, reactions and event assignments, rateOf inside delay())
SUITE_CASES = (937, 938, 939, 981, 982, 1142, 1318, 1401, 1454, 1518, 1534, 1593)


@pytest.fixture(scope="module")
def device(gpu_device):
    return gpu_device


def test_a_200000_member_delay_ensemble_with_the_largest_ring(device):
    """200,000 members (more where the GPU has room for them all) with a 448 KB ring
    each (92 GB in all): batches that fit the GPU's free memory, none running out of
    memory on the way, every member ok and equal to the host build's numbers up to
    rounding; the kernel's thread frame is not the ring."""
    needs_compiler()
    from sbmlgpu.ode.delays import MAX_HISTORY_BYTES
    from sbmlgpu.plugins.ode.backend import OdeBackend
    from sbmlgpu.plugins.ode.options import OdeOptions
    from sbmlgpu.profile import Profiler
    from sbmlgpu.schedule import Scheduler
    from sbmlgpu.tasks import TimeCourse

    from .ode_helpers import run_cpu

    net = lagged_feedback()
    nodes = MAX_HISTORY_BYTES // 24  # one state: t, x, x' in double
    ring = nodes * 3 * 8
    n = max(200_000, int(1.2 * device.free_memory() / ring))  # more than fits at once
    taus = np.random.default_rng(7).uniform(0.3, 1.7, n)
    times = np.linspace(0.0, 5.0, 11)
    options = OdeOptions(method="dopri5", rtol=1e-8, atol=1e-10,
                         history_nodes=nodes).validate()
    program = OdeBackend().compile(net, options, device)
    profiler = Profiler()
    scheduler = Scheduler(devices=[device], progress=False, profiler=profiler)
    result = program.run(TimeCourse(times=times, parameters={"tau": taus}, progress=False),
                         scheduler, profiler)
    assert result.metadata["engine"] == "gpu"
    assert np.all(result.status == Status.ok), np.unique(result.status, return_counts=True)
    batches = scheduler.last_batches
    assert n * ring > device.free_memory()  # so it had to be split ...
    assert len(batches) >= 2 and all(not b.out_of_memory_sizes for b in batches)
    launches = [r for r in profiler.records if r.kernel.startswith("sbmlgpu_ode_dopri5")]
    assert launches and all(r.local_bytes < 4096 for r in launches)  # ... not held per thread
    picks = np.random.default_rng(8).choice(n, 64, replace=False)
    host = run_cpu(net, "dopri5", times=times, parameters={"tau": taus[picks]}, rtol=1e-8,
                   atol=1e-10, history_nodes=nodes)
    # the same source; FMA contraction and libm/libdevice rounding differ, which moves
    # the step-size control and the history's Hermite nodes (at rtol 1e-8 the H100 was
    # 5.8e-7 relative from the host build): within 100 x rtol. A member reading another
    # member's history, or a node of another batch, is off by O(1).
    gap = np.abs(result.data[picks] - host.data) / (1e-8 + 1e-6 * np.abs(host.data))
    assert gap.max() <= 1.0, f"largest gap {gap.max():.3g} x the tolerance"


@needs_semantic
def test_several_delay_models_loaded_at_once_in_one_process(device):
    """The suite's delay cases in one process, each model kept loaded (its program
    and kernel stay), run twice: every case passes, no delay kernel has a thread
    frame the size of its ring, and the GPU's free memory is what it was (a ring in
    local memory held 7-18 GB of it for the process's life)."""
    from sbmlgpu.api import execute, time_course
    from sbmlgpu.testsuite.cases import find_cases
    from sbmlgpu.testsuite.outcome import PASS
    from sbmlgpu.testsuite.semantic import run_semantic

    cases = find_cases(SEMANTIC, set(SUITE_CASES))
    assert len(cases) == len(SUITE_CASES)
    kept, records = [], []

    def on_gpu(network, times, names):
        kept.append(network)  # its compiled program (and kernel) stay loaded
        outcome = execute(network, time_course(times=times, outputs=list(names),
                                               progress=False),
                          "ode", device=[device.index], cache=False)
        result = outcome.result
        assert result.metadata["engine"] == "gpu"
        assert not result.n_failed, result.failures()[:1]
        records.extend(r for r in outcome.profiler.records if r.kernel.startswith("sbmlgpu_ode_"))
        return {name: np.asarray(result[name][0], dtype=float) for name in names}

    free_before = device.free_memory()
    for _ in range(2):
        outcomes = [run_semantic(case, case.settings(), on_gpu) for case in cases]
        assert [o.status for o in outcomes] == [PASS] * len(cases), \
            [(o.case, o.message) for o in outcomes if o.status != PASS]
    assert len(kept) == 2 * len(cases) and records
    assert all(r.local_bytes < 4096 for r in records), \
        sorted({(r.kernel, r.local_bytes) for r in records})
    assert device.free_memory() > free_before - 2 * GiB
