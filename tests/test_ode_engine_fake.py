"""The GPU engine's host side without a GPU: a fake device that checks every launch's
arguments against the generated kernel's C signature (count and types) and runs the
ode kernel through its host build, so that argument order, buffer sizes, the output
layout and the profiler records of the GPU path are tested in CI."""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest

from .fakes import FakeDevice, FakeKernel, FakeModule, HostBuffer, real_type
from .ode_helpers import load, needs_compiler

C_TYPES = {"long long": np.int64, "int": np.int32, "unsigned long long": np.uint64,
           "float": np.float32, "double": np.float64}


def signatures(source: str) -> dict[str, list[str]]:
    """{kernel name: [parameter C types]} of the extern "C" __global__ functions."""
    out = {}
    for m in re.finditer(r'extern "C" __global__ void(?:\s+__launch_bounds__\([^)]*\))?\s+(\w+)\(([^)]*)\)',
                         source):
        params = []
        for p in m.group(2).split(","):
            p = " ".join(p.replace("__restrict__", "").split())
            params.append("pointer" if "*" in p else p.rsplit(" ", 1)[0].replace("const ", ""))
        out[m.group(1)] = params
    return out


class SignatureCheckedKernel(FakeKernel):
    """Checks each launch's arguments against the kernel's C signature (count and
    types), then runs it: an ode kernel through its host build (the summary kernels
    are not run: only their arguments are checked). The fake device runs core's
    transpose itself."""

    def __init__(self, build: "HostBuild", name: str, log: list):
        super().__init__(name, log=log)
        self.build = build
        self.params = build.signatures[name]

    def run(self, grid, block, args, shared_bytes):
        assert len(args) == len(self.params), (self.name, len(args), self.params)
        real = self.build.real
        for ctype, arg in zip(self.params, args):
            if ctype == "pointer":
                assert isinstance(arg, HostBuffer) or (isinstance(arg, np.uintp) and arg == 0), \
                    (self.name, ctype, type(arg))
            elif ctype == "real_t":
                assert type(arg) is real, (self.name, ctype, type(arg))
            else:
                assert type(arg) is C_TYPES[ctype], (self.name, ctype, type(arg))
        if self.name.startswith("sbmlgpu_ode_") and self.name not in (
                "sbmlgpu_ode_moments", "sbmlgpu_ode_histogram"):
            # the refill kernel: as many lanes as the launch has threads
            lanes = grid[0] * block[0] if self.name.endswith("_refill") else 0
            self.build.run_raw(args, lanes)


class HostBuild:
    """A source as the fake device "compiles" it: its kernels' C signatures and, for
    the ode kernel, its host build, called with the GPU kernel's arguments (the same
    order)."""

    def __init__(self, source: str):
        self.real = real_type(source)
        self.signatures = signatures(source)
        self.kernel = None
        if "sbmlgpu_ode_host" in source or "SBMLGPU_HOST_ENTRY" in source:
            from sbmlgpu.ode.codegen import KernelSource
            from sbmlgpu.plugins.ode.native import host_kernel

            precision = "double" if self.real is np.float64 else "float"
            # a delay() kernel takes the history ring last (its size: the engine's)
            ring = int("ODE_HISTORY_NODES" in source)
            self.kernel = host_kernel(KernelSource("fake.cu", source, "", "", precision,
                                                   0.0, 0.0, 0.0, "none", history_reals=ring))

    def run_raw(self, args, lanes: int = 0):
        """The host build with the launch's arguments; `lanes` > 0: the refill kernel's
        (its queue last), run by the host's schedule of that many lanes."""
        def ptr(a):
            return None if not isinstance(a, HostBuffer) else a.data.ctypes.data_as(ctypes.c_void_p)

        n, table, times, n_times, out, status, steps, *rest = args
        rtol, atol, h0, max_step, dt, max_steps, seed, members, first, *rest = rest
        limits = [int(v) for v in rest if not isinstance(v, HostBuffer)]
        # delay(): the ring; the refill kernel: its queue, last
        buffers = [ptr(v) for v in rest if isinstance(v, HostBuffer)]
        entry, queue = self.kernel._run, ()
        if lanes:
            assert self.kernel._refill is not None and buffers, "a refill launch without its queue"
            assert rest[-1].view(np.uint64, 1)[0] == 0, "the queue must start at 0"
            entry, queue = self.kernel._refill, (lanes,)
        entry(int(n), ptr(table), ptr(times), int(n_times), ptr(out), ptr(status),
              ptr(steps), rtol, atol, h0, max_step, dt, int(max_steps), int(seed),
              ptr(members), int(first), *limits, *buffers, *queue)


def compile_for_host(device, source):
    build = HostBuild(source)
    return FakeModule(build.signatures,
                      lambda name: SignatureCheckedKernel(build, name, device.launches))


@pytest.fixture(scope="module")
def compiler():
    needs_compiler()


def test_signature_parser_reads_the_generated_kernel(compiler):
    from sbmlgpu.ode.model import KernelModel
    from sbmlgpu.plugins.ode.program import kernel_source
    from sbmlgpu.views import ode_system

    net = load("lorenz")
    src = kernel_source(KernelModel(ode_system(net), ("rho",), ("x", "y", "z")), "rk4")
    params = signatures(src.text)["sbmlgpu_ode_rk4"]
    # the common 16 and the limits (steps per output interval, wall time in ns, the
    # table's row of member output counts)
    assert params[:4] == ["long long", "pointer", "pointer", "int"] and len(params) == 19
    assert params[-3:] == ["long long", "long long", "long long"]


@pytest.mark.parametrize("method,precision", [("rk4", "double"), ("dopri5", "float"),
                                              ("rodas4", "double")])
@pytest.mark.parametrize("summary,refill", [(False, True), (True, True), (False, False)])
def test_gpu_engine_path_with_a_fake_device(compiler, method, precision, summary, refill,
                                           monkeypatch):
    from sbmlgpu.ode import engines
    from sbmlgpu.tasks import TimeCourse
    from sbmlgpu.plugins.ode.backend import OdeBackend
    from sbmlgpu.plugins.ode.options import OdeOptions
    from sbmlgpu.profile import Profiler
    from sbmlgpu.schedule import Scheduler

    from .ode_helpers import run_cpu

    net = load("seir_epidemic")
    rng = np.random.default_rng(2)
    params = {"beta": rng.uniform(0.1, 1.0, 700), "gamma": rng.uniform(0.05, 0.5, 700)}
    times = np.linspace(0, 160, 9)
    device = FakeDevice(compile=compile_for_host)
    # a quarter of the blocks the fake GPU would hold: a batch's members outnumber the
    # lanes, so that lanes take a second and third member (at full size every lane
    # of these small batches gets one)
    grid = engines.resident_grid
    monkeypatch.setattr(engines, "resident_grid",
                        lambda b, block, properties, max_lanes=0:
                        max(1, grid(b, block, properties, max_lanes) // 4))
    options = OdeOptions(method=method, precision=precision, pilot_size=64,
                         lane_refill=refill).validate()
    program = OdeBackend().compile(net, options, device)
    profiler = Profiler()
    scheduler = Scheduler(devices=[device], max_batch_items=256, progress=False,
                          profiler=profiler)
    request = TimeCourse(times=times, parameters=params, summary=summary, progress=False)
    result = program.run(request, scheduler, profiler)
    assert result.metadata["engine"] == "gpu"
    assert len(scheduler.last_batches) >= 3
    # rk4 without events runs its tight loop, one member per thread, asked or not
    entry = f"sbmlgpu_ode_{method}" + ("_refill" if refill and method != "rk4" else "")
    launches = [r for r in profiler.records if r.kernel == entry]
    assert launches and all(r.flops > 0 and r.bytes > 0 for r in launches)
    assert len(launches) == sum(1 for r in profiler.records if r.kernel.startswith(
        f"sbmlgpu_ode_{method}"))
    assert result.metadata["lanes"].startswith("refill" if entry.endswith("_refill") else "one")
    if entry.endswith("_refill"):  # fewer lanes than members: lanes took several
        assert any(r.grid[0] * r.block[0] < r.meta["members"] for r in launches)
    if summary:  # the summary kernels are not run by the fake: only their arguments
        assert any(r.kernel == "sbmlgpu_ode_histogram" for r in profiler.records)
        return
    host = run_cpu(net, method, times=times, parameters=params, precision=precision,
                   pilot_size=64)
    assert np.array_equal(result.status, host.status)
    assert np.array_equal(result.data, host.data)
    if method != "rk4":
        assert result.metadata["bundling"] == "bundled by predicted step count"


def test_max_lanes_caps_a_refill_launch_and_changes_no_result(compiler):
    """--max-lanes: every refill launch has at most that many lanes (whole blocks), and
    the members' results are the CPU path's, bit for bit, as with every lane count."""
    from sbmlgpu.plugins.ode.backend import OdeBackend
    from sbmlgpu.plugins.ode.options import OdeOptions
    from sbmlgpu.profile import Profiler
    from sbmlgpu.schedule import Scheduler
    from sbmlgpu.tasks import TimeCourse

    from .ode_helpers import run_cpu

    net = load("seir_epidemic")
    rng = np.random.default_rng(3)
    params = {"beta": rng.uniform(0.1, 1.0, 300), "gamma": rng.uniform(0.05, 0.5, 300)}
    times = np.linspace(0, 160, 9)
    device = FakeDevice(compile=compile_for_host)
    options = OdeOptions(method="rodas4", pilot_size=64, block_size=32, max_lanes=80,
                         bundling=False).validate()
    program = OdeBackend().compile(net, options, device)
    profiler = Profiler()
    result = program.run(TimeCourse(times=times, parameters=params, progress=False),
                         Scheduler(devices=[device], progress=False, profiler=profiler),
                         profiler)
    launches = [r for r in profiler.records if r.kernel == "sbmlgpu_ode_rodas4_refill"]
    assert launches and all(r.grid[0] == 2 and r.block[0] == 32 for r in launches)
    assert {"kernel_registers", "kernel_local_bytes"} <= set(result.metadata)
    host = run_cpu(net, "rodas4", times=times, parameters=params)
    assert np.array_equal(result.status, host.status)
    assert np.array_equal(result.data, host.data)
