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
