"""`sbmlgpu.run` end to end on Lorenz, 8,388,608 members, t in [0, 1], RK4 (dt = 1e-3):
the whole call (kernel source cached, upload, kernel, member-major transpose, copy of
every time course into the result, Result), five times each in float and double,
with the result rows downloaded through the pinned staging pool ("staged", the
default where the driver pins memory) and by one direct copy into pageable memory
("direct"). Run it in two checkouts installed side by side to compare commits.

    source .device/setup.sh && python3 benchmarks/ode_end_to_end.py [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
N = 8_388_608


def once(net, precision: str, n: int = N) -> float:
    import sbmlgpu

    started = time.perf_counter()
    sbmlgpu.run(net, "ode", times=[0.0, 1.0], parameters={"rho": np.linspace(0, 21, n)},
                options={"method": "rk4", "precision": precision}, device=[0], progress=False)
    return time.perf_counter() - started


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--profile", action="store_true",
                        help="also print a cProfile of one direct double run")
    args = parser.parse_args(argv)
    import sbmlgpu
    from sbmlgpu.runtime import layout

    net = sbmlgpu.load(str(ROOT / "sbml_models" / "lorenz.xml"))
    for precision in ("float", "double"):  # compile (cached) and warm up
        once(net, precision, 1024)
    for label in ("staged", "direct", "staged"):
        layout.pins_host_memory = (lambda d: True) if label == "staged" else (lambda d: False)
        seconds = {p: [round(once(net, p), 3) for _ in range(args.repeats)]
                   for p in ("float", "double")}
        print(label, seconds, flush=True)
    if args.profile:
        layout.pins_host_memory = lambda d: False
        profile = cProfile.Profile()
        profile.enable()
        once(net, "double")
        profile.disable()
        pstats.Stats(profile).sort_stats("cumulative").print_stats(25)
    return 0


if __name__ == "__main__":
    sys.exit(main())
