"""The SSA backend on the CPU: the numpy engine, the compiled kernel on the host, and
what every path must share (Philox streams keyed by realisation, statistics, events,
failures, summaries)."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

import sbmlgpu
from sbmlgpu import ir
from sbmlgpu.tasks import TimeCourse
from sbmlgpu.codegen.compile_check import nvcc_available, nvcc_compile
from sbmlgpu.errors import OptionError
from sbmlgpu.ir import TIME, sym
from sbmlgpu.plugins.ssa import codegen, host
from sbmlgpu.plugins.ssa.backend import SsaBackend
from sbmlgpu.plugins.ssa.codegen import Variant, kernel_source
from sbmlgpu.plugins.ssa.cpu import NumpyEngine
from sbmlgpu.plugins.ssa.expressions import prepare
from sbmlgpu.plugins.ssa.model import build
from sbmlgpu.plugins.ssa.options import SsaOptions
from sbmlgpu.results import Status
from sbmlgpu.schedule import Scheduler

from .test_ssa_model import (decay, dimerisation, immigration_death, one, reaction,
                              small_dimerisation)

needs_cxx = pytest.mark.skipif(not host.available(), reason="no C++ compiler")
VARIANTS = [Variant("register", "full", "direct"), Variant("thin", "sparse", "direct"),
            Variant("fat", "sparse", "optimized"), Variant("register", "full", "optimized")]


def events_model() -> ir.Network:
    """Immigration-death with a time event (X = 50 at t >= 5) and a state event
    (X > 60 resets X to 0)."""
    at_five = ir.Event("at5", sp.Ge(TIME, 5), (ir.EventAssignment("X", one(50)),),
                       trigger_initial_value=False)
    cap = ir.Event("cap", sp.Gt(sym("X"), 60), (ir.EventAssignment("X", one(0)),))
    return immigration_death(alpha=10.0, mu=0.1, events=[at_five, cap])


def run(net, *, n=200, times=None, seed=1, summary=False, **options):
    times = np.linspace(0.0, 10.0, 11) if times is None else times
    return sbmlgpu.run(net, backend="ssa", times=times, n=n, seed=seed, summary=summary,
                       device="cpu", options=options or None, progress=False)


def engines(net, variant, outputs=None, order=None):
    m = build(net)
    exprs = prepare(m, (), outputs or m.default_outputs(), order)
    return exprs, NumpyEngine(exprs, variant), host.HostEngine(
        kernel_source(exprs, variant), variant.precision, len(exprs.outputs))


# -- one stream per realisation ------------------------------------------------------
@needs_cxx
@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: f"{v.layout}-{v.update}-{v.method}")
@pytest.mark.parametrize("which", ["dimerisation", "events"])
def test_numpy_engine_and_compiled_kernel_give_identical_realisations(variant, which):
    net = small_dimerisation() if which == "dimerisation" else events_model()
    order = (3, 1, 0, 2) if which == "dimerisation" and variant.method == "optimized" else None
    exprs, numpy_engine, host_engine = engines(net, variant, order=order)
    times = np.linspace(0, 10.0, 21)
    n = 64
    a = numpy_engine.run(5, 1000, n, np.zeros((0, n)), times)
    b = host_engine.run(5, 1000, n, np.zeros((0, n)), times)
    assert a.firings.sum() > 100 * n  # the realisations really ran
    assert np.array_equal(a.firings, b.firings)
    assert np.array_equal(a.data, b.data)


@pytest.mark.parametrize("engine", ["numpy", pytest.param("compiled", marks=needs_cxx)])
def test_same_seed_same_realisations_whatever_the_batches(engine):
    net = small_dimerisation()
    program = SsaBackend().compile(net, SsaOptions(cpu_engine=engine), None)
    request = TimeCourse(times=np.linspace(0, 10, 6), n=90, seed=42, progress=False)
    whole = program.run(request, Scheduler(devices=[], progress=False), None)
    split = Scheduler(devices=[], max_batch_items=37, progress=False)
    pieces = program.run(request, split, None)
    assert len(split.last_batches) == 3
    assert np.array_equal(whole.data, pieces.data)
    other = program.run(TimeCourse(times=request.times, n=90, seed=43, progress=False), None)
    assert not np.array_equal(whole.data, other.data)
    # member i is realisation i: the first 30 of 90 are the 30 of a smaller run
    fewer = program.run(TimeCourse(times=request.times, n=30, seed=42, progress=False), None)
    assert np.array_equal(fewer.data, whole.data[:30])


def test_layouts_and_updates_give_identical_realisations():
    results = [run(small_dimerisation(), n=40, times=np.linspace(0, 10, 6), layout=layout,
                   update=update, cpu_engine="numpy").data
               for layout, update in [("register", "full"), ("thin", "sparse"), ("fat", "sparse")]]
    assert np.array_equal(results[0], results[1]) and np.array_equal(results[0], results[2])


# -- statistics against exact solutions ---------------------------------------------------
def _z(sample_mean, mean, var, n):
    return np.sqrt(n) * (sample_mean - mean) / np.sqrt(var)


@pytest.mark.parametrize("method", ["direct", "optimized"])
def test_decay_is_binomial(method):
    k, a0, n = 0.5, 100.0, 4000
    times = np.array([0.0, 0.5, 1.0, 2.0, 4.0])
    r = run(decay(k=k, a0=a0), n=n, times=times, method=method, seed=7)
    p = np.exp(-k * times)
    mean, var = a0 * p, a0 * p * (1 - p)
    a = r["A"]
    assert np.all(a[:, 0] == a0)
    z = _z(a.mean(axis=0)[1:], mean[1:], var[1:], n)
    assert np.all(np.abs(z) < 4.5), z
    # sample variance: its sd is about var * sqrt(2 / n) for a near-normal law
    rel = a.var(axis=0, ddof=1)[1:] / var[1:] - 1
    assert np.all(np.abs(rel) < 4.5 * np.sqrt(2 / n) * 1.5), rel
    assert np.all(np.diff(a, axis=1) <= 0)  # decay only ever goes down


def test_immigration_death_is_poisson():
    alpha, mu, n = 10.0, 0.1, 4000
    times = np.array([0.0, 2.0, 5.0, 10.0, 30.0])
    x = run(immigration_death(alpha, mu), n=n, times=times, seed=3)["X"]
    lam = alpha / mu * (1 - np.exp(-mu * times))
    assert np.all(np.abs(_z(x.mean(axis=0)[1:], lam[1:], lam[1:], n)) < 4.5)
    assert np.all(np.abs(x.var(axis=0, ddof=1)[1:] / lam[1:] - 1) < 0.12)


# -- events, rules, outputs ---------------------------------------------------------------
@pytest.mark.parametrize("engine", ["numpy", pytest.param("compiled", marks=needs_cxx)])
def test_events_fire_at_their_time_and_on_state_changes(engine):
    times = np.linspace(0.0, 10.0, 41)  # 5.0 is a sample time
    x = run(events_model(), n=300, times=times, seed=11, cpu_engine=engine)["X"]
    at5 = int(np.flatnonzero(times == 5.0)[0])
    assert np.all(x[:, at5] == 50)  # a sample at the event time shows the new value
    assert not np.all(x[:, at5 - 1] == 50)
    assert x.max() <= 60  # the cap fires on the firing that crosses 60
    assert (x[:, at5 + 1:] < x[:, at5:-1]).any()


def test_a_time_event_before_the_start_fires_at_the_start_when_its_trigger_starts_false():
    late = ir.Event("e", sp.Ge(TIME, -1), (ir.EventAssignment("X", one(7)),),
                    trigger_initial_value=False)
    x = run(immigration_death(events=[late]), n=20, times=np.array([0.0, 0.001]))["X"]
    assert np.all(x[:, 0] == 7)
    early = ir.Event("e", sp.Ge(TIME, -1), (ir.EventAssignment("X", one(7)),),
                     trigger_initial_value=True)
    x = run(immigration_death(events=[early]), n=20, times=np.array([0.0, 0.001]))["X"]
    assert np.all(x[:, 0] == 0)


def test_assignment_rule_is_reported_from_the_state():
    net = decay(rules=[ir.AssignmentRule("y", 2 * sym("A") + 1)])
    net = ir.Network(**{**net.__dict__,
                        "parameters": net.parameters + (ir.Parameter("y", 0.0, constant=False),)})
    r = run(net, n=50)
    assert np.array_equal(r["y"], 2 * r["A"] + 1)


def test_concentration_species_are_reported_as_sbml_values():
    # hasOnlySubstanceUnits false, size 2: the value is amount / 2 and the law reads it so
    r = run(decay(k=0.5, a0=100, size=2.0, hosu=False), n=2000, times=np.array([0.0, 1.0]))
    a = r["A"]
    assert np.all(a[:, 0] == 50.0)
    p = np.exp(-0.25)  # rate k * concentration = 0.25 per molecule
    assert abs(_z(2 * a[:, 1].mean(), 100 * p, 100 * p * (1 - p), 2000)) < 4.5


# -- failures -----------------------------------------------------------------------------
def test_negative_propensity_fails_that_member_with_a_message():
    net = ir.Network(
        id="bad", compartments=(ir.Compartment("c", 1.0),),
        species=(ir.Species("A", "c", initial_amount=3.0, has_only_substance_units=True),),
        parameters=(ir.Parameter("k", 1.0),),
        reactions=(reaction("R", ["A"], [], sym("k") * (sym("A") - 5)),))
    r = run(net, n=5)
    assert np.all(r.status == Status.failed)
    assert "negative" in r.messages[0]
    assert np.all(np.isnan(r["A"]))


def test_max_firings_stops_a_member_and_marks_it():
    r = run(dimerisation(), n=4, times=np.linspace(0, 5, 6), max_firings=100)
    assert np.all(r.status == Status.max_steps)
    assert "max-firings" in r.messages[3]
    assert np.all(np.isnan(r["S1"][:, -1])) and np.all(r["S1"][:, 0] == 10000)


# -- summaries and ensembles --------------------------------------------------------------
def test_summary_equals_the_statistics_of_the_same_realisations():
    times = np.linspace(0, 1, 6)
    full = run(dimerisation(), n=300, times=times, seed=9)
    summ = run(dimerisation(), n=300, times=times, seed=9, summary=True, pilot=64)
    assert summ.data is None
    np.testing.assert_allclose(summ.summary.mean, full.data.mean(axis=0), rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(summ.summary.sd, full.data.std(axis=0, ddof=1), rtol=1e-9,
                               atol=1e-9)
    hist = np.asarray(summ.metadata["histograms"]["counts"])
    assert hist.shape == (6, 3, 66) and np.all(hist.sum(axis=-1) == 300)
    # quantiles from the histogram are within a bin of the exact ones
    width = np.asarray(summ.metadata["histograms"]["width"])
    exact = np.quantile(full.data, 0.5, axis=0)
    assert np.all(np.abs(summ.summary_of("S1")["q50"] - exact[:, 0]) <= width[:, 0] + 1e-9)


def test_varied_parameters_come_from_the_table_one_row_per_member():
    k = np.repeat([0.1, 1.0], 1500)
    r = sbmlgpu.run(decay(a0=100), backend="ssa", times=[0.0, 1.0], parameters={"k": k},
                    seed=2, device="cpu", progress=False)
    a = r["A"][:, 1]
    for value, group in ((0.1, a[:1500]), (1.0, a[1500:])):
        p = np.exp(-value)
        assert abs(_z(group.mean(), 100 * p, 100 * p * (1 - p), 1500)) < 4.5
    # an initial amount can be varied too
    r = sbmlgpu.run(decay(a0=100), backend="ssa", times=[0.0], parameters={"A": [3.0, 4.0]},
                    device="cpu", progress=False)
    assert r["A"][:, 0].tolist() == [3.0, 4.0]


def test_trajectories_can_go_to_a_memory_mapped_file(tmp_path):
    r = run(dimerisation(), n=20, trajectory_dir=str(tmp_path))
    assert (tmp_path / r.metadata["trajectory_file"].split("/")[-1]).is_file()
    assert np.array_equal(np.asarray(r.data), run(dimerisation(), n=20).data)


def test_metadata_reports_the_method_and_the_work():
    r = run(dimerisation(), n=10)
    meta = r.metadata
    assert meta["backend"] == "ssa" and meta["firings"] > 10 * 1000
    assert meta["layout"] == "register" and meta["method"] == "direct"
    assert meta["firings_per_second"] > 0


def test_optimized_method_orders_reactions_by_frequency():
    r = run(dimerisation(), n=10, method="optimized")
    order = r.metadata["reaction_order"]
    assert sorted(order) == ["conversion", "decay", "dimerisation", "dissociation"]
    assert order[-1] == "conversion"  # c4 = 0.04: the rarest


# -- options and generated code -----------------------------------------------------------
def test_bad_options_are_named():
    with pytest.raises(OptionError, match="block-size"):
        SsaOptions(block_size=33).validate()
    with pytest.raises(OptionError, match="layout"):
        SsaOptions(layout="wide").validate()
    with pytest.raises(OptionError, match="seed"):
        run(dimerisation(), n=2, seed=-1)


def test_compiled_engine_without_a_compiler_is_an_option_error(monkeypatch):
    monkeypatch.setattr("sbmlgpu.runtime.host.find_compiler", lambda: None)
    with pytest.raises(OptionError, match="cpu-engine"):
        SsaBackend().compile(dimerisation(), SsaOptions(cpu_engine="compiled"), None)
    program = SsaBackend().compile(dimerisation(), SsaOptions(), None)
    assert program.engine_kind == "numpy"


@pytest.mark.skipif(not nvcc_available(), reason="nvcc not found")
@pytest.mark.parametrize("variant", VARIANTS[:3] + [Variant("register", "full", "direct", "float")],
                         ids=lambda v: f"{v.layout}-{v.method}-{v.precision}")
def test_generated_kernels_compile_for_sm_90(variant):
    m = build(events_model())
    source = kernel_source(prepare(m, ("alpha",), ("X",)), variant)
    assert nvcc_compile(source, "sm_90", ("-O3",), name="ssa").startswith(b"\x7fELF")


@needs_cxx
def test_float_precision_runs_on_the_compiled_engine():
    r = run(decay(k=0.5, a0=100), n=2000, times=np.array([0.0, 1.0]), precision="float")
    p = np.exp(-0.5)
    assert abs(_z(r["A"][:, 1].mean(), 100 * p, 100 * p * (1 - p), 2000)) < 4.5


def test_keep_source_holds_the_default_kernel():
    program = SsaBackend().compile(dimerisation(), SsaOptions(), None)
    (text,) = program.sources.values()  # named after the model: test_ssa_codegen.py
    assert "ssa_trajectories" in text
    assert codegen.PACKAGE == "sbmlgpu.plugins.ssa"
