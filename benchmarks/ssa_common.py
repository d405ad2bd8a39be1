"""Shared pieces of the SSA benchmarks (benchmarks/ssa_*.py): models, one timed
measurement, the device description, JSON output and plain tables.

Timing: every measurement compiles and warms up first (a small run of the same
program), then times one run. `kernel_s` is the sum of the kernel launches as CUDA
events measured them (the profiler's records); `wall_s` is the whole `run()`:
batches, copies, host work. Firings are counted by the kernel itself (each
realisation reports its number of firings)."""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # noqa -- run as a script from anywhere
MODELS = ROOT / "sbml_models"
# ../shared, ./shared or $SBMLGPU_SHARED, found as the tests find it
from tests.shared_data import STOCHASTIC as DSMTS  # noqa: E402


def arguments(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--out", default=os.environ.get("OUT") or str(ROOT / "benchmarks" / "results"),
                   help="folder for the JSON results [default: $OUT or benchmarks/results]")
    p.add_argument("--cpu", action="store_true", help="measure the CPU engine only (no GPU)")
    p.add_argument("--quick", action="store_true", help="smaller ensembles (a smoke test)")
    return p


def gpu_device(cpu: bool = False):
    """The first GPU, or None (CPU engine) when there is none or --cpu."""
    if cpu:
        return None
    from sbmlgpu import runtime

    devices = runtime.get_devices()
    return devices[0] if devices else None


def describe(device) -> dict:
    info = {"date": date.today().isoformat(), "host": platform.node(),
            "cpu_cores": os.cpu_count(), "python": platform.python_version()}
    if device is not None:
        p = device.properties
        info.update(gpu=p.name, sm_count=p.sm_count, sm_clock_mhz=p.clock_khz / 1e3,
                    compute_capability=list(p.compute_capability),
                    fp64_peak_tflops=p.peak_flops("double") / 1e12,
                    fp32_peak_tflops=p.peak_flops("single") / 1e12)
    return info


def commit() -> dict:
    """$SBMLGPU_COMMIT when set (the GPU machine runs a copy of the tree whose git
    state, if any, is not the copied commit), else the checked-out commit and whether
    the tree differs from it (None outside git)."""
    if os.environ.get("SBMLGPU_COMMIT"):
        return {"commit": os.environ["SBMLGPU_COMMIT"], "modified": None}
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                                    cwd=ROOT, capture_output=True, text=True,
                                    check=True).stdout.strip())
        return {"commit": head, "modified": dirty}
    except (OSError, subprocess.CalledProcessError):
        return {"commit": os.environ.get("SBMLGPU_COMMIT"), "modified": None}


def concatenated_dimerisation(copies: int) -> str:
    """`copies` independent decay-dimerisation systems in one SBML model (Klingbeil et
    al. 2012, Fig. 5: the system grows, every copy with the same rates): species
    S1_i, S2_i, S3_i, reactions decay_i, dimerisation_i, dissociation_i, conversion_i."""
    species, reactions = [], []

    def ref(tag, items):
        if not items:
            return ""
        inner = "".join(f'<speciesReference species="{s}" stoichiometry="{n}" constant="true"/>'
                        for s, n in items)
        return f"<{tag}>{inner}</{tag}>"

    def law(*factors, half=False):
        body = "".join(factors)
        mathml = f"<apply><times/>{body}</apply>"
        if half:
            mathml = f"<apply><divide/>{mathml}<cn type='integer'>2</cn></apply>"
        return f'<kineticLaw><math xmlns="http://www.w3.org/1998/Math/MathML">{mathml}</math></kineticLaw>'

    ci = "<ci>{}</ci>".format
    for i in range(1, copies + 1):
        s1, s2, s3 = f"S1_{i}", f"S2_{i}", f"S3_{i}"
        for sid, amount in ((s1, 10000), (s2, 0), (s3, 0)):
            species.append(f'<species id="{sid}" compartment="cell" initialAmount="{amount}" '
                           'hasOnlySubstanceUnits="true" boundaryCondition="false" '
                           'constant="false"/>')
        minus_one = f"<apply><minus/>{ci(s1)}<cn type='integer'>1</cn></apply>"
        for rid, reactants, products, kinetic in (
                (f"decay_{i}", [(s1, 1)], [], law(ci("c1"), ci(s1))),
                (f"dimerisation_{i}", [(s1, 2)], [(s2, 1)], law(ci("c2"), ci(s1), minus_one,
                                                                half=True)),
                (f"dissociation_{i}", [(s2, 1)], [(s1, 2)], law(ci("c3"), ci(s2))),
                (f"conversion_{i}", [(s2, 1)], [(s3, 1)], law(ci("c4"), ci(s2)))):
            reactions.append(f'<reaction id="{rid}" reversible="false">'
                             + ref("listOfReactants", reactants)
                             + ref("listOfProducts", products) + kinetic + "</reaction>")
    parameters = "".join(f'<parameter id="{p}" value="{v}" constant="true"/>'
                         for p, v in (("c1", 1), ("c2", 0.002), ("c3", 0.5), ("c4", 0.04)))
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            '<sbml xmlns="http://www.sbml.org/sbml/level3/version2/core" level="3" version="2">'
            f'<model id="decay_dimerisation_x{copies}">'
            '<listOfCompartments><compartment id="cell" spatialDimensions="3" size="1" '
            'constant="true"/></listOfCompartments>'
            f"<listOfSpecies>{''.join(species)}</listOfSpecies>"
            f"<listOfParameters>{parameters}</listOfParameters>"
            f"<listOfReactions>{''.join(reactions)}</listOfReactions></model></sbml>")


def measure(network, times, n: int, device, *, summary: bool = False, seed: int = 1,
            warmup: int = 4096, **options) -> dict:
    """Compile, warm up, then time one run of n realisations. Returns the figures."""
    from sbmlgpu.tasks import TimeCourse
    from sbmlgpu.plugins.ssa.backend import SsaBackend
    from sbmlgpu.plugins.ssa.options import SsaOptions
    from sbmlgpu.profile import Profiler
    from sbmlgpu.schedule import Scheduler

    started = time.perf_counter()
    program = SsaBackend().compile(network, SsaOptions(**options), device)
    scheduler = Scheduler(devices=[device] if device is not None else [], progress=False)
    times = np.asarray(times, float)
    program.run(TimeCourse(times=times, n=min(n, warmup), seed=seed + 1000, progress=False),
                scheduler, None)
    setup_s = time.perf_counter() - started
    profiler = Profiler()
    started = time.perf_counter()
    result = program.run(TimeCourse(times=times, n=n, seed=seed, summary=summary,
                                    progress=False), scheduler, profiler)
    wall = time.perf_counter() - started
    meta = result.metadata
    # the simulation kernels only (not the transpose of the time courses, from 6d786e4)
    records = [r for r in profiler.records if r.kernel.startswith("ssa_")]
    kernel_s = sum(r.ms for r in records) / 1e3 if records else meta["compute_seconds"]
    firings = int(meta["firings"])
    row = {"n": n, "times": len(times), "t_end": float(times[-1]), "summary": summary,
           "engine": meta["engine"], "method": meta["method"], "layout": meta["layout"],
           "update": meta["update"], "precision": meta["precision"],
           "block": meta.get("block_size"), "firings": firings,
           "firings_per_realisation": firings / n, "kernel_s": kernel_s, "wall_s": wall,
           "setup_s": setup_s, "firings_per_s": firings / kernel_s if kernel_s else None,
           "realisations_per_s": n / kernel_s if kernel_s else None,
           "realisations_per_s_wall": n / wall, "failed": int(result.n_failed),
           "options": options}
    if records:
        r = records[-1]
        row.update(registers=r.registers, local_bytes=r.local_bytes,
                   dynamic_shared_bytes=r.dynamic_shared_bytes, launches=len(records))
        summary_rows = [k for k in profiler.summary() if k.kernel.startswith("ssa_")]
        if summary_rows:
            row["gflops"] = summary_rows[0].gflops
            row["fraction_of_fp_peak"] = summary_rows[0].flops_fraction
    return row


def write_json(out: str, name: str, data: dict) -> Path:
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(data, indent=1, default=str) + "\n", encoding="utf-8")
    print(f"wrote {path}")
    return path


def table(rows: list[dict], columns: list[tuple[str, str, str]]) -> str:
    """columns: (header, key, format)."""
    def cell(row, key, fmt):
        value = row.get(key)
        if value is None:
            return "-"
        try:
            return format(value, fmt)
        except (TypeError, ValueError):
            return str(value)

    lines = [[h for h, _, _ in columns]]
    lines += [[cell(r, k, f) for _, k, f in columns] for r in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(columns))]
    text = []
    for n, line in enumerate(lines):
        text.append("  ".join(c.rjust(w) for c, w in zip(line, widths)))
        if n == 0:
            text.append("  ".join("-" * w for w in widths))
    return "\n".join(text)


THROUGHPUT_COLUMNS = [("firings/s", "firings_per_s", ".3e"),
                      ("real./s", "realisations_per_s", ".4g"),
                      ("real./s wall", "realisations_per_s_wall", ".4g"),
                      ("kernel s", "kernel_s", ".3f"), ("wall s", "wall_s", ".3f"),
                      ("regs", "registers", "d"), ("block", "block", "d")]
