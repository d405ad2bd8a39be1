#!/usr/bin/env python3
"""What pinning a download's staging costs, and whether Python runs while a thread pins.

    python benchmarks/pinned_ahead.py [--mib 32] [--blocks 2] [--repeat 5] [--out DIR]

On the first GPU: the seconds to page-lock `--blocks` blocks of `--mib` MiB (the two
staging chunks of a large download, runtime/transfer.py), through PyCUDA's
pagelocked_empty (which holds the GIL) and through cuMemHostAlloc called by ctypes
(runtime/driver_host_memory.py, which does not); then each again on a thread while the
main thread runs a pure-Python loop for as long, and how far that loop got against
the same loop alone (1.0: the pinning cost the main thread nothing). The blocks are
freed after each round. JSON to DIR/pinned_ahead.json (DIR: --out, else $OUT, else .).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def spin(seconds: float) -> int:
    """Iterations of a pure-Python loop in `seconds` (it needs the GIL throughout)."""
    count, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        count += 1
    return count


def pin_all(allocate, nbytes: int, blocks: int, free) -> float:
    started = time.perf_counter()
    kept = [allocate(nbytes) for _ in range(blocks)]
    seconds = time.perf_counter() - started
    while kept:  # (no loop variable left holding the last block)
        free(kept.pop())
    gc.collect()
    return seconds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, default=32)
    parser.add_argument("--blocks", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    args = parser.parse_args(argv)
    for name in ("mib", "blocks", "repeat"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, not {getattr(args, name)}")
    from sbmlgpu import runtime
    from sbmlgpu.errors import DeviceError
    from sbmlgpu.runtime.driver_host_memory import DriverHostMemory

    devices = runtime.get_devices()
    if not devices:
        print(f"no GPU: {runtime.no_gpu_reason()}", file=sys.stderr)
        return 2
    device = devices[0]
    cuda = device.cuda
    memory = DriverHostMemory.load()
    nbytes = args.mib << 20
    # (allocate, free): PyCUDA's blocks are freed by hand in their context (a block
    # collected on another thread warns and leaks); the driver's by their finalizer
    ways = {"pycuda": (lambda n: device._host_guard(lambda: _pycuda(cuda, device, n), n),
                       lambda block: _free_pycuda(device, block))}
    if memory is not None:
        activate = device._context_activation()  # (the finalizer keeps the context only)
        ways["ctypes"] = (lambda n: memory.allocate(n, activate, repr(device)),
                          lambda block: None)
    try:
        rows = _measure(ways, nbytes, args)
    except DeviceError as exc:  # e.g. more than the host can page-lock
        print(f"pinned_ahead: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "pinned_ahead.json").write_text(json.dumps({
        "benchmark": "pinned_ahead", "date": datetime.now(timezone.utc).isoformat(),
        "device": device.properties.name, "mib": args.mib, "blocks": args.blocks,
        "command": " ".join(["benchmarks/pinned_ahead.py", *(argv or sys.argv[1:])]),
        "ways": rows}, indent=1))
    return 0


def _measure(ways: dict, nbytes: int, args) -> dict:
    """Per way of pinning: its seconds alone, and the main thread's Python share while
    a thread pins."""
    allocate, free = ways["pycuda"]
    pin_all(allocate, 1 << 20, 1, free)  # the context, made here
    rows = {}
    for name, (allocate, free) in ways.items():
        alone, shares = [], []
        for _ in range(args.repeat):
            seconds = pin_all(allocate, nbytes, args.blocks, free)
            alone.append(seconds)
            baseline = spin(seconds)
            thread = threading.Thread(target=pin_all,
                                      args=(allocate, nbytes, args.blocks, free))
            thread.start()
            beside = spin(seconds)
            thread.join()
            shares.append(beside / max(baseline, 1))
        rows[name] = {"pin_seconds": alone, "pin_seconds_median": float(np.median(alone)),
                      "python_share_while_pinning": shares,
                      "python_share_median": float(np.median(shares))}
        print(f"{name:7s} pin {args.blocks} x {args.mib} MiB: {np.median(alone) * 1e3:7.1f} ms "
              f"(median of {args.repeat}); the main thread's Python meanwhile ran "
              f"{np.median(shares):.2f} of its speed alone")
    return rows


def _free_pycuda(device, block) -> None:
    with device.activate():
        block.base.free()


def _pycuda(cuda, device, nbytes: int):
    with device.activate():
        return cuda.pagelocked_empty((nbytes,), np.uint8,
                                     mem_flags=cuda.host_alloc_flags.PORTABLE)


if __name__ == "__main__":
    sys.exit(main())
