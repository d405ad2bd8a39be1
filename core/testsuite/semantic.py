"""Running one semantic (time-course) case: simulate, then compare with the expected table."""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..errors import SimulationError
from ..outputs import VALUE, check_outputs, evaluate, output_name
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
    """`simulate_values(network, times, names) -> {name: values}`, `names` the
    output names (core/outputs.py) of what the case reports (`case_outputs`)."""
    if settings.absolute is None or settings.relative is None:
        raise CaseError(f"{case.settings_path}: no absolute/relative tolerance")
    times_expected, expected = case.expected()
    times = output_times(settings, times_expected)
    if not settings.variables:
        raise CaseError(f"{case.settings_path}: 'variables:' names nothing to compare")
    missing = [v for v in settings.variables if v not in expected]
    if missing:
        raise CaseError(f"the results file has no column for {', '.join(missing)}")
    from .. import load

    network = load(case.model_path())
    names = case_outputs(network, settings)
    got = simulate_values(network, times, list(names.values()))
    passed, worst = compare(times, {v: got[names[v]] for v in settings.variables},
                            {v: expected[v] for v in settings.variables},
                            settings.absolute, settings.relative)
    if worst is None:  # zero rows: a pass would be vacuous
        raise CaseError("the results file has no points to compare")
    if passed:
        return Outcome(case.number, "pass", worst=worst)
    return Outcome(case.number, "fail", message=_describe(worst), worst=worst)


def case_outputs(network, settings: Settings) -> dict[str, str]:
    """{variable: output name}: what the case reports of each variable, spelled as
    the outputs of a run (core/outputs.py). The `amount:` and `concentration:` lists
    also name compartments (00051: a compartment under `amount:`), whose size is
    their one value."""
    out = {}
    for v in settings.variables:
        kind = settings.output_kind(v)
        out[v] = output_name(v, kind if network.kind_of(v) == "species" else VALUE)
    return out


def _describe(worst) -> str:
    return (f"worst: {worst.variable} at t={worst.time:g} got {worst.got:.10g} "
            f"expected {worst.expected:.10g}")


def reference_values(network, times, names, *, rtol=1e-8, atol=1e-10):
    """Simulate with the CPU reference, called directly; {name: values}."""
    from ..errors import UnsupportedModelError
    from ..reference import compile_model, simulate, unsupported

    refused = unsupported(network)
    if refused:
        raise UnsupportedModelError(refused, who="the CPU reference")
    check_outputs(network, names)
    traj = simulate(compile_model(network), times, rtol=rtol, atol=atol)
    if not traj.ok:
        raise SimulationError(f"{traj.status}: {traj.message}")
    values = evaluate(traj, names)
    return {name: values[:, j] for j, name in enumerate(names)}


def backend_values(network, times, names, *, backend: str, device: str = "gpu-if-present",
                   options: dict | None = None):
    """Simulate through the plugin API, `sbmlgpu.run(..., backend=..., options=...)`,
    asking for each output by name (amounts and concentrations included); {name: values}.
    `device` "gpu-if-present" is decided here, in the worker process (the GPU is
    never touched before the pool forks)."""
    from .. import plugin_manager, runtime
    from ..api import run

    if device == "gpu-if-present":
        gpu = not plugin_manager.backend(backend).cpu_only and runtime.get_driver() is not None
        device = "gpu" if gpu else "cpu"
    result = run(network, backend=backend, times=times, outputs=list(names), progress=False,
                 device=device, options=options or None)
    if result.n_failed:
        _, status, message = result.failures()[0]
        raise SimulationError(f"backend {backend}: {status.name}: {message}")
    return {name: np.asarray(result[name][0], dtype=float) for name in names}
