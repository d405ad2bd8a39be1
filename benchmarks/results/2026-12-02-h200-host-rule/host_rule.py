#!/usr/bin/env python3
"""What the host's share of a GPU run's second pass should be when bdf runs it there.

    python3 benchmarks/results/2026-12-02-h200-host-rule/host_rule.py MODEL N PER_CORE[,...]

The model's N PEtab-sampled members (benchmarks/ode_cpu_methods.py's sets, times and
tolerances), --method auto on GPU 0, with host_pass.HOST_MEMBERS_PER_CORE set to each
value (16 is the rule): the second of two runs' wall time, where its later passes ran
and how long. A scratch measurement for a rule that counts bdf's speed (not kept as
a benchmark)."""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from benchmarks.ode_cpu_methods import _ours  # noqa: E402
from benchmarks.ode_cpu_methods import _folder  # noqa: E402
from benchmarks.ode_petab import POINTS, end_time, parameter_sets, petab_problem  # noqa: E402


def main() -> None:
    import numpy as np

    import sbmlgpu
    from sbmlgpu.plugins.ode import host_pass

    name, n, values = sys.argv[1], int(sys.argv[2]), [int(v) for v in sys.argv[3].split(",")]
    problem = petab_problem(_folder(name))
    network = sbmlgpu.load(str(problem["sbml"]))
    condition, sets, _ = parameter_sets(problem, network, n)
    times = np.linspace(0.0, end_time(problem, condition), POINTS)
    rows = []
    for per_core in values:
        host_pass.HOST_MEMBERS_PER_CORE = per_core
        wall, result = _ours(network, times, sets, "auto", 0)
        meta = result.metadata
        row = {"per_core": per_core, "wall_s": wall, "method": meta.get("method"),
               "first_pass_s": meta.get("first_pass_seconds"),
               "second_pass_members": meta.get("second_pass_members"),
               "second_pass_s": meta.get("second_pass_seconds"),
               "later_passes": meta.get("later_passes"),
               "failed": int((result.status != 0).sum())}
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(json.dumps({"model": name, "n": n, "rows": rows}))


if __name__ == "__main__":
    main()
