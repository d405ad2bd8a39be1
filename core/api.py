"""The Python API: `sbmlgpu.run(...)` and one function per task, all through `execute`.

load -> plugin IR passes -> the backend for the task -> backend.supports -> options ->
task.bind(network) (every SBML id checked once, here) -> devices -> compile ->
program.run(task, scheduler, profiler) -> a result of the task's kind, with its
provenance, kept sources and profile files.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from . import model_cache, plugin_manager, runtime
from .backend import Backend, BackendOptions
from .errors import DeviceError, OptionError, UnsupportedModelError
from .profile import Profiler
from .results import Result
from .schedule import Scheduler
from .tasks import DEFAULT_POINTS, Task, TimeCourse, output_times  # noqa: F401 - re-exported
from .tasks.limits import check_result_size

if TYPE_CHECKING:  # pragma: no cover - the IR imports sympy, which a cached run skips
    from .ir import Network

log = logging.getLogger("sbmlgpu")


@dataclass
class RunOutcome:
    """What one run produced: the result, and for the CLI the profiler and files."""

    result: Result
    network: Network
    profiler: Any = None
    files: list[Path] = field(default_factory=list)


def load_model(model) -> Network:
    from .ir import Network

    if isinstance(model, Network):
        return model
    from . import load

    return load(model)


def backend_options(backend: Backend, options) -> BackendOptions:
    """The backend's options from None, a mapping or an options object, validated."""
    cls = backend.options_class
    if options is None:
        return default_options(cls)
    if isinstance(options, Mapping):
        return cls.from_mapping(dict(options))
    if isinstance(options, cls):
        return options.validate()
    raise OptionError("options", f"backend {backend.name!r} takes {cls.__name__} or a "
                                 f"mapping, not {type(options).__name__}")


def options_key(options: BackendOptions) -> str:
    """The options' values as a key of compiled programs: their repr, which keeps 1,
    1.0 and True apart (equal values that may compile differently)."""
    return repr(sorted(options.as_dict().items()))


@functools.lru_cache(maxsize=None)
def default_options(cls: type[BackendOptions]) -> BackendOptions:
    """The class's defaults, validated once and shared (read-only, as the options a
    compiled program keeps are): a run without options made and validated the same
    object every time (~4 us; issue 13). Invalid defaults raise at every call."""
    return cls().validate()


@functools.lru_cache(maxsize=None)
def default_options_key(cls: type[BackendOptions]) -> str:
    """options_key of the class's defaults, once per class (its repr costs ~10 us)."""
    return options_key(default_options(cls))


def ensemble_parameters(parameters, n: int) -> tuple[dict | None, int]:
    """(parameter sets as float arrays, ensemble size) from {id: values} and `n`."""
    if parameters is None:
        return None, n
    sets = {str(k): np.atleast_1d(np.asarray(v, dtype=float)) for k, v in parameters.items()}
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


def select_devices(device, backend: Backend, task: Task | None = None) -> list:
    """[] for the CPU path, else the runtime's devices to use. Without a usable GPU,
    "auto" takes the CPU path; the runtime says so once, with the reason. "auto" also
    takes it for an ensemble of no more members than the host's cores on a backend
    that says its CPU path is the faster there (Backend.few_members_on_cpu): no GPU is
    even looked for. "gpu": every GPU, an error without one."""
    cpu_only = getattr(backend, "cpu_only", False)
    if device == "cpu" or (cpu_only and device == "auto"):
        return []
    if cpu_only:
        raise OptionError("device", f"backend {backend.name!r} runs on the CPU only")
    if device == "auto":
        if _few_members_for_the_cpu(backend, task):
            return []
        return list(runtime.get_devices()) if runtime.get_driver() is not None else []
    if device == "gpu":
        devices = runtime.get_devices()
        if not devices:
            raise DeviceError(f"a GPU was asked for, but none was found "
                              f"({runtime.no_gpu_reason()})")
        return devices
    indices = [device] if isinstance(device, (int, np.integer)) else device
    if isinstance(indices, str) or not all(
            isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in indices):
        raise OptionError("device", f"{device!r}: use 'auto', 'cpu', 'gpu' or GPU indices")
    return list(runtime.get_devices([int(i) for i in indices]))


def host_cores() -> int:
    return runtime.host.host_cores()


_SAID_FEW_MEMBERS: set = set()


def _few_members_for_the_cpu(backend: Backend, task: Task | None) -> bool:
    """An ensemble that a GPU cannot run faster than the host's cores: a core
    integrates a member several to ~30 times faster than one GPU thread (the ode host
    pass's measurement), so no more members than cores finish sooner there, even run
    one after another (the host build starts threads above 16 members); and a GPU
    launch costs more than a small model's few members (~2 ms against ~0.3 ms for one
    member). Said once."""
    members = getattr(task, "ensemble_size", None)
    if not getattr(backend, "few_members_on_cpu", False) or not isinstance(members, int):
        return False
    cores = host_cores()
    if members > cores:
        return False
    if backend.name not in _SAID_FEW_MEMBERS:
        _SAID_FEW_MEMBERS.add(backend.name)
        log.info(f"{members} member{'s' * (members != 1)}, no more than the {cores} CPU "
                 f"cores: running on the CPU path, faster than the GPU for so few "
                 f"(--devices 0 or device=[0] runs it on a GPU, where there is one: "
                 f"no GPU was looked for)")
    return True


def source_file_name(name: str, model_id: str) -> str:
    """A kept source's file name: only its last path part (never a path out of the
    folder), starting with the model's id so that kept kernels of several models
    can share a folder."""
    name = Path(name).name
    model = re.sub(r"[^A-Za-z0-9_.-]", "_", model_id or "model")
    return name if model in name else f"{model}_{name}"


def keep_sources(program, directory: str | Path, backend: str,
                 model_id: str = "model") -> list[Path]:
    directory = Path(directory)
    sources = getattr(program, "sources", None) or {}
    if not sources:
        log.warning(f"backend {backend!r} generated no source code on this path; "
                    f"nothing to keep in {directory}")
        return []
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in sources.items():
        path = directory / source_file_name(name, model_id)
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


def _given(options) -> bool:
    # options for the default backend the user set (a mapping with keys, or an object)
    return bool(options) if isinstance(options, Mapping) else options is not None


def choose_backend(task_cls: type[Task], network: Network, backend: str | None,
                   options=None) -> Backend:
    """The backend that runs the task, having accepted the model. With no backend
    named, a model the task's default refuses (ode: delay(), fast reactions, ...) goes
    to the task's `fallback_backend` with one note naming what was refused; a named
    backend's refusal, or one whose options were given, is the user's error."""
    chosen = plugin_manager.backend_for(task_cls, backend)
    try:
        _check_supported(chosen, network)
    except UnsupportedModelError as refusal:
        fallback = task_cls.fallback_backend
        if backend is not None or fallback in (None, chosen.name):
            raise
        if _given(options):
            log.info(f"options of {chosen.name!r} were given, so the model does not go "
                     f"to {fallback!r}")
            raise
        other = plugin_manager.backend_for(task_cls, fallback)
        _check_supported(other, network)  # its own refusal if it refuses too
        refused = "; ".join(refusal.features)
        log.info(f"the default backend {chosen.name!r} refuses this model ({refused}): "
                 f"running it on {other.name!r} instead (--backend names one)")
        return other
    return chosen


def _check_supported(backend: Backend, network: Network) -> None:
    """backend.check_supported, remembered on the network when it accepts it (a
    refusal is not remembered: it raises again, with its message)."""
    from .views.cache import memoised

    memoised(network, ("supported", backend.name, type(backend)),
             lambda: backend.check_supported(network) or True)


def compiled_program(backend: Backend, network: Network, options: BackendOptions, device,
                     settings: str | None = None):
    """backend.compile, once per loaded network, backend, options and device: a
    repeated run of a loaded model reuses its generated kernels, views, method checks
    and engines (issue 13: in-process fixed cost). `settings`: options_key(options),
    where the caller knows it."""
    from .views.cache import memoised

    settings = options_key(options) if settings is None else settings
    # a program keeps its loaded kernels: built under other compiler settings
    # ($SBMLGPU_EXTRA_CXXFLAGS, $CXX) it is another program
    key = ("program", backend.name, type(backend), settings, id(device),
           model_cache.build_environment())
    return memoised(network, key, lambda: backend.compile(network, options, device))


def execute(model, task: Task, backend: str | None = None, *, options=None, device="auto",
            keep_source: str | Path | None = None, profile: str | Path | None = None,
            cache: bool = True) -> RunOutcome:
    """Answer `task` for `model` with `backend` (None: the task's default, falling back
    as choose_backend says, or the one installed backend that implements it); the
    result, profiler and files written. A model given as a file goes through the
    compiled-model cache (sbmlgpu.model_cache) unless `cache` is False or
    $SBMLGPU_MODEL_CACHE=0."""
    started = time.perf_counter()
    # from the start, so that its spans can name the setup before the backend runs
    profiler = Profiler(observers=plugin_manager.profile_observers())
    if not isinstance(task, Task):
        raise OptionError("task", f"{task!r} is not a task (sbmlgpu.tasks)")
    cached = CachedRun.open(model, task, backend, options, device) if cache else None
    if cached is not None and cached.entry is not None:
        try:
            return cached.run_warm(task, options, device, keep_source, profile, started,
                                   profiler)
        except model_cache.Miss as miss:
            log.debug(f"model cache: {miss}; running cold")
            # the cold run's own record (the attempt may have recorded spans)
            profiler = Profiler(observers=plugin_manager.profile_observers())
    # the task's ids as asked (bind rewrites them), for the entry of the model cache
    bound = model_cache.bound_key(task) if cached is not None else None
    network = plugin_manager.transform(load_model(model))
    chosen = choose_backend(type(task), network, backend, options)
    opts = backend_options(chosen, options)
    task.bind(network)
    if isinstance(task, TimeCourse):
        check_result_size(task, network)
    devices = select_devices(device, chosen, task)
    program = compiled_program(chosen, network, opts, devices[0] if devices else None,
                               default_options_key(type(opts)) if options is None else None)
    outcome = _run_program(program, chosen, opts, devices, task, network, network.id,
                           network.source, keep_source, profile, started, profiler)
    if cached is not None:
        cached.save(program, chosen, devices, network, bound, task)
    return outcome


def _run_program(program, chosen: Backend, opts, devices, task: Task, network,
                 model_id: str, source, keep_source, profile, started: float,
                 profiler: Profiler) -> RunOutcome:
    """Run a compiled program (cold or from the model cache) and dress its result.
    The profiler's spans name the host's work around the backend's ("prepare the
    run": from execute's start, when `profiler` was made; "program.run"; "dress the
    result", of which "time course notes"), so that a benchmark can say where a
    run's time goes."""
    scheduler = Scheduler(devices=devices, progress=task.progress, profiler=profiler)
    profiler.add_span("prepare the run", 0.0, profiler.clock())
    try:
        with profiler.span("program.run"):
            result = program.run(task, scheduler, profiler)
    finally:
        # after the run: backends generate kernels per run (they depend on which
        # parameters vary and on the outputs), and a failed run's kernels help most
        files = (keep_sources(program, keep_source, chosen.name, model_id)
                 if keep_source else [])
    expected = type(task).result_class
    if not isinstance(result, expected):
        raise plugin_manager.PluginError(
            f"backend {chosen.name!r} answered a {task.kind} task with "
            f"{type(result).__name__}, not {expected.__name__}")
    if isinstance(task, TimeCourse) and task.member_ends is not None \
            and (result.metadata or {}).get("member_ends") != "integrated":
        # a backend that integrated every member to the last time: its later outputs
        # cut as the ode kernels leave them (TimeCourse.member_ends)
        task.cut_after_ends(result.data)
    with profiler.span("dress the result"):
        _dress(result, chosen, opts, devices, task, model_id, source, started, profiler)
    if profile:
        files += write_profile(profiler, profile)
    return RunOutcome(result, network, profiler, files)


def _dress(result: Result, chosen: Backend, opts, devices, task: Task, model_id: str,
           source, started: float, profiler: Profiler) -> None:
    """The result's provenance, and the notes on a time course (logged)."""
    distribution, version = plugin_manager.provider(chosen.name)
    from . import __version__

    own = result.metadata or {}
    result.metadata = {
        "model": model_id, "source": source, "backend": chosen.name,
        "plugin": f"{distribution} {version}".strip(),
        "device": device_names(devices),
        # the backend's own report of its options, where it has one, takes this place
        "options": own["options"] if "options" in own else opts.as_dict(),
        "seed": getattr(task, "seed", None),
        "task": task.describe(), "sbmlgpu": __version__,
        **own,
        "wall_seconds": time.perf_counter() - started,
    }
    if isinstance(task, TimeCourse):
        result.metadata["members"] = task.n
        if task.parameters and not result.members:
            result.members = dict(task.parameters)
    if isinstance(task, TimeCourse):
        with profiler.span("time course notes"):  # the non-finite scan reads every value
            notes = time_course_notes(result, task)
        for note in notes:
            log.info(note)


def device_names(devices) -> str:
    return ", ".join(d.properties.name for d in devices) or "cpu"


@dataclass
class CachedRun:
    """A run of a model file through sbmlgpu.model_cache: its key, and the entry
    found under it (None: a miss)."""

    key: str
    entry: dict | None

    @classmethod
    def open(cls, model, task: Task, backend, options, device) -> "CachedRun | None":
        """None where the cache does not apply: disabled, the model is not a file, or
        a plugin's network pass runs (its effect, or its report of a failure, may
        depend on more than the file: it runs every time)."""
        path = model_cache.model_file(model)
        if path is None or not model_cache.enabled() or plugin_manager.has_transforms():
            return None
        try:
            key = model_cache.key(path, kind=task.kind, backend=backend, options=options,
                                  device=device)
        except OSError:
            return None
        return cls(key, model_cache.load(key))

    def run_warm(self, task: Task, options, device, keep_source, profile,
                 started: float, profiler: Profiler) -> RunOutcome:
        """The run from the entry; model_cache.Miss where the entry cannot answer it."""
        entry = self.entry
        try:
            chosen = plugin_manager.backend(entry["backend"])
            restore = getattr(chosen, "restore", None)
            outputs = entry["bound"][model_cache.bound_key(task)]
            model_id, source = entry["model"], entry["source"]
        except (KeyError, TypeError, OptionError) as exc:
            raise model_cache.Miss(f"the entry does not answer this task ({exc})") from None
        if restore is None:
            raise model_cache.Miss(f"backend {chosen.name!r} cannot run from the cache")
        opts = backend_options(chosen, options)
        task.validate()
        if outputs is not None:
            task.outputs = tuple(outputs)  # as the model check wrote them
        if isinstance(task, TimeCourse):
            columns = task.outputs or tuple(entry.get("default_outputs") or ())
            check_result_size(dataclasses.replace(task, outputs=columns), None)
        devices = select_devices(device, chosen, task)
        if device_names(devices) != entry.get("device"):
            raise model_cache.Miss("another device than the cached run's")
        program = restore(entry["program"], opts, devices[0] if devices else None)
        return _run_program(program, chosen, opts, devices, task, None, model_id, source,
                            keep_source, profile, started, profiler)

    def save(self, program, chosen: Backend, devices, network: Network, bound: str,
             task: Task) -> None:
        """Store (merge into) the entry after a cold run; backends without the
        protocol store nothing."""
        warm_state = getattr(program, "warm_state", None)
        if warm_state is None or not hasattr(chosen, "restore"):
            return
        previous = self.entry or {}
        same = previous.get("backend") == chosen.name \
            and previous.get("device") == device_names(devices)
        try:
            state = warm_state(previous.get("program") if same else None)
        except Exception as exc:  # noqa: BLE001 - a cache that cannot be written costs time only
            log.debug(f"model cache: no state from {chosen.name!r} ({exc})")
            return
        outputs = getattr(task, "outputs", None)
        model_cache.store(self.key, {
            "backend": chosen.name, "device": device_names(devices),
            "model": network.id, "source": network.source, "program": state,
            "default_outputs": list(state.get("default_outputs", ())),
            "bound": {**(previous.get("bound", {}) if same else {}),
                      bound: None if outputs is None else list(outputs)}})


def time_course_notes(result, task: TimeCourse) -> list[str]:
    """What a user could take for a bug in a time course that is right: no output
    columns, non-finite outputs of members that succeeded (recorded in the metadata
    too), a summary whose sd cannot be defined."""
    notes = []
    if not result.ids:
        notes.append("the result has no output columns (the model has no species and "
                     "nothing that changes): only the times are written; name outputs "
                     "with --outputs / outputs=")
    non_finite = result.non_finite_outputs(task.own_times()) \
        if result.data is not None else {}
    if non_finite:
        result.metadata["non_finite_outputs"] = non_finite
        worst = ", ".join(f"{name} ({n} member(s))" for name, n in list(non_finite.items())[:6])
        more = f", ... ({len(non_finite)} outputs in all)" if len(non_finite) > 6 else ""
        notes.append(f"NaN or infinite values in outputs of members that succeeded: {worst}"
                     f"{more}; the model's math gives them (e.g. a compartment of size 0, "
                     f"a function outside its domain); the result's metadata lists them "
                     f"under non_finite_outputs")
    if task.summary:
        succeeded = result.n_members - result.n_failed
        if succeeded == 0:
            notes.append("--summary: no member succeeded, so every statistic is NaN")
        elif succeeded == 1:
            notes.append("--summary over one member: its sd is undefined and written as "
                         "NaN; mean and quantiles are that member's values")
    return notes


def run(model, backend: str | None = None, *, start: float = 0.0, end: float | None = None,
        points: int | None = None, times=None,
        parameters: Mapping[str, Sequence[float]] | None = None, n: int = 1, seed: int = 0,
        summary: bool = False, outputs: Sequence[str] | None = None, options=None,
        device="auto", keep_source: str | Path | None = None,
        profile: str | Path | None = None, progress: bool = True) -> Result:
    """Simulate `model` (a path, an SBML string or a Network) with `backend` (None:
    `ode`, on the GPU if there is one, else its CPU path; a model that ode refuses
    runs on `reference`, with a note).

    Output times: `times`, or `points` (default 101) evenly spaced from `start` to
    `end`. Ensemble: `parameters` {SBML id: one value per member} (see
    sbmlgpu.ensemble for tables and sampling), or `n` members at the model's values
    (stochastic backends). `summary`: keep mean/sd/quantiles instead of every
    trajectory. `outputs`: names to report (`S1`, `[S1]`, `amount(S1)`). `options`:
    the backend's options (mapping or its options dataclass). `device`: "auto" (a
    GPU if there is one, else the CPU path), "cpu", or GPU indices. `keep_source`: a
    folder for the generated kernels. `profile`: a JSON file for the launch records
    (plus a Chrome trace beside it).

    Returns a TimeCourseResult. Raises UnsupportedModelError before anything runs
    if the backend refuses the model, OptionError naming a bad option, DeviceError,
    SBMLImportError.
    """
    task = time_course(start=start, end=end, points=points, times=times, parameters=parameters,
                       n=n, seed=seed, summary=summary, outputs=outputs, progress=progress)
    return execute(model, task, backend, options=options, device=device,
                   keep_source=keep_source, profile=profile).result


def time_course(*, start=0.0, end=None, points=None, times=None, parameters=None,
                n: int = 1, seed: int = 0, summary: bool = False, outputs=None,
                progress: bool = True) -> TimeCourse:
    """The TimeCourse task that `run()` answers (its ids are checked when it runs)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise OptionError("n", f"{n!r}: the ensemble size must be a positive integer")
    sets, n = ensemble_parameters(parameters, n)
    return TimeCourse(times=output_times(start, end, points, times), parameters=sets,
                      n=int(n), seed=seed, outputs=None if outputs is None else tuple(outputs),
                      summary=summary, progress=progress)


def task_function(task_cls: type[Task]):
    """The Python function of a task: `sbmlgpu.<task.function>(model, backend=None,
    *, <the task's fields>, options=None, device="auto", keep_source=None,
    profile=None, progress=True)`, returning the task's result."""
    fields = [f for f in dataclasses.fields(task_cls) if f.init and f.name != "progress"]

    def function(model, backend: str | None = None, *, options=None, device="auto",
                 keep_source=None, profile=None, progress: bool = True, **settings):
        task = task_cls.from_mapping({**settings, "progress": progress})
        return execute(model, task, backend, options=options, device=device,
                       keep_source=keep_source, profile=profile).result

    keyword = inspect.Parameter.KEYWORD_ONLY
    parameters = [inspect.Parameter("model", inspect.Parameter.POSITIONAL_OR_KEYWORD),
                  inspect.Parameter("backend", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                    default=None)]
    for f in fields:
        default = (f.default if f.default is not dataclasses.MISSING
                   else f.default_factory())  # type: ignore[misc]
        parameters.append(inspect.Parameter(f.name, keyword, default=default))
    parameters += [inspect.Parameter(n, keyword, default=d) for n, d in
                   (("options", None), ("device", "auto"), ("keep_source", None),
                    ("profile", None), ("progress", True))]
    function.__signature__ = inspect.Signature(parameters)
    function.__name__ = function.__qualname__ = task_cls.function
    lines = [f"{task_cls.title[0].upper()}{task_cls.title[1:]}.", "", task_cls.description,
             "", f"Returns a {task_cls.result_class.__name__}. Settings:"]
    lines += [f"    {f.name}: {f.metadata.get('help', '')}"
              + (" (required)" if f.metadata.get("required") else "") for f in fields]
    lines += ["", "backend: a backend that implements this task (default: the only "
                  "installed one); options, device, keep_source, profile: as for run()."]
    function.__doc__ = "\n".join(lines)
    return function
