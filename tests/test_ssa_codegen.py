"""The SSA kernel's text (plugins/ssa/codegen.py, kernels/ssa.cu): named after the
model, a table of the SBML ids it uses, each generated line naming its SBML id,
`real_t` temporaries, and no dead or empty blocks."""

from __future__ import annotations

import re

import numpy as np
import pytest

from sbmlgpu import ir
from sbmlgpu.ir import sym
from sbmlgpu.plugins.ssa.backend import SsaBackend
from sbmlgpu.plugins.ssa.codegen import Variant, kernel_source, source_name
from sbmlgpu.plugins.ssa.expressions import prepare
from sbmlgpu.plugins.ssa.model import build
from sbmlgpu.plugins.ssa.options import SsaOptions

from .test_ssa_cpu import VARIANTS, events_model
from .test_ssa_model import MODELS, dimerisation, reaction

ALL_VARIANTS = VARIANTS + [Variant("thin", "full", "optimized", "float")]


def _realisation(text: str) -> str:
    """The body of ssa_realisation: the generated part of the kernel."""
    start = text.index("SBMLGPU_HD int ssa_realisation")
    return text[start:text.index("#ifdef __CUDACC__", start)]


def with_a_reaction_that_changes_nothing() -> ir.Network:
    """A -> 0, plus A -> A (fires, changes no state, so nothing depends on it)."""
    return ir.Network(
        id="idle", compartments=(ir.Compartment("c", 1.0),),
        species=(ir.Species("A", "c", initial_amount=50.0, has_only_substance_units=True),),
        parameters=(ir.Parameter("k", 0.5), ir.Parameter("q", 2.0)),
        reactions=(reaction("R", ["A"], [], sym("k") * sym("A")),
                   reaction("idle", ["A"], ["A"], sym("q") * sym("A"))))


def test_kept_sources_are_named_after_the_model():
    program = SsaBackend().compile(dimerisation(), SsaOptions(cpu_engine="numpy"), None)
    (default,) = program.sources
    assert re.fullmatch(r"ssa_decay_dimerisation_(direct|optimized)_double_[0-9a-f]{12}\.cu",
                        default)
    assert "ssa_trajectories" in program.sources[default]
    program.run(_request(parameters={"c1": np.array([1.0, 2.0])}))
    assert len(program.sources) == 2 and all(n.startswith("ssa_decay_dimerisation_")
                                             for n in program.sources)
    m = build(ir.Network(id="", compartments=(ir.Compartment("c", 1.0),)))
    exprs = prepare(m, (), ())
    assert source_name(exprs, VARIANTS[0], "text").startswith("ssa_model_direct_double_")


def _request(**kw):
    from sbmlgpu.tasks import TimeCourse

    return TimeCourse(times=np.array([0.0, 1.0]), n=2, seed=1, progress=False, **kw)


def test_the_kernel_opens_with_a_table_of_the_sbml_ids_it_uses():
    m = build(events_model())
    order = (1, 0)  # death before birth: the code order differs from the file's
    text = kernel_source(prepare(m, ("alpha",), ("X",), order), VARIANTS[0])
    table = text[:text.index("*/")]
    assert table.startswith("/* ---- SBML ids in this kernel: model imdeath")
    for row in (r"states\s+SSA_X\(0\)\s+X", r"varied\s+ssa_p0\s+alpha\s+\(from the parameter table\)",
                r"literals\s+X\s+= 0\.0\s+\(initial value\)", r"mu\s+= 0\.1\n",
                r"reactions\s+SSA_A\(0\)\s+death\s+\(reaction 1 in the file",
                r"SSA_A\(1\)\s+birth\s+\(reaction 0 in the file", r"outputs\s+output 0\s+X",
                r"events\s+ssa_ev0\s+at5\s+\(time >= ssa_T0\)", r"ssa_ev1\s+cap\s+\(state trigger\)"):
        assert re.search(row, table), row
    assert "alpha  " not in table.split("literals")[1]  # a varied parameter is no literal


@pytest.mark.parametrize("variant", ALL_VARIANTS, ids=lambda v: f"{v.layout}-{v.update}-{v.method}")
def test_every_generated_line_names_its_sbml_id(variant):
    m = build(events_model())
    exprs = prepare(m, ("alpha",), ("X",))
    body = _realisation(kernel_source(exprs, variant))
    propensities = re.findall(r"SSA_A\((\d)\) = .*?; /\* (\w+) \*/", body)
    assert {(int(j), rid) for j, rid in propensities} >= {(0, "birth"), (1, "death")}
    assert re.search(r"const real_t ssa_p0 = ptab\[.*\]; /\* alpha \*/", body)
    assert re.search(r"sink\.put\(k, 0, SSA_X\(0\)\); /\* X \*/", body)
    assert re.search(r"SSA_X\(0\) = .*; /\* X \*/", body)  # the initial state
    assert re.search(r"const real_t ssa_v0 = 50\.0f?; /\* new X \*/", body)  # event at5
    assert re.search(r"SSA_X\(0\) \+= .*; /\* X \*/", body)  # the state change of a firing
    for line in body.splitlines():  # each computed propensity says whose it is
        if re.match(r"\s*(SSA_A\(\d+\) = (?!ssa_new)|const real_t ssa_new =)", line):
            assert re.search(r"/\* (birth|death) \*/$", line), line


def test_temporaries_are_declared_real_t():
    m = build(__import__("sbmlgpu").load(MODELS / "BIOMD0000000035.xml"))
    for variant in (VARIANTS[0], Variant("register", "sparse", "direct", "float")):
        text = kernel_source(prepare(m, (), m.default_outputs()), variant)
        declarations = re.findall(r"const (\w+) \w*cse_\d+ =", text)
        assert declarations and set(declarations) <= {"real_t", "bool"}


@pytest.mark.parametrize("variant", ALL_VARIANTS, ids=lambda v: f"{v.layout}-{v.update}-{v.method}")
def test_no_dead_or_empty_blocks(variant):
    m = build(with_a_reaction_that_changes_nothing())
    body = _realisation(kernel_source(prepare(m, (), m.default_outputs()), variant))
    code = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    assert not re.search(r"\{\s*\}", code)  # no empty block
    assert "ssa_tevent" not in code  # no time events: no code for them
    assert "SBMLGPU_DOUBLE" not in code and "(void)t_out" not in code and "t_out" not in code
    assert ("ssa_dirty" in code) == (variant.update == "sparse")  # read only by sparse updates
    assert "case 1:" not in code  # `idle` changes nothing: the switch has no case for it
    events = _realisation(kernel_source(prepare(build(events_model()), (), ("X",)), variant))
    assert "ssa_tevent" in events  # a time event does get its code
