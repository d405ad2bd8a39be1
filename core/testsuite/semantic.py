"""Running one semantic (time-course) case: simulate, then compare with the expected table."""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..errors import SimulationError
from .cases import Case, CaseError, Settings
from .compare import compare
from .outcome import Outcome


def output_times(settings: Settings, expected_times: np.ndarray) -> np.ndarray:
    """start + i * duration / steps, except where the table prints that time exactly
    (then the table's double: the literal 0.99 of a trigger and of the table are
    the same number). Some tables round their times (01121: 9 digits); those
    points keep the nominal time."""
    nominal = settings.times()
    expected_times = np.asarray(expected_times, dtype=float)
    spacing = settings.duration / settings.steps if settings.steps else 1.0
    if len(expected_times) != len(nominal) or not np.allclose(
            expected_times, nominal, rtol=0, atol=1e-6 * abs(spacing)):
        raise CaseError(f"the results' time column does not match start {settings.start}, "
                        f"duration {settings.duration}, steps {settings.steps}")
    scale = np.maximum(1.0, np.abs(nominal))
    same = np.abs(expected_times - nominal) <= 1e-12 * scale
    return np.where(same, expected_times, nominal)


def run_semantic(case: Case, settings: Settings, simulate_values: Callable) -> Outcome:
    """`simulate_values(model_path, times, [(variable, kind), ...]) -> {variable: values}`."""
    if settings.absolute is None or settings.relative is None:
        raise CaseError(f"{case.settings_path}: no absolute/relative tolerance")
    times_expected, expected = case.expected()
    times = output_times(settings, times_expected)
    missing = [v for v in settings.variables if v not in expected]
    if missing:
        raise CaseError(f"the results file has no column for {', '.join(missing)}")
    wanted = [(v, settings.output_kind(v)) for v in settings.variables]
    got = simulate_values(case.model_path(), times, wanted)
    passed, worst = compare(times, got, {v: expected[v] for v in settings.variables},
                            settings.absolute, settings.relative)
    if passed:
        return Outcome(case.number, "pass", worst=worst)
    return Outcome(case.number, "fail", message=_describe(worst), worst=worst)


def _describe(worst) -> str:
    return (f"worst: {worst.variable} at t={worst.time:g} got {worst.got:.10g} "
            f"expected {worst.expected:.10g}")


def reference_values(model_path, times, wanted, *, rtol=1e-8, atol=1e-10):
    """Simulate with the CPU reference, called directly."""
    from .. import load
    from ..errors import UnsupportedModelError
    from ..reference import compile_model, simulate, unsupported

    network = load(model_path)
    refused = unsupported(network)
    if refused:
        raise UnsupportedModelError(refused, who="the CPU reference")
    traj = simulate(compile_model(network), times, rtol=rtol, atol=atol)
    if not traj.ok:
        raise SimulationError(f"{traj.status}: {traj.message}")
    out = {}
    for kind in ("value", "amount", "concentration"):
        ids = [v for v, k in wanted if k == kind]
        if ids:
            values = traj.evaluate(ids, kind)
            out.update({v: values[:, i] for i, v in enumerate(ids)})
    return out


def backend_values(model_path, times, wanted, *, backend: str):
    """Simulate through the plugin API, `sbmlgpu.run(..., backend=...)`.

    Backends report SBML values (a species' concentration unless it has only
    substance units), so amounts and concentrations are converted here with the
    compartment's size, which is asked for as an extra output column."""
    from .. import load
    from ..api import run

    network = load(model_path)
    extra = []
    for v, kind in wanted:
        if kind != "value" and v in network.species_by_id:
            comp = network.species_by_id[v].compartment
            if comp not in extra:
                extra.append(comp)
    outputs = list(dict.fromkeys([v for v, _ in wanted] + extra))
    result = run(network, backend=backend, times=times, outputs=outputs, progress=False)
    if result.n_failed:
        _, status, message = result.failures()[0]
        raise SimulationError(f"backend {backend}: {status.name}: {message}")
    out = {}
    for v, kind in wanted:
        value = np.asarray(result[v][0], dtype=float)
        if kind != "value" and v in network.species_by_id:
            size = np.asarray(result[network.species_by_id[v].compartment][0], dtype=float)
            is_amount = network.species_value_is_amount(v)
            if kind == "amount" and not is_amount:
                value = value * size
            elif kind == "concentration" and is_amount:
                value = value / size
        out[v] = value
    return out
