"""Step-count bundling (Kovac et al. 2019) for adaptive methods.

The 32 threads of a warp run in lock-step, so a warp costs as much as its slowest
trajectory. Kovac et al. predicted each simulation's step count from its parameters
with a linear regression on log-parameters, trained on a pilot subset, and sorted
the work so that a warp holds trajectories of similar cost: 40-80 % less time lost
to divergence. Here: a pilot of `pilot_size` random members runs first (its step
counts measured by the kernel), sbmlgpu.schedule.CostPredictor fits log(steps) on
log(parameters) (plain parameters where a column is not positive), and
sbmlgpu.schedule.bundle sorts all members by predicted steps, most expensive first;
batches start on warp boundaries; results are put back in the original order.

Not used when it cannot pay: rk4 (every member takes the same steps), no varied
parameters, ensembles smaller than MIN_RATIO x the pilot, or a cost model whose order
does not gain MIN_GAIN x on the members it was fitted on (the steps do not follow the
parameters closely enough). What it gains depends on the kernel's lanes: where each
thread has one member (the CPU-free one-member-per-thread kernel, or fewer members
than the GPU holds at once) the order fills warps (lane_efficiency); where threads
take the next member when theirs ends (lanes that refill, more members than lanes) no
lane waits for its warp's slowest member, and the order only makes the costliest
members start first instead of last (refill_makespan), which saves about the slowest
member's time at most, what a pilot's launch costs too: a first run there runs no
pilot (program.py), and the runs after it time both orders. Measured on an H200 at 10^5
PEtab sets: under refill the order still sped Fujita's kernels up (0.37 s against
0.51 s) and nothing else, while the plan cost Zhao, Sneyd, Brannmark and Rahman
0.02-0.1 s a call (docs/benchmarks.md, issue 13's fifth round).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sbmlgpu.schedule import (CostPredictor, Permutation, bundle, lane_efficiency,
                              pilot_indices, refill_makespan)
from sbmlgpu.schedule.bundling import WARP

MIN_RATIO = 10
#: the plan's reason in a first run under lanes that refill (program.py: no pilot there)
FIRST_UNDER_REFILL = ("not used: lanes refill and no earlier run's cost model covers this "
                      "one (a first run), and with more members than lanes the order would "
                      "save about what a pilot costs, so none ran; this run's steps fit the "
                      "cost model of the next")
#: bundle only where the cost model's order raises the lane efficiency of the members
#: it was fitted on by this factor: below it the plan, the sort and the gathers cost
#: more than they save (measured, benchmarks/ode_lane_efficiency.py: Zhao's and
#: Raia's objectives gain nothing or lose; Fujita's pilot 0.28 -> 0.41, Sneyd's
#: 0.42 -> 0.54, and the whole ensembles alike)
MIN_GAIN = 1.15
#: members a fit needs for that test: fewer warps tell too little (a smaller pilot
#: always bundles)
MIN_GAIN_MEMBERS = 512


@dataclass
class BundlePlan:
    permutation: Permutation | None
    reason: str
    info: dict = field(default_factory=dict)


def should_bundle(enabled: bool, method: str, n: int, n_varied: int, pilot_size: int) -> str | None:
    """None if bundling applies, else why not."""
    if not enabled:
        return "off (--no-bundling)"
    if method == "rk4":
        return "not used: rk4 takes the same steps for every member"
    if n_varied == 0:
        return "not used: no parameter varies, so every member costs the same"
    if n < MIN_RATIO * pilot_size:
        return f"not used: {n} members are fewer than {MIN_RATIO} x the pilot ({pilot_size})"
    return None


def pilot(n: int, pilot_size: int, seed: int) -> np.ndarray:
    return pilot_indices(n, min(pilot_size, n), seed)


@dataclass
class CostFit:
    """log(steps) ~ the table's rows `rows` (those that vary over the members fitted
    on), and the cost given to a member whose values the fit cannot take."""

    predictor: CostPredictor
    rows: np.ndarray
    worst: float
    info: dict
    #: the steps of the members fitted on (a random sample, in member order) and the
    #: model's order of them: what refill_gain simulates
    costs: np.ndarray = field(default_factory=lambda: np.zeros(0))
    fitted_order: Permutation | None = None

    def covers(self, table: np.ndarray, members: np.ndarray) -> bool:
        """Whether this fit (made on another run of the same kernel, whose table had
        these rows) can order `table`: every row that varies over `members` is one of
        its features, and log features see only positive values there."""
        sample = np.asarray(table, dtype=float)[:, members]
        if not set(_varying_rows(sample).tolist()) <= set(self.rows.tolist()):
            return False
        return not self.predictor.log_features or bool(np.all(sample[self.rows] > 0))


def _varying_rows(sample: np.ndarray) -> np.ndarray:
    """The rows of a (rows, members) sample that take more than one value."""
    if not sample.size:
        return np.zeros(0, np.intp)
    return np.flatnonzero(np.any(sample != sample[:, :1], axis=1))


def fit(table: np.ndarray, members: np.ndarray, steps: np.ndarray, what: str) -> CostFit:
    """The cost model from the steps measured on `members` (the pilot's, or a sample
    of a finished run's). `table`: (varied, n); `what`: where the steps come from."""
    table = np.asarray(table, dtype=float)  # (varied, n): the table as it lies, no copy
    costs = np.maximum(np.asarray(steps, dtype=float), 1.0)
    # only the columns that vary over the members are features: one seen at a single
    # value tells the fit nothing (least squares would share the intercept with it),
    # and an ensemble of runs x sets holds many such columns (a PEtab objective's
    # fixed columns); the prediction reads only these rows
    sample = table[:, members]
    varying = _varying_rows(sample)
    sample = sample[varying]
    # log features when every value seen is positive (and finite); the fit takes a
    # value that is not finite as 1
    positive = bool(np.all(sample > 0))
    predictor = CostPredictor(log_features=positive)
    features = np.where(np.isfinite(sample), sample, 1.0).T
    predictor.fit(features, costs)
    # what the model's order does for the members it was fitted on (in sample: a
    # little better than it will do for the others)
    fitted_order = bundle(predictor.predict(features), WARP)
    info = {
        "fitted_on": what,
        "pilot_members": int(len(members)),
        "pilot_steps_mean": float(np.mean(steps)),
        "pilot_steps_max": int(np.max(steps)),
        "r_squared": float(predictor.r_squared),
        "log_features": positive,
        "pilot_lane_efficiency_unbundled": lane_efficiency(costs, WARP),
        "pilot_lane_efficiency_bundled": lane_efficiency(costs, WARP, fitted_order),
    }
    return CostFit(predictor, varying, float(np.max(costs)), info, costs, fitted_order)


def refill_gain(cost: CostFit, lanes: int, n: int) -> float | None:
    """How much sooner a refill launch of `n` members over `lanes` lanes ends ordered
    by the cost model than in member order, estimated on the members it was fitted
    on (a random sample in member order) over lanes scaled to the sample (lanes x
    sample / n, so that a lane takes as many members as in the whole launch). None
    where every member has a lane of its own (n <= lanes): nothing is refilled, and
    the order fills warps instead."""
    if n <= lanes or cost.costs.size == 0 or cost.fitted_order is None:
        return None
    sample_lanes = max(1, round(lanes * cost.costs.size / n))
    ordered = refill_makespan(cost.costs, sample_lanes, cost.fitted_order)
    return refill_makespan(cost.costs, sample_lanes) / ordered if ordered > 0 else 1.0


def verdict(cost: CostFit, lanes: int | None = None, n: int = 0) -> tuple[str | None, dict]:
    """(None where ordering by `cost` pays MIN_GAIN, else why not; what was estimated).
    `lanes`: the GPU's lanes that refill (None: one member per thread), `n` the
    members of the run."""
    gain = refill_gain(cost, lanes, n) if lanes else None
    if gain is not None:
        info = {"refill_lanes": int(lanes), "refill_gain_estimated": gain}
        if gain >= MIN_GAIN or cost.info["pilot_members"] < MIN_GAIN_MEMBERS:
            return None, info
        return (f"not used: with lanes that refill ({lanes:,} lanes, {n:,} members) no "
                f"lane waits for its warp, and ordered by its cost model the members it "
                f"was fitted on ({cost.info['fitted_on']}) would end {gain:.2f}x sooner "
                f"(bundling needs {MIN_GAIN:g}x)"), info
    before = cost.info["pilot_lane_efficiency_unbundled"]
    after = cost.info["pilot_lane_efficiency_bundled"]
    if after >= MIN_GAIN * before or cost.info["pilot_members"] < MIN_GAIN_MEMBERS:
        return None, {}
    return (f"not used: ordered by its cost model, the members it was fitted on "
            f"({cost.info['fitted_on']}) fill warps no better (lane efficiency "
            f"{before:.2f} -> {after:.2f}; bundling needs {MIN_GAIN:g}x)"), {}


def order(table: np.ndarray, cost: CostFit, group: int = 32) -> BundlePlan:
    """The bundling permutation of the table's members by the cost model's prediction."""
    # a row at a time, no copy of the table; a member with a value the fit cannot
    # take (not finite, or not positive for log features) is predicted the largest
    # cost fitted on: it runs among the first, where a slow member costs least
    log_predicted = cost.predictor.predict_log_rows(np.asarray(table, dtype=float), cost.rows)
    with np.errstate(over="ignore", invalid="ignore"):
        predicted = np.exp(log_predicted)
    predicted[~(np.isfinite(log_predicted) & np.isfinite(predicted))] = cost.worst
    permutation = bundle(predicted, group)
    info = {
        **cost.info,
        "predicted_lane_efficiency_unbundled": lane_efficiency(predicted, group),
        "predicted_lane_efficiency_bundled": lane_efficiency(predicted, group, permutation),
    }
    return BundlePlan(permutation, "bundled by predicted step count", info)


def measured_verdict(measured: dict[bool, float]) -> tuple[str | None, dict] | None:
    """verdict from earlier runs of the kernel timed bundled (True) and not (False), in
    seconds a step of their whole run: the faster way once both are timed; the way
    not yet timed where one is (so that the next run times it); None where none is.

    Why measure: under refill the list schedule in steps says what ordering saves in
    steps, not in time. Zhao's objective would end 1.6x sooner in steps, yet its
    kernels took 0.019 s either way: a lane left alone at the end of a small model's
    launch steps several times faster than when the GPU is full (H200, benchmarks.md)."""
    if not measured:
        return None
    info = {"measured_s_per_step": {("bundled" if k else "unbundled"): v
                                    for k, v in measured.items()}}
    if len(measured) == 1:
        (timed, seconds), = measured.items()
        if timed:
            return (f"not used, to time it: this kernel's runs took {seconds * 1e9:.2f} ns a "
                    f"step bundled; with lanes that refill the faster way is measured"), info
        return None, info
    if measured[True] < measured[False]:
        return None, info
    return (f"not used: with lanes that refill this kernel's runs took "
            f"{measured[False] * 1e9:.2f} ns a step unbundled, {measured[True] * 1e9:.2f} "
            f"bundled"), info


def plan_by(table: np.ndarray, cost: CostFit, lanes: int | None = None,
            group: int = 32, measured: dict[bool, float] | None = None) -> BundlePlan:
    """The bundling permutation by `cost` (none where it does not pay: verdict, or
    measured_verdict where earlier runs were timed). `table`: (varied, n); `lanes`:
    as verdict's."""
    timed = measured_verdict(measured) if measured else None
    reason, estimated = timed if timed is not None else verdict(cost, lanes, table.shape[1])
    if reason is not None:
        return BundlePlan(None, reason, {**cost.info, **estimated})
    bundled = order(table, cost, group)
    bundled.info.update(estimated)
    return bundled


def plan(table: np.ndarray, pilot_members: np.ndarray, pilot_steps: np.ndarray,
         group: int = 32, lanes: int | None = None) -> BundlePlan:
    """The bundling permutation from the pilot's measured steps (plan_by)."""
    return plan_by(table, fit(table, pilot_members, pilot_steps, "the pilot"), lanes, group)


def run_sample(n: int, size: int, seed: int) -> np.ndarray:
    """Members of a finished run to fit the next run's cost model on."""
    return pilot_indices(n, min(size, n), seed)
