"""One SED-ML simulation of one model, for one member or an ensemble of members:
UniformTimeCourse, SteadyState (core/ode_steady_state.py), OneStep.

Returns {SBML id or TIME: array (members, points)} (SteadyState: (members,)).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, fields

import numpy as np

from ..errors import OptionError, SimulationError, UnsupportedModelError
from . import kisao

log = logging.getLogger("sbmlgpu")
TIME = "urn:sedml:symbol:time"


@dataclass(frozen=True)
class RunSettings:
    """What the user chose for the whole archive."""

    backend: str | None = None  # None: the algorithm's (kisao.py)
    device: str = "auto"
    policy: str = kisao.DEFAULT_POLICY


def simulate(network, simulation, ids: list[str], parameters: dict | None, members: int,
             settings: RunSettings, where: str) -> dict[str, np.ndarray]:
    kind = simulation.getElementName()
    steady = kind == "steadyState"
    method = kisao.choose(simulation.getAlgorithm(), where, steady=steady,
                          policy=settings.policy)
    backend = settings.backend or method.backend
    ids = list(dict.fromkeys(ids))
    if kind == "uniformTimeCourse":
        times, keep = time_course_times(simulation, where)
    elif kind == "oneStep":
        step = simulation.getStep()
        if not step > 0:
            raise OptionError("oneStep", f"{where}: step {step!r} must be positive")
        times, keep = np.array([0.0, step]), slice(None)
    elif steady:
        if backend == "ssa":
            raise UnsupportedModelError({"steady state with a stochastic algorithm": (where,)},
                                        who="sbmlgpu omex")
        return _steady(network, ids, parameters, members, backend, method, settings, where)
    else:
        raise UnsupportedModelError({f"SED-ML simulation {kind}": (where,)},
                                    who="sbmlgpu omex")

    def run(b):
        return _run(network, b, times, ids, parameters, members, method, settings, where)
    result = _with_fallback(run, backend, settings, where)
    out = {TIME: np.broadcast_to(times[keep], (members, len(times[keep]))).copy()}
    for name in ids:
        out[name] = np.asarray(result[name], dtype=float)[:, keep]
    return out


def time_course_times(simulation, where: str):
    """(the times to simulate, the slice of them to report): the run starts at
    initialTime, the report at outputStartTime (numberOfSteps + 1 points)."""
    t0, start, end = (simulation.getInitialTime(), simulation.getOutputStartTime(),
                      simulation.getOutputEndTime())
    steps = simulation.getNumberOfSteps() or simulation.getNumberOfPoints()
    if not (np.isfinite([t0, start, end]).all() and t0 <= start < end) or steps < 1:
        raise OptionError("uniformTimeCourse", f"{where}: need initialTime <= "
                                               f"outputStartTime < outputEndTime and "
                                               f"numberOfSteps >= 1 (got {t0}, {start}, "
                                               f"{end}, {steps})")
    reported = np.linspace(start, end, int(steps) + 1)
    if t0 < start:
        return np.concatenate([[t0], reported]), slice(1, None)
    return reported, slice(None)


def _with_fallback(run, backend: str, settings: RunSettings, where: str):
    """ode where it accepts the model, else the reference (unless a backend was named)."""
    try:
        return run(backend)
    except UnsupportedModelError as exc:
        if backend != "ode" or settings.backend is not None:
            raise
        log.warning(f"{where}: the ode backend refuses this model ({exc}); using the "
                    f"reference backend")
        return run("reference")


def _options(backend: str, options: dict) -> dict:
    from .. import plugin_manager

    names = {f.name for f in fields(plugin_manager.backend(backend).options_class)}
    return {k: v for k, v in options.items() if k in names}


def _run(network, backend, times, ids, parameters, members, method, settings, where):
    from ..api import run

    result = run(network, backend=backend, times=times, outputs=ids or None,
                 parameters=parameters, n=members if parameters is None else 1,
                 options=_options(backend, method.options), device=settings.device,
                 progress=False)
    if result.n_failed:
        member, status, message = result.failures()[0]
        raise SimulationError(f"{where}: {result.n_failed} of {len(result.status)} runs "
                              f"failed (member {member}: {status.name}: {message})")
    return result


def _steady(network, ids, parameters, members, backend, method, settings, where):
    from ..ode_steady_state import ode_steady_state

    def run(times, outputs):
        return _with_fallback(
            lambda b: _run(network, b, times, outputs, parameters, members, method, settings,
                           where), backend, settings, where)
    state = ode_steady_state(run, network, [i for i in ids if i != TIME])
    if not state.settled.all():
        raise SimulationError(f"{where}: {int((~state.settled).sum())} of "
                              f"{len(state.settled)} runs reached no steady state by "
                              f"t = 2^40")
    out = dict(state.values)
    out[TIME] = state.times
    return out
