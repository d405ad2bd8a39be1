"""delay() in the ode backend's kernel (sbmlgpu.ode.delays, templates/delay.cuh): the
member's history of Hermite nodes, on the native CPU path (the host build of the
kernel) against the analytic solution and the CPU reference; the ring's overflow
status; the kernels compile for sm_90; what stays refused."""

from __future__ import annotations

import numpy as np
import pytest

import sbmlgpu
from sbmlgpu.codegen.compile_check import nvcc_available, nvcc_compile
from sbmlgpu.ode.model import KernelModel
from sbmlgpu.plugins.ode.program import default_outputs, kernel_source
from sbmlgpu.results import Status
from sbmlgpu.views import ode_system

from .ode_helpers import apply, ci, cn, needs_compiler, rate_rule_model, reference, run_cpu
from .shared_data import SEMANTIC, needs_semantic

needs_nvcc = pytest.mark.skipif(not nvcc_available(), reason="nvcc not found")


def delay(e: str, lag: str) -> str:
    return ('<apply><csymbol encoding="text" '
            'definitionURL="http://www.sbml.org/sbml/symbols/delay">delay</csymbol>'
            f'{e}{lag}</apply>')


def negative_feedback():
    """x' = -delay(x, 1), x = 1 before and at the start: x = 1 - t on [0, 1], then
    x = -(2 (t - 1) - (t^2 - 1) / 2) on [1, 2] (the method of steps)."""
    return sbmlgpu.load(rate_rule_model({"x": (1.0, apply("minus", delay(ci("x"), cn(1))))}))


@pytest.mark.parametrize("method", ["dopri5", "rodas4", "rk4"])
def test_delay_follows_the_method_of_steps(method):
    needs_compiler()
    times = np.linspace(0.0, 2.0, 9)
    result = run_cpu(negative_feedback(), method, times=times, rtol=1e-10, atol=1e-12)
    assert result.status[0] == Status.ok
    x = result.data[0, :, 0]
    exact = np.where(times <= 1.0, 1.0 - times, -(2 * (times - 1) - (times**2 - 1) / 2))
    assert np.allclose(x, exact, rtol=0, atol=1e-6 if method != "rk4" else 1e-5)


def _lagged_decay_exact(tau: float, times: np.ndarray) -> np.ndarray:
    """x' = -x(t - tau), x = 1 up to the start, by the method of steps: on the k-th lag,
    with u = t - k tau in [0, tau], x_k(u) = x_{k-1}(tau) - integral_0^u x_{k-1}, each
    piece a polynomial in u (small coefficients: exact to rounding)."""
    from numpy.polynomial import Polynomial

    pieces = [Polynomial([1.0])]  # x on [-tau, 0]
    while len(pieces) * tau <= times.max() + tau:
        before = pieces[-1]
        integral = before.integ()
        pieces.append(before(tau) - integral)
    out = []
    for t in times:
        k = min(int(t // tau), len(pieces) - 2)
        out.append(pieces[k + 1](t - k * tau))
    return np.array(out)


@pytest.mark.parametrize("method", ["dopri5", "rodas4"])
def test_the_history_is_as_accurate_as_the_steps_over_many_lags(method):
    """x' = -x(t - tau) over 4-15 lags, tau a varied parameter: the solution is a
    polynomial on each lag, which the method's error estimate finds smooth, so its
    steps grow long; look-ups between two history nodes then read the cubic Hermite
    interpolant of a long step. Without the driver's check of that interpolant the
    host build was off by 4.7e-4 at rtol 1e-8 (dopri5, whatever the tolerance); with
    it the error follows the tolerance."""
    needs_compiler()
    from .test_ode_delay_ring import lagged_feedback

    taus = np.random.default_rng(7).uniform(0.3, 1.7, 60)
    times = np.linspace(0.0, 5.0, 11)
    exact = np.array([_lagged_decay_exact(tau, times) for tau in taus])
    for rtol, bound in ((1e-6, 1e-4), (1e-8, 2e-6)):
        result = run_cpu(lagged_feedback(), method, times=times, parameters={"tau": taus},
                         rtol=rtol, atol=rtol * 1e-2)
        assert result.ok.all()
        error = np.abs(result.data[:, :, 0] - exact).max()
        assert error < bound, f"rtol {rtol}: off by {error:.3g}"


def test_only_the_delayed_states_history_is_checked():
    """x' = -x(t - 1) + y with a stiff y' = -1e6 (y - cos t) that no delay() reads:
    the check of the history's interpolant looks at x alone. Over every state, y's
    noisy slopes at the nodes held rodas4 to steps of ~1/lambda: 2,816 steps over
    [0, 10] against 407, and over [0, 1000] the per-interval limit (20,000) failed
    the member."""
    needs_compiler()
    from .test_ode_discontinuities import TIME

    y_rate = apply("times", apply("minus", cn(0), ci("lam")),
                   apply("minus", ci("y"), f"<apply><cos/>{TIME}</apply>"))
    x_rate = apply("plus", apply("minus", delay(ci("x"), cn(1))), ci("y"))
    net = sbmlgpu.load(rate_rule_model({"x": (1.0, x_rate), "y": (1.0, y_rate)},
                                       {"lam": 1e6}))
    result = run_cpu(net, "rodas4", times=np.linspace(0.0, 10.0, 11), rtol=1e-8, atol=1e-10)
    assert result.status[0] == Status.ok
    assert result.metadata["steps_max"] < 1000, result.metadata["steps_max"]


def test_delay_with_varied_lag_and_events_matches_the_reference():
    """A lag that is a varied parameter (no step limit known when the kernel is
    generated) and an event that makes x jump: the history holds both sides."""
    needs_compiler()
    events = ('<event id="kick" useValuesFromTriggerTime="true"><trigger initialValue="false" '
              'persistent="true"><math xmlns="http://www.w3.org/1998/Math/MathML">'
              + apply("geq", '<csymbol encoding="text" '
                             'definitionURL="http://www.sbml.org/sbml/symbols/time">t</csymbol>',
                      cn(1.3))
              + '</math></trigger><listOfEventAssignments><eventAssignment variable="x">'
              '<math xmlns="http://www.w3.org/1998/Math/MathML">'
              + apply("plus", ci("x"), cn(2)) + '</math></eventAssignment>'
              '</listOfEventAssignments></event>')
    rate = apply("minus", apply("times", cn(0.5), delay(ci("x"), ci("tau"))),
                 apply("times", cn(0.1), ci("x")))
    net = sbmlgpu.load(rate_rule_model({"x": (1.0, rate)}, {"tau": 0.7}, events=events))
    times = np.linspace(0.0, 4.0, 41)
    taus = np.array([0.4, 0.7, 1.1])
    result = run_cpu(net, "dopri5", times=times, parameters={"tau": taus}, rtol=1e-9,
                     atol=1e-11)
    assert np.all(result.status == Status.ok)
    for m, tau in enumerate(taus):
        expected = reference(net, times, parameters={"tau": tau}, ids=["x"])
        assert np.allclose(result.data[m, :, 0], expected[:, 0], rtol=1e-5, atol=1e-7), tau


def test_a_history_ring_too_short_for_the_lag_fails_the_member_with_a_message():
    needs_compiler()
    result = run_cpu(negative_feedback(), "dopri5", times=np.linspace(0, 3, 4),
                     history_nodes=4, max_step=0.01)
    assert result.status[0] == Status.failed
    assert "--history-nodes" in result.messages[0]


def test_the_kernel_names_its_delayed_expressions_and_keeps_its_history_with_p():
    net = negative_feedback()
    src = kernel_source(KernelModel(ode_system(net), (), default_outputs(net)), "dopri5")
    assert "-ode_delayed_0(p, -1.0 + t, t, x)" in src.text  # x looked up one lag back
    assert "ode_params_with_history" in src.text and "#define ODE_HISTORY_NODES 1024" in src.text
    # the step limit: stages look up known history only
    assert "hmax = ODE_MIN(hmax, ODE_R(1.0))" in src.text


@needs_nvcc
@pytest.mark.parametrize("method", ["rk4", "dopri5", "rodas4"])
def test_delay_kernels_compile_for_sm90(method):
    net = negative_feedback()
    src = kernel_source(KernelModel(ode_system(net), (), default_outputs(net)), method)
    assert nvcc_compile(src.text, "sm_90", name=src.name)


@needs_nvcc
@needs_semantic
@pytest.mark.parametrize("case", ["01593", "00981"])
def test_suite_delay_kernels_compile_for_sm90(case):
    """01593: delay() in an assignment rule with events; 00981: delay() in an event."""
    net = sbmlgpu.load(str(SEMANTIC / case / f"{case}-sbml-l3v2.xml"))
    src = kernel_source(KernelModel(ode_system(net), (), default_outputs(net)), "dopri5")
    assert "ode_history_state" in src.text
    assert nvcc_compile(src.text, "sm_90", name=src.name)


@needs_semantic
def test_rate_of_inside_delay_matches_the_reference():
    """01401: P1 = delay(rateOf(S1), 1): the rates one lag back, and before the start
    the initial values' time derivative (zero)."""
    needs_compiler()
    net = sbmlgpu.load(str(SEMANTIC / "01401" / "01401-sbml-l3v2.xml"))
    times = np.linspace(0.0, 5.0, 26)
    result = run_cpu(net, "dopri5", times=times, rtol=1e-10, atol=1e-12)
    assert result.status[0] == Status.ok
    ids = list(result.ids)
    assert "P1" in ids
    expected = reference(net, times, ids=ids)
    assert np.allclose(result.data[0], expected, rtol=1e-6, atol=1e-9)


def test_the_history_ring_is_sized_per_member():
    from sbmlgpu.errors import OptionError
    from sbmlgpu.ode.delays import history_capacity

    assert history_capacity(0, 1) == 1024  # small models: the automatic maximum
    assert history_capacity(0, 40) == 64 * 1024 // (8 * 81)  # large ones: 64 KB
    assert history_capacity(300, 40) == 300
    with pytest.raises(OptionError, match="history-nodes"):
        history_capacity(5000, 40)  # 3.2 MB: more than a member's ring may take


def test_the_numpy_cpu_engine_refuses_delay_by_name():
    from sbmlgpu.errors import UnsupportedModelError

    with pytest.raises(UnsupportedModelError, match="delay.*numpy CPU engine"):
        run_cpu(negative_feedback(), "dopri5", times=[0.0, 1.0], cpu_engine="numpy")


def test_a_delay_model_is_accepted():
    from sbmlgpu.plugins.ode.support import unsupported

    assert unsupported(negative_feedback()) == []
