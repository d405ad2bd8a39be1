"""The ode backend's bdf method (templates/bdf.cuh: variable-order NDF/BDF with the
Jacobian and its LU kept from step to step), on the native CPU path (the host build of
the kernel): against the CPU reference at tight tolerances on stiff systems, with
events, on suite cases (every time-course case of the suite is checked by
`sbmlgpu testsuite --backend ode --cpu --backend-option method=bdf`, docs/ode.md); its
kernels compile for sm_90 with the dense and the sparse LU."""

from __future__ import annotations

import numpy as np
import pytest

import sbmlgpu
from sbmlgpu.codegen.compile_check import nvcc_available, nvcc_compile
from sbmlgpu.ode.codegen import LU_STATIC_MAX
from sbmlgpu.ode.model import KernelModel
from sbmlgpu.plugins.ode.program import default_outputs, kernel_source
from sbmlgpu.results import Status
from sbmlgpu.views import ode_system

from .ode_helpers import apply, ci, cn, load, needs_compiler, rate_rule_model, reference, run_cpu
from .shared_data import MODELS, SEMANTIC, needs_models, parameters
from .test_ode_events import _event

needs_nvcc = pytest.mark.skipif(not nvcc_available(), reason="nvcc not found")


@pytest.fixture(scope="module", autouse=True)
def compiler():
    needs_compiler()


def robertson():
    """Robertson's chemical kinetics (Hairer and Wanner, ODEs II, sec. IV.1): rates from
    0.04 to 3e7, the classic stiff test."""
    y1, y2, y3 = ci("y1"), ci("y2"), ci("y3")
    r1 = apply("times", cn(0.04), y1)
    r2 = apply("times", cn(1e4), y2, y3)
    r3 = apply("times", cn(3e7), y2, y2)
    return sbmlgpu.load(rate_rule_model({
        "y1": (1.0, apply("plus", apply("minus", r1), r2)),
        "y2": (0.0, apply("minus", apply("minus", r1, r2), r3)),
        "y3": (0.0, r3)}))


def test_bdf_follows_the_reference_on_robertson():
    times = np.array([0.0, 0.4, 4.0, 40.0, 400.0, 4e3, 4e4])
    result = run_cpu(robertson(), "bdf", times=times, rtol=1e-8, atol=1e-14)
    assert result.status[0] == Status.ok
    exact = reference(robertson(), times, ids=["y1", "y2", "y3"])
    got = result.data[0]
    for j, sid in enumerate(["y1", "y2", "y3"]):
        assert np.allclose(got[:, j], exact[:, j], rtol=1e-5, atol=1e-12), sid
    # stiff: an explicit method's steps would follow the fastest rate (3e7) over 4e4
    assert result.metadata["steps_max"] < 5_000


def test_bdf_equals_rodas4_on_an_ensemble_within_the_tolerance():
    net = load("seir_epidemic")
    rng = np.random.default_rng(3)
    params = {"beta": rng.uniform(0.1, 2.0, 64), "gamma": rng.uniform(0.05, 0.5, 64)}
    times = np.linspace(0, 160, 17)
    bdf = run_cpu(net, "bdf", times=times, parameters=params, rtol=1e-9, atol=1e-10)
    rodas = run_cpu(net, "rodas4", times=times, parameters=params, rtol=1e-9, atol=1e-10)
    assert (bdf.status == Status.ok).all() and (rodas.status == Status.ok).all()
    assert np.allclose(bdf.data, rodas.data, rtol=1e-6, atol=1e-6)


def test_bdf_restarts_after_an_event_and_locates_its_crossing():
    """x' = -k x with x reset to 1 whenever it falls below 0.3: the reset times are
    exact (t = ln(1/0.3) / k each), so the sawtooth is known in closed form."""
    k = 0.8
    events = _event("reset", apply("lt", ci("x"), cn(0.3)), [("x", cn(1.0))])
    net = sbmlgpu.load(rate_rule_model({"x": (1.0, apply("minus", apply("times", ci("k"), ci("x"))))},
                                       {"k": k}, events=events))
    times = np.linspace(0, 6, 25)
    result = run_cpu(net, "bdf", times=times, rtol=1e-10, atol=1e-12)
    assert result.status[0] == Status.ok
    period = np.log(1 / 0.3) / k
    exact = np.exp(-k * np.mod(times, period))
    assert np.allclose(result.data[0, :, 0], exact, rtol=0, atol=1e-6)


def _suite_sample() -> list[str]:
    """A few cases the bdf method must pass: plain kinetics, assignment and rate rules,
    events with delays, delay(), fast reactions (the whole suite is checked by the
    command in the module's docstring)."""
    picked = ["00001", "00026", "00039", "00184", "00348", "00451", "00937", "01407", "00871"]
    return [c for c in picked if (SEMANTIC / c).is_dir()]  # none without the suite: a skip


@pytest.mark.parametrize("case", parameters(_suite_sample(), SEMANTIC,
                                            "the semantic SBML Test Suite"))
def test_bdf_passes_suite_cases(case):
    from sbmlgpu.testsuite import RunConfig, find_cases, run_case

    (found,) = find_cases(SEMANTIC, {int(case)})
    outcome = run_case(found, RunConfig(backend="ode", device="cpu",
                                        options=(("method", "bdf"),)))
    assert outcome.status == "pass", f"{case}: {outcome.status}: {outcome.message}"


def _chain(n: int):
    """A linear chain x0 -> x1 -> ... of n states with rates 10^(k mod 5): stiff, and
    large enough (n > LU_STATIC_MAX) for the sparse LU."""
    rules = {}
    for k in range(n):
        out = apply("times", cn(10.0 ** (k % 5)), ci(f"x{k}"))
        inflow = apply("times", cn(10.0 ** ((k - 1) % 5)), ci(f"x{k - 1}")) if k else cn(0)
        rules[f"x{k}"] = (1.0 if k == 0 else 0.0, apply("minus", inflow, out))
    return sbmlgpu.load(rate_rule_model(rules))


def test_bdf_with_the_sparse_lu_follows_the_reference():
    net = _chain(LU_STATIC_MAX + 8)
    src = kernel_source(KernelModel(ode_system(net), (), default_outputs(net)), "bdf")
    assert src.linear_algebra.startswith("sparse LU")
    times = np.linspace(0, 5, 6)
    result = run_cpu(net, "bdf", times=times, rtol=1e-9, atol=1e-12)
    assert result.status[0] == Status.ok
    ids = [f"x{k}" for k in range(LU_STATIC_MAX + 8)]
    exact = reference(net, times, ids=ids)
    got = result.data[0]
    for j, sid in enumerate(ids):
        assert np.allclose(got[:, j], exact[:, j], rtol=1e-5, atol=1e-9), sid


@needs_nvcc
@pytest.mark.parametrize("states", [3, LU_STATIC_MAX + 8])
def test_bdf_kernels_compile_for_sm90(states):
    net = robertson() if states == 3 else _chain(states)
    src = kernel_source(KernelModel(ode_system(net), (), default_outputs(net)), "bdf",
                        refill=True)
    assert src.refills and src.method == "bdf"
    assert nvcc_compile(src.text, "sm_90", name=src.name)


BRANNMARK = MODELS / "petab-benchmark" / "Brannmark_JBC2010" / "model_Brannmark_JBC2010.xml"
#: a parameter set sampled within Brannmark_JBC2010's PEtab bounds (member 188 of
#: benchmarks/ode_cpu_path.py's 1,000) where Newton's increments in a quiet stretch are
#: the roundoff of f, ~4e-11 of the error weights at atol 1e-12
BRANNMARK_MEMBER = {
    "k1a": 123.16801566151024, "k1aBasic": 232.09352280602891, "k1b": 1.8414822846651524,
    "k1c": 1.7636488121410074, "k1d": 305731.7475686016, "k1e": 40.716776598403705,
    "k1f": 5.299624227819763, "k1g": 0.0003219420891798753, "k1r": 39311.433212431766,
    "k21": 1019.5838142585642, "k22": 0.007387755099181349, "k3": 7399.66799263764,
    "k_IRSiP_DosR": 14734.879588214893, "km2": 236253.070314153, "km3": 42.700432526739625}


@needs_models
def test_newton_increments_at_roundoff_converge_rather_than_halve_the_step():
    """scipy's test called two increments of ~4e-11 of the weights, the second not
    smaller, divergence: the step halved, again and again, 237,261 order-1 steps where
    scipy's BDF (which met no such stretch) took 472; bdf.cuh takes them as converged
    (BDF_NEWTON_NOISE), and the result still follows rodas4 within the tolerance."""
    if not BRANNMARK.is_file():
        pytest.skip(f"{BRANNMARK} not found")
    network = sbmlgpu.load(str(BRANNMARK))
    times = np.linspace(0.0, 30.0, 51)
    params = {k: np.array([v]) for k, v in BRANNMARK_MEMBER.items()}

    def run(method):
        return sbmlgpu.run(network, times=times, parameters=params, device="cpu",
                           progress=False, options={"method": method, "rtol": 1e-6,
                                                    "atol": 1e-12, "pass_steps": 0})

    bdf, rodas4 = run("bdf"), run("rodas4")
    assert bdf.status[0] == Status.ok and rodas4.status[0] == Status.ok
    assert bdf.metadata["steps_max"] < 2_000  # 491 at 43862ab + the fix; 237,261 before
    scale = np.abs(rodas4.data[0]).max(axis=0) + 1e-9
    assert (np.abs(bdf.data[0] - rodas4.data[0]) / scale).max() < 1e-4
