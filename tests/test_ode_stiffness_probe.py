"""The stiffness check's cheaper probe (plugins/ode/stiffness.py): a smooth model's
trajectory from its own right-hand side under LSODA (no compile of the CPU reference),
its Jacobian by forward differences in one vectorised call. It must find the same
stiffness index as the reference's trajectory, and leave models with jumps to the
reference."""

from __future__ import annotations

import numpy as np
import pytest

from .ode_helpers import load

# (model, time span): stiff (BIOMD0000000035, index ~3e5 per the module's notes) and not
CASES = [("BIOMD0000000035", 100.0), ("seir_epidemic", 160.0), ("lotka_volterra", 20.0)]


def _model(name):
    from sbmlgpu.ode.model import KernelModel
    from sbmlgpu.outputs import default_outputs
    from sbmlgpu.views.ode import ode_system

    net = load(name)
    return KernelModel(ode_system(net), (), default_outputs(net))


@pytest.mark.parametrize("name,span", CASES)
def test_the_smooth_probe_finds_the_reference_trajectorys_index(name, span, monkeypatch):
    import sbmlgpu.plugins.ode.stiffness as stiffness

    model = _model(name)
    assert stiffness._is_smooth(model)
    calls = []
    smooth_states = stiffness._smooth_states
    monkeypatch.setattr(stiffness, "_smooth_states",
                        lambda *a: calls.append(1) or smooth_states(*a))
    p = np.zeros(0)
    smooth = stiffness.stiffness_index(model, p, 0.0, span)
    assert calls  # it took the smooth path
    monkeypatch.setattr(stiffness, "_is_smooth", lambda m: False)  # the reference's
    reference = stiffness.stiffness_index(model, p, 0.0, span)
    assert np.isfinite(smooth) and smooth > 0
    assert smooth == pytest.approx(reference, rel=1e-3)


def test_a_model_with_a_jump_is_followed_by_the_reference():
    import sympy as sp

    import sbmlgpu.plugins.ode.stiffness as stiffness

    model = _model("seir_epidemic")
    x = model.x[0]

    class Jumpy:  # the same model with ceiling() in a rate
        def __getattr__(self, name):
            return getattr(model, name)

        rhs = (sp.ceiling(x) * model.rhs[0], *model.rhs[1:])

    assert not stiffness._is_smooth(Jumpy())


def test_the_vectorised_jacobian_is_the_column_by_column_one():
    import sbmlgpu.plugins.ode.stiffness as stiffness
    from sbmlgpu.plugins.ode.numeric import lambdify

    model = _model("lotka_volterra")
    f = lambdify(model, model.rhs)
    x = np.array([1.3, 0.7][:model.n_states])
    fx = np.asarray(f(0.5, *x), dtype=float)
    expected = np.empty((model.n_states, model.n_states))
    for j in range(model.n_states):
        delta = 1e-7 * max(abs(x[j]), 1e-5)
        y = x.copy()
        y[j] += delta
        expected[:, j] = (np.asarray(f(0.5, *y), dtype=float) - fx) / delta
    np.testing.assert_array_equal(stiffness._jacobian(f, 0.5, x, []), expected)


@pytest.mark.parametrize("name", ["lotka_volterra", "BIOMD0000000035"])
def test_the_jacobians_at_many_points_in_one_call_are_each_points(name):
    import sbmlgpu.plugins.ode.stiffness as stiffness
    from sbmlgpu.plugins.ode.numeric import lambdify

    model = _model(name)
    f = lambdify(model, model.rhs)
    rng = np.random.default_rng(2)
    xs = rng.uniform(0.1, 3.0, (5, model.n_states))
    ts = np.linspace(0.0, 4.0, 5)
    many = stiffness._jacobians(f, ts, xs, [])
    assert many.shape == (5, model.n_states, model.n_states)
    for k in range(5):
        np.testing.assert_allclose(many[k], stiffness._jacobian(f, ts[k], xs[k], []),
                                   rtol=1e-6, atol=1e-9)
