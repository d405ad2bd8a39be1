"""Shared by the dbn backend tests (CPU and GPU): an independent count of CPTs from trajectories computed by
the `ode` backend (fixed-step RK4 at the same precision, the same samples), binned by
numpy with the DBN result's own edges — the yardstick the issue names ("counted
marginals equal those of an ode-backend ensemble with the same samples")."""

from __future__ import annotations

import numpy as np

import sbmlgpu
from sbmlgpu.ensemble import sample
from sbmlgpu.results import DbnResult


def bin_values(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """numpy.digitize on linspace edges, clamped to 0..K-1 (as binning.cuh)."""
    k = len(edges) - 1
    return np.clip(np.digitize(values, edges) - 1, 0, k - 1)


def ode_backend_counts(model, result: DbnResult, *, n: int, samples: dict, seed: int,
                       steps: int, precision: str = "float", device="cpu"):
    """(dense counts per variable, counted marginals, ok mask) recounted from the ode
    backend's trajectories of the same samples (with nvcc's fast math where the DBN's
    kernels had it: the same arithmetic)."""
    drawn = sample(samples, n, seed)
    times = result.times
    dt = (times[1] - times[0]) / steps
    states = [v for v in result.variables if v not in result.metadata.get("parameter_nodes", ())]
    tc = sbmlgpu.run(model, "ode", times=times, parameters=drawn, outputs=states,
                     options={"method": "rk4", "dt": dt, "precision": precision,
                              "bundling": False,
                              "fast_math": bool(result.metadata.get("fast_math"))},
                     device=device, progress=False)
    ok = tc.ok
    k = result.bins
    bins = {}
    for j, v in enumerate(result.variables):
        if v in states:
            values = tc[v][ok]
        else:  # a parameter node keeps its sampled value
            values = np.repeat(np.asarray(drawn[v])[ok][:, None], len(times), axis=1)
        bins[v] = bin_values(values, result.edges[j])
    counts = {}
    for v in result.variables:
        pa = result.parents[v]
        rows = np.ravel_multi_index(tuple(bins[p][:, :-1] for p in pa), (k,) * len(pa))
        c = np.zeros((len(times) - 1, k ** len(pa), k), np.int64)
        s = np.broadcast_to(np.arange(len(times) - 1), rows.shape)
        np.add.at(c, (s, rows, bins[v][:, 1:]), 1)
        counts[v] = c
    marginals = np.stack([np.stack([np.bincount(bins[v][:, s], minlength=k)
                                    for v in result.variables])
                          for s in range(len(times))]) / max(int(ok.sum()), 1)
    return counts, marginals, ok


def dense(result: DbnResult, variable: str) -> np.ndarray:
    """A variable's counts as a dense (slices, K**parents, K) array, whichever form."""
    return np.stack([result.dense_counts(variable, s) for s in range(len(result.times) - 1)])
