"""Thin vs fat (and registers) as the system grows: Klingbeil et al. 2012, Fig. 5,
extended. 1, 2, 4, 6, 12 and 24 independent decay-dimerisation systems in one model
(4 to 96 reactions, 3 to 72 species), each layout with the direct method and the
optimized direct method, on the GPU.

    source .device/setup.sh && python3 benchmarks/ssa_layouts.py

Klingbeil et al. found thin matching fat on small systems and winning from about 8
reactions up; tuning.py's automatic choice (THIN_FROM_REACTIONS,
REGISTER_MAX_VALUES, OPTIMIZED_FROM_REACTIONS) should follow what this prints.
Writes ssa_layouts.json into --out.
"""

from __future__ import annotations

import numpy as np

from ssa_common import (THROUGHPUT_COLUMNS, arguments, concatenated_dimerisation, describe,
                        gpu_device, measure, table, write_json)

COPIES = (1, 2, 4, 6, 12, 24)


def main() -> None:
    p = arguments(__doc__)
    p.add_argument("--copies", type=int, nargs="+", default=list(COPIES))
    p.add_argument("--layouts", nargs="+", default=["register", "fat", "thin"])
    p.add_argument("--methods", nargs="+", default=["direct", "optimized"])
    p.add_argument("--n", type=int, default=None, help="realisations per measurement")
    p.add_argument("--end", type=float, default=1.0, help="end time of every realisation")
    args = p.parse_args()
    from sbmlgpu import load

    device = gpu_device(args.cpu)
    n = args.n or ((1 << 18 if not args.quick else 1 << 12) if device is not None else 256)
    times = np.array([0.0, args.end])
    rows = []
    for copies in args.copies:
        network = load(concatenated_dimerisation(copies))
        for layout in args.layouts:
            for method in args.methods:
                try:
                    row = measure(network, times, n, device, layout=layout, method=method)
                except Exception as exc:  # noqa: BLE001 -- a layout that cannot run is a result
                    row = {"error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"}
                row.update(copies=copies, reactions=4 * copies, species=3 * copies,
                           layout_asked=layout, method_asked=method)
                rows.append(row)
                print(f"x{copies:<3d} {layout:8s} {method:9s} "
                      + (f"{row['firings_per_s']:.3e} firings/s, {row.get('registers')} regs, "
                         f"{row.get('local_bytes')} B local" if "error" not in row
                         else row["error"]), flush=True)
    print()
    print(table(rows, [("copies", "copies", "d"), ("reactions", "reactions", "d"),
                       ("layout", "layout_asked", "s"), ("method", "method_asked", "s"),
                       ("update", "update", "s"), ("local B", "local_bytes", "d"),
                       ("shared B", "dynamic_shared_bytes", "d")] + THROUGHPUT_COLUMNS))
    best = {}
    for r in rows:
        if "error" in r:
            continue
        key = r["copies"]
        if key not in best or r["firings_per_s"] > best[key]["firings_per_s"]:
            best[key] = r
    print()
    for copies, r in sorted(best.items()):
        print(f"x{copies}: best {r['layout_asked']} / {r['method_asked']} "
              f"({r['firings_per_s']:.3e} firings/s)")
    write_json(args.out, "ssa_layouts", {"machine": describe(device), "n": n, "end": args.end,
                                         "rows": rows})


if __name__ == "__main__":
    main()
