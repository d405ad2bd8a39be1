"""Clocks in the SSA (plugins/ssa/model.py): a parameter whose rate rule has a
constant rate c is carried exactly, v = c * time + offset, and a trigger on it
fires at its exact crossing time, recomputed whenever an event resets the clock.
The models here count events, so the firing counts at the output times are known
exactly: floor(c * t / threshold)."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

import sbmlgpu
from sbmlgpu import ir
from sbmlgpu.codegen.compile_check import nvcc_available, nvcc_compile
from sbmlgpu.errors import OptionError, UnsupportedModelError
from sbmlgpu.ir import TIME, sym
from sbmlgpu.plugins.ssa import host
from sbmlgpu.plugins.ssa.codegen import Variant, kernel_source
from sbmlgpu.plugins.ssa.cpu import NumpyEngine
from sbmlgpu.plugins.ssa.expressions import prepare
from sbmlgpu.plugins.ssa.model import build
from sbmlgpu.testsuite import RunConfig, find_cases, run_case

from .shared_data import STOCHASTIC, needs_stochastic
from .test_ssa_cpu import VARIANTS
from .test_ssa_model import one, reaction

needs_cxx = pytest.mark.skipif(not host.available(), reason="no C++ compiler")


def clock_model(rate=2.0, trigger=None, rate_math=None, propensity=None) -> ir.Network:
    """A clock `tau` (d tau/dt = c, tau(0) = 0) and an event `tau >= 1` that counts
    in N and resets tau to 0, so it fires at 1/c, 2/c, ...; beside it a birth-death
    process Y, so that the firings interleave with the events."""
    tick = ir.Event("tick", trigger if trigger is not None else sp.Ge(sym("tau"), 1),
                    (ir.EventAssignment("N", sym("N") + 1), ir.EventAssignment("tau", one(0))),
                    trigger_initial_value=False)
    return ir.Network(
        id="clock", compartments=(ir.Compartment("cell", 1.0),),
        species=(ir.Species("Y", "cell", initial_amount=0.0, has_only_substance_units=True),),
        parameters=(ir.Parameter("c", rate), ir.Parameter("tau", 0.0, constant=False),
                    ir.Parameter("N", 0.0, constant=False),
                    ir.Parameter("birth", 20.0), ir.Parameter("death", 0.5)),
        reactions=(reaction("make", [], ["Y"], propensity if propensity is not None
                            else sym("birth")),
                   reaction("lose", ["Y"], [], sym("death") * sym("Y"))),
        rate_rules=(ir.RateRule("tau", rate_math if rate_math is not None else sym("c")),),
        events=(tick,))


def run(net, times, device="cpu", **kw):
    return sbmlgpu.run(net, backend="ssa", times=times, device=device, progress=False,
                       outputs=["N", "tau", "Y"], **kw)


@pytest.mark.parametrize("engine", ["numpy", pytest.param("compiled", marks=needs_cxx)])
@pytest.mark.parametrize("rate", [1.0, 2.0])
def test_clock_events_fire_at_their_exact_times(engine, rate):
    times = np.linspace(0.0, 5.0, 21)  # holds the firing times k / c exactly
    r = run(clock_model(rate), times, n=50, seed=3, options={"cpu_engine": engine})
    assert np.all(r.status == 0)
    expected = np.floor(rate * times)  # a sample at a firing time shows the event
    assert np.array_equal(r["N"], np.broadcast_to(expected, r["N"].shape))
    # the clock's value: c * (t - the last firing), i.e. c t - N
    assert np.allclose(r["tau"], rate * times - expected, atol=1e-12)
    assert r["Y"][:, -1].std() > 0  # the reactions really fired between the events


@pytest.mark.parametrize("engine", ["numpy", pytest.param("compiled", marks=needs_cxx)])
def test_a_varied_clock_rate_moves_each_members_events(engine):
    rates = np.array([0.5, 1.0, 2.0, 4.0, 3.0])
    times = np.concatenate([[0.0], np.linspace(0.26, 5.01, 20)])  # off every firing time
    r = run(clock_model(), times, n=len(rates), seed=1, parameters={"c": rates},
            options={"cpu_engine": engine})
    expected = np.floor(rates[:, None] * times[None, :])
    assert np.array_equal(r["N"], expected)


@pytest.mark.gpu
def test_clock_events_fire_at_their_exact_times_on_the_gpu(gpu_device):
    rates = np.array([0.5, 1.0, 2.0, 4.0] * 64)
    times = np.concatenate([[0.0], np.linspace(0.26, 5.01, 20)])
    gpu = run(clock_model(), times, device=[gpu_device.index], n=rates.size, seed=2,
              parameters={"c": rates})
    assert np.array_equal(gpu["N"], np.floor(rates[:, None] * times[None, :]))
    cpu = run(clock_model(), times, n=rates.size, seed=2, parameters={"c": rates})
    same = np.mean(np.all(gpu.data == cpu.data, axis=(1, 2)))
    assert same >= 0.99, f"only {same:.3f} of the members equal the host build's"


def test_a_varied_rate_that_reverses_the_clock_is_an_option_error():
    with pytest.raises(OptionError, match="c in member 1"):
        run(clock_model(), np.array([0.0, 1.0]), n=2, parameters={"c": [1.0, -1.0]})


@needs_cxx
@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: f"{v.layout}-{v.update}-{v.method}")
def test_numpy_engine_and_compiled_kernel_agree_on_clocks(variant):
    m = build(clock_model(rate=3.0))  # 1/3: thresholds that round
    exprs = prepare(m, (), ("N", "tau", "Y"))
    times = np.linspace(0.0, 4.0, 17)
    n = 32
    a = NumpyEngine(exprs, variant).run(9, 0, n, np.zeros((0, n)), times)
    b = host.HostEngine(kernel_source(exprs, variant), variant.precision, 3).run(
        9, 0, n, np.zeros((0, n)), times)
    assert a.firings.sum() > 10 * n
    assert np.array_equal(a.firings, b.firings)
    assert np.array_equal(a.data, b.data)
    assert a.data[:, -1, 0].tolist() == [12.0] * n  # fired at 1/3, 2/3, ..., 4


def test_the_kernel_recomputes_the_threshold_after_an_event():
    text = kernel_source(prepare(build(clock_model()), ("c",), ("N",)),
                         Variant("register", "full", "direct"))
    assert "    double ssa_T0 = " in text  # not const: events move it
    # recomputed after the assignments in every copy of the event loop
    recomputed = text.count("ssa_T0 = (double)(") - 1
    assert recomputed == text.count("bool ssa_again = true;") >= 2


@pytest.mark.skipif(not nvcc_available(), reason="nvcc not found")
def test_the_clock_kernel_compiles_for_sm_90():
    text = kernel_source(prepare(build(clock_model()), ("c",), ("N", "tau")),
                         Variant("register", "full", "direct"))
    assert nvcc_compile(text, "sm_90", ("-O3",), name="ssa").startswith(b"\x7fELF")


@pytest.mark.parametrize("network, reason, ids", [
    (clock_model(rate_math=sym("Y")), "rate rule", ("tau",)),
    (clock_model(rate_math=TIME), "rate rule", ("tau",)),
    (clock_model(propensity=sym("tau")), "reads a clock", ("make",)),
    (clock_model(trigger=sp.Le(sym("tau"), 1)), "time makes false", ("tick",)),
    (clock_model(rate=-1.0), "time makes false", ("tick",)),
    (clock_model(trigger=sp.Ge(sym("tau") * sym("tau"), 1)), "clock other than", ("tick",)),
])
def test_what_is_not_a_clock_or_not_exact_is_refused_by_name(network, reason, ids):
    with pytest.raises(UnsupportedModelError) as caught:
        build(network)
    message = str(caught.value)
    assert reason in message and all(i in message for i in ids)


def test_other_stochastic_consumers_still_refuse_clocks():
    from sbmlgpu.views import stochastic_system

    with pytest.raises(UnsupportedModelError, match="rate rule"):
        stochastic_system(clock_model())
    view = stochastic_system(clock_model(), clocks=True)
    ((index, rate),) = view.clocks
    assert view.state_ids[index] == "tau" and rate.name.split("@", 1)[1] == "c"


@needs_stochastic
@needs_cxx
@pytest.mark.parametrize("number", ["00041", "00051", "00087"])
def test_distrib_suite_cases_pass_on_the_ssa(number):
    # a clock t (dt/dt = 1) and an event t >= 0.5 that draws X and resets t
    (case,) = find_cases(STOCHASTIC / number)
    outcome = run_case(case, RunConfig(backend="ssa", stochastic_runs=10000, seed=1))
    assert outcome.status == "pass", outcome.line()


@needs_stochastic
@needs_cxx
def test_a_distrib_case_draws_the_same_numbers_on_the_ssa_as_on_the_ode_backend():
    # both key the draws by (seed, member) on their own stream, so events that fire
    # at the same instants, in the same order, draw the very same numbers
    model = sbmlgpu.load(STOCHASTIC / "00042" / "00042-sbml-l3v2.xml")
    times = np.linspace(0.0, 10.0, 11)
    runs = [sbmlgpu.run(model, backend=backend, times=times, n=200, seed=5, device="cpu",
                        outputs=["X"], progress=False) for backend in ("ssa", "ode")]
    ssa, ode = (r["X"] for r in runs)
    assert np.all(runs[0].status == 0) and np.unique(ssa[:, 1:]).size > 100  # really drawn
    np.testing.assert_array_equal(ssa, ode)
