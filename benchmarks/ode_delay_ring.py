#!/usr/bin/env python3
"""delay() ensembles with the history ring in global memory (issue 13).

    python benchmarks/ode_delay_ring.py [--members 200000] [--out DIR]

Two delay models written here, each with its lag varied over the members:
`negative_feedback` (x' = -delay(x, tau), tau in [0.3, 1.7], t in [0, 10]) and
`mackey_glass` (x' = 0.2 delay(x, tau) / (1 + delay(x, tau)^10) - 0.1 x, tau in
[10, 20], t in [0, 300]: chaotic, many look-ups a step), each at the default ring and
at the largest one --history-nodes allows (448 KB a member), with the `ode` backend
on the GPU (the CPU path without one), dopri5 at rtol 1e-8, after a run that compiles
the kernel.

Reported per row: wall time and members/s of the whole run, kernel time (CUDA
events), the kernel's registers and local bytes per thread (CUDA's function
attributes: before the ring moved to global memory the local bytes were the ring's
size, reserved by the driver for every resident thread), the ring's bytes per member
and per run, the batches and the batch sizes that ran out of memory on the way
(none expected: the planner counts the ring), the device's free memory before and
after (what the process keeps), and statuses. JSON to DIR/ode_delay_ring.json (DIR:
--out, else $OUT, else .). The script runs on the code before the ring moved to
global memory too (the same command at that commit: its largest-ring rows fail "out of
memory" at launch on an H100, and its local bytes per thread are the ring's).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DELAY = ('<apply><csymbol encoding="text" definitionURL="http://www.sbml.org/sbml/symbols/'
         'delay">delay</csymbol><ci>x</ci><ci>tau</ci></apply>')


def sbml(rate: str, x0: float, tau: float) -> str:
    """A one-state model x' = rate (MathML) with parameter tau."""
    return ('<?xml version="1.0" encoding="UTF-8"?>'
            '<sbml xmlns="http://www.sbml.org/sbml/level3/version2/core" level="3" '
            'version="2"><model id="m"><listOfParameters>'
            f'<parameter id="tau" value="{tau}" constant="true"/>'
            f'<parameter id="x" value="{x0}" constant="false"/></listOfParameters>'
            '<listOfRules><rateRule variable="x"><math '
            f'xmlns="http://www.w3.org/1998/Math/MathML">{rate}</math></rateRule>'
            '</listOfRules></model></sbml>')


MODELS = {
    # name: (SBML, tau range, end time)
    "negative_feedback": (sbml(f"<apply><minus/>{DELAY}</apply>", 1.0, 1.0), (0.3, 1.7), 10.0),
    "mackey_glass": (sbml(
        "<apply><minus/><apply><divide/><apply><times/><cn>0.2</cn>" + DELAY + "</apply>"
        "<apply><plus/><cn>1</cn><apply><power/>" + DELAY + "<cn>10</cn></apply></apply>"
        "</apply><apply><times/><cn>0.1</cn><ci>x</ci></apply></apply>", 1.2, 17.0),
        (10.0, 20.0), 300.0),
}


def one_row(net, name: str, taus: np.ndarray, end: float, history_nodes: int,
            device) -> dict:
    from sbmlgpu.ode.delays import history_capacity  # (as before the ring moved: runs there too)
    from sbmlgpu.plugins.ode.backend import OdeBackend
    from sbmlgpu.plugins.ode.options import OdeOptions
    from sbmlgpu.profile import Profiler
    from sbmlgpu.results import Status
    from sbmlgpu.schedule import Scheduler
    from sbmlgpu.tasks import TimeCourse

    options = OdeOptions(method="dopri5", rtol=1e-8, atol=1e-10,
                         history_nodes=history_nodes).validate()
    program = OdeBackend().compile(net, options, device)
    times = np.linspace(0.0, end, 51)

    def run(parameters):
        profiler = Profiler()
        scheduler = Scheduler(devices=[device] if device is not None else None,
                              progress=False, profiler=profiler)
        started = time.perf_counter()
        result = program.run(TimeCourse(times=times, parameters=parameters, progress=False),
                             scheduler, profiler)
        return result, time.perf_counter() - started, profiler, scheduler

    run({"tau": taus[:64]})  # compiles the kernel
    free_before = device.free_memory() if device is not None else None
    result, seconds, profiler, scheduler = run({"tau": taus})
    launches = [r for r in profiler.records if r.kernel.startswith("sbmlgpu_ode_")]
    ring = history_capacity(history_nodes, 1) * 3 * 8  # one state: t, x, x' a node
    statuses, counts = np.unique(result.status, return_counts=True)
    return {
        "model": name, "members": len(taus), "history_nodes": history_nodes or "default",
        "ring_bytes_per_member": ring, "ring_bytes_total": ring * len(taus),
        "engine": result.metadata["engine"], "wall_s": seconds,
        "members_per_s": len(taus) / seconds,
        "kernel_ms": sum(r.ms for r in launches) if launches else None,
        "registers": launches[0].registers if launches else None,
        "local_bytes_per_thread": launches[0].local_bytes if launches else None,
        "batches": [b.size for b in scheduler.last_batches],
        "out_of_memory_sizes": [list(b.out_of_memory_sizes) for b in scheduler.last_batches
                                if b.out_of_memory_sizes],
        "free_bytes_before": free_before,
        "free_bytes_after": device.free_memory() if device is not None else None,
        "steps_mean": result.metadata.get("steps_mean"),
        "status": {Status(int(s)).name: int(c) for s, c in zip(statuses, counts)},
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--members", type=int, default=200_000)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    out = Path(args.out or os.environ.get("OUT") or ".")
    out.mkdir(parents=True, exist_ok=True)

    import sbmlgpu
    from sbmlgpu import runtime
    from sbmlgpu.ode.delays import MAX_HISTORY_BYTES

    devices = runtime.get_devices()
    device = devices[0] if devices else None
    rows = []
    for name in args.models.split(","):
        text, (low, high), end = MODELS[name]
        net = sbmlgpu.load(text)
        taus = np.random.default_rng(0).uniform(low, high, args.members)
        for nodes in (0, MAX_HISTORY_BYTES // 24):  # default; the largest (one state)
            try:
                row = one_row(net, name, taus, end, nodes, device)
            except Exception as exc:  # a row that fails is reported, not the end
                row = {"model": name, "history_nodes": nodes or "default",
                       "error": f"{type(exc).__name__}: {exc}",
                       "traceback": traceback.format_exc()[-4000:]}
            print(json.dumps({k: v for k, v in row.items() if k != "traceback"}), flush=True)
            rows.append(row)
    report = {
        "benchmark": "ode_delay_ring", "when": datetime.now(timezone.utc).isoformat(),
        "host": platform.node(), "device": device.properties.name if device else "cpu",
        "members": args.members, "rows": rows,
    }
    (out / "ode_delay_ring.json").write_text(json.dumps(report, indent=1))
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
