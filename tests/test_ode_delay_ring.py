"""The delay() history ring in global memory (templates/delay.cuh): no per-thread
array of nodes in the compiled kernel (ptxas's stack frame), each member's slice of
the launch's buffer (members across several blocks of 32 do not disturb each
other), the GPU engine's launch with the ring (a fake device running the host
build), and the batch planner counting the ring per member."""

from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest

from sbmlgpu.codegen.compile_check import nvcc_available, nvcc_path
from sbmlgpu.ode.kernel_source import HISTORY_GROUP
from sbmlgpu.ode.model import KernelModel
from sbmlgpu.plugins.ode.program import default_outputs, kernel_source
from sbmlgpu.results import Status
from sbmlgpu.views import ode_system

from .ode_helpers import apply, ci, needs_compiler, rate_rule_model, run_cpu
from .test_ode_delay import delay, negative_feedback

needs_nvcc = pytest.mark.skipif(not nvcc_available(), reason="nvcc not found")


def lagged_feedback():
    """x' = -delay(x, tau) with the lag a parameter: members of other lags take other
    steps, so their rings fill at other rates."""
    import sbmlgpu

    return sbmlgpu.load(rate_rule_model({"x": (1.0, apply("minus", delay(ci("x"), ci("tau"))))},
                                        {"tau": 1.0}))


def source_of(net, method="dopri5", varied=(), **options):
    return kernel_source(KernelModel(ode_system(net), varied, default_outputs(net)), method,
                         **options)


def stack_frame(text: str, kernel: str) -> int:
    """ptxas's stack frame in bytes of the entry function `kernel` (sm_90)."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory(prefix="sbmlgpu-ring-") as scratch:
        src = Path(scratch) / "kernel.cu"
        src.write_text(text)
        done = subprocess.run([nvcc_path(), "-cubin", "-arch=sm_90", "-Xptxas", "-v", "-o",
                               str(src.with_suffix(".cubin")), str(src)],
                              capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    found = re.search(rf"Function properties for {kernel}\s*\n\s*(\d+) bytes stack frame",
                      done.stdout + done.stderr)
    assert found, (done.stdout + done.stderr)[-4000:]
    return int(found.group(1))


def test_the_ring_size_is_the_kernels():
    """history_reals is what the kernel indexes: nodes x (t, x, dx/dt)."""
    src = source_of(negative_feedback())
    nodes = int(re.search(r"#define ODE_HISTORY_NODES (\d+)", src.text).group(1))
    assert src.history_reals == nodes * (1 + 2 * 1)
    assert f"#define ODE_HISTORY_GROUP {HISTORY_GROUP}" in src.text
    # whole blocks of HISTORY_GROUP members
    assert src.history_buffer_reals(1) == HISTORY_GROUP * src.history_reals
    assert src.history_buffer_reals(33) == 2 * HISTORY_GROUP * src.history_reals
    # the parameters hold where the nodes are, not the nodes
    assert "real_t t[ODE_HISTORY_NODES]" not in src.text
    assert source_of(negative_feedback(), history_nodes=40).history_reals == 40 * 3


def test_a_model_without_delay_has_no_ring():
    import sbmlgpu

    net = sbmlgpu.load(rate_rule_model({"x": (1.0, apply("minus", ci("x")))}))
    src = source_of(net)
    assert src.history_reals == 0 and src.history_buffer_reals(100) == 0
    assert "history" not in src.text.split("sbmlgpu_ode_dopri5(", 1)[1].split(")", 1)[0]


def test_bytes_per_member_counts_the_ring():
    from sbmlgpu.ode.engines import bytes_per_member

    plain = bytes_per_member(2, 11, 3, 8, False)
    assert bytes_per_member(2, 11, 3, 8, False, history_reals=3072) == plain + 3072 * 8


@needs_nvcc
@pytest.mark.parametrize("method", ["dopri5", "rodas4"])
def test_no_history_array_in_the_threads_stack_frame(method):
    """The ring was a per-thread array (a 24,608-byte stack frame here, local memory
    the driver reserves for every resident thread); now the frame is a few words."""
    src = source_of(negative_feedback(), method)
    ring_bytes = src.history_reals * 8
    assert ring_bytes >= 24 * 1024
    assert stack_frame(src.text, src.kernel) < 1024


@pytest.mark.parametrize("method", ["dopri5", "rodas4", "rk4"])
def test_members_across_blocks_of_the_ring_keep_their_own_history(method):
    """70 members (blocks of 32, 32 and 6) of other lags, each as it runs alone: a
    member reading or writing another's slice would change its numbers."""
    needs_compiler()
    net = lagged_feedback()
    taus = np.linspace(0.3, 1.7, 70)
    times = np.linspace(0.0, 4.0, 17)
    together = run_cpu(net, method, times=times, parameters={"tau": taus}, rtol=1e-8,
                       atol=1e-10, dt=0.01)
    assert np.all(together.status == Status.ok)
    for m in (0, 31, 32, 63, 64, 69):
        alone = run_cpu(net, method, times=times, parameters={"tau": taus[m:m + 1]},
                        rtol=1e-8, atol=1e-10, dt=0.01)
        assert np.array_equal(together.data[m], alone.data[0]), m
    # and they differ from member to member (the check above could see a mix-up)
    assert not np.allclose(together.data[0], together.data[69])


def test_each_member_writes_its_own_slice_of_the_ring_in_the_gpus_layout():
    """The host build over a ring filled with NaN: member i's node s, real j at
    history[(i // 32) * 32 * NODES * WIDTH + (s * WIDTH + j) * 32 + i % 32] (what
    GpuEngine allocates the same way): its first node is (t0, x0_i, x'(t0) = -x0_i),
    its nodes' times increase to the end, and the last block's unused lanes stay
    untouched."""
    needs_compiler()
    from sbmlgpu.plugins.ode.native import host_kernel

    net = lagged_feedback()
    src = source_of(net, varied=("x", "tau"))
    n, width = 40, 3
    nodes = src.history_reals // width
    x0 = np.linspace(1.0, 2.0, n)
    ring = np.full(src.history_buffer_reals(n), np.nan)
    times = np.linspace(0.0, 2.0, 5)
    config = dict(rtol=1e-8, atol=1e-10, h0=0.0, max_step=0.0, dt=0.01, max_steps=10**6,
                  seed=0, n=n)
    _, status, _ = host_kernel(src).run(np.vstack([x0, np.full(n, 0.5)]), times, 1, config,
                                        history=ring)
    assert np.all(status == Status.ok)
    blocks = ring.reshape(-1, nodes, width, HISTORY_GROUP)  # block, node, real, lane
    for i in range(n):
        member = blocks[i // HISTORY_GROUP, :, :, i % HISTORY_GROUP]
        assert np.array_equal(member[0], [0.0, x0[i], -x0[i]]), i
        held = member[~np.isnan(member[:, 0])]
        assert len(held) > 2 and np.all(np.diff(held[:, 0]) > 0) and held[-1, 0] == 2.0, i
    assert np.all(np.isnan(blocks[n // HISTORY_GROUP, :, :, n % HISTORY_GROUP:]))


def test_the_gpu_engine_launches_with_the_ring_and_plans_batches_by_it(monkeypatch):
    """The GPU engine's path on a fake device that runs the host build: the launch
    takes the ring last (the signature check counts it), the ring buffer is sized
    for the batch, the planner fits batches to free memory by the ring's bytes (no
    launch runs out of memory on the way), and the numbers are the host engine's."""
    needs_compiler()
    from sbmlgpu.plugins.ode.backend import OdeBackend
    from sbmlgpu.plugins.ode.options import OdeOptions
    from sbmlgpu.schedule import Scheduler
    from sbmlgpu.tasks import TimeCourse

    from .fakes import FakeDevice
    from .test_ode_engine_fake import compile_for_host

    net = lagged_feedback()
    n = 300
    taus = np.random.default_rng(4).uniform(0.3, 1.7, n)
    times = np.linspace(0.0, 4.0, 9)
    ring_bytes = source_of(net, varied=("tau",)).history_reals * 8
    free = 60 * ring_bytes  # ~54 members a batch: the ring is nearly all of a member
    device = FakeDevice(free=free, alloc_limit=free, compile=compile_for_host)
    allocations = []
    alloc = device.alloc
    monkeypatch.setattr(device, "alloc", lambda nbytes: (allocations.append(nbytes),
                                                         alloc(nbytes))[1])
    options = OdeOptions(method="dopri5", pilot_size=32, rtol=1e-8, atol=1e-10).validate()
    program = OdeBackend().compile(net, options, device)
    scheduler = Scheduler(devices=[device], progress=False)
    result = program.run(TimeCourse(times=times, parameters={"tau": taus}, progress=False),
                         scheduler)
    assert result.metadata["engine"] == "gpu"
    batches = scheduler.last_batches
    assert len(batches) >= n // 60
    assert all(not b.out_of_memory_sizes for b in batches), \
        [b.out_of_memory_sizes for b in batches]
    for b in batches:  # each launch's ring: whole blocks of 32 members
        assert -(-b.size // HISTORY_GROUP) * HISTORY_GROUP * ring_bytes in allocations
    host = run_cpu(net, "dopri5", times=times, parameters={"tau": taus}, rtol=1e-8,
                   atol=1e-10)
    assert np.all(result.status == Status.ok)
    assert np.array_equal(result.data, host.data)


def test_the_history_nodes_option_keeps_its_bound():
    from sbmlgpu.errors import OptionError
    from sbmlgpu.ode.delays import MAX_HISTORY_BYTES

    most = MAX_HISTORY_BYTES // 24  # one state: 24 bytes a node
    assert source_of(negative_feedback(), history_nodes=most).history_reals == most * 3
    with pytest.raises(OptionError, match="history-nodes"):
        source_of(negative_feedback(), history_nodes=most + 1)


def test_the_ring_benchmark_runs_on_the_cpu_path(tmp_path, monkeypatch):
    """benchmarks/ode_delay_ring.py (the lead's GPU figures) on the CPU path: every
    row runs, its members are all ok and its batches cover them."""
    needs_compiler()
    import json
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1]))
    from benchmarks import ode_delay_ring

    assert ode_delay_ring.main(["--members", "300", "--models", "negative_feedback",
                                "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "ode_delay_ring.json").read_text())["rows"]
    assert [r["history_nodes"] for r in rows] == ["default", 19114]
    for row in rows:
        assert row["status"] == {"ok": 300} and sum(row["batches"]) == 300
        assert row["ring_bytes_per_member"] == (1024 if row["history_nodes"] == "default"
                                                else 19114) * 24
