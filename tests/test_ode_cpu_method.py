"""The method check (plugins/ode/stiffness.py): every member of an ensemble (up to
SCREEN_MEMBERS, fewer for large models) is screened at its initial state, on the CPU
path and the GPU, so that the stiff corner of a wide prior, which eight probed
members can miss, chooses rodas4."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import sbmlgpu
from sbmlgpu.ode.model import KernelModel
from sbmlgpu.outputs import default_outputs
from sbmlgpu.plugins.ode.program import OdeProgram, _probe_members
from sbmlgpu.plugins.ode.stiffness import (SCREEN_MEMBERS, SCREEN_MIN, SCREEN_WORK,
                                           STIFF_SPAN_EIGENVALUE, choose_method,
                                           initial_stiffness, screen_members, screen_size)
from sbmlgpu.views import ode_system

from .ode_helpers import apply, ci, needs_compiler, rate_rule_model, run_cpu

SPAN = 10.0


def two_rates():
    """x' = -k x, y' = -y + x: eigenvalues -k and -1."""
    return sbmlgpu.load(rate_rule_model(
        {"x": (1.0, apply("times", "<cn>-1</cn>", ci("k"), ci("x"))),
         "y": (0.0, apply("plus", apply("minus", ci("y")), ci("x")))},
        parameters={"k": 2.0}))


def kernel_model(net, varied=("k",)):
    return KernelModel(ode_system(net), varied, default_outputs(net))


def test_initial_stiffness_is_the_largest_decay_rate_times_the_span_for_every_member():
    model = kernel_model(two_rates())
    k = np.array([0.5, 3.0, 1e4, 7e6])
    index = initial_stiffness(model, k[:, None], 0.0, SPAN)
    assert index.shape == (4,)
    np.testing.assert_allclose(index, np.maximum(k, 1.0) * SPAN, rtol=1e-3)  # forward differences


def test_the_screen_finds_a_stiff_member_that_the_probes_miss():
    model = kernel_model(two_rates())
    mild = np.array([[0.1], [1.0], [2.0]])
    assert choose_method(model, mild, 0.0, SPAN)[0] == "dopri5"
    members = np.vstack([mild, [[1e6]]])  # one member with k x span = 1e7
    method, why = choose_method(model, mild, 0.0, SPAN, screen=members)
    assert method == "rodas4"
    assert "1 of 4 screened members" in why and "initial state" in why
    # nothing stiff among the screened members: the probes decide as before
    assert choose_method(model, mild, 0.0, SPAN, screen=mild) == \
        choose_method(model, mild, 0.0, SPAN)


def test_screen_members_takes_every_member_of_a_small_ensemble_and_a_sample_of_a_large_one():
    table = np.arange(20.0).reshape(2, 10)
    np.testing.assert_array_equal(screen_members(table), table.T)
    large = np.vstack([np.arange(5000.0), -np.arange(5000.0)])
    rows = screen_members(large)
    assert rows.shape == (SCREEN_MEMBERS, 2)
    assert len(np.unique(rows[:, 0])) == SCREEN_MEMBERS  # distinct members
    np.testing.assert_array_equal(rows[:, 1], -rows[:, 0])  # whole columns


@pytest.mark.parametrize("stiff_member", [False, True])
def test_the_cpu_path_chooses_rodas4_when_one_member_of_a_wide_ensemble_is_stiff(stiff_member):
    needs_compiler()
    rng = np.random.default_rng(3)
    k = 10.0 ** rng.uniform(-1, 0.5, 200)
    if stiff_member:
        k[137] = STIFF_SPAN_EIGENVALUE  # k x span = 1e6 for this member only
    result = run_cpu(two_rates(), "auto", end=SPAN, points=5, parameters={"k": k})
    assert result.metadata["method"] == ("rodas4" if stiff_member else "dopri5")
    assert ("screened members" in result.metadata["method_reason"]) == stiff_member
    assert result.ok.all()
    x = result.data[:, :, list(result.ids).index("x")]
    np.testing.assert_allclose(x[:, -1], np.exp(-k * SPAN), rtol=1e-4, atol=1e-9)


def test_the_trajectories_follow_the_screened_members_nearest_to_stiff():
    """x' = -k (1 + y) x, y' = 1: the index k x span at t0 grows to k (1 + span) x span,
    so the member with the largest k is stiff only along its trajectory."""
    net = sbmlgpu.load(rate_rule_model(
        {"x": (1.0, apply("times", "<cn>-1</cn>", ci("k"), apply("plus", "<cn>1</cn>", ci("y")),
                          ci("x"))),
         "y": (0.0, "<cn>1</cn>")}, parameters={"k": 1.0}))
    model = kernel_model(net)
    rng = np.random.default_rng(0)
    mild = 10.0 ** rng.uniform(-1, 0, (40, 1))
    turns_stiff = np.array([[2e3]])  # 2e4 at t0, 2.2e5 at t = span
    assert initial_stiffness(model, turns_stiff, 0.0, SPAN)[0] < STIFF_SPAN_EIGENVALUE
    assert choose_method(model, mild[:8], 0.0, SPAN)[0] == "dopri5"
    method, why = choose_method(model, mild[:8], 0.0, SPAN, screen=np.vstack([mild, turns_stiff]))
    assert method == "rodas4" and "along the nominal trajectory" in why


def test_screen_size_caps_the_eigenvalue_work_by_the_model_size():
    assert screen_size(1) == SCREEN_MEMBERS
    sizes = [screen_size(n) for n in range(1, 300)]
    assert all(a >= b for a, b in zip(sizes, sizes[1:]))  # never more for a larger model
    for n, count in enumerate(sizes, start=1):
        assert count == 0 or (SCREEN_MIN <= count <= SCREEN_MEMBERS
                              and count * n ** 3 <= SCREEN_WORK)
    assert sizes[-1] == 0  # a 299-state model: no screen, the probes decide


@pytest.mark.parametrize("device", [None, "a GPU"])
def test_the_method_check_screens_on_the_gpu_too(device):
    """The program's check hands the screen to choose_method whatever the device (the
    GPU did not screen before; Sneyd_PNAS2002's objective then ran dopri5)."""
    model = kernel_model(two_rates())
    rng = np.random.default_rng(3)
    k = 10.0 ** rng.uniform(-1, 0.5, 500)
    k[321] = STIFF_SPAN_EIGENVALUE  # one stiff member the eight probes do not pick
    probe_rows = _probe_members(k[None, :])[:, 0]
    assert STIFF_SPAN_EIGENVALUE not in probe_rows
    stub = SimpleNamespace(options=SimpleNamespace(method="auto"), _probes={}, device=device)
    method, why = OdeProgram._method(stub, model, k[None, :], np.linspace(0.0, SPAN, 5))
    assert method == "rodas4" and "screened members" in why


def test_a_screen_that_finds_the_model_stiff_does_not_make_the_probes_members():
    """The probes' members (a median over every member: 80 % of a stiff PEtab model's
    check at 10^5 members) are made only where the screen does not decide."""
    model = kernel_model(two_rates())
    made = []

    def members():
        made.append(1)
        return np.array([[0.1], [1.0]])

    stiff = np.array([[0.5], [1e6]])
    assert choose_method(model, members, 0.0, SPAN, screen=stiff)[0] == "rodas4"
    assert not made
    mild = np.array([[0.5], [2.0]])
    assert choose_method(model, members, 0.0, SPAN, screen=mild) == \
        choose_method(model, np.array([[0.1], [1.0]]), 0.0, SPAN, screen=mild)
    assert made == [1]


def test_the_probes_median_on_threads_is_numpys(monkeypatch):
    from sbmlgpu.plugins.ode import program

    table = np.random.default_rng(5).lognormal(size=(7, 200_001))
    np.testing.assert_array_equal(program._row_medians(table), np.median(table, axis=1))
    pieces = []
    real = program.over_pieces
    monkeypatch.setattr(program, "over_pieces",
                        lambda work, n, min_items: pieces.append(n) or real(work, n, min_items))
    program._row_medians(table)
    assert pieces == [7]  # (rows over the threads: a table this size is worth it)


def test_a_screen_past_its_first_chunk_finds_a_stiff_member_in_any_later_chunk():
    """The chunks grow (256, 256, 512, 1024): a stiff member anywhere is found."""
    model = kernel_model(two_rates())
    for where in (0, 300, 700, 2000):
        k = np.full((2048, 1), 0.5)
        k[where] = 1e6
        method, why = choose_method(model, np.array([[0.5]]), 0.0, SPAN, screen=k)
        assert method == "rodas4" and "1 of" in why, where


def test_a_smooth_models_probes_run_as_one_system_and_find_each_members_index(monkeypatch):
    """The probes of a smooth model are one LSODA system over the members
    (_smooth_states_many): each member's points and index as when it is probed alone
    (within the tolerances), and the same choice."""
    from sbmlgpu.plugins.ode import stiffness

    model = kernel_model(two_rates())
    members = np.array([[0.5], [3.0], [40.0], [2e3]])
    probe = stiffness._Probe(model)
    along = stiffness._smooth_states_many(probe, members, 0.0, SPAN)
    assert along is not None and [len(points) for points in along] == [10] * 4
    for row, points in zip(members, along):
        alone = stiffness._smooth_states(probe, row, 0.0, SPAN,
                                         np.asarray(probe.x0f(0.0, *row), float).reshape(-1))
        assert [t for t, _ in points] == [t for t, _ in alone]
        np.testing.assert_allclose(np.stack([x for _, x in points]),
                                   np.stack([x for _, x in alone]), rtol=1e-4, atol=1e-7)
        assert stiffness.stiffness_index(model, row, 0.0, SPAN, probe, points) == \
            pytest.approx(stiffness.stiffness_index(model, row, 0.0, SPAN, probe), rel=1e-3)
    stiff = np.vstack([members, [[2e4]]])  # 2e5 x the span: stiff
    many = choose_method(model, members, 0.0, SPAN), choose_method(model, stiff, 0.0, SPAN)
    monkeypatch.setattr(stiffness, "_smooth_states_many", lambda *a: None)  # each alone
    alone = choose_method(model, members, 0.0, SPAN), choose_method(model, stiff, 0.0, SPAN)
    assert [m for m, _ in many] == [m for m, _ in alone] == ["dopri5", "rodas4"]


def test_stacked_probes_that_fail_leave_each_member_to_be_probed_alone():
    """A model function that takes no arrays of members (the stacked probes' call) must
    not end the check: each member is probed alone, as before, with the same choice."""
    from sbmlgpu.plugins.ode import stiffness

    model = kernel_model(two_rates())
    members = np.array([[0.5], [3.0], [40.0]])
    expected = choose_method(model, members, 0.0, SPAN)
    probes = {}
    probe = stiffness._probe_for(model, probes)
    real = probe.x0f

    def scalars_only(t, *p):
        if any(np.ndim(v) for v in p):
            raise TypeError("array parameters")
        return real(t, *p)

    probe.x0f = scalars_only
    assert stiffness._smooth_states_many(probe, members[1:], 0.0, SPAN) is None
    assert choose_method(model, members, 0.0, SPAN, probes=probes) == expected


def test_a_stiff_median_ends_the_check_before_the_other_probes(monkeypatch):
    """The first member (the median) is probed alone: where it is stiff, the others
    are neither integrated alone nor stacked."""
    from sbmlgpu.plugins.ode import stiffness

    model = kernel_model(two_rates())
    stacked = []
    real = stiffness._smooth_states_many
    monkeypatch.setattr(stiffness, "_smooth_states_many",
                        lambda *a: stacked.append(1) or real(*a))
    stiff_first = np.array([[2e5], [0.5], [3.0]])
    assert choose_method(model, stiff_first, 0.0, SPAN)[0] == "rodas4"
    assert not stacked
    assert choose_method(model, stiff_first[::-1].copy(), 0.0, SPAN)[0] == "rodas4"
    assert stacked == [1]  # the median mild: the other two stacked
