#!/usr/bin/env python3
"""How much of a warp's work is useful in a PEtab objective's ensembles (issue 13).

    python benchmarks/ode_lane_efficiency.py PROBLEM[,PROBLEM...] [--n 20000] [--out FILE]

The 32 members of a warp integrate in lock-step, so a warp costs 32 x the steps of its
slowest member. Per ensemble of one objective call on --n sampled sets, from each
member's own step count (the kernel's `steps`), the lane efficiency (useful steps /
paid steps, sbmlgpu.schedule.lane_efficiency) of three launch orders:
- as the members come (runs x sets), i.e. without bundling;
- bundled by a cost model fitted on a 1,000-member pilot, as the ode backend orders
  them (plugins/ode/bundling) - with the fit's R^2, the pilot's own lane efficiency
  unbundled and bundled, and whether the backend bundles (bundling.MIN_GAIN);
- sorted by the true steps: the bound of any order.
and the paid steps of the backend's two passes (--pass-steps B: members past B run
again from t0 in a second pass of their own) at several B, relative to one pass.

Steps are a property of the integration, not of the device: the objective runs on
the CPU path (the same kernel text built for the host, which takes the steps the GPU
takes up to rounding), so this runs anywhere; it measures no time.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.shared_data import MODELS  # noqa: E402

BUDGETS = (300, 500, 1000, 2000, 5000)


def warp_cost(steps: np.ndarray, cap: float | None = None) -> float:
    """Paid lane-steps of `steps` run 32 to a warp in this order (each member stopped
    at `cap` steps when given)."""
    groups = -(-steps.size // 32)
    padded = np.zeros(groups * 32)
    padded[:steps.size] = steps if cap is None else np.minimum(steps, cap)
    return float(padded.reshape(groups, 32).max(axis=1).sum() * 32)


def ensemble_row(steps: np.ndarray, table: np.ndarray, method: str) -> dict:
    from sbmlgpu.plugins.ode import bundling
    from sbmlgpu.schedule import bundle, lane_efficiency

    steps = np.maximum(steps.astype(float), 1.0)
    n = steps.size
    pilot = bundling.pilot(n, 1000, 0)
    cost = bundling.fit(table, pilot, steps[pilot], "the pilot")
    plan = bundling.order(table, cost)  # the model's order, whether or not the backend uses it
    order = plan.permutation.order
    one_pass = warp_cost(steps[order])
    passes = {}
    for budget in BUDGETS:
        slow = order[steps[order] > budget]  # the second pass keeps the launch order
        passes[str(budget)] = {
            "members_past": int(slow.size),
            "paid_relative": (warp_cost(steps[order], budget) + warp_cost(steps[slow]))
            / one_pass}
    return {
        "members": int(n), "steps_mean": float(steps.mean()),
        "steps_p99": float(np.percentile(steps, 99)), "steps_max": float(steps.max()),
        "unbundled": lane_efficiency(steps), "bundled": lane_efficiency(steps, 32, plan.permutation),
        "by_true_steps": lane_efficiency(steps, 32, bundle(steps)),
        # what the backend would do with this ensemble on a GPU (its default pilot)
        "backend_bundles": bundling.should_bundle(True, method, n, table.shape[0], 1000)
        is None and bundling.verdict(cost)[0] is None,  # one member per thread
        "fit_r_squared": plan.info["r_squared"],
        "pilot_unbundled": plan.info["pilot_lane_efficiency_unbundled"],
        "pilot_bundled": plan.info["pilot_lane_efficiency_bundled"], "two_passes": passes}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("problems", help="comma-separated problem folders")
    parser.add_argument("--n", type=int, default=20_000, help="parameter sets")
    parser.add_argument("--out", type=Path, help="JSON file of the rows")
    args = parser.parse_args(argv)
    names = args.problems.split(",")
    missing = [name for name in names
               if not (MODELS / "petab-benchmark" / name / f"{name}.yaml").is_file()]
    if missing or args.n < 1:
        parser.error(f"no problem {', '.join(missing)} in {MODELS / 'petab-benchmark'}"
                     if missing else f"--n must be at least 1, not {args.n}")

    from sbmlgpu.petab import objective
    from sbmlgpu.petab.values import sampled_sets
    from sbmlgpu.plugins.ode.program import OdeProgram, _is_constant, _table

    captured: list[tuple[np.ndarray, np.ndarray]] = []
    run = OdeProgram.run

    def recording(self, task, scheduler=None, profiler=None):
        result = run(self, task, scheduler, profiler)
        # the table the backend fits on: its varied columns by its own rule (a column
        # with NaN among other values varies), its own table builder
        n = int(task.ensemble_size)
        params = dict(task.parameters or {})
        keep = set(task.table_columns)
        varied = tuple(k for k in params
                       if not (n > 1 and k not in keep and _is_constant(params[k])))
        captured.append((np.array(self.last_steps), _table(params, varied, n),
                         self.last_run.get("method")))
        return result

    rows = []
    OdeProgram.run = recording
    try:
        for name in names:
            yaml = MODELS / "petab-benchmark" / name / f"{name}.yaml"
            prepared = objective(yaml, device="cpu", options={"rtol": 1e-6, "atol": 1e-12})
            captured.clear()
            prepared.evaluate(sampled_sets(prepared.problem, args.n, 0))
            for k, (steps, table, method) in enumerate(captured):
                if steps.size < 32 * 10 or not table.size:
                    continue  # too few members to bundle, or nothing varies
                row = {"problem": name, "ensemble": k, "method": method,
                       **ensemble_row(steps, table, method)}
                rows.append(row)
                best = min(row["two_passes"].items(), key=lambda kv: kv[1]["paid_relative"])
                print(f"{name} #{k}: {row['members']} members, steps mean "
                      f"{row['steps_mean']:.0f} p99 {row['steps_p99']:.0f} max "
                      f"{row['steps_max']:.0f}; lane efficiency unbundled "
                      f"{row['unbundled']:.2f}, bundled {row['bundled']:.2f} (R^2 "
                      f"{row['fit_r_squared']:.2f}; the pilot's own {row['pilot_unbundled']:.2f}"
                      f" -> {row['pilot_bundled']:.2f}), by true steps "
                      f"{row['by_true_steps']:.2f}; "
                      f"two passes at best {best[1]['paid_relative']:.2f} of one "
                      f"(--pass-steps {best[0]}); the backend "
                      f"{'bundles' if row['backend_bundles'] else 'does not bundle'}", flush=True)
    finally:
        OdeProgram.run = run
    if args.out:
        args.out.write_text(json.dumps({"benchmark": "ode_lane_efficiency", "n": args.n,
                                        "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
