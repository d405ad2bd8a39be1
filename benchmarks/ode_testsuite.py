#!/usr/bin/env python3
"""Every semantic SBML Test Suite case through the `ode` backend, against the suite and
against the CPU reference (run it on the GPU machine; on a CPU machine it checks the
CPU path, which runs the same generated code compiled for the host).

    python benchmarks/ode_testsuite.py [--cases 1-1800] [--jobs 8] [--out DIR]

Per case (FBA cases skipped): the backend's supports(); if accepted,
1. the suite's own criterion (|C - U| <= abs + rel |C| at every point) with the
   backend's default options, exactly what `sbmlgpu testsuite --backend ode` does;
2. agreement with the CPU reference (rtol 1e-12): the backend at rtol 1e-10,
   atol 1e-14 in fp64, max over variables and times of |U - R| / (|R| + abs_case),
   abs_case the case's absolute tolerance (so that values at zero do not divide by
   zero); `reference_1e-6` is whether that is <= 1e-6.
Also the reference's own verdict on the suite, so that "the same cases the CPU
reference passes, minus the refused ones" can be read off. JSON to
DIR/ode_testsuite.json, a summary printed.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# ../shared, ./shared or $SBMLGPU_SHARED, found as the tests find it
from tests.shared_data import SEMANTIC as DEFAULT_SUITE  # noqa: E402
TIGHT = {"rtol": 1e-10, "atol": 1e-14}


def _values(network, times, names, options, device):
    """The backend's values of each output name (as core's testsuite backend_values:
    `amount(S)` and `[S]` are asked of the backend, no compartment arithmetic here)."""
    from sbmlgpu.api import run

    result = run(network, "ode", times=times, outputs=list(names), options=options,
                 device=device, progress=False)
    return {name: np.asarray(result[name][0], dtype=float) for name in names}, result


def by_variable(values: dict, names: dict) -> dict:
    """{output name: values} -> {case variable: values}."""
    return {v: values[name] for v, name in names.items()}


def run_one(number: int, suite: str) -> dict:
    from sbmlgpu import load, plugin_manager
    from sbmlgpu.errors import SbmlGpuError
    from sbmlgpu.testsuite import compare, find_cases
    from sbmlgpu.testsuite.semantic import case_outputs, output_times, reference_values

    started = time.perf_counter()
    row = {"case": f"{number:05d}"}
    try:
        (case,) = find_cases(suite, {number})
        if case.test_type() == "FluxBalanceSteadyState":
            row["status"] = "skip"
            row["why"] = "flux balance case"
            return row
        settings = case.settings()
        if settings.kind != "semantic":
            row["status"] = "skip"
            row["why"] = "stochastic"
            return row
        path = case.model_path()
        try:
            network = load(str(path))
        except SbmlGpuError as exc:
            row.update(status="skip", why=" ".join(str(exc).split())[:300])
            return row
        times_expected, expected = case.expected()
        times = output_times(settings, times_expected)
        names = case_outputs(network, settings)  # {variable: output name}
        wanted = list(names.values())
        exp = {v: expected[v] for v in settings.variables}
        # the reference's own verdict
        try:
            ref_default = by_variable(reference_values(network, times, wanted), names)
            row["reference_pass"] = bool(compare(times, ref_default, exp, settings.absolute,
                                                 settings.relative)[0])
        except SbmlGpuError as exc:
            row["reference_pass"] = None
            row["reference_why"] = " ".join(str(exc).split())[:200]
        refused = plugin_manager.backend("ode").supports(network)
        if refused:
            row.update(status="refused",
                       why="; ".join(f"{f} ({', '.join(ids[:3])})" for f, ids in refused))
            return row
        device = "auto"
        got, result = _values(network, times, wanted, {}, device)
        got = by_variable(got, names)
        row["engine"] = result.metadata.get("engine")
        row["method"] = result.metadata.get("method")
        if result.n_failed:
            row.update(status="fail", why=f"member failed: {result.statuses()[0].name}")
        else:
            passed, worst = compare(times, got, exp, settings.absolute, settings.relative)
            row["status"] = "pass" if passed else "fail"
            if worst is not None:
                row["worst"] = worst.as_dict()
        # against the CPU reference at tight tolerances
        tight, tight_result = _values(network, times, wanted, TIGHT, device)
        tight = by_variable(tight, names)
        if row.get("reference_pass") is not None and not tight_result.n_failed:
            ref = by_variable(reference_values(network, times, wanted, rtol=1e-12, atol=1e-16),
                              names)
            worst = 0.0
            for v in settings.variables:
                a, b = np.asarray(tight[v], float), np.asarray(ref[v], float)
                both_nan = np.isnan(a) & np.isnan(b)
                with np.errstate(invalid="ignore"):
                    err = np.abs(a - b) / (np.abs(b) + settings.absolute)
                err = np.where(both_nan | (a == b), 0.0, err)
                worst = max(worst, float(np.nanmax(err)) if err.size else 0.0)
            row["rel_vs_reference"] = worst
            row["reference_1e-6"] = worst <= 1e-6
    except Exception as exc:  # noqa: BLE001 - one case never stops the run
        row.update(status="error", why=f"{type(exc).__name__}: {exc}"[:300],
                   traceback=traceback.format_exc()[-1500:])
    finally:
        row["seconds"] = time.perf_counter() - started
    return row


def _parse(text: str | None, suite: Path) -> list[int]:
    if not text:
        return sorted(int(p.name) for p in suite.iterdir() if p.is_dir() and p.name.isdigit())
    out = set()
    for part in text.split(","):
        if "-" in part:
            a, b = part.split("-")
            out.update(range(int(a), int(b) + 1))
        else:
            out.add(int(part))
    have = {int(p.name) for p in suite.iterdir() if p.is_dir() and p.name.isdigit()}
    return sorted(out & have)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", default=str(DEFAULT_SUITE))
    parser.add_argument("--cases", default=None)
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    args = parser.parse_args(argv)
    suite = Path(args.suite)
    numbers = _parse(args.cases, suite)
    started = time.perf_counter()
    rows = []
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with mp.get_context("spawn").Pool(args.jobs, maxtasksperchild=50) as pool:
        for row in pool.imap_unordered(_job, [(n, str(suite)) for n in numbers]):
            rows.append(row)
            if row["status"] not in ("pass", "refused", "skip") or (
                    row.get("reference_1e-6") is False):
                print(f"{row['case']} {row['status']} {row.get('why', '')} "
                      f"rel_vs_reference={row.get('rel_vs_reference')}", flush=True)
            if len(rows) % 100 == 0:  # a run cut short still leaves its results
                _report(rows, len(numbers), started, out)
                print(f"{len(rows)} of {len(numbers)} cases done "
                      f"({time.perf_counter() - started:.0f} s)", flush=True)
    report = _report(rows, len(numbers), started, out)
    count, missing = report["counts"], report["reference_passes_not_passed_by_ode_and_not_refused"]
    print(f"engine(s) {report['engines']}: {count['pass']} pass, {count['fail']} fail, "
          f"{count['refused']} refused, {count['skip']} skipped, {count['error']} errors; the "
          f"reference passes {report['reference_passes']}; reference passes that ode neither "
          f"passes nor refuses: {missing or 'none'}; within 1e-6 of the reference: "
          f"{report['within_1e-6_of_reference']} of {report['compared_with_reference']}")
    print(f"wrote {out / 'ode_testsuite.json'}")
    return 0 if not missing and not count["error"] else 1


def _report(rows: list[dict], planned: int, started: float, out: Path) -> dict:
    """The summary of the cases done so far, written to out/ode_testsuite.json."""
    rows = sorted(rows, key=lambda r: r["case"])
    count = {s: sum(r["status"] == s for r in rows) for s in ("pass", "fail", "refused", "skip",
                                                              "error")}
    ref_pass = {r["case"] for r in rows if r.get("reference_pass")}
    ode_pass = {r["case"] for r in rows if r["status"] == "pass"}
    refused = {r["case"] for r in rows if r["status"] == "refused"}
    compared = [r for r in rows if "rel_vs_reference" in r]
    report = {"benchmark": "ode_testsuite", "date": datetime.now(timezone.utc).isoformat(),
              "engines": sorted({r.get("engine") for r in rows if r.get("engine")}),
              "planned": planned, "done": len(rows), "counts": count,
              "reference_passes": len(ref_pass),
              "reference_passes_not_passed_by_ode_and_not_refused":
                  sorted(ref_pass - ode_pass - refused),
              "passed_by_ode_not_by_reference": sorted(ode_pass - ref_pass),
              "compared_with_reference": len(compared),
              "within_1e-6_of_reference": sum(bool(r["reference_1e-6"]) for r in compared),
              "seconds": time.perf_counter() - started, "cases": rows}
    (out / "ode_testsuite.json").write_text(json.dumps(report, indent=1, default=str))
    return report


def _job(args):
    return run_one(*args)


if __name__ == "__main__":
    sys.exit(main())
