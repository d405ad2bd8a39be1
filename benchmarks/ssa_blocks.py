"""Block size sweep of the SSA kernel: firings/s for 32 to 1024 threads per block,
per layout, on decay-dimerisation (1, 6 and 24 copies) and the Vilar oscillator.

    source .device/setup.sh && python3 benchmarks/ssa_blocks.py

Klingbeil et al. found 192 or 384 best on a GTX 260; the defaults in
plugins/ssa/tuning.py (DEFAULT_BLOCK) should be the best blocks this prints on the
H200. Writes ssa_blocks.json into --out.
"""

from __future__ import annotations

import numpy as np

from ssa_common import (MODELS, arguments, concatenated_dimerisation, describe, gpu_device,
                        measure, table, write_json)

BLOCKS = (32, 64, 96, 128, 192, 256, 384, 512, 768, 1024)
CASES = (  # (name, copies or None for Vilar, layouts)
    ("decay-dimerisation", 1, ("register", "fat", "thin")),
    ("decay-dimerisation x6", 6, ("register", "fat", "thin")),
    ("decay-dimerisation x24", 24, ("fat", "thin")),
    ("vilar", None, ("register", "thin")),
)


def main() -> None:
    p = arguments(__doc__)
    p.add_argument("--blocks", type=int, nargs="+", default=list(BLOCKS))
    p.add_argument("--n", type=int, default=None)
    args = p.parse_args()
    from sbmlgpu import load

    device = gpu_device(args.cpu)
    if device is None:
        print("no GPU: the block size means nothing on the CPU engine; nothing to measure")
        return
    n = args.n or (1 << 18 if not args.quick else 1 << 13)
    rows = []
    for name, copies, layouts in CASES:
        network = load(concatenated_dimerisation(copies)) if copies else \
            load(MODELS / "BIOMD0000000035.xml")
        times = np.array([0.0, 1.0]) if copies else np.array([0.0, 20.0])
        for layout in layouts:
            for block in args.blocks:
                try:
                    row = measure(network, times, n, device, layout=layout, block_size=block)
                except Exception as exc:  # noqa: BLE001 -- a block that cannot run is a result
                    row = {"error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:160]}"}
                row.update(model=name, layout_asked=layout, block_asked=block)
                rows.append(row)
                print(f"{name:24s} {layout:8s} block {block:5d}: "
                      + (f"{row['firings_per_s']:.3e} firings/s" if "error" not in row
                         else row["error"]), flush=True)
    print()
    print(table(rows, [("model", "model", "s"), ("layout", "layout_asked", "s"),
                       ("block", "block_asked", "d"), ("firings/s", "firings_per_s", ".3e"),
                       ("regs", "registers", "d"), ("shared B", "dynamic_shared_bytes", "d")]))
    print()
    best = {}
    for r in rows:
        if "error" in r:
            continue
        key = (r["model"], r["layout_asked"])
        if key not in best or r["firings_per_s"] > best[key]["firings_per_s"]:
            best[key] = r
    for (model, layout), r in best.items():
        print(f"{model:24s} {layout:8s} best block {r['block_asked']:5d} "
              f"({r['firings_per_s']:.3e} firings/s)")
    write_json(args.out, "ssa_blocks", {"machine": describe(device), "n": n, "rows": rows,
                                        "best": {f"{m} / {l}": r["block_asked"]
                                                 for (m, l), r in best.items()}})


if __name__ == "__main__":
    main()
