"""The ode kernel's events under GPU rounding, checked on the host: the kernel built
with FMA contraction (nvcc contracts a*b + c into FMAs by default; g++ -std=c++14
does not unless asked), so that event logic that depends on how the compiler rounds
fails here and not only on the GPU.

The regression it guards (SBML Test Suite cases 00426 ... 01261 ended with status
max_steps on the GPU): with contraction, inlined copies of the atom g = c*x3 - c*x1
gave 0 and +-1e-18 at one state, so the atom lost the side the driver had found it
crossed to as soon as the events' instant evaluated it again, and the driver found
a new "crossing" one ulp after every restart. model_atoms is now one compiled copy
(never inlined, kernels/model.cuh), so every evaluation at one state agrees."""

from __future__ import annotations

import platform
from pathlib import Path

import numpy as np
import pytest

import sbmlgpu

from .ode_helpers import needs_compiler, reference, run_cpu
from .shared_data import SEMANTIC, needs_semantic

# Event cases that failed (max_steps) with FMA contraction before the fix: triggers
# comparing two species that meet exactly (S4 > S2 with S2 + S4 conserved, ...).
CASES = ["00426", "00427", "00428", "00681", "00743", "00744", "00746", "00763", "00764",
         "01169", "01261"]
# the same kind of case with the other methods (each failed with the old kernel)
METHOD_CASES = [("00426", "rk4"), ("00681", "rodas4"), ("01169", "rk4")]


def fma_flags() -> tuple[tuple[str, ...] | None, str]:
    """Host compiler flags that contract like nvcc, or None and why not here."""
    machine = platform.machine().lower()
    if machine in ("aarch64", "arm64"):
        return ("-ffp-contract=fast",), ""  # FMA is part of the base instruction set
    if machine not in ("x86_64", "amd64"):
        return None, f"no FMA build for {machine}"
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.is_file():
        return None, "no /proc/cpuinfo to tell whether this CPU has FMA"
    flags = set()
    for line in cpuinfo.read_text(errors="replace").splitlines():
        if line.startswith("flags"):
            flags.update(line.partition(":")[2].split())
    if "fma" not in flags:
        return None, "this CPU has no FMA instructions (no 'fma' in /proc/cpuinfo flags)"
    return ("-mfma", "-ffp-contract=fast"), ""


@pytest.fixture
def fma_build(monkeypatch):
    """Host kernels built in this test contract a*b + c like nvcc."""
    needs_compiler()
    flags, why = fma_flags()
    if flags is None:
        pytest.skip(why)
    from sbmlgpu.plugins.ode.native import EXTRA_FLAGS_ENV

    monkeypatch.setenv(EXTRA_FLAGS_ENV, " ".join(flags))
    return flags


def _case_model(case: str):
    return sbmlgpu.load(str(SEMANTIC / case / f"{case}-sbml-l3v2.xml"))


def _case_times(case: str) -> np.ndarray:
    """The output times of the case's settings file (start, duration, steps)."""
    settings = {}
    for line in (SEMANTIC / case / f"{case}-settings.txt").read_text().splitlines():
        key, _, value = line.partition(":")
        settings[key.strip()] = value.strip()
    start, duration = float(settings["start"]), float(settings["duration"])
    return np.linspace(start, start + duration, int(settings["steps"]) + 1)


@needs_semantic
def test_the_fma_build_rounds_differently_from_the_plain_build(fma_build, monkeypatch):
    """Otherwise the other tests here would check nothing the plain build does not."""
    from sbmlgpu.plugins.ode.native import EXTRA_FLAGS_ENV

    net = _case_model("00746")
    times = _case_times("00746")
    fused = run_cpu(net, "dopri5", times=times)
    monkeypatch.delenv(EXTRA_FLAGS_ENV)
    plain = run_cpu(net, "dopri5", times=times)
    assert plain.ok.all() and fused.ok.all()
    assert not np.array_equal(fused.data, plain.data), "the FMA flags had no effect"
    assert np.allclose(fused.data, plain.data, rtol=1e-9, atol=1e-12)


@needs_semantic
@pytest.mark.parametrize("case", CASES)
def test_event_cases_pass_with_fma_contraction(fma_build, case):
    from sbmlgpu.testsuite import RunConfig, find_cases, run_case

    (found,) = find_cases(SEMANTIC, {int(case)})
    outcome = run_case(found, RunConfig(backend="ode"))
    assert outcome.status == "pass", f"{case}: {outcome.status}: {outcome.message}"


@needs_semantic
@pytest.mark.parametrize("case,method", METHOD_CASES)
def test_event_cases_with_each_method_match_the_reference(fma_build, case, method):
    net = _case_model(case)
    times = _case_times(case)
    result = run_cpu(net, method, times=times, dt=1e-3)
    assert result.ok.all(), result.failures()[:1]
    expected = reference(net, times, ids=result.ids)
    scale = np.abs(expected).max(axis=0) + 1e-12
    error = (np.abs(result.data[0] - expected) / scale).max()
    assert error < 1e-6, f"{case} {method}: {error:.2e}"
