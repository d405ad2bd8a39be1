"""What keeps large ode kernels quick to compile (issue 13, "Compiles").

Compile times themselves are measured by benchmarks/ode_compile.py, not here. These
tests check the structure that makes them small: a large sparse LU runs as loops over
index tables (sbmlgpu.ode.sparse_lu.LuTables) with the same numbers as the
straight-line code, loops of large models are not unrolled, the generated source
grows linearly with the model, and a large model's kernel compiles with nvcc (sm_90)
and as host C++.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import sbmlgpu
from sbmlgpu.codegen.compile_check import nvcc_available, nvcc_compile
from sbmlgpu.ode import codegen, sparse_lu
from sbmlgpu.ode.model import KernelModel
from sbmlgpu.plugins.ode.program import kernel_source
from sbmlgpu.views import ode_system

from .ode_helpers import apply, ci, cn, needs_compiler, rate_rule_model

needs_nvcc = pytest.mark.skipif(not nvcc_available(), reason="nvcc not found")


def ring(n: int):
    """n states on a ring, each driven by its neighbours (mass action and a
    saturating term): a sparse Jacobian whose LU has fill-in, like a reaction network."""
    rules = {}
    for i in range(n):
        me, right, far = ci(f"x{i}"), ci(f"x{(i + 1) % n}"), ci(f"x{(i + 7) % n}")
        rate = apply("minus",
                     apply("plus", apply("times", ci("k1"), right),
                           apply("divide", apply("times", ci("k2"), far),
                                 apply("plus", cn(1), far))),
                     apply("times", ci("k3"), me, right))
        rules[f"x{i}"] = (1.0 + 0.01 * i, rate)
    return sbmlgpu.load(rate_rule_model(rules, {"k1": 0.5, "k2": 2.0, "k3": 0.3}))


def kernel_model(net, varied=("k1",)):
    ode = ode_system(net)
    return KernelModel(ode, tuple(varied), tuple(ode.state_ids[:3]))


def test_large_lu_runs_as_loops_over_tables():
    model = kernel_model(ring(150))
    plan = sparse_lu.plan(sparse_lu.jacobian_pattern(model.jacobian), model.n_states)
    assert sparse_lu.statement_count(plan) == len(sparse_lu.lu_statements(plan))
    text = kernel_source(model, "rodas4").text
    assert sparse_lu.statement_count(plan) > sparse_lu.STRAIGHT_LINE_MAX
    assert "ODE_LU(update_entry)" in text and "ode_lu_update_entry_device" in text
    # no straight-line elimination statement is left in the source
    assert not re.search(r"A\[\d+\] -= A\[\d+\] \* A\[\d+\];", text)


def test_tables_visit_entries_as_the_straight_line_code():
    model = kernel_model(ring(20))
    plan = sparse_lu.plan(sparse_lu.jacobian_pattern(model.jacobian), model.n_states)
    tables = sparse_lu.tables(plan)
    updates = [line for line in sparse_lu.lu_statements(plan) if "-=" in line]
    assert len(updates) == len(tables.update_entry) > 0
    assert [int(u[2:u.index("]")]) for u in updates] == list(tables.update_entry)
    assert sum(tables.lower_count) == len(tables.lower_entry) == len(tables.lower_row)
    assert sum(tables.upper_count) == len(tables.upper_entry) == len(tables.upper_col)


def _host_run(model, table):
    from sbmlgpu.plugins.ode.native import host_kernel

    kernel = host_kernel(kernel_source(model, "rodas4"))
    times = np.linspace(0.0, 5.0, 6)
    config = {"rtol": 1e-8, "atol": 1e-10, "h0": 0.0, "max_step": 0.0, "dt": 0.0,
              "max_steps": 100000, "seed": 0}
    return kernel.run(table, times, len(model.outputs), config)


def test_table_lu_gives_the_numbers_of_the_straight_line_lu(monkeypatch):
    needs_compiler()
    model = kernel_model(ring(24))
    table = np.array([[0.2, 0.5, 1.5, 3.0]])
    monkeypatch.setattr(sparse_lu, "STRAIGHT_LINE_MAX", 0)
    assert "ODE_LU(" in kernel_source(model, "rodas4").text
    loops = _host_run(model, table)
    monkeypatch.setattr(sparse_lu, "STRAIGHT_LINE_MAX", 10**9)
    assert "ODE_LU(" not in kernel_source(model, "rodas4").text
    straight = _host_run(model, table)
    assert np.all(loops[1] == 0) and np.all(straight[1] == 0)  # every member ok
    np.testing.assert_array_equal(loops[0], straight[0])  # bit for bit
    np.testing.assert_array_equal(loops[2], straight[2])  # same steps


def test_loops_of_large_models_are_not_unrolled():
    large = kernel_source(kernel_model(ring(codegen.INLINE_MODEL_MAX + 8)), "rodas4").text
    small = kernel_source(kernel_model(ring(10)), "rodas4").text
    assert codegen.NO_UNROLL in large
    assert codegen.NO_UNROLL not in small and "#pragma unroll\n" in small


@pytest.mark.parametrize("method", ["rodas4", "dopri5"])
def test_generated_source_grows_linearly_with_the_model(method, monkeypatch):
    monkeypatch.setattr(sparse_lu, "STRAIGHT_LINE_MAX", 0)  # the large models' LU at every size
    sizes = (60, 120, 240)
    lengths = [len(kernel_source(kernel_model(ring(n)), method).text) for n in sizes]
    # per added state the source grows by about the same amount (linear), not by an
    # amount that grows with the size (quadratic: x4 per doubling)
    first, second = lengths[1] - lengths[0], lengths[2] - lengths[1]
    assert 1.5 * first <= second <= 2.6 * first, lengths


@needs_nvcc
def test_a_large_models_kernel_compiles_with_nvcc():
    source = kernel_source(kernel_model(ring(150)), "rodas4")
    assert "ODE_LU(" in source.text
    cubin = nvcc_compile(source.text, arch="sm_90", name=source.name)
    assert cubin.startswith(b"\x7fELF")


def test_a_large_models_kernel_builds_for_the_host():
    needs_compiler()
    from sbmlgpu.plugins.ode.native import host_kernel

    model = kernel_model(ring(150))
    kernel = host_kernel(kernel_source(model, "rodas4"))
    out, status, _ = kernel.run(np.array([[0.5, 0.7]]), np.array([0.0, 1.0]), 3,
                                {"rtol": 1e-6, "atol": 1e-9, "h0": 0.0, "max_step": 0.0,
                                 "dt": 0.0, "max_steps": 100000, "seed": 0})
    assert np.all(status == 0) and np.all(np.isfinite(out))


# -- cached by structure: fixed parameters of large models are read at launch -------------
def _ensemble_model(net, k2: float):
    """The kernel model of an ensemble that varies k1 and holds k2 at `k2`."""
    return KernelModel(ode_system(net), ("k1",), tuple(ode_system(net).state_ids[:3]),
                       {"k2": k2})


def test_a_large_models_source_does_not_depend_on_fixed_values():
    from sbmlgpu.runtime import host

    net = ring(codegen.LITERALS_MAX_STATES + 8)
    a, b = (kernel_source(_ensemble_model(net, v), "rodas4") for v in (2.0, 3.25))
    assert a.text == b.text and a.name == b.name
    assert a.fixed_values != b.fixed_values and 3.25 in b.fixed_values
    assert host.cache_key(a.text, ("-O2",), "g++") == host.cache_key(b.text, ("-O2",), "g++")
    assert "(value given at launch)" in a.text and "times[n_times + " in a.text


@needs_nvcc
def test_the_compile_cache_key_does_not_change_with_fixed_values(tmp_path):
    from sbmlgpu.runtime.cache import CompileCache

    net = ring(codegen.LITERALS_MAX_STATES + 8)
    cache = CompileCache(tmp_path)
    keys = {cache.key(kernel_source(_ensemble_model(net, v), "dopri5").text, "sm_90")
            for v in (2.0, 3.25, 1e-3)}
    assert len(keys) == 1


def test_a_small_models_fixed_parameters_stay_literals():
    net = ring(10)
    a, b = (kernel_source(_ensemble_model(net, v), "rodas4") for v in (2.0, 3.25))
    assert a.text != b.text and a.fixed_values == b.fixed_values == ()
    assert "3.25" in b.text


def test_fixed_values_at_launch_give_the_numbers_of_literals():
    needs_compiler()
    from sbmlgpu.ode.codegen import generate
    from sbmlgpu.plugins.ode.native import host_kernel
    from sbmlgpu.plugins.ode.program import KERNEL

    model = _ensemble_model(ring(24), 3.25)
    table = np.array([[0.2, 0.5, 1.5]])
    times = np.linspace(0.0, 5.0, 6)
    config = {"rtol": 1e-8, "atol": 1e-10, "h0": 0.0, "max_step": 0.0, "dt": 0.0,
              "max_steps": 100000, "seed": 0}
    runs = {}
    for fixed in ("literals", "launch"):
        source = generate(model, "rodas4", template=KERNEL, fixed=fixed)
        assert bool(source.fixed_values) == (fixed == "launch")
        runs[fixed] = host_kernel(source).run(table, times, len(model.outputs), config)
    assert np.all(runs["launch"][1] == 0)
    for got, want in zip(runs["launch"], runs["literals"]):
        np.testing.assert_array_equal(got, want)


def test_a_second_run_with_other_fixed_values_reuses_the_kernel():
    needs_compiler()
    from sbmlgpu.api import run

    net = ring(codegen.LITERALS_MAX_STATES + 8)
    names, results = set(), []
    for k2 in (2.0, 3.0):
        result = run(net, "ode", times=[0.0, 1.0, 2.0],
                     parameters={"k1": [0.4, 0.6], "k2": [k2, k2]},
                     options={"cpu_engine": "native", "method": "dopri5"}, device="cpu",
                     progress=False)
        names.add(result.metadata["kernel"])
        results.append(result.data)
    assert len(names) == 1  # one source, one host build
    assert not np.array_equal(results[0], results[1])  # and the values did arrive


# -- compiled while the method check runs ---------------------------------------------------
def test_a_large_models_kernel_is_built_while_the_method_check_runs(monkeypatch, tmp_path):
    needs_compiler()
    monkeypatch.setenv("SBMLGPU_CACHE_DIR", str(tmp_path))  # an empty cache: one build
    import time

    import sbmlgpu.plugins.ode.stiffness as stiffness
    from sbmlgpu.api import run
    from sbmlgpu.runtime import host

    def libraries():
        return set(host.cache_directory().glob("*.so")) if host.cache_directory().is_dir() \
            else set()

    before = libraries()
    seen = []

    def slow_check(model, members, t0, span, **screen):
        # a check that takes as long as the build: the library must appear meanwhile
        deadline = time.monotonic() + 300
        while not (libraries() - before) and time.monotonic() < deadline:
            time.sleep(0.05)
        seen.append(bool(libraries() - before))
        return "rodas4", "chosen by the test"

    monkeypatch.setattr(stiffness, "choose_method", slow_check)  # (program imports it per run)
    net = ring(codegen.INLINE_MODEL_MAX + 4)
    result = run(net, "ode", times=[0.0, 1.0], parameters={"k1": [0.4, 0.6], "k3": [0.31, 0.2]},
                 options={"cpu_engine": "native", "method": "auto"}, device="cpu",
                 progress=False)
    assert seen == [True]  # built during the check, before the run asked for it
    assert result.metadata["method"] == "rodas4" and result.ok.all()
    assert len(libraries() - before) == 1  # and the run used that build


def test_the_gpu_engine_passes_the_fixed_values_at_launch():
    """The GPU path on a fake device that runs the kernel's host build with the very
    arguments of each launch: the uploaded times must carry the fixed values."""
    needs_compiler()
    from sbmlgpu.plugins.ode.backend import OdeBackend
    from sbmlgpu.plugins.ode.options import OdeOptions
    from sbmlgpu.schedule import Scheduler
    from sbmlgpu.tasks import TimeCourse

    from .fakes import FakeDevice
    from .ode_helpers import run_cpu
    from .test_ode_engine_fake import compile_for_host

    net = ring(codegen.LITERALS_MAX_STATES + 4)
    params = {"k1": np.linspace(0.3, 0.7, 40), "k2": np.full(40, 3.5)}
    times = np.linspace(0.0, 2.0, 5)
    device = FakeDevice(compile=compile_for_host)
    options = OdeOptions(method="dopri5", pilot_size=32).validate()
    program = OdeBackend().compile(net, options, device)
    scheduler = Scheduler(devices=[device], max_batch_items=16, progress=False)
    result = program.run(TimeCourse(times=times, parameters=params, progress=False), scheduler)
    assert result.metadata["engine"] == "gpu"
    assert "(value given at launch)" in next(iter(program.sources.values()))
    host = run_cpu(net, "dopri5", times=times, parameters=params, pilot_size=32)
    assert np.all(result.status == 0)
    np.testing.assert_array_equal(result.data, host.data)


@pytest.mark.parametrize("name", ["lorenz", "BIOMD0000000035", "BIOMD0000000088"])
def test_the_jacobian_is_sympys_matrix_jacobian(name):
    """model.jacobian differentiates only where a state occurs (fast for large
    models); it must be exactly the matrix sympy's Matrix.jacobian gives."""
    import sympy as sp

    from .ode_helpers import load

    ode = ode_system(load(name))
    model = KernelModel(ode, (), tuple(ode.state_ids[:1]))
    full = sp.Matrix(model.rhs).jacobian(sp.Matrix(model.x))
    assert model.jacobian == full  # the same entries, zeros included
