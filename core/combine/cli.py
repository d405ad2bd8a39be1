"""`sbmlgpu omex -i ARCHIVE.omex -o OUTDIR [--cpu] [--backend NAME]`: the command line of
sbmlgpu.combine (core/cli.py registers it with `add_command`)."""

from __future__ import annotations

from ..settings import make_output_folder, output_folder
from . import kisao


def add_command(sub) -> None:
    p = sub.add_parser(
        "omex", help="run the SED-ML simulation experiments of a COMBINE archive",
        description="Run every SED-ML file of a COMBINE/OMEX archive (the master file first): "
                    "its models with their changes, time courses, steady states and repeated "
                    "tasks (parameter scans run as one ensemble), and write its reports to "
                    "OUTDIR/reports.h5 and OUTDIR/<sedml>/<report>.csv and its plots to PNG, "
                    "as BioSimulators does (docs/combine.md).",
        epilog="Prints the path of every file it writes. Exit status: 0 on success, 2 for a "
               "bad archive, an unsupported SED-ML element or a failed simulation (the "
               "message names the SED-ML file and the element).")
    p.add_argument("-i", "--archive", required=True, metavar="ARCHIVE.omex",
                   help="the COMBINE archive")
    p.add_argument("-o", "--outdir", required=True, metavar="OUTDIR", type=output_folder,
                   help="folder for reports.h5, the CSV reports and the plots (created if "
                        "missing)")
    p.add_argument("--backend", default=None, metavar="NAME",
                   help="run every simulation on this backend [default: by the simulation's "
                        "KiSAO algorithm: ode (reference where ode refuses the model) or ssa]")
    p.add_argument("--algorithm-substitution", default=kisao.DEFAULT_POLICY,
                   choices=kisao.POLICIES,
                   help="an algorithm we do not implement: NONE refuses it, "
                        "SIMILAR_APPROXIMATIONS runs it on ode with a warning "
                        f"[default: {kisao.DEFAULT_POLICY}]")
    p.add_argument("--no-plots", action="store_true", help="do not draw the plots")
    p.add_argument("--cpu", action="store_true",
                   help="use the CPU path even if a GPU is present")
    p.set_defaults(func=cmd_omex)


def cmd_omex(args) -> int:
    from .runner import run_omex

    make_output_folder(args.outdir)
    outcome = run_omex(args.archive, args.outdir, backend=args.backend,
                       device="cpu" if args.cpu else "auto",
                       algorithm_substitution=args.algorithm_substitution,
                       plots=not args.no_plots)
    for path in outcome.files:
        print(f"wrote {path}")
    return 0
