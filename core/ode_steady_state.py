"""A deterministic steady state by simulation: integrate until the state stops changing.

One time course per ensemble, with output times doubling from 2^-4 to 2^40: the first
doubling interval [t, 2t] over which no species changes by more than rtol * |x| + atol
gives the steady state x(2t). A change measured over a whole doubling bounds the
derivative times t, so the test is no weaker than |dx/dt| small, and it needs no
Jacobian and no RHS evaluation outside the backend (any time-course backend can run
it, with the ensemble on the GPU). Members that never settle by 2^40 are NaN, and
reported as such.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: 0, then 2^k for k = -4..40 (2^40 ~ 1.1e12 time units)
TIMES = np.concatenate([[0.0], 2.0 ** np.arange(-4, 41)])


@dataclass
class SteadyStateValues:
    values: dict[str, np.ndarray]  # {output name: one value per member}
    settled: np.ndarray  # bool per member
    times: np.ndarray  # the time each member settled at (NaN: never)


def settle(data: np.ndarray, watched: list[int], rtol: float, atol: float):
    """(index of the settled output time per member (-1: never), settled mask) from
    trajectories `data` (members, times, columns), testing the columns `watched`."""
    x = data[:, :, watched]
    change = np.abs(np.diff(x, axis=1))
    small = np.all(change <= rtol * np.abs(x[:, 1:, :]) + atol, axis=2)
    small[:, 0] = False  # [0, 2^-4] is not a doubling
    settled = small.any(axis=1)
    first = np.where(settled, np.argmax(small, axis=1) + 1, -1)
    return first, settled


def ode_steady_state(run, network, outputs: list[str], *, rtol: float = 1e-6,
                     atol: float = 1e-9) -> SteadyStateValues:
    """`run(times, outputs) -> TimeCourseResult` simulates the (ensemble) model; the
    outputs asked for, at each member's steady state."""
    species = [s for s in network.species_by_id if s not in outputs]
    asked = list(outputs) + species
    result = run(TIMES, asked)
    columns = {name: j for j, name in enumerate(result.ids)}
    watched = [columns[s] for s in network.species_by_id if s in columns]
    data = np.asarray(result.data, dtype=float)
    if not watched:  # nothing changes but what rules compute: the start is steady
        first = np.ones(data.shape[0], dtype=int)
        settled = np.ones(data.shape[0], dtype=bool)
    else:
        first, settled = settle(data, watched, rtol, atol)
    members = np.arange(data.shape[0])
    index = np.where(settled, first, 0)
    values = {name: np.where(settled, data[members, index, columns[name]], np.nan)
              for name in outputs}
    return SteadyStateValues(values, settled, np.where(settled, TIMES[index], np.nan))
