"""The `sbmlgpu` command: backends, info, testsuite, and one command per task (docs/cli.md):
run, steady-state, estimate, dbn, where an installed backend computes it.

Every SbmlGpuError becomes one message on stderr and a non-zero exit status;
`--debug` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from pathlib import Path

from . import __version__
from .combine import cli as combine_cli
from .errors import OptionError, SbmlGpuError
from .settings import make_output_folder, output_folder
from .petab.command import add_command as add_petab_command

EXIT_RUN_FAILED = 1  # every member of the run failed
EXIT_INTERNAL = 70  # a bug in sbmlgpu or a plugin (EX_SOFTWARE)


class _StderrHandler(logging.Handler):
    # Writes to whatever sys.stderr is now (not the one at start), so that output
    # captured by tests and redirections alike sees the messages.
    def emit(self, record: logging.LogRecord) -> None:
        print(f"sbmlgpu: {record.getMessage()}", file=sys.stderr)


def _configure_logging() -> None:
    log = logging.getLogger("sbmlgpu")
    if not any(isinstance(h, _StderrHandler) for h in log.handlers):
        log.addHandler(_StderrHandler())
    if log.level == logging.NOTSET:
        log.setLevel(logging.INFO)


# -- parser ---------------------------------------------------------------------------
def _command(argv: list[str]) -> str | None:
    return next((a for a in argv if not a.startswith("-")), None)


def _peek_backend(argv: list[str]) -> str | None:
    for k, a in enumerate(argv):
        if a == "--backend" and k + 1 < len(argv):
            return argv[k + 1]
        if a.startswith("--backend="):
            return a.split("=", 1)[1]
    return None


def _int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of "
                                         f"GPU indices") from None


def _default_backend_text(task_cls) -> str:
    if task_cls.default_backend and task_cls.fallback_backend:
        return (f"{task_cls.default_backend}; {task_cls.fallback_backend} where "
                f"{task_cls.default_backend} refuses the model")
    if task_cls.default_backend:
        return task_cls.default_backend
    return "the only installed backend that computes it"


def _add_task_command(sub, task_cls, argv: list[str]) -> None:
    """The subcommand of one task: model, backend, the task's own flags, output,
    devices, and the options of the backend it will run (the named or default one)."""
    from . import plugin_manager
    from .cli_options import add_backend_options, add_task_arguments

    p = sub.add_parser(
        task_cls.command, help=task_cls.title,
        description=f"{task_cls.description} Writes the result to OUTDIR.",
        epilog="Prints the path of every file it writes. Exit status: 0 on success (for an "
               "ensemble: when at least one member succeeded; failed members are listed on "
               "stderr), 1 when every member failed (an estimate: every box's integration), "
               "2 for bad input (the message says what and where).")
    p.add_argument("model", metavar="MODEL", help="SBML file")
    able = ", ".join(plugin_manager.backends_for(task_cls.kind)) or "none installed"
    p.add_argument("--backend", default=None, metavar="NAME",
                   help=f"backend to run (installed for this task: {able}) "
                        f"[default: {_default_backend_text(task_cls)}]")
    add_task_arguments(p, task_cls)
    o = p.add_argument_group("output")
    o.add_argument("-o", "--outdir", required=True, metavar="OUTDIR", type=output_folder,
                   help="folder for the result files (created if missing)")
    formats = list(plugin_manager.writers(task_cls.kind))
    o.add_argument("--format", default="csv", choices=formats,
                   help="result file format (plugins may add more) [default: csv]")
    o.add_argument("--plot", action="store_true", help="also write a PNG plot of the result")
    o.add_argument("--profile", metavar="FILE.json",
                   help="write the per-launch profile as JSON, a Chrome trace beside it "
                        "(FILE.trace.json), and print the summary table")
    o.add_argument("--keep-source", metavar="DIR", help="write the generated kernel sources to DIR")
    o.add_argument("--no-progress", action="store_true", help="no progress bar")
    o.add_argument("--no-cache", action="store_true",
                   help="neither use nor write the compiled-model cache ($SBMLGPU_CACHE_DIR/"
                        "models; $SBMLGPU_MODEL_CACHE=0 disables it everywhere)")
    d = p.add_argument_group("devices").add_mutually_exclusive_group()
    d.add_argument("--cpu", action="store_true", help="use the CPU path even if a GPU is present")
    d.add_argument("--devices", type=_int_list, metavar="LIST",
                   help="GPU indices to use, comma-separated [default: all; the ode "
                        "backend runs no more members than the CPU cores on the CPU path "
                        "unless GPUs are named here]")
    add_backend_options(p, plugin_manager.backend_for(task_cls, _peek_backend(argv)))
    p.set_defaults(func=cmd_task, task_cls=task_cls)


def _add_testsuite(sub, load: bool) -> None:
    p = sub.add_parser("testsuite", help="run SBML Test Suite cases against a backend",
                       description="Run cases of the SBML Test Suite (semantic time courses, "
                                   "stochastic DSMTS) and report which pass.")
    if not load:
        return
    try:
        module = importlib.import_module("sbmlgpu.testsuite")
    except ModuleNotFoundError as exc:
        if exc.name != "sbmlgpu.testsuite":
            raise
        p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        p.set_defaults(func=lambda args: _missing("the testsuite command needs "
                                                  "sbmlgpu.testsuite, which is not installed"))
        return
    module.add_arguments(p)
    p.set_defaults(func=module.main_from_args)


def _missing(message: str) -> int:
    raise SbmlGpuError(message)


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    """The parser for this command line: one subcommand per task that an installed
    backend computes (the one being run gets the options of its backend);
    `testsuite` loads its module only when it is the command."""
    from . import plugin_manager
    from .tasks import TASKS

    parser = argparse.ArgumentParser(
        prog="sbmlgpu", description="Ensemble analyses of SBML models on GPUs.",
        epilog="`sbmlgpu COMMAND --help` describes each command; docs/cli.md has examples.")
    parser.add_argument("--version", action="version", version=f"sbmlgpu {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show Python tracebacks instead of one-line error messages")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    b = sub.add_parser("backends", help="list the installed backends, the tasks each computes "
                                        "and the plugins providing them",
                       description="List every installed backend: name, description, the "
                                   "tasks it computes, and the distribution and version of "
                                   "the plugin providing it; then any broken plugin.")
    b.set_defaults(func=cmd_backends)
    command = _command(argv)
    available = plugin_manager.task_kinds()
    for task_cls in TASKS:
        if task_cls.kind not in available:
            continue  # no installed backend computes it: no command that could only fail
        if command == task_cls.command:
            _add_task_command(sub, task_cls, argv)
        else:  # listed in --help without building the backend's options
            sub.add_parser(task_cls.command, help=task_cls.title)
    i = sub.add_parser("info", help="what a model contains and which backends accept it",
                       description="Print the model's size, the SBML features it uses with the "
                                   "ids of the elements using them, and which installed backends "
                                   "accept it (and why the others refuse).")
    i.add_argument("model", metavar="MODEL", help="SBML file")
    i.set_defaults(func=cmd_info)
    _add_testsuite(sub, load=command == "testsuite")
    combine_cli.add_command(sub)
    add_petab_command(sub)
    return parser


# -- commands -------------------------------------------------------------------------
def cmd_backends(args) -> int:
    from . import plugin_manager
    from .tasks import task_class

    entries = plugin_manager.backend_entries()
    if not entries:
        print("no backends installed (a backend plugin registers in the entry-point group "
              "'sbmlgpu')")
    width = max((len(n) for n in entries), default=0)
    for name, entry in entries.items():
        backend = entry.value
        commands = ", ".join(f"{task_class(k).command} ({k})" if k != task_class(k).command
                             else k for k in backend.task_kinds)
        print(f"{name:<{width}}  {backend.description}")
        print(f"{'':<{width}}  tasks: {commands}")
        print(f"{'':<{width}}  plugin: {entry.origin} (entry point {entry.plugin!r})")
    broken = plugin_manager.problems()
    if broken:
        print("\nplugins with problems (skipped):")
        for message in broken:
            print(f"  {message}")
    if entries:
        print("\noptions of a backend: sbmlgpu COMMAND --backend NAME --help")
    return 0


def _report_failures(result) -> None:
    failures = result.failures()
    if not failures:
        return
    print(f"sbmlgpu: {len(failures)} of {result.n_members} member(s) failed:", file=sys.stderr)
    for member, status, message in failures[:5]:
        print(f"  member {member}: {status.name}: {message}", file=sys.stderr)
    if len(failures) > 5:
        print(f"  ... and {len(failures) - 5} more", file=sys.stderr)


def _print_profile(profiler) -> None:
    if profiler.records:
        print(profiler.summary_table())
    else:  # the CPU path launches no kernels: no table of empty rows
        print("profile: no kernels were launched (the CPU path runs none), so there is "
              "nothing to tabulate")


def cmd_task(args) -> int:
    """Any task's command: build the task from the flags, run it, write the result."""
    from . import api, load, plugin_manager
    from .cli_options import collected_options, collected_task_fields
    from .results import TimeCourseResult

    task_cls = args.task_cls
    # the model is loaded here only where the task's flags read it (a PEtab parameter
    # table); otherwise execute() loads it, or finds it in the compiled-model cache
    network = load(args.model) if getattr(args, "petab_parameters", None) else None
    values = collected_task_fields(args, task_cls)
    task = task_cls.from_arguments({**values, "progress": not args.no_progress}, args, network)
    device = "cpu" if args.cpu else (args.devices if args.devices else "auto")
    outdir = Path(args.outdir)
    outcome = api.execute(network or args.model, task, args.backend,
                          options=collected_options(args), device=device,
                          keep_source=args.keep_source, profile=args.profile,
                          cache=not args.no_cache)
    result = outcome.result
    if (result.metadata or {}).get("mpi_rank", 0) != 0:
        return 0  # an MPI rank other than the root: rank 0 writes the result
    make_output_folder(outdir)
    stem = Path(args.model).stem
    files = list(outcome.files)
    suffix = plugin_manager.writer_suffix(task_cls.kind, args.format)
    files += result.write(outdir / (stem + suffix), args.format)
    if args.plot:
        png = outdir / f"{stem}.png"
        result.plot(png)
        files.append(png)
    for path in files:
        print(f"wrote {path}")
    if args.profile and outcome.profiler is not None:
        _print_profile(outcome.profiler)
    if isinstance(result, TimeCourseResult):
        _report_failures(result)
        return EXIT_RUN_FAILED if result.n_failed == result.n_members else 0
    note, every = result.failure_note() if hasattr(result, "failure_note") else (None, False)
    if note:
        print(f"sbmlgpu: {note}", file=sys.stderr)
    return EXIT_RUN_FAILED if every else 0


def _ids(ids, limit: int = 12) -> str:
    shown = ", ".join(ids[:limit])
    return shown + (f", ... ({len(ids)} in all)" if len(ids) > limit else "")


def cmd_info(args) -> int:
    from . import load, plugin_manager
    from .features import network_features

    network = load(args.model)
    title = f"{network.id}" + (f" ({network.name})" if network.name else "")
    print(f"model: {title}, SBML Level {network.level} Version {network.version}, "
          f"from {network.source or args.model}")
    sizes = [f"{k}: {v}" for k, v in network.summary().items() if v]
    print("size: " + (", ".join(sizes) or "empty"))
    for note in network.notes:
        print(f"import note: {note}")
    features = network_features(network)
    print("SBML features:" + ("" if features else " none"))
    for feature, ids in features.items():
        print(f"  {feature}: {_ids(list(ids))}")
    transformed = plugin_manager.transform(network)
    print("backends:")
    entries = plugin_manager.backend_entries()
    width = max((len(n) for n in entries), default=0)
    for name, entry in entries.items():
        try:
            refused = entry.value.supports(transformed)
        except SbmlGpuError as exc:
            print(f"  {name:<{width}}  cannot check: {exc}")
            continue
        if not refused:
            print(f"  {name:<{width}}  accepts ({', '.join(entry.value.task_kinds)})")
        else:
            reasons = "; ".join(f"{f} ({_ids(list(ids), 6)})" if ids else f for f, ids in refused)
            print(f"  {name:<{width}}  refuses: {reasons}")
    if not entries:
        print("  none installed")
    return 0


# -- entry point ----------------------------------------------------------------------
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a command cut off so


def _closed_pipe() -> int:
    """Quietly end a command whose reader closed stdout: point stdout at /dev/null so
    that the interpreter's last flush does not print a second error."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real file descriptor (captured output)
        pass
    return EXIT_BROKEN_PIPE


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    _configure_logging()
    try:
        args = build_parser(argv).parse_args(argv)
        if getattr(args, "func", None) is None:
            build_parser([]).print_help(sys.stderr)
            return 2
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, inside the handlers below
        return code
    except BrokenPipeError:  # `sbmlgpu info MODEL | head -1`: the reader had enough
        return _closed_pipe()
    except SystemExit as exc:  # argparse: --help, --version, usage errors
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except SbmlGpuError as exc:
        if debug:
            raise
        print(f"sbmlgpu: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("sbmlgpu: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:  # a file we could not read or write: the user's to fix
        if debug:
            raise
        print(f"sbmlgpu: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - a bug: one line, traceback on --debug
        if debug:
            raise
        print(f"sbmlgpu: internal error: {type(exc).__name__}: {exc} (this is a bug in "
              f"sbmlgpu or a plugin; rerun with --debug for the traceback)", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
