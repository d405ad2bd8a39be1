"""The CPU reference simulator on hand-built networks with known solutions."""

import math

import numpy as np
import pytest
import sympy as sp

from sbmlgpu import ir
from sbmlgpu.errors import OptionError
from sbmlgpu.ir import TIME, Delay, sym
from sbmlgpu.reference import compile_model, simulate, unsupported

x, y, z, k = sym("x"), sym("y"), sym("z"), sym("k")


def par(pid, value, constant=False):
    return ir.Parameter(pid, value, constant=constant)


def event(eid, trigger, assignments, **kw):
    return ir.Event(eid, trigger, tuple(ir.EventAssignment(v, m) for v, m in assignments), **kw)


def clock(*events, extra=(), rules=(), x0=0.0):
    """x' = 1 (x(0) = x0) plus the given events and parameters."""
    return ir.Network(
        id="clock",
        parameters=(par("x", x0), *extra),
        rate_rules=(ir.RateRule("x", sp.Integer(1)), *rules),
        events=tuple(events),
    )


# -- continuous dynamics ------------------------------------------------------------

def decay_network(k_value=0.5):
    return ir.Network(
        id="decay",
        compartments=(ir.Compartment("c", 1.0),),
        species=(ir.Species("S", "c", initial_amount=10.0),),
        parameters=(ir.Parameter("k", k_value),),
        reactions=(ir.Reaction("R", (ir.SpeciesReference("S", sp.Integer(1)),), (), (),
                               k * sym("S") * sym("c")),),
    )


def test_decay_matches_the_exponential():
    t = np.linspace(0, 10, 21)
    traj = simulate(decay_network(), t)
    assert traj.ok, traj.message
    got = traj.evaluate(["S"])[:, 0]
    np.testing.assert_allclose(got, 10 * np.exp(-0.5 * t), rtol=1e-6, atol=1e-9)


def test_parameters_override_by_id():
    t = np.linspace(0, 4, 9)
    got = simulate(decay_network(), t, parameters={"k": 1.0}).evaluate(["S"])[:, 0]
    np.testing.assert_allclose(got, 10 * np.exp(-t), rtol=1e-6)
    with pytest.raises(OptionError, match="nope"):
        simulate(decay_network(), t, parameters={"nope": 1.0})


def test_reversible_reaction_relaxes_to_its_equilibrium():
    kf, kr, a0, b0 = 2.0, 0.5, 3.0, 1.0
    net = ir.Network(
        id="ab",
        compartments=(ir.Compartment("c", 1.0),),
        species=(ir.Species("A", "c", initial_amount=a0), ir.Species("B", "c", initial_amount=b0)),
        parameters=(ir.Parameter("kf", kf), ir.Parameter("kr", kr)),
        reactions=(ir.Reaction("R", (ir.SpeciesReference("A", sp.Integer(1)),),
                               (ir.SpeciesReference("B", sp.Integer(1)),), (),
                               sym("kf") * sym("A") - sym("kr") * sym("B"), reversible=True),),
    )
    t = np.linspace(0, 5, 26)
    a = simulate(net, t).evaluate(["A", "B"])
    total = a0 + b0
    a_eq = kr * total / (kf + kr)
    expected_a = a_eq + (a0 - a_eq) * np.exp(-(kf + kr) * t)
    np.testing.assert_allclose(a[:, 0], expected_a, rtol=1e-6)
    np.testing.assert_allclose(a.sum(axis=1), total, rtol=1e-9)


def test_amount_and_concentration_outputs():
    net = ir.Network(
        id="conc",
        compartments=(ir.Compartment("c", 2.0),),
        species=(ir.Species("S", "c", initial_amount=4.0),),
    )
    traj = simulate(net, [0.0, 1.0])
    assert traj.evaluate(["S"], "amount")[0, 0] == pytest.approx(4.0)
    assert traj.evaluate(["S"], "concentration")[0, 0] == pytest.approx(2.0)
    assert traj.evaluate(["S"])[0, 0] == pytest.approx(2.0)  # its SBML value


def test_piecewise_switch_in_the_rates_is_not_stepped_over():
    # x' = 1 until t = 1, then 0: x(t) = min(t, 1)
    net = ir.Network(id="pw", parameters=(par("x", 0.0),),
                     rate_rules=(ir.RateRule("x", sp.Piecewise((1, TIME < 1), (0, True))),))
    t = np.array([0.0, 0.5, 0.99, 1.5, 3.0])
    got = simulate(net, t).evaluate(["x"])[:, 0]
    np.testing.assert_allclose(got, np.minimum(t, 1.0), atol=1e-9)


def test_stiff_system_with_the_default_method():
    # Robertson's problem: stiff; the conservation law holds and y2 stays tiny
    net = ir.Network(
        id="robertson",
        parameters=(par("a", 1.0), par("b", 0.0), par("c", 0.0)),
        rate_rules=(
            ir.RateRule("a", -0.04 * sym("a") + 1e4 * sym("b") * sym("c")),
            ir.RateRule("b", 0.04 * sym("a") - 1e4 * sym("b") * sym("c") - 3e7 * sym("b") ** 2),
            ir.RateRule("c", 3e7 * sym("b") ** 2),
        ),
    )
    t = np.array([0.0, 0.4, 40.0, 4e4])
    traj = simulate(net, t)
    assert traj.ok, traj.message
    v = traj.evaluate(["a", "b", "c"])
    np.testing.assert_allclose(v.sum(axis=1), 1.0, rtol=1e-6)
    # reference values (Hairer & Wanner): a(0.4) = 0.98517, a(40) = 0.71583
    assert v[1, 0] == pytest.approx(0.98517, rel=1e-4)
    assert v[2, 0] == pytest.approx(0.71583, rel=1e-4)


def test_division_by_zero_gives_ieee_values_not_an_exception():
    net = ir.Network(id="inf", parameters=(par("p", 0.0, constant=True), par("q", 0.0)),
                     assignment_rules=(ir.AssignmentRule("q", 1 / sym("p")),))
    traj = simulate(net, [0.0, 1.0])
    assert traj.ok
    assert np.all(np.isinf(traj.evaluate(["q"])))


# -- events ----------------------------------------------------------------------

def test_sawtooth_from_a_resetting_event():
    net = clock(event("reset", x >= 2, [("x", sp.Integer(0))]))
    t = 0.7 * np.arange(14)  # never an even number, so no output sits on a reset
    traj = simulate(net, t)
    np.testing.assert_allclose(traj.evaluate(["x"])[:, 0], np.mod(t, 2.0), atol=1e-9)
    times = [when for when, _ in traj.events]
    np.testing.assert_allclose(times, [2.0, 4.0, 6.0, 8.0], atol=1e-9)


@pytest.mark.parametrize("trigger", [TIME >= 2, TIME > 2])
def test_event_at_an_output_time_is_reported_after_it_fires(trigger):
    net = clock(event("E", trigger, [("y", sp.Integer(10))]), extra=(par("y", 0.0),))
    traj = simulate(net, np.array([0.0, 1.0, 2.0, 3.0]))
    assert traj.evaluate(["y"])[:, 0].tolist() == [0.0, 0.0, 10.0, 10.0]
    assert traj.events == [(2.0, "E")]


def test_a_trigger_that_stays_true_fires_once():
    net = clock(event("E", x > 1, [("y", y + 1)]), extra=(par("y", 0.0),))
    traj = simulate(net, np.linspace(0, 5, 6))
    assert traj.evaluate(["y"])[-1, 0] == 1.0


@pytest.mark.parametrize("initial, fires", [(False, True), (True, False)])
def test_trigger_initial_value(initial, fires):
    net = clock(event("E", TIME >= 0, [("y", sp.Integer(5))], trigger_initial_value=initial),
                extra=(par("y", 0.0),))
    traj = simulate(net, np.array([0.0, 1.0]))
    assert traj.evaluate(["y"])[0, 0] == (5.0 if fires else 0.0)  # at t0, after the event


@pytest.mark.parametrize("trigger_time_values, expected", [(True, 11.0), (False, 11.5)])
def test_delayed_event_with_trigger_or_execution_time_values(trigger_time_values, expected):
    e = event("E", TIME >= 1, [("x", x + 10)], delay=sp.Float(0.5),
              use_values_from_trigger_time=trigger_time_values)
    traj = simulate(clock(e), np.array([0.0, 1.0, 1.25, 1.5, 2.5]))
    got = traj.evaluate(["x"])[:, 0]
    np.testing.assert_allclose(got[:3], [0.0, 1.0, 1.25], atol=1e-9)
    np.testing.assert_allclose(got[3:], [expected, expected + 1.0], atol=1e-9)
    assert traj.events == [(1.5, "E")]


@pytest.mark.parametrize("persistent, count", [(True, 1), (False, 0)])
def test_non_persistent_event_is_cancelled_when_its_trigger_turns_false(persistent, count):
    # s = sin(t) (s' = cos t); s > 0.5 from t = pi/6 to 5 pi/6; the delay of 3 ends after that
    net = ir.Network(
        id="persist",
        parameters=(par("s", 0.0), par("n", 0.0)),
        rate_rules=(ir.RateRule("s", sp.cos(TIME)),),
        events=(event("E", sym("s") > 0.5, [("n", sym("n") + 1)], delay=sp.Integer(3),
                      persistent=persistent),),
    )
    traj = simulate(net, np.linspace(0, 5, 11))
    assert traj.evaluate(["n"])[-1, 0] == count
    if persistent:
        assert traj.events[0][0] == pytest.approx(math.pi / 6 + 3, abs=1e-7)


@pytest.mark.parametrize("p_first, p_second, expected", [(10, 5, 2.0), (5, 10, 1.0)])
def test_priorities_order_simultaneous_events(p_first, p_second, expected):
    # both fire at t = 1; the one executed last decides y
    net = clock(event("A", TIME >= 1, [("y", sp.Integer(1))], priority=sp.Integer(p_first)),
                event("B", TIME >= 1, [("y", sp.Integer(2))], priority=sp.Integer(p_second)),
                extra=(par("y", 0.0),))
    traj = simulate(net, np.array([0.0, 2.0]))
    assert traj.evaluate(["y"])[-1, 0] == expected


@pytest.mark.parametrize("uvftt, expected", [(False, 5.0), (True, 0.0)])
def test_execution_time_values_see_earlier_events_of_the_same_instant(uvftt, expected):
    # A (high priority) sets y = 5; B (low) copies y into z: with execution-time
    # values B sees A's work, with trigger-time values it copies the old y
    net = clock(event("A", TIME >= 1, [("y", sp.Integer(5))], priority=sp.Integer(2)),
                event("B", TIME >= 1, [("z", y)], priority=sp.Integer(1),
                      use_values_from_trigger_time=uvftt),
                extra=(par("y", 0.0), par("z", -1.0)))
    assert simulate(net, np.array([0.0, 2.0])).evaluate(["z"])[-1, 0] == expected


def test_events_triggered_by_an_event_run_in_the_same_instant():
    net = clock(event("A", TIME >= 1, [("y", sp.Integer(1))]),
                event("B", y > 0.5, [("z", sp.Integer(7))]),
                extra=(par("y", 0.0), par("z", 0.0)))
    traj = simulate(net, np.array([0.0, 1.0, 2.0]))
    assert traj.evaluate(["z"])[:, 0].tolist() == [0.0, 7.0, 7.0]
    assert [e for _, e in traj.events] == ["A", "B"]


def test_equal_priorities_are_ordered_by_the_seed():
    net = clock(event("A", TIME >= 1, [("y", sp.Integer(1))], priority=sp.Integer(0)),
                event("B", TIME >= 1, [("y", sp.Integer(2))], priority=sp.Integer(0)),
                extra=(par("y", 0.0),))
    cm = compile_model(net)
    finals = {seed: simulate(cm, np.array([0.0, 2.0]), seed=seed).evaluate(["y"])[-1, 0]
              for seed in range(16)}
    assert set(finals.values()) == {1.0, 2.0}  # both orders occur
    again = simulate(cm, np.array([0.0, 2.0]), seed=3).evaluate(["y"])[-1, 0]
    assert again == finals[3]  # and the seed decides


def test_a_negative_delay_is_a_failure_status():
    net = clock(event("E", TIME >= 1, [("x", sp.Integer(0))], delay=sp.Integer(-1)))
    traj = simulate(net, np.array([0.0, 1.0, 2.0]))
    assert traj.status == "event_error" and "E" in traj.message
    assert np.isnan(traj.evaluate(["x"])[-1, 0])


# -- delay() -----------------------------------------------------------------------

def test_delay_of_a_state_uses_the_initial_value_before_the_start():
    # y = delay(x, 1) with x = t: y = 0 until t = 1, then t - 1
    net = ir.Network(
        id="echo", parameters=(par("x", 0.0), par("y", 0.0)),
        rate_rules=(ir.RateRule("x", sp.Integer(1)),),
        assignment_rules=(ir.AssignmentRule("y", Delay(x, sp.Integer(1))),))
    t = np.linspace(0, 3, 13)
    got = simulate(net, t).evaluate(["y"])[:, 0]
    np.testing.assert_allclose(got, np.maximum(t - 1, 0.0), atol=1e-8)


def test_delay_differential_equation():
    # x' = -x(t - 1), x = 1 for t <= 0: x = 1 - t on [0, 1], 1 - t + (t - 1)^2 / 2 on [1, 2]
    net = ir.Network(id="dde", parameters=(par("x", 1.0),),
                     rate_rules=(ir.RateRule("x", -Delay(x, sp.Integer(1))),))
    t = np.array([0.0, 0.5, 1.0, 1.5, 2.0])
    got = simulate(net, t).evaluate(["x"])[:, 0]
    expected = np.where(t <= 1, 1 - t, 1 - t + (t - 1) ** 2 / 2)
    np.testing.assert_allclose(got, expected, atol=1e-7)


def test_delay_before_the_start_follows_a_time_dependent_initial_assignment():
    # y(0) = sin(t) claimed for the past, constant after: delay(y, 0.5) echoes sin before t=0.5
    net = ir.Network(
        id="past", parameters=(par("y", None), par("e", 0.0)),
        initial_assignments=(ir.InitialAssignment("y", sp.sin(TIME)),),
        assignment_rules=(ir.AssignmentRule("e", Delay(y, sp.Rational(1, 2))),))
    t = np.array([0.0, 0.25, 0.75])
    got = simulate(net, t).evaluate(["e"])[:, 0]
    np.testing.assert_allclose(got, [math.sin(-0.5), math.sin(-0.25), 0.0], atol=1e-9)


# -- what it refuses ------------------------------------------------------------------

def test_unsupported_lists_features_with_ids():
    net = ir.Network(id="alg", parameters=(par("a", 1.0), par("b", None)),
                     algebraic_rules=(ir.AlgebraicRule(sym("a") + sym("b") ** 5 - sym("b") - 3,
                                                       id="rule1"),))
    refused = unsupported(net)
    assert refused and refused[0][0] == "algebraic rule" and refused[0][1] == ("rule1",)
    assert unsupported(decay_network()) == []


def test_bad_arguments_are_option_errors():
    with pytest.raises(OptionError, match="method"):
        simulate(decay_network(), [0, 1], method="Euler")
    with pytest.raises(OptionError, match="times"):
        simulate(decay_network(), [1.0, 0.0])
    with pytest.raises(OptionError, match="kind"):
        simulate(decay_network(), [0, 1]).evaluate(["S"], kind="moles")


def test_an_equality_trigger_fires_where_it_is_crossed():
    net = clock(event("E", sp.Eq(x, sp.Rational(5, 2)), [("y", y + 1)]), extra=(par("y", 0.0),))
    traj = simulate(net, np.array([0.0, 2.0, 3.0, 4.0]))
    assert traj.evaluate(["y"])[:, 0].tolist() == [0.0, 0.0, 1.0, 1.0]
    assert traj.events[0][0] == pytest.approx(2.5, abs=1e-9)


def test_a_switch_that_chatters_fails_cleanly():
    # x' = -1 for x > 0, +1 otherwise: x slides along 0 from t = 1 (no classical solution)
    net = ir.Network(id="slide", parameters=(par("x", 1.0),),
                     rate_rules=(ir.RateRule("x", sp.Piecewise((-1, x > 0), (1, True))),))
    traj = simulate(net, np.array([0.0, 0.5, 2.0]), max_steps=20_000)
    assert traj.status in ("max_steps", "too_many_events") and traj.message
    assert traj.evaluate(["x"])[:2, 0] == pytest.approx([1.0, 0.5])
    assert np.isnan(traj.x[-1, 0])


def test_fast_reaction_holds_its_equilibrium_from_the_start():
    # nothing -> A at rate v (slow); A <-> B fast with kf A - kr B: A/B = kr/kf always,
    # A + B = 1 + v t; at t0 the state is already on the equilibrium
    kf, kr, v = 3.0, 1.0, 0.5
    a, b = sym("A"), sym("B")
    net = ir.Network(
        id="fast",
        compartments=(ir.Compartment("c", 1.0),),
        species=(ir.Species("A", "c", initial_amount=1.0),
                 ir.Species("B", "c", initial_amount=0.0)),
        reactions=(
            ir.Reaction("make", (), (ir.SpeciesReference("A", sp.Integer(1)),), (), sp.Float(v)),
            ir.Reaction("swap", (ir.SpeciesReference("A", sp.Integer(1)),),
                        (ir.SpeciesReference("B", sp.Integer(1)),), (), kf * a - kr * b,
                        reversible=True, fast=True),
        ),
    )
    assert unsupported(net) == []
    t = np.linspace(0, 2, 5)
    got = simulate(net, t).evaluate(["A", "B"])
    total = 1 + v * t
    np.testing.assert_allclose(got[:, 0], total * kr / (kf + kr), rtol=1e-6)
    np.testing.assert_allclose(got[:, 1], total * kf / (kf + kr), rtol=1e-6)


def test_delay_of_a_rate_of_is_zero_before_the_start_and_the_rate_after():
    # S' = -S/10 (S0 = 5); P = delay(rateOf(S), 1): 0 until t = 1 (S was constant
    # before the start), then -S(t - 1)/10. The view resolves rateOf everywhere but
    # inside delay(), where the reference must do it (test suite 01401)
    from dataclasses import replace

    from sbmlgpu.ir import RateOf
    from sbmlgpu.views import ode_system

    net = ir.Network(id="dr", parameters=(par("S", 5.0), par("P", 0.0)),
                     rate_rules=(ir.RateRule("S", -sym("S") / 10),))
    ode = ode_system(net)
    xs = ode.x[ode.state_ids.index("S")]
    ode = replace(ode, values={**ode.values, "P": Delay(RateOf(xs), sp.Integer(1))})
    t = np.array([0.0, 0.5, 1.0, 2.0, 3.0])
    got = simulate(ode, t).evaluate(["P"])[:, 0]
    expected = np.where(t < 1, 0.0, -0.5 * np.exp(-(t - 1) / 10))
    np.testing.assert_allclose(got, expected, atol=1e-8)


def test_math_functions_and_their_ieee_edge_cases():
    q = sym("q")
    exprs = {
        "sec": sp.sec(q),                                  # printed as 1/cos(q)
        "fact": sp.factorial(q),                           # gamma(q + 1)
        "root3": sp.Pow(-q, sp.Rational(1, 3)),            # negative base: NaN, not complex
        "pw": sp.Piecewise((1, q > 10)),                   # no otherwise: NaN
        "mod": sp.Mod(-q, 3),                              # floored, as sympy defines it
        "logz": sp.log(q - 2),                             # log(0) = -inf
        "big": sp.exp(1000 * q),                           # overflow: inf
    }
    net = ir.Network(id="m", parameters=(par("q", 2.0, constant=True),
                                         *(par(name, 0.0) for name in exprs)),
                     assignment_rules=tuple(ir.AssignmentRule(n, e) for n, e in exprs.items()))
    got = dict(zip(exprs, simulate(net, [0.0]).evaluate(list(exprs))[0]))
    assert got["sec"] == pytest.approx(1 / math.cos(2.0))
    assert got["fact"] == pytest.approx(2.0)
    assert math.isnan(got["root3"]) and math.isnan(got["pw"])
    assert got["mod"] == pytest.approx(1.0)
    assert got["logz"] == -math.inf and got["big"] == math.inf


def test_a_state_without_a_value_is_a_nonfinite_status_naming_it():
    net = ir.Network(id="nan", parameters=(par("x", None),),
                     rate_rules=(ir.RateRule("x", -x),))
    traj = simulate(net, np.array([0.0, 1.0]))
    assert traj.status == "nonfinite_state" and "x" in traj.message


def test_a_blow_up_is_an_integrator_failure_near_its_time():
    net = ir.Network(id="blow", parameters=(par("x", 1.0),), rate_rules=(ir.RateRule("x", x**2),))
    traj = simulate(net, np.array([0.0, 0.5, 2.0]))  # x = 1 / (1 - t)
    assert traj.status in ("integrator_failed", "max_steps")
    assert traj.evaluate(["x"])[1, 0] == pytest.approx(2.0, rel=1e-6)
    assert np.isnan(traj.x[2, 0])


def test_generated_code_is_the_kernels_arithmetic_with_truths_read_as_they_are():
    """The reference prints with core's ScalarPrinter: the CUDA printer's operations
    in its order (x**2 is x*x, /3 a division), Python's lazy `and`, and a trigger's
    atoms (b_<i>) used as the truth values they are."""
    net = clock(event("e", sp.And(x > 1, x < 3), [("y", x**2 / 3)]), extra=(par("y", 0.0),))
    model = compile_model(net)
    assert "return array([(x_0*x_0)/3.0], dtype=float)" in model.events[0].values.source
    assert "return [(b_0 and b_1)]" in model.triggers.source
    assert simulate(net, [0.0, 2.0]).evaluate(["y"])[1, 0] == pytest.approx(1 / 3)
