"""Discontinuities of the right-hand side in the ode backend (issue 14 point 2): a
piecewise switch of time alone (in a rate or in an assignment rule feeding one) ends
the step before it, so that no stage of a step sees both sides; a switch of the state
is located on the step's extension, as event triggers are. Run as host code (the CPU
path); the kernels with such switches also compile with nvcc -arch=sm_90.

Before this, a stiff system switched on mid-run (the drug additions of PEtab problem
Isensee_JCB2018) drove the step size to underflow: the steps across the switch were
rejected again and again."""

from __future__ import annotations

import csv

import numpy as np
import pytest

import sbmlgpu
from sbmlgpu.codegen.compile_check import nvcc_available, nvcc_compile
from sbmlgpu.ode.model import KernelModel
from sbmlgpu.plugins.ode.program import default_outputs, kernel_source
from sbmlgpu.views import ode_system

from .ode_helpers import apply, ci, cn, needs_compiler, rate_rule_model, run_cpu
from .shared_data import MODELS, needs_models

needs_nvcc = pytest.mark.skipif(not nvcc_available(), reason="nvcc not found")
ISENSEE = MODELS / "petab-benchmark" / "Isensee_JCB2018"

TIMES = np.linspace(0.0, 10.0, 21)
MATH = 'xmlns="http://www.w3.org/1998/Math/MathML"'
TIME = ('<csymbol encoding="text" definitionURL="http://www.sbml.org/sbml/symbols/time">'
        'time</csymbol>')


def _piecewise(value, condition, otherwise) -> str:
    return (f"<piecewise><piece>{value}{condition}</piece>"
            f"<otherwise>{otherwise}</otherwise></piecewise>")


def _drug_model(k: float, level: float, t_add: float) -> str:
    """Isensee's pattern: drug = level * piecewise(0, time - t_add < 0, 1) as an
    assignment rule, and a stiff response y' = k (drug - y)."""
    drug = apply("times", ci("level"),
                 _piecewise(cn(0), apply("lt", apply("minus", TIME, ci("t_add")), cn(0)),
                            cn(1)))
    rate = apply("times", ci("k"), apply("minus", ci("drug"), ci("y")))
    return ('<?xml version="1.0" encoding="UTF-8"?>'
            '<sbml xmlns="http://www.sbml.org/sbml/level3/version2/core" level="3" version="2">'
            '<model id="drug_addition"><listOfParameters>'
            f'<parameter id="k" value="{k}" constant="true"/>'
            f'<parameter id="level" value="{level}" constant="true"/>'
            f'<parameter id="t_add" value="{t_add}" constant="true"/>'
            '<parameter id="drug" constant="false"/>'
            '<parameter id="y" value="0" constant="false"/>'
            '</listOfParameters><listOfRules>'
            f'<assignmentRule variable="drug"><math {MATH}>{drug}</math></assignmentRule>'
            f'<rateRule variable="y"><math {MATH}>{rate}</math></rateRule>'
            '</listOfRules></model></sbml>')


def _drug_response(t, k, level, t_add):
    return np.where(t < t_add, 0.0, level * (1.0 - np.exp(-k * np.clip(t - t_add, 0.0, None))))


def test_a_stiff_response_switched_on_in_time_matches_the_analytic_solution():
    """k = 1e4: every step across the switch was rejected until the step size
    underflowed. The switching time is varied per member (p[...] in the kernel),
    including at t0 and after the end."""
    needs_compiler()
    k, level = 1e4, 3.0
    net = sbmlgpu.load(_drug_model(k, level, 1.0))
    t_add = np.array([4.3, 0.0, 7.77, 2.5, 12.0])
    result = run_cpu(net, "rodas4", times=TIMES, parameters={"t_add": t_add})
    assert list(result.status) == [0] * len(t_add)
    for member, t_switch in enumerate(t_add):
        expected = _drug_response(TIMES, k, level, t_switch)
        assert np.abs(result["y"][member] - expected).max() < 1e-8, t_switch
    assert np.allclose(result["drug"][0], np.where(TIMES < 4.3, 0.0, level))


@pytest.mark.parametrize("method", ["rk4", "dopri5", "rodas4"])
def test_a_ramp_switched_on_in_time_is_integrated_exactly(method):
    """x' = a H(t - t_on): piecewise linear, so each method is exact where no step
    crosses the switch (stepping across it left errors of 1.6e-9 with dopri5 and
    5e-4 with rk4)."""
    needs_compiler()
    rate = apply("times", ci("a"), _piecewise(cn(0), apply("lt", TIME, ci("t_on")), cn(1)))
    net = sbmlgpu.load(rate_rule_model({"x": (0.0, rate)}, {"a": 3.0, "t_on": 4.3}))
    result = run_cpu(net, method, times=TIMES, dt=1e-3)
    assert result.status[0] == 0
    expected = 3.0 * np.clip(TIMES - 4.3, 0.0, None)
    assert np.abs(result["x"][0] - expected).max() < 1e-10


@pytest.mark.parametrize("method,stiffness,tolerance", [
    ("dopri5", 0.0, 1e-6), ("rodas4", 0.0, 1e-6), ("rodas4", 1e4, 1e-8)])
def test_a_switch_of_the_state_is_located_and_matches_the_analytic_solution(
        method, stiffness, tolerance):
    """x' = 1 until x reaches 2.3, then 5 (stiffness 0); or x' = 1 and a stiff
    y' = -k (y - H(x - 2.3)) (stiffness k): the switch depends on the state."""
    needs_compiler()
    switch = _piecewise(cn(0), apply("lt", ci("x"), cn(2.3)), cn(1))
    if stiffness:
        rules = {"x": (0.0, cn(1)),
                 "y": (0.0, apply("times", ci("k"), apply("minus", switch, ci("y"))))}
        net = sbmlgpu.load(rate_rule_model(rules, {"k": stiffness}))
        got = run_cpu(net, method, times=TIMES)
        expected = np.where(TIMES < 2.3, 0.0,
                            1.0 - np.exp(-stiffness * np.clip(TIMES - 2.3, 0.0, None)))
        assert got.status[0] == 0
        assert np.abs(got["y"][0] - expected).max() < tolerance
    else:
        rate = _piecewise(cn(1), apply("lt", ci("x"), cn(2.3)), cn(5))
        net = sbmlgpu.load(rate_rule_model({"x": (0.0, rate)}))
        got = run_cpu(net, method, times=TIMES)
        expected = np.where(TIMES < 2.3, TIMES, 2.3 + 5.0 * (TIMES - 2.3))
        assert got.status[0] == 0
        assert np.abs(got["x"][0] - expected).max() < tolerance * np.abs(expected).max()


def _kernel(net, method, varied=(), precision="double"):
    model = KernelModel(ode_system(net), tuple(varied), default_outputs(net))
    return model, kernel_source(model, method, precision)


def test_only_switches_in_time_alone_add_the_search_before_each_step():
    """Models without such switches keep the kernel they had (no search)."""
    timed, src = _kernel(sbmlgpu.load(_drug_model(1e4, 3.0, 4.3)), "rodas4", ("t_add",))
    assert timed.time_switches == (0,)
    assert "time_switch[1] = { 0 }" in src.text
    state = _piecewise(cn(1), apply("lt", ci("x"), cn(2.3)), cn(5))
    by_state, src = _kernel(sbmlgpu.load(rate_rule_model({"x": (0.0, state)})), "dopri5")
    assert by_state.switches == (0,) and by_state.time_switches == ()
    assert "time_switch" not in src.text


@needs_nvcc
@pytest.mark.parametrize("method", ["rk4", "dopri5", "rodas4"])
@pytest.mark.parametrize("precision", ["double", "float"])
def test_kernels_with_switches_in_time_compile_for_sm90(method, precision):
    _, src = _kernel(sbmlgpu.load(_drug_model(1e4, 3.0, 4.3)), method, ("t_add",), precision)
    options = ["--use_fast_math"] if precision == "float" else []
    assert nvcc_compile(src.text, "sm_90", options, name=src.name)


def _isensee_conditions() -> dict[str, np.ndarray]:
    """Every simulation condition of Isensee_JCB2018 as one member: the nominal
    parameters with the condition's overrides (a number, or a parameter's id)."""
    def table(name):
        with open(ISENSEE / name, newline="") as f:
            return list(csv.DictReader(f, delimiter="\t"))

    nominal = {row["parameterId"]: float(row["nominalValue"])
               for row in table("parameters_Isensee_JCB2018.tsv")}
    conditions = table("experimentalCondition_Isensee_JCB2018.tsv")
    ids = {p.id for p in sbmlgpu.load(str(ISENSEE / "model_Isensee_JCB2018.xml")).parameters}
    columns = sorted((set(nominal) | set(conditions[0])) & ids)
    values = {c: [] for c in columns}
    for condition in conditions:
        for c in columns:
            value = condition.get(c, "")
            value = nominal[c] if value == "" else nominal.get(value, value)
            values[c].append(float(value))
    return {c: np.array(v) for c, v in values.items()}


@needs_models
def test_isensee_every_condition_runs_and_matches_the_reference():
    """Drug additions as piecewise functions of time (51 of the 123 conditions
    underflowed); every one now runs and matches the scipy reference."""
    needs_compiler()
    from sbmlgpu.api import run

    model = str(ISENSEE / "model_Isensee_JCB2018.xml")
    parameters = _isensee_conditions()
    times = np.linspace(0.0, 180.0, 37)
    ode = run(model, "ode", times=times, parameters=parameters, device="cpu", progress=False,
              options={"cpu_engine": "native"})
    assert list(ode.status) == [0] * len(ode.status)
    ref = run(model, "reference", times=times, parameters=parameters, progress=False)
    assert list(ref.status) == [0] * len(ref.status)
    assert list(ode.ids) == list(ref.ids)
    got, expected = ode.data, ref.data
    floor = 1e-3 * np.abs(expected).max(axis=(0, 1))  # where a state is near zero
    assert (np.abs(got - expected) / (np.abs(expected) + floor + 1e-300)).max() < 1e-4


@pytest.mark.parametrize("method", ["rk4", "dopri5", "rodas4"])
def test_a_switch_at_the_last_output_time_ends_the_run_normally(method):
    """A dose that stops at the last output time (PEtab's Fujita_SciSignal2010:
    EGF = piecewise(EGF_0, time <= EGF_end, 0) with EGF_end = 3600 = the last
    measurement): the switch's atom is 0 at t_end; cutting the last step there left a
    step of length zero, reported as step_size_underflow."""
    needs_compiler()
    rate = _piecewise(ci("a"), apply("leq", TIME, ci("t_end")), cn(0))
    net = sbmlgpu.load(rate_rule_model({"x": (0.0, rate)}, {"a": 2.0, "t_end": 10.0}))
    result = run_cpu(net, method, times=TIMES, dt=1e-3)
    assert list(result.status) == [0]
    assert np.abs(result["x"][0] - 2.0 * TIMES).max() < 1e-8
