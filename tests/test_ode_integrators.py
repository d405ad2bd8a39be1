"""The ode backend's integrators, run as host code (the same generated kernel source
the GPU runs, compiled with g++): accuracy against the CPU reference and exact
solutions, order of convergence, dense output, step counting, status codes."""

from __future__ import annotations

import numpy as np
import pytest

import sbmlgpu
from sbmlgpu.results import Status

from .ode_helpers import apply, ci, cn, load, needs_compiler, rate_rule_model, reference, run_cpu

pytestmark = pytest.mark.usefixtures("compiler")


@pytest.fixture(scope="module")
def compiler():
    needs_compiler()


def oscillator():
    """x' = y, y' = -x; x(0) = 1, y(0) = 0: x = cos t, y = -sin t."""
    return sbmlgpu.load(rate_rule_model({"x": (1.0, ci("y")), "y": (0.0, apply("minus", ci("x")))}))


def robertson():
    """Robertson's stiff chemical kinetics (Hairer & Wanner II, sec. IV.1)."""
    k1, k2, k3 = cn(0.04), cn(3e7), cn(1e4)
    y1, y2, y3 = ci("y1"), ci("y2"), ci("y3")
    r1 = apply("times", k1, y1)
    r2 = apply("times", k2, y2, y2)
    r3 = apply("times", k3, y2, y3)
    return sbmlgpu.load(rate_rule_model({
        "y1": (1.0, apply("plus", apply("minus", r1), r3)),
        "y2": (0.0, apply("minus", apply("minus", r1, r3), r2)),
        "y3": (0.0, r2),
    }))


# -- against the CPU reference, on the models we ship ------------------------------
CASES = [("lorenz", 1.0), ("seir_epidemic", 160.0), ("lotka_volterra", 20.0),
         ("seir_linear", 20.0), ("BIOMD0000000033", 100.0), ("BIOMD0000000201", 100.0),
         ("BIOMD0000000035", 50.0)]


@pytest.mark.parametrize("method", ["dopri5", "rodas4"])
@pytest.mark.parametrize("name,end", CASES)
def test_adaptive_methods_match_the_reference(name, end, method):
    net = load(name)
    times = np.linspace(0, end, 21)
    result = run_cpu(net, method, times=times, rtol=1e-10, atol=1e-13)
    assert result.ok.all(), result.failures()
    expected = reference(net, times, ids=result.ids)
    scale = np.abs(expected).max(axis=0) + 1e-12
    error = np.abs(result.data[0] - expected) / scale
    assert error.max() < 1e-6, f"{name} {method}: {error.max():.2e}"


@pytest.mark.parametrize("name,end", [("lorenz", 1.0), ("seir_epidemic", 160.0),
                                      ("BIOMD0000000201", 20.0)])
def test_rk4_matches_the_reference(name, end):
    net = load(name)
    times = np.linspace(0, end, 11)
    result = run_cpu(net, "rk4", times=times, dt=1e-3)
    expected = reference(net, times, ids=result.ids)
    scale = np.abs(expected).max(axis=0) + 1e-12
    assert (np.abs(result.data[0] - expected) / scale).max() < 1e-6


# -- order and exactness ------------------------------------------------------------
def test_rk4_is_fourth_order_and_steps_exactly_onto_output_times():
    net = oscillator()
    times = np.array([0.0, 0.35, 1.0, 2.0])  # 0.35 is no multiple of dt
    errors = []
    for dt in (0.1, 0.05):
        result = run_cpu(net, "rk4", times=times, dt=dt)
        x = result["x"][0]
        errors.append(np.abs(x - np.cos(times)).max())
        # ceil(interval/dt) steps per interval: 0.35 -> 4 (dt 0.1) or 7 (dt 0.05)
        expected_steps = sum(int(np.ceil(round(d / dt, 9))) for d in np.diff(times))
        assert result.metadata["steps_max"] == expected_steps
    ratio = errors[0] / errors[1]
    assert 12 < ratio < 20, f"error ratio {ratio} for halving dt (16 for order 4)"


def test_dopri5_dense_output_is_accurate_and_does_not_add_steps():
    net = oscillator()
    few = run_cpu(net, "dopri5", times=np.array([0.0, 10.0]), rtol=1e-9, atol=1e-12)
    many = run_cpu(net, "dopri5", times=np.linspace(0, 10, 1001), rtol=1e-9, atol=1e-12)
    # output times inside steps come from the continuous extension: the same steps
    assert few.metadata["steps_max"] == many.metadata["steps_max"]
    t = many.times
    assert np.abs(many["x"][0] - np.cos(t)).max() < 1e-7
    assert np.abs(many["y"][0] + np.sin(t)).max() < 1e-7


def test_rodas4_dense_output_and_stiff_accuracy():
    net = robertson()
    times = np.array([0.0, 0.4, 4.0, 40.0, 400.0])
    result = run_cpu(net, "rodas4", times=times, rtol=1e-8, atol=1e-14)
    assert result.ok.all()
    expected = reference(net, times, ids=result.ids, rtol=1e-12, atol=1e-20)
    rel = np.abs(result.data[0] - expected) / (np.abs(expected) + 1e-12)
    assert rel[:, [0, 2]].max() < 1e-5  # y1, y3
    assert rel[1:, 1].max() < 1e-4  # y2 ~ 1e-5 in size


def test_rodas4_fd_jacobian_agrees_with_analytic():
    net = load("seir_epidemic")
    times = np.linspace(0, 160, 9)
    analytic = run_cpu(net, "rodas4", times=times, jacobian="analytic")
    fd = run_cpu(net, "rodas4", times=times, jacobian="fd")
    assert analytic.metadata["jacobian"] == "analytic" and fd.metadata["jacobian"] == "fd"
    assert np.allclose(analytic.data, fd.data, rtol=1e-6, atol=1e-6)


def test_auto_method_picks_by_stiffness():
    assert run_cpu(robertson(), "auto", times=[0, 400.0]).metadata["method"] == "rodas4"
    assert run_cpu(load("lorenz"), "auto", times=[0, 1.0]).metadata["method"] == "dopri5"


def test_auto_method_probes_the_ensembles_own_constant_values():
    """A column that is one value for every member becomes a literal of the kernel;
    the stiffness check must follow the trajectory with that value, not the SBML one:
    x' = -k y x + c, y' = a, y(0) = 0 (so not stiff at t0) with a = 0 in the file (y
    stays 0: never stiff) and a = 1 in the ensemble (k y reaches 1e6: stiff)."""
    net = sbmlgpu.load(rate_rule_model(
        {"x": (1.0, apply("plus", apply("times", apply("minus", ci("k")), ci("y"), ci("x")),
                          ci("c"))),
         "y": (0.0, ci("a"))},
        {"k": 1e5, "a": 0.0, "c": 0.0}))
    times = [0.0, 10.0]
    nominal = run_cpu(net, "auto", times=times, parameters={"c": [0.0, 0.1]})
    assert nominal.metadata["method"] == "dopri5", nominal.metadata["method_reason"]
    stiff = run_cpu(net, "auto", times=times, parameters={"a": [1.0, 1.0], "c": [0.0, 0.1]})
    assert stiff.metadata["method"] == "rodas4", stiff.metadata["method_reason"]
    assert stiff.ok.all()


# -- status codes -----------------------------------------------------------------
def blow_up():
    """x' = x^2, x(0) = 1: x = 1/(1 - t), infinite at t = 1."""
    return sbmlgpu.load(rate_rule_model({"x": (1.0, apply("times", ci("x"), ci("x")))}))


def test_status_max_steps_and_nan_after_failure():
    net = robertson()
    result = run_cpu(net, "dopri5", times=np.linspace(0, 100, 11), max_steps=50)
    assert result.status[0] == Status.max_steps
    assert np.isnan(result.data[0, -1]).all()
    assert np.isfinite(result.data[0, 0]).all()


def test_status_blow_up():
    times = np.linspace(0, 2, 5)
    rk4 = run_cpu(blow_up(), "rk4", times=times, dt=1e-2)
    assert rk4.status[0] == Status.non_finite
    assert np.isfinite(rk4.data[0, 1]).all() and np.isnan(rk4.data[0, -1]).all()
    adaptive = run_cpu(blow_up(), "dopri5", times=times)
    assert adaptive.status[0] in (Status.step_size_underflow, Status.non_finite, Status.max_steps)
    assert np.isnan(adaptive.data[0, -1]).all()
    before = adaptive.data[0, 1, 0]  # t = 0.5: x = 2
    assert abs(before - 2.0) < 1e-6


def test_non_finite_initial_state():
    net = sbmlgpu.load(rate_rule_model({"x": (1.0, cn(0))}))
    result = run_cpu(net, "dopri5", times=[0, 1], parameters={"x": [1.0, float("nan")]})
    assert list(result.status) == [Status.ok, Status.non_finite]


def test_float32_agrees_with_float64():
    net = load("seir_epidemic")
    times = np.linspace(0, 160, 17)
    double = run_cpu(net, "dopri5", times=times)
    single = run_cpu(net, "dopri5", times=times, precision="float")
    assert single.metadata["rtol"] == 1e-5  # the float default
    scale = np.abs(double.data).max(axis=1, keepdims=True)
    assert (np.abs(single.data - double.data) / scale).max() < 1e-3
