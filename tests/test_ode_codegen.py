"""The ode backend's generated CUDA (kernels/ode.cu on sbmlgpu.ode's templates):
specialisation, and nvcc -arch=sm_90 on every shipped model (CI has nvcc and no GPU),
every method, both precisions, events. The core pieces on their own (sparse LU, the
summary kernels, the id table, output sinks): tests/test_core_ode_*.py."""

from __future__ import annotations

import pytest

import sbmlgpu
from sbmlgpu.codegen.compile_check import nvcc_available, nvcc_compile
from sbmlgpu.ode.model import KernelModel
from sbmlgpu.plugins.ode.program import default_outputs, kernel_source
from sbmlgpu.plugins.ode.stiffness import choose_method
from sbmlgpu.views import ode_system

from .ode_helpers import MODELS, load
from .shared_data import SEMANTIC, needs_semantic

needs_nvcc = pytest.mark.skipif(not nvcc_available(), reason="nvcc not found")


def kernel(net, method, precision="double", varied=(), **kw):
    model = KernelModel(ode_system(net), tuple(varied), default_outputs(net))
    return kernel_source(model, method, precision, **kw)


def test_fixed_parameters_are_literals_and_varied_ones_come_from_the_table():
    src = kernel(load("lorenz"), "rk4", varied=("rho",))
    rhs = src.text[src.text.index("void model_rhs"):src.text.index("void model_outputs")]
    assert "p[0]" in rhs and "10.0" in rhs  # rho varied, sigma folded
    assert "28.0" not in rhs
    assert "table[0LL * n + i]" in src.text
    assert src.flops_per_rhs > 0 and src.flops_per_step > 4 * src.flops_per_rhs


def test_float_kernels_use_float_arithmetic():
    src = kernel(load("seir_epidemic"), "dopri5", "float")
    model_part = src.text[src.text.index("void model_x0"):src.text.index("void model_outputs")]
    import re

    literals = re.findall(r"\b\d+\.\d*(?:e[-+]?\d+)?f?\b", model_part)
    assert literals and all(lit.endswith("f") for lit in literals)
    assert "typedef float real_t" in src.text


@needs_nvcc
@pytest.mark.parametrize("method", ["rk4", "dopri5", "rodas4"])
@pytest.mark.parametrize("precision", ["double", "float"])
def test_small_models_compile_for_sm90(method, precision):
    for name in ("lorenz", "seir_epidemic"):
        src = kernel(load(name), method, precision, varied=("beta",) if name != "lorenz"
                     else ("rho",))
        options = ["--use_fast_math"] if precision == "float" else []
        assert nvcc_compile(src.text, "sm_90", options, name=src.name)


@needs_nvcc
@pytest.mark.slow
@pytest.mark.parametrize("path", sorted(MODELS.glob("*.xml")), ids=lambda p: p.stem)
def test_every_shipped_model_compiles_for_sm90_with_its_default_method(path):
    net = sbmlgpu.load(str(path))
    model = KernelModel(ode_system(net), (), default_outputs(net))
    method, _ = choose_method(model, [], 0.0, 100.0)
    src = kernel_source(model, method, "double")
    assert nvcc_compile(src.text, "sm_90", name=src.name)


@needs_nvcc
@needs_semantic
@pytest.mark.parametrize("case", ["00978", "01466", "00072"])
def test_event_kernels_compile_for_sm90(case):
    """00978: priorities, re-triggered pending events, values from trigger time;
    01466: 201 events with random tie-breaking (the Philox stream); 00072: delays."""
    net = sbmlgpu.load(str(SEMANTIC / case / f"{case}-sbml-l3v2.xml"))
    src = kernel(net, "dopri5")
    if case == "01466":
        assert "sbmlgpu_rng_u32" in src.text
    assert nvcc_compile(src.text, "sm_90", name=src.name)

