"""The refill kernel's lanes (templates/driver.cuh's ode_lane, entry.cuh's refill entry
points): a thread that takes the next member from a queue when its own ends, one step
per turn. Its host schedule (`<entry>_refill_host`: that many lanes taking turns on one
thread) must give every member exactly what the one-member-per-thread entry gives:
outputs, status and steps, bit for bit, whatever the number of lanes and however the
members interleave: with events, delayed events, delay(), fast reactions, draws,
failures at the start and at the step limit, and a bundled launch order."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pytest

import sbmlgpu
from sbmlgpu.codegen.compile_check import nvcc_available, nvcc_compile
from sbmlgpu.ode.codegen import generate
from sbmlgpu.ode.model import KernelModel
from sbmlgpu.ode.sinks import TrajectorySink
from sbmlgpu.plugins.ode.native import host_kernel
from sbmlgpu.plugins.ode.program import KERNEL, default_outputs, kernel_source
from sbmlgpu.reference.fast import with_fast_factor
from sbmlgpu.results import Status
from sbmlgpu.views import ode_system

from .ode_helpers import apply, ci, cn, load, needs_compiler, rate_rule_model
from .shared_data import SEMANTIC, parameters
from .test_ode_delay import delay, negative_feedback
from .test_ode_events import _event, _time
from .test_ode_fast import KICK, fast_binding

CONFIG = dict(rtol=1e-7, atol=1e-10, h0=0.0, max_step=0.0, dt=1e-2, max_steps=200_000, seed=7)
LANES = (1, 3, 32)


@pytest.fixture(scope="module", autouse=True)
def compiler():
    needs_compiler()


def _kernel(net, method, varied=()):
    """The ode backend's kernel source and host build (fast reactions as it takes them)."""
    src = kernel_source(KernelModel(ode_system(with_fast_factor(net)), tuple(varied),
                                    default_outputs(net)), method, refill=True)
    return src, host_kernel(src)


def _same_with_lanes(kernel, table, times, n_outputs, lanes=LANES, **kw):
    """The plain entry's (out, status, steps), after checking that every lane count's
    schedule gives the very same."""
    config = dict(CONFIG, n=table.shape[1] if table.size else kw.pop("n", 64), **kw.pop("config", {}))
    plain = kernel.run(table, times, n_outputs, config, **kw)
    for count in lanes:
        refill = kernel.run(table, times, n_outputs, config, lanes=count, **kw)
        for what, a, b in zip(("outputs", "status", "steps"), plain, refill):
            assert np.array_equal(a, b, equal_nan=True), f"{count} lanes: {what} differ"
    return plain


def _spread(values: dict[str, float], n: int, seed: int = 0, low=0.5, high=2.0) -> np.ndarray:
    """(len(values), n): each value times a factor log-uniform in [low, high]."""
    rng = np.random.default_rng(seed)
    return np.array([v * np.exp(rng.uniform(np.log(low), np.log(high), n))
                     for v in values.values()])


@pytest.mark.parametrize("method", ["dopri5", "rodas4", "bdf"])
def test_lanes_give_each_member_what_one_thread_per_member_gives(method):
    net = load("seir_epidemic")
    ode = ode_system(net)
    values = dict(zip(ode.p_ids, ode.p_values))
    varied = {k: values[k] for k in ("beta", "gamma")}
    src, kernel = _kernel(net, method, varied)
    assert src.refills and src.kernel == f"sbmlgpu_ode_{method}_refill"
    table = _spread(varied, 200, low=0.2, high=5.0)
    out, status, steps = _same_with_lanes(kernel, table, np.linspace(0, 160, 9), len(
        default_outputs(net)))
    assert (status == Status.ok).all()
    assert steps.max() > 1.5 * steps.min()  # members of unequal work interleave


def test_a_refill_schedule_of_no_lanes_is_refused():
    net = load("lotka_volterra")
    _, kernel = _kernel(net, "dopri5")
    with pytest.raises(ValueError, match="lanes"):
        kernel.run(np.zeros((0, 0)), np.linspace(0, 1, 3), 2, dict(CONFIG, n=4), lanes=-2)


def test_a_bundled_launch_order_writes_each_member_in_its_column():
    """members: launch index -> member number (a bundled launch of first_member ..
    first_member + n - 1): each lane writes its member's column, as the plain entry."""
    net = load("lotka_volterra")
    ode = ode_system(net)
    values = dict(zip(ode.p_ids, ode.p_values))
    src, kernel = _kernel(net, "dopri5", values)
    n = 150
    order = np.random.default_rng(3).permutation(n).astype(np.uint64) + 1000
    table = _spread(values, n, seed=4)
    _same_with_lanes(kernel, table, np.linspace(0, 10, 6), len(default_outputs(net)),
                     members=order, first_member=1000)


def test_members_that_fail_at_the_start_or_at_the_step_limit_end_their_lane_alike():
    net = load("lotka_volterra")
    ode = ode_system(net)
    values = dict(zip(ode.p_ids, ode.p_values))
    src, kernel = _kernel(net, "dopri5", values)
    table = _spread(values, 120, seed=5, low=0.1, high=10.0)
    table[list(values).index("p1"), ::7] = np.nan  # a NaN rate: fails at its first step
    out, status, steps = _same_with_lanes(kernel, table, np.linspace(0, 30, 7), 2,
                                          config={"max_steps": 300, "max_interval_steps": 120})
    assert (status[::7] != Status.ok).all() and (status == Status.ok).any()
    assert (status == Status.max_steps).any() or (status == Status.max_steps_per_interval).any()


@pytest.mark.parametrize("method", ["rk4", "dopri5", "rodas4", "bdf"])
def test_lanes_with_events_priorities_and_a_delayed_event(method):
    """Events with priorities (tie-breaks from the member's random stream), a delayed
    event and a state crossing: rk4 with events runs the general driver too."""
    x_rate = apply("minus", apply("times", ci("k"), ci("x")))
    events = (_event("e1", apply("lt", ci("x"), ci("th")), [("x", cn(1.0))], priority=cn(1))
              + _event("e2", apply("lt", ci("x"), ci("th")), [("y", apply("plus", ci("y"), cn(1)))],
                       priority=cn(1))
              + _event("late", apply("geq", _time(), cn(2.5)), [("y", cn(0))], delay=cn(0.75)))
    net = sbmlgpu.load(rate_rule_model({"x": (1.0, x_rate), "y": (0.0, cn(0))},
                                       {"k": 0.8, "th": 0.3}, events=events))
    src, kernel = _kernel(net, method, ("k", "th"))
    assert src.refills
    table = _spread({"k": 0.8, "th": 0.3}, 90, seed=6, low=0.5, high=1.8)
    out, status, _ = _same_with_lanes(kernel, table, np.linspace(0, 6, 13), 2)
    assert (status == Status.ok).all()


@pytest.mark.parametrize("method", ["dopri5", "rodas4", "bdf"])
def test_lanes_with_delay_keep_each_members_history(method):
    """delay(): each lane's member keeps its own ring (by launch index)."""
    rate = apply("minus", apply("times", ci("a"), delay(ci("x"), ci("tau"))))
    net = sbmlgpu.load(rate_rule_model({"x": (1.0, rate)}, {"a": 1.0, "tau": 0.8}))
    src, kernel = _kernel(net, method, ("a", "tau"))
    assert src.refills and src.history_reals
    table = _spread({"a": 1.0, "tau": 0.8}, 70, seed=8)
    _same_with_lanes(kernel, table, np.linspace(0, 5, 11), 1)


@pytest.mark.parametrize("method", ["rodas4", "bdf"])
def test_lanes_with_fast_reactions_and_an_event(method):
    net = sbmlgpu.load(fast_binding(KICK))
    src, kernel = _kernel(net, method, ("kf", "kd"))
    table = _spread({"kf": 10.0, "kd": 0.3}, 60, seed=9)
    _same_with_lanes(kernel, table, np.linspace(0, 4, 9), len(default_outputs(net)))


@dataclass(frozen=True)
class KeepsLocals(TrajectorySink):
    """A sink with per-member variables between output times (as the dbn backend's)."""

    locals = "int kept_between_outputs = 0;"


def test_no_refill_entry_where_members_take_equal_steps_or_the_sink_keeps_locals():
    net = load("lorenz")
    model = KernelModel(ode_system(net), ("rho",), ("x",))
    src = kernel_source(model, "rk4", refill=True)
    assert not src.refills and "_refill" not in src.text  # rk4's tight loop
    assert src.kernel == "sbmlgpu_ode_rk4"
    kept = generate(model, "dopri5", template=KERNEL, sink=KeepsLocals(), refill=True)
    assert not kept.refills and "_refill" not in kept.text
    plain = kernel_source(model, "dopri5")  # not asked: one entry point, one member a thread
    assert not plain.refills and plain.kernel == "sbmlgpu_ode_dopri5"
    assert "_refill" not in plain.text and "\nsbmlgpu_ode_dopri5(" in plain.text
    refill = kernel_source(model, "dopri5", refill=True)  # asked: only the refill entry
    assert refill.refills and "\nsbmlgpu_ode_dopri5(" not in refill.text


@pytest.mark.skipif(not nvcc_available(), reason="nvcc not found")
def test_the_refill_entry_compiles_for_sm90_and_names_its_queue():
    net = load("seir_epidemic")
    src, _ = _kernel(net, "rodas4", ("beta",))
    assert re.search(r"sbmlgpu_ode_rodas4_refill\([^)]*unsigned long long\* __restrict__ next\)",
                     src.text) and src.kernel == "sbmlgpu_ode_rodas4_refill"
    assert nvcc_compile(src.text, "sm_90", name=src.name)


def _suite_cases() -> list[str]:
    """Semantic cases with events, delay() or fast reactions, a few of each."""
    if not SEMANTIC.is_dir():
        return []
    picked: dict[str, list[str]] = {"EventWithDelay": [], "CSymbolDelay": [],
                                    "FastReaction": [], "EventPriority": []}
    for folder in sorted(SEMANTIC.iterdir()):
        model = folder / f"{folder.name}-model.m"
        if not model.is_file() or not (folder / f"{folder.name}-sbml-l3v2.xml").is_file():
            continue
        text = model.read_text(errors="replace")
        tags = " ".join(re.findall(r"(?:componentTags|testTags):\s*(.*)", text))
        if "AlgebraicRule" in tags or "FluxBalance" in tags:
            continue
        for tag, cases in picked.items():
            if tag in tags and len(cases) < 6:
                cases.append(folder.name)
                break
    return sorted(c for cases in picked.values() for c in cases)


@pytest.mark.parametrize("case", parameters(_suite_cases(), SEMANTIC,
                                            "the semantic SBML Test Suite"))
def test_lanes_on_suite_cases_with_events_delays_and_fast_reactions(case):
    net = sbmlgpu.load(str(SEMANTIC / case / f"{case}-sbml-l3v2.xml"))
    src, kernel = _kernel(net, "dopri5")
    assert src.refills
    _same_with_lanes(kernel, np.zeros((0, 0)), np.linspace(0, 5, 11),
                     len(default_outputs(net)), lanes=(3,), n=12)


def test_the_lanes_a_gpu_holds_at_once_follow_threads_registers_and_shared_memory():
    """A refill launch's lanes (what the bundling rule divides members by): blocks per
    SM as the occupancy calculator counts them on an H200-like device (65,536
    registers, 2,048 threads, 228 KiB shared memory per SM, 132 SMs)."""
    from sbmlgpu.ode.engines import resident_threads
    from sbmlgpu.runtime.base import KernelAttributes

    from .fakes import PROPERTIES

    def lanes(registers, block, shared=0):
        attributes = KernelAttributes(registers=registers, shared_bytes=shared,
                                      local_bytes=0, max_threads_per_block=1024)
        return resident_threads(attributes, block, PROPERTIES) // PROPERTIES.sm_count

    assert lanes(32, 128) == 2048  # by threads
    assert lanes(64, 128) == 1024  # 2,048 registers a warp: 8 blocks of 4 warps
    assert lanes(255, 128) == 256  # 255 counts as 256: 8,192 a warp, 2 blocks
    assert lanes(250, 96) == 192  # 3 warps of 8,192: 2 blocks (8 would need 3 x 8 x 8,192)
    assert lanes(33, 128) == 1536  # 40 a thread (256 a warp is the unit): 12 blocks
    assert lanes(32, 32) == 32 * 32  # at most 32 blocks an SM
    assert lanes(32, 128, shared=100 << 10) == 2 * 128  # 2 blocks' shared memory fit


def test_max_lanes_caps_the_blocks_of_a_refill_launch_in_whole_blocks():
    from sbmlgpu.ode.engines import resident_grid

    from .fakes import PROPERTIES

    full = resident_grid(10**6, 128, PROPERTIES)
    assert full == 2048 // 128 * PROPERTIES.sm_count
    assert resident_grid(10**6, 128, PROPERTIES, max_lanes=0) == full
    assert resident_grid(10**6, 128, PROPERTIES, max_lanes=8192) == 64
    assert resident_grid(10**6, 128, PROPERTIES, max_lanes=8200) == 64  # whole blocks
    assert resident_grid(10**6, 128, PROPERTIES, max_lanes=100) == 1  # at least one
    assert resident_grid(300, 128, PROPERTIES, max_lanes=8192) == 3  # the members' blocks
    assert resident_grid(10**6, 128, PROPERTIES, max_lanes=10**9) == full
