#!/usr/bin/env python3
"""delay(): how far the ode backend is from the exact solution of x' = -x(t - tau).

    python benchmarks/ode_delay_accuracy.py [--members 300] [--cpu] [--out DIR]

x = 1 up to the start, tau a varied parameter drawn uniform in [0.3, 1.7] (seed 7),
outputs at t = 0, 0.5, .., 5 (4-15 lags). The exact solution is the method of steps
(a polynomial on each lag: tests/test_ode_delay.py's `_lagged_decay_exact`). Each of
dopri5 at rtol 1e-6, 1e-8, 1e-10 and rodas4 at 1e-6, 1e-8 (atol = rtol / 100) runs
the ensemble once (the CPU path's host build unless a GPU is there and --cpu is not
given): the largest absolute error over members and times, the median of the members'
largest errors, and the mean and largest steps per member. The history's interpolant
check (core/ode/templates/driver.cuh, `ode_history_error`) is what moves these
figures: the same script with that file as it was before the check gives its
"before" figures. JSON to DIR/ode_delay_accuracy.json (DIR: --out, else $OUT, else .).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RUNS = (("dopri5", 1e-6), ("dopri5", 1e-8), ("dopri5", 1e-10), ("rodas4", 1e-6),
        ("rodas4", 1e-8))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=300)
    parser.add_argument("--cpu", action="store_true", help="the CPU path even with a GPU")
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    args = parser.parse_args(argv)
    if args.members < 1:
        parser.error(f"--members must be at least 1, not {args.members}")

    from sbmlgpu import runtime
    from sbmlgpu.api import run
    from tests.test_ode_delay import _lagged_decay_exact
    from tests.test_ode_delay_ring import lagged_feedback

    taus = np.random.default_rng(7).uniform(0.3, 1.7, args.members)
    times = np.linspace(0.0, 5.0, 11)
    exact = np.array([_lagged_decay_exact(tau, times) for tau in taus])
    devices = [] if args.cpu else runtime.get_devices()
    device = [devices[0].index] if devices else "cpu"
    rows = []
    print(f"{'method':8} {'rtol':>7} {'max error':>10} {'median':>10} {'steps mean':>11} "
          f"{'steps max':>10} {'failed':>7}")
    for method, rtol in RUNS:
        options = {"method": method, "rtol": rtol, "atol": rtol * 1e-2}
        if device == "cpu":
            options["cpu_engine"] = "native"
        result = run(lagged_feedback(), "ode", times=times, parameters={"tau": taus},
                     options=options, device=device, progress=False)
        ok = result.ok
        error = np.abs(result.data[:, :, 0] - exact)[ok]
        worst = error.max(axis=1) if error.size else np.array([np.nan])
        row = {"method": method, "rtol": rtol, "max_error": float(worst.max()),
               "median_member_error": float(np.median(worst)),
               "steps_mean": result.metadata.get("steps_mean"),
               "steps_max": result.metadata.get("steps_max"),
               "failed": int((~ok).sum()), "engine": result.metadata.get("engine")}
        rows.append(row)
        print(f"{method:8} {rtol:7.0e} {row['max_error']:10.2e} "
              f"{row['median_member_error']:10.2e} {row['steps_mean']:11.1f} "
              f"{row['steps_max']:10d} {row['failed']:7d}", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = {"benchmark": "ode_delay_accuracy",
              "date": datetime.now(timezone.utc).isoformat(), "members": args.members,
              "device": devices[0].properties.name if devices else "cpu",
              "commit": os.environ.get("SBMLGPU_COMMIT"), "command": " ".join(sys.argv),
              "rows": rows}
    (out / "ode_delay_accuracy.json").write_text(json.dumps(report, indent=1))
    print(f"wrote {out / 'ode_delay_accuracy.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
