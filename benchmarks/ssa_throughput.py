"""SSA throughput: reaction firings/s and realisations/s on decay-dimerisation, the
Vilar oscillator (BIOMD0000000035) and the DSMTS time-course models; the same on the
CPU engine; and GillesPy2's C++ SSA on every core of this machine in the same run.

    source .device/setup.sh && python3 benchmarks/ssa_throughput.py           # GPU machine
    python3 benchmarks/ssa_throughput.py --cpu --quick                        # anywhere

Targets (../shared/BENCHMARKS.md): >= 2e10 firings/s on decay-dimerisation; >= 1000x
GillesPy2 on all 16 cores on the Vilar oscillator (realisations/s, same end time and
output points). Writes ssa_throughput.json into --out.
"""

from __future__ import annotations

import numpy as np

from ssa_common import (DSMTS, MODELS, THROUGHPUT_COLUMNS, arguments, describe, gpu_device,
                        measure, table, write_json)

import ssa_gillespy2


def dsmts_models() -> list[tuple[str, object, np.ndarray]]:
    from sbmlgpu import load
    from sbmlgpu.errors import UnsupportedModelError
    from sbmlgpu.testsuite import find_cases

    out = []
    for case in find_cases(DSMTS):
        try:
            network = load(case.model_path())
        except UnsupportedModelError:
            continue  # the distrib cases
        times, _ = case.expected()
        out.append((f"dsmts-{case.number}", network, times))
    return out


def main() -> None:
    p = arguments(__doc__)
    p.add_argument("--skip-dsmts", action="store_true")
    p.add_argument("--skip-gillespy2", action="store_true")
    p.add_argument("--precision", choices=("double", "float", "both"), default="both")
    args = p.parse_args()
    from sbmlgpu import load

    device = gpu_device(args.cpu)
    gpu = device is not None
    big = not args.quick
    dd = load(MODELS / "decay_dimerisation.xml")
    vilar = load(MODELS / "BIOMD0000000035.xml")
    dd_times = np.linspace(0.0, 10.0, 11)
    vilar_times = np.linspace(0.0, 200.0, 201)
    precisions = ("double", "float") if args.precision == "both" else (args.precision,)
    rows = []

    def add(name, network, times, n, **options):
        row = measure(network, times, n, device, **options)
        row["model"] = name
        rows.append(row)
        print(f"{name:28s} {row['engine']:8s} {row['precision']:6s} {row['method']:9s} "
              f"{row['layout']:8s} firings/s {row['firings_per_s']:.3e}  realisations/s "
              f"{row['realisations_per_s']:.4g}", flush=True)
        return row

    n_dd = (1 << 20 if big else 1 << 14) if gpu else (4096 if big else 256)
    n_vilar = (1 << 17 if big else 1 << 13) if gpu else (256 if big else 16)
    for precision in precisions:
        add("decay-dimerisation", dd, dd_times, n_dd, precision=precision)
        for method in ("direct", "optimized"):
            add("vilar", vilar, vilar_times, n_vilar, precision=precision, method=method)
        add("vilar (on-GPU summary)" if gpu else "vilar (summary)", vilar, vilar_times,
            n_vilar, precision=precision, summary=True)
    if gpu:  # the CPU engine on this machine, for scale
        from ssa_common import measure as cpu_measure

        for name, network, times, n in (("decay-dimerisation", dd, dd_times, 2048),
                                        ("vilar", vilar, vilar_times, 128)):
            row = cpu_measure(network, times, n, None)
            row["model"] = name
            rows.append(row)
    if not args.skip_dsmts and DSMTS.is_dir():
        n = (1 << 20 if big else 1 << 12) if gpu else (10000 if big else 500)
        for name, network, times in dsmts_models():
            add(name, network, times, n, summary=True)

    anchor = {"available": False, "reason": "skipped (--skip-gillespy2)"}
    if not args.skip_gillespy2:
        vilar_traj = 256 if big else 32
        anchor = {"vilar": ssa_gillespy2.measure(str(MODELS / "BIOMD0000000035.xml"), 200.0, 201,
                                                 vilar_traj),
                  "decay-dimerisation": ssa_gillespy2.measure(
                      str(MODELS / "decay_dimerisation.xml"), 10.0, 11, 2048 if big else 64)}
        for key, model_name in (("vilar", "vilar"), ("decay-dimerisation", "decay-dimerisation")):
            a = anchor[key]
            if not a.get("available"):
                continue
            ours = [r for r in rows if r["model"] == model_name and r["engine"] != "compiled"
                    and not r["summary"]] or [r for r in rows if r["model"] == model_name]
            best = max(ours, key=lambda r: r["realisations_per_s"])
            a["ours_best"] = {k: best[k] for k in ("engine", "precision", "method", "layout",
                                                   "realisations_per_s",
                                                   "realisations_per_s_wall")}
            a["ratio_kernel"] = best["realisations_per_s"] / a["trajectories_per_s"]
            a["ratio_wall"] = best["realisations_per_s_wall"] / a["trajectories_per_s"]

    print()
    print(table(rows, [("model", "model", "s"), ("engine", "engine", "s"),
                       ("prec", "precision", "s"), ("method", "method", "s"),
                       ("layout", "layout", "s"), ("n", "n", "d"),
                       ("firings/real.", "firings_per_realisation", ".4g")]
                + THROUGHPUT_COLUMNS))
    print()
    for key, a in (anchor.items() if "vilar" in anchor else []):
        if a.get("available"):
            print(f"GillesPy2 {key}: {a['trajectories_per_s']:.4g} trajectories/s on {a['cores']} "
                  f"cores; ours {a['ours_best']['realisations_per_s']:.4g}/s (kernel), "
                  f"{a['ours_best']['realisations_per_s_wall']:.4g}/s (wall): "
                  f"{a['ratio_kernel']:.0f}x / {a['ratio_wall']:.0f}x")
        else:
            print(f"GillesPy2 {key}: not available ({a.get('reason')})")
    if "vilar" not in anchor:
        print(f"GillesPy2: not available ({anchor.get('reason')})")
    dd_best = max((r for r in rows if r["model"] == "decay-dimerisation"),
                  key=lambda r: r["firings_per_s"])
    print(f"decay-dimerisation best: {dd_best['firings_per_s']:.3e} firings/s "
          f"({dd_best['precision']}); target 2e10: "
          f"{'met' if dd_best['firings_per_s'] >= 2e10 else 'MISSED'}")
    write_json(args.out, "ssa_throughput", {"machine": describe(device), "rows": rows,
                                            "gillespy2": anchor})


if __name__ == "__main__":
    main()
