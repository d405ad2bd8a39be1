"""`sbmlgpu petab PROBLEM.yaml -o OUTDIR [--ensemble N | --parameters TABLE] [--seed S]
[--cpu] [--backend ode|reference]` (docs/petab.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..settings import make_output_folder, output_folder

BACKENDS = ("ode", "reference")


def add_command(sub) -> None:
    p = sub.add_parser(
        "petab", help="simulate a PEtab problem: simulation table, likelihood, ensembles",
        description="Simulate a PEtab v1 problem (conditions, preequilibration, observables, "
                    "noise, measurements) with every condition in one batched ensemble. At "
                    "the nominal parameters: OUTDIR/simulations.tsv and "
                    "OUTDIR/likelihood.json (the log-likelihood is also printed). With "
                    "--ensemble or --parameters: OUTDIR/objective.tsv, the negative "
                    "log-likelihood and chi2 of every member.",
        epilog="Exit status: 0 on success (an ensemble: at least one member succeeded; "
               "failed members are listed on stderr), 1 when the nominal run or every "
               "member failed, 2 for bad input or a problem we do not support (the "
               "message says what and where). docs/petab.md has examples.")
    p.add_argument("problem", metavar="PROBLEM.yaml", help="PEtab problem (YAML)")
    p.add_argument("-o", "--outdir", required=True, metavar="OUTDIR", type=output_folder,
                   help="folder for the result files (created if missing)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sampler [default: 0]")
    e = p.add_mutually_exclusive_group()
    e.add_argument("--ensemble", type=int, metavar="N",
                   help="N parameter sets sampled uniformly within the bounds on each "
                        "estimated parameter's scale")
    e.add_argument("--parameters", metavar="TABLE",
                   help="parameter sets: CSV, rows = sets, columns = parameterIds (linear "
                        "scale; the others stay nominal)")
    p.add_argument("--backend", default="ode", choices=BACKENDS,
                   help="backend that simulates [default: ode: the GPU where there is one, "
                        "else its CPU path]")
    p.add_argument("--cpu", action="store_true", help="use the CPU path even if a GPU is "
                                                      "present")
    p.set_defaults(func=main_from_args)


def main_from_args(args: argparse.Namespace) -> int:
    from ..errors import OptionError
    from .run import simulate_problem

    if args.seed < 0:
        raise OptionError("seed", f"{args.seed}: need an integer from 0 to 2^64 - 1")
    result = simulate_problem(args.problem, ensemble=args.ensemble, parameters=args.parameters,
                              seed=args.seed, backend=args.backend,
                              device="cpu" if args.cpu else "auto")
    outdir = Path(args.outdir)
    make_output_folder(outdir)
    ensemble = args.ensemble is not None or args.parameters is not None
    files = result.write_objective(outdir) if ensemble else result.write_nominal(outdir)
    for path in files:
        print(f"wrote {path}")
    failures = result.failures()
    if not ensemble:
        if failures:
            print(f"sbmlgpu: the nominal run failed: {failures[0][2]}", file=sys.stderr)
            return 1
        print(f"log-likelihood: {result.llh:.12g}")
        return 0
    ok = result.n_members - len(failures)
    print(f"{ok} of {result.n_members} member(s) succeeded; best negative log-likelihood: "
          f"{min(result.nll[result.status == 0], default=float('nan')):.12g}")
    if failures:
        print(f"sbmlgpu: {len(failures)} of {result.n_members} member(s) failed:",
              file=sys.stderr)
        for member, status, message in failures[:5]:
            print(f"  member {member}: {status.name}: {message}", file=sys.stderr)
    return 1 if ok == 0 else 0
