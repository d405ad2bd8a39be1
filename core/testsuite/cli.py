"""`sbmlgpu testsuite CASES_DIR ...`: run SBML Test Suite cases, one line per case."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from ..errors import OptionError
from .cases import find_cases, parse_selection
from .outcome import PASS, Outcome, closing_line, tally
from .pool import run_cases
from .runner import RunConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("cases_dir", metavar="CASES_DIR",
                        help="the suite's folder of cases (e.g. sbml-test-suite/semantic), "
                             "or one case folder")
    parser.add_argument("--cases", metavar="LIST", default=None,
                        help="case numbers to run, e.g. 1-100,250 (default: all)")
    parser.add_argument("--json", metavar="FILE", default=None,
                        help="write a JSON record per case to FILE")
    parser.add_argument("--backend", metavar="NAME", default=None,
                        help="run the cases through this backend via sbmlgpu.run() "
                             "(default: the CPU reference, called directly)")
    parser.add_argument("--cpu", action="store_true",
                        help="run the backend's CPU path even where a GPU is present "
                             "(default: the GPU when there is one; each case is one run, "
                             "which sbmlgpu.run would otherwise give the CPU path)")
    parser.add_argument("--backend-option", metavar="NAME=VALUE", action="append", default=[],
                        dest="backend_options",
                        help="an option of --backend for every case, e.g. method=bdf "
                             "(repeatable; the backend checks names and values)")
    parser.add_argument("--timeout", metavar="SECONDS", type=float, default=60.0,
                        help="time limit per case; past it the case FAILs with 'timeout' "
                             "(default 60; 0: none)")
    parser.add_argument("--jobs", "-j", metavar="N", type=int, default=1,
                        help="cases to run at once, in separate processes (default 1)")
    parser.add_argument("-n", "--stochastic-runs", metavar="N", type=int, default=10_000,
                        help="realisations per stochastic (DSMTS) case (default 10000)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--quiet", "-q", action="store_true",
                        help="print only the cases that do not pass, and the summary")


def main_from_args(args: argparse.Namespace, out=None) -> int:
    """Run the cases; 0 when none failed (skips are not failures), 1 otherwise,
    2 for bad arguments. Closes with `N passed, N failed, N skipped (N refused
    features, N not time courses)`."""
    out = out or sys.stdout
    try:
        selection = parse_selection(args.cases)
        cases = find_cases(args.cases_dir, selection)
        if args.jobs < 1:
            raise OptionError("jobs", f"{args.jobs}: need at least 1")
        if args.stochastic_runs < 2:
            raise OptionError("stochastic-runs", f"{args.stochastic_runs}: need at least 2")
        if not 0 <= args.timeout < float("inf"):  # (NaN fails too)
            raise OptionError("timeout", f"{args.timeout}: seconds per case, a finite "
                                         f"number >= 0 (0: none)")
        if not 0 <= args.seed < 2**64:
            raise OptionError("seed", f"{args.seed}: need an integer from 0 to 2^64 - 1")
        options = backend_options(args.backend_options)
        if options and args.backend is None:
            raise OptionError("backend-option", "needs --backend (the CPU reference takes none)")
        if args.backend is not None:
            from .. import plugin_manager

            backend = plugin_manager.backend(args.backend)  # OptionError: the installed ones
            if options:  # names and values checked once, not as a failure of every case
                backend.options_class.from_mapping(options).validate()
    except OptionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not cases:
        print(f"error: no cases found in {args.cases_dir}"
              + (f" for --cases {args.cases}" if args.cases else ""), file=sys.stderr)
        return 2
    config = RunConfig(backend=args.backend, stochastic_runs=args.stochastic_runs,
                       seed=args.seed, device="cpu" if args.cpu else "gpu-if-present",
                       options=tuple(options.items()))
    started = time.perf_counter()
    outcomes = _print_in_order(run_cases(cases, config, jobs=args.jobs, timeout=args.timeout),
                               [c.number for c in cases], out, args.quiet)
    counts = tally(outcomes)
    if args.json:
        _write_json(Path(args.json), args, outcomes, counts, time.perf_counter() - started)
    print(closing_line(counts), file=out)
    return 1 if counts["failed"] else 0


def backend_options(pairs: list[str]) -> dict[str, object]:
    """{name: value} of --backend-option NAME=VALUE flags: a value reads as an integer,
    a number, true/false, or else as text (the backend validates each)."""
    out: dict[str, object] = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not name.strip():
            raise OptionError("backend-option", f"{pair!r}: expected NAME=VALUE")
        value: object = text
        for convert in (int, float):
            try:
                value = convert(text)
                break
            except ValueError:
                continue
        if text.lower() in ("true", "false"):
            value = text.lower() == "true"
        out[name.strip().replace("-", "_")] = value
    return out


def _print_in_order(stream, order, out, quiet) -> list[Outcome]:
    """Print each outcome as soon as every case before it has finished."""
    done: dict[str, Outcome] = {}
    k = 0
    for outcome in stream:
        done[outcome.case] = outcome
        while k < len(order) and order[k] in done:
            o = done[order[k]]
            if not (quiet and o.status == PASS):
                print(o.line(), file=out, flush=True)
            k += 1
    return [done[n] for n in order if n in done]


def _write_json(path: Path, args, outcomes, counts, seconds) -> None:
    doc = {
        "cases_dir": str(args.cases_dir),
        "backend": args.backend or "reference",
        "summary": {**counts, "seconds": round(seconds, 1)},
        "cases": [o.record() for o in outcomes],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="sbmlgpu testsuite", description=__doc__)
    add_arguments(parser)
    return main_from_args(parser.parse_args(argv))
