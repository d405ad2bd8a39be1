"""`sbmlgpu.run(...)`: the one call behind `sbmlgpu run` and the Python API.

load -> plugin IR passes -> backend.supports -> options -> devices -> compile ->
program.run(scheduler, profiler) -> Result, with kept sources and profile files.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from . import plugin_manager
from .backend import Backend, BackendOptions, RunRequest
from .ensemble import check_ids, unknown_id_error
from .errors import OptionError
from .ir import Network
from .profile import Profiler
from .results import Result
from .schedule import Scheduler

log = logging.getLogger("sbmlgpu")
DEFAULT_POINTS = 101
@dataclass
class RunOutcome:
    """What one run produced: the result, and for the CLI the profiler and files."""

    result: Result
    network: Network
    profiler: Any = None
    files: list[Path] = field(default_factory=list)


def load_model(model) -> Network:
    if isinstance(model, Network):
        return model
    from . import load

    return load(model)


def output_times(start: float = 0.0, end: float | None = None, points: int | None = None,
                 times: Sequence[float] | np.ndarray | None = None) -> np.ndarray:
    """Either explicit `times` or `points` evenly spaced times from start to end."""
    if times is not None:
        if end is not None or points is not None:
            raise OptionError("times", "give either times or start/end/points, not both")
        return np.asarray(times, dtype=float)
    if end is None:
        raise OptionError("end", "give the end time (and points), or the output times")
    points = DEFAULT_POINTS if points is None else points
    if isinstance(points, bool) or not isinstance(points, (int, np.integer)) or points < 2:
        raise OptionError("points", f"{points!r}: need an integer of at least 2")
    if not (np.isfinite(start) and np.isfinite(end) and end > start):
        raise OptionError("end", f"{end!r} must be a finite time after start {start!r}")
    return np.linspace(float(start), float(end), int(points))


def backend_options(backend: Backend, options) -> BackendOptions:
    """The backend's options from None, a mapping or an options object, validated."""
    cls = backend.options_class
    if options is None:
        return cls().validate()
    if isinstance(options, Mapping):
        return cls.from_mapping(dict(options))
    if isinstance(options, cls):
        return options.validate()
    raise OptionError("options", f"backend {backend.name!r} takes {cls.__name__} or a "
                                 f"mapping, not {type(options).__name__}")


def ensemble_parameters(network: Network, parameters, n: int) -> tuple[dict | None, int]:
    if parameters is None:
        return None, n
    sets = {str(k): np.atleast_1d(np.asarray(v, dtype=float)) for k, v in parameters.items()}
    check_ids(network, sets)
    lengths = {len(v) for v in sets.values()}
    if len(lengths) > 1:
        raise OptionError("parameters", f"the parameter arrays differ in length: "
                                        f"{ {k: len(v) for k, v in sets.items()} }")
    rows = lengths.pop() if lengths else n
    if n not in (1, rows):
        raise OptionError("n", f"{n} members asked for, but the parameter sets have {rows}")
    return sets or None, rows


def check_outputs(network: Network, outputs: Sequence[str] | None) -> tuple[str, ...] | None:
    """The output names as asked (`S1`, `[S1]`, `concentration(S1)`, `amount(S1)`),
    each checked against the model by core/outputs.py; None: the backend's default."""
    if outputs is None:
        return None
    from . import outputs as output_names

    return tuple(o.name for o in output_names.check_outputs(network, outputs))


def select_devices(device, backend: Backend) -> list:
    """[] for the CPU path, else the runtime's devices to use. Without a usable GPU,
    "auto" takes the CPU path; the runtime says so once, with the reason."""
    cpu_only = getattr(backend, "cpu_only", False)
    if device == "cpu" or (cpu_only and device == "auto"):
        return []
    if cpu_only:
        raise OptionError("device", f"backend {backend.name!r} runs on the CPU only")
    from . import runtime

    if device == "auto":
        return list(runtime.get_devices()) if runtime.get_driver() is not None else []
    indices = [device] if isinstance(device, (int, np.integer)) else device
    if isinstance(indices, str) or not all(
            isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in indices):
        raise OptionError("device", f"{device!r}: use 'auto', 'cpu' or GPU indices")
    return list(runtime.get_devices([int(i) for i in indices]))


def keep_sources(program, directory: str | Path, backend: str) -> list[Path]:
    directory = Path(directory)
    sources = getattr(program, "sources", None) or {}
    if not sources:
        log.warning(f"backend {backend!r} generated no source code on this path; "
                 f"nothing to keep in {directory}")
        return []
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in sources.items():
        path = directory / Path(name).name  # a name, never a path out of the folder
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def write_profile(profiler, path: str | Path) -> list[Path]:
    path = Path(path)
    if profiler is None:
        log.warning("profiling is not available in this installation (no sbmlgpu.profile)")
        return []
    trace = path.with_name(path.stem + ".trace.json")
    path.parent.mkdir(parents=True, exist_ok=True)  # as -o and --keep-source do
    profiler.to_json(path)
    profiler.to_chrome_trace(trace)
    return [path, trace]


def execute(model, backend: str = "reference", *, start: float = 0.0,
            end: float | None = None, points: int | None = None, times=None,
            parameters: Mapping[str, Sequence[float]] | None = None, n: int = 1, seed: int = 0,
            summary: bool = False, outputs: Sequence[str] | None = None, options=None,
            device="auto", keep_source: str | Path | None = None,
            profile: str | Path | None = None, progress: bool = True) -> RunOutcome:
    """`run()`, returning the profiler and the files written as well."""
    network = plugin_manager.transform(load_model(model))
    chosen = plugin_manager.backend(backend)
    chosen.check_supported(network)
    opts = backend_options(chosen, options)
    sets, n = ensemble_parameters(network, parameters, n)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise OptionError("n", f"{n!r}: the ensemble size must be a positive integer")
    request = RunRequest(times=output_times(start, end, points, times), parameters=sets,
                         n=int(n), seed=seed, outputs=check_outputs(network, outputs),
                         summary=summary, progress=progress)
    devices = select_devices(device, chosen)
    program = chosen.compile(network, opts, devices[0] if devices else None)
    profiler = Profiler(observers=plugin_manager.profile_observers())
    scheduler = Scheduler(devices=devices, progress=progress, profiler=profiler)
    try:
        result = program.run(request, scheduler, profiler)
    finally:
        # after the run: backends generate kernels per run (they depend on which
        # parameters vary and on the outputs), and a failed run's kernels help most
        files = keep_sources(program, keep_source, chosen.name) if keep_source else []
    distribution, version = plugin_manager.provider(chosen.name)
    from . import __version__

    result.metadata = {
        "model": network.id, "source": network.source, "backend": chosen.name,
        "plugin": f"{distribution} {version}".strip(),
        "device": ", ".join(d.properties.name for d in devices) or "cpu",
        "options": dataclasses.asdict(opts), "seed": seed, "members": request.n,
        "sbmlgpu": __version__, **(result.metadata or {}),
    }
    if profile:
        files += write_profile(profiler, profile)
    return RunOutcome(result, network, profiler, files)


def run(model, backend: str = "reference", *, start: float = 0.0, end: float | None = None,
        points: int | None = None, times=None,
        parameters: Mapping[str, Sequence[float]] | None = None, n: int = 1, seed: int = 0,
        summary: bool = False, outputs: Sequence[str] | None = None, options=None,
        device="auto", keep_source: str | Path | None = None,
        profile: str | Path | None = None, progress: bool = True) -> Result:
    """Simulate `model` (a path, an SBML string or a Network) with `backend`.

    Output times: `times`, or `points` (default 101) evenly spaced from `start` to
    `end`. Ensemble: `parameters` {SBML id: one value per member} (see
    sbmlgpu.ensemble for tables and sampling), or `n` members at nominal values
    (stochastic backends). `summary`: keep mean/sd/quantiles instead of every
    trajectory. `options`: the backend's options (mapping or its options
    dataclass). `device`: "auto" (a GPU if there is one, else the CPU path),
    "cpu", or GPU indices. `keep_source`: a folder for the generated kernels.
    `profile`: a JSON file for the launch records (plus a Chrome trace beside it).

    Raises UnsupportedModelError before anything runs if the backend refuses the
    model, OptionError naming a bad option, DeviceError, SBMLImportError.
    """
    return execute(model, backend, start=start, end=end, points=points, times=times,
                   parameters=parameters, n=n, seed=seed, summary=summary, outputs=outputs,
                   options=options, device=device, keep_source=keep_source,
                   profile=profile, progress=progress).result
