"""The plugin manager: finds every plugin through the entry-point group `sbmlgpu`.

Built-in backends (sbmlgpu.plugins.*) and third-party ones are found the same way,
from the entry points in their distributions' metadata; core never imports a plugin
package. Only core's own result writers are registered directly.

A broken plugin never disables the tool: a plugin that fails to import, implements
a hook sbmlgpu does not define, or raises in a hook is reported once on stderr
(through the "sbmlgpu" logger), naming its distribution, and skipped; every other
backend and command works. Two plugins that provide the same backend name or
writer format are reported too, and neither is used for that name (which one was
meant cannot be guessed).

(Named plugin_manager, not plugins: `sbmlgpu.plugins` is the package of built-in
backends.)
"""

from __future__ import annotations

import difflib
import functools
import importlib.metadata
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Hashable, TypeVar

import pluggy

from . import hookspecs
from .errors import OptionError, SbmlGpuError, UnsupportedModelError

if TYPE_CHECKING:  # pragma: no cover
    from .backend import Backend
    from .ir import Network

GROUP = "sbmlgpu"
CORE = "sbmlgpu (core)"
TIME_COURSE = "time-course"
log = logging.getLogger("sbmlgpu")
T = TypeVar("T")


class PluginError(SbmlGpuError):
    """An installed plugin is broken or misbehaves; names the distributions involved."""


@dataclass(frozen=True)
class Provided:
    """Something a plugin provides, and where it comes from."""

    value: Any
    plugin: str  # the entry-point name the plugin is registered under
    distribution: str
    version: str

    @property
    def origin(self) -> str:
        return f"{self.distribution} {self.version}".strip()


# -- problems: reported once per manager, kept for `sbmlgpu backends` ---------------------
def problems(pm: pluggy.PluginManager | None = None) -> list[str]:
    """What was wrong with the installed plugins (each skipped), in the order found."""
    return list(getattr(pm or manager(), "sbmlgpu_problems", []))


def _report(pm: pluggy.PluginManager, message: str) -> None:
    found = pm.__dict__.setdefault("sbmlgpu_problems", [])
    if message not in found:
        found.append(message)
        log.warning(message)


def _loading_report(dist, ep, exc: BaseException) -> str:
    return (f"plugin {ep.name!r} ({ep.value}) of distribution {dist.metadata['Name']} "
            f"{dist.version} fails to load and was skipped: {type(exc).__name__}: {exc}")


# -- loading ---------------------------------------------------------------------------------
def _entry_points() -> list[tuple[Any, Any]]:
    """(distribution, entry point) of the group, each distribution once. A name that two
    distributions register cannot be told apart by pluggy (it keeps one silently):
    those are returned under the key None to be reported."""
    seen: dict[str, tuple[Any, Any]] = {}
    clashes: dict[str, list[str]] = {}
    names_done: set[tuple[str, str]] = set()
    for dist in importlib.metadata.distributions():
        ours = [ep for ep in dist.entry_points if ep.group == GROUP]
        if not ours:
            continue  # its name is not read: parsing every METADATA took 0.15 s a run
        dist_name = dist.metadata["Name"]
        for ep in ours:
            if (dist_name, ep.name) in names_done:
                continue
            names_done.add((dist_name, ep.name))
            if ep.name in seen and seen[ep.name][0].metadata["Name"] != dist_name:
                clashes.setdefault(ep.name, [seen[ep.name][0].metadata["Name"]]).append(dist_name)
                continue
            seen[ep.name] = (dist, ep)
    out = [pair for name, pair in seen.items() if name not in clashes]
    out += [(None, (name, dists)) for name, dists in clashes.items()]
    return out


def _load_entry_points(pm: pluggy.PluginManager) -> None:
    for dist, ep in _entry_points():
        if dist is None:
            name, dists = ep
            _report(pm, f"two distributions register the plugin name {name!r} in the "
                        f"entry-point group {GROUP!r}: {' and '.join(dists)}; neither was "
                        f"loaded (uninstall one of them)")
            continue
        if pm.get_plugin(ep.name) is not None or pm.is_blocked(ep.name):
            continue
        try:
            plugin = ep.load()
            pm.register(plugin, name=ep.name)
        except Exception as exc:  # noqa: BLE001 - any failure of a plugin is reported
            _report(pm, _loading_report(dist, ep, exc))
            continue
        pm.add_distinfo(plugin, dist)
    _drop_unknown_hooks(pm)


def _drop_unknown_hooks(pm: pluggy.PluginManager) -> None:
    """Unregister each plugin that implements a hook sbmlgpu does not define (a typo
    such as `sbmlgpu_backend`), reporting it; pluggy would refuse all of them at once."""
    origins = _origins(pm)
    for name, plugin in list(pm.list_name_plugin()):
        unknown = [h for h in _hook_names(plugin) if not hasattr(hookspecs, h)]
        if unknown:
            dist, version = origins.get(id(plugin), ("(registered directly)", ""))
            pm.unregister(plugin)
            _report(pm, f"plugin {name!r} ({dist} {version}) implements "
                        f"{', '.join(unknown)}, which sbmlgpu does not define (a misspelt "
                        f"hook?); it was skipped")


def _hook_names(plugin) -> list[str]:
    marker = f"{hookspecs.PROJECT}_impl"
    return [n for n in dir(plugin) if n.startswith("sbmlgpu_")
            and getattr(getattr(plugin, n, None), marker, None) is not None]


class _Manager(pluggy.PluginManager):
    """pluggy's manager, counting the changes to its plugins: what is derived from
    them (backends, their distributions, network passes, observers) is kept until the
    next change (`_memo`), as every run asks for it several times (issue 13)."""

    changes = 0

    def register(self, plugin, name=None):
        try:
            return super().register(plugin, name)
        finally:
            self.changes += 1

    def unregister(self, plugin=None, name=None):  # set_blocked comes here too
        try:
            return super().unregister(plugin, name)
        finally:
            self.changes += 1

    def add_hookspecs(self, module_or_class) -> None:
        try:
            super().add_hookspecs(module_or_class)
        finally:
            self.changes += 1

    def add_distinfo(self, plugin, dist) -> None:
        """Record the distribution of an entry point's plugin, as pluggy's own loader
        (load_setuptools_entrypoints) does."""
        self._plugin_distinfo.append((plugin, dist))
        self.changes += 1


def _plugins_state(pm: pluggy.PluginManager) -> Hashable:
    """What identifies the registered plugins of `pm`: its count of changes, or for a
    manager made elsewhere the plugins and distributions themselves."""
    if isinstance(pm, _Manager):
        return pm.changes
    return (frozenset(id(plugin) for plugin in pm.get_plugins()),
            tuple(id(plugin) for plugin, _ in pm.list_plugin_distinfo()))


def _memo(pm: pluggy.PluginManager, what: Hashable, build: Callable[[], T]) -> T:
    """build(), kept on `pm` under `what` until its plugins change (_plugins_state).
    A build that raises keeps nothing (its error comes again, with its report)."""
    state = _plugins_state(pm)
    memo = pm.__dict__.get("sbmlgpu_memo")
    if memo is None or memo[0] != state:
        memo = pm.__dict__["sbmlgpu_memo"] = (state, {})
    table = memo[1]
    if what not in table:
        table[what] = build()
    return table[what]


def new_manager(entry_points: bool = True) -> pluggy.PluginManager:
    """A fresh manager with the hook specs and core's writers; with the installed
    plugins unless `entry_points` is False (tests register their own)."""
    from .results import writers as core_writers

    pm = _Manager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.register(core_writers, name=CORE)
    if entry_points:
        _load_entry_points(pm)
    return pm


@functools.lru_cache(maxsize=1)
def manager() -> pluggy.PluginManager:
    """The process-wide manager, loaded once."""
    return new_manager()


def reset() -> None:
    """Forget the loaded plugins (after installing one, and in tests)."""
    manager.cache_clear()


def _origins(pm: pluggy.PluginManager) -> dict[int, tuple[str, str]]:
    """{id(plugin): (distribution, version)}, memoised per set of registered plugins:
    reading a distribution's metadata parses its METADATA file, and every run asks
    several times (backend, provider, transforms, observers)."""
    def read() -> dict[int, tuple[str, str]]:
        from . import __version__
        from .results import writers as core_writers

        origins = {id(plugin): (dist.metadata["Name"], dist.version)
                   for plugin, dist in pm.list_plugin_distinfo()}
        origins[id(core_writers)] = ("sbmlgpu", __version__)
        return origins

    return _memo(pm, "origins", read)


def _calls(pm: pluggy.PluginManager, hook_name: str):
    """(implementation, distribution, version) per implementation of a hook, in
    registration order, hook wrappers left out."""
    origins = _origins(pm)
    for impl in getattr(pm.hook, hook_name).get_hookimpls():
        if impl.hookwrapper or getattr(impl, "wrapper", False):
            continue
        dist, version = origins.get(id(impl.plugin), ("(registered directly)", ""))
        yield impl, dist, version


def _collect(pm: pluggy.PluginManager, hook_name: str, check) -> list[tuple[Any, Provided]]:
    """(answer, where it came from) per implementation that answered well; one that
    raises, or whose answer `check` refuses (ValueError), is reported and skipped."""
    out = []
    for impl, dist, version in _calls(pm, hook_name):
        where = Provided(None, impl.plugin_name, dist, version)
        try:
            answer = impl.function()  # the collected hooks take no arguments
            answer = check(answer, where)
        except Exception as exc:  # noqa: BLE001 - a plugin's bug, reported with its name
            _report(pm, f"plugin {impl.plugin_name} ({where.origin}) failed in "
                        f"{hook_name}() and was skipped: {type(exc).__name__}: {exc}")
            continue
        out.append((answer, where))
    return out


def _entries(pm: pluggy.PluginManager | None, hook_name: str, what: str,
             check) -> dict[Any, Provided]:
    pm = pm or manager()
    found: dict[Any, Provided] = {}
    clashing: dict[Any, list[Provided]] = {}
    for answer, where in _collect(pm, hook_name, check):
        for name, value in answer:
            if name in found or name in clashing:
                clashing.setdefault(name, [found.pop(name)] if name in found else [])
                clashing[name].append(where)
                continue
            found[name] = Provided(value, where.plugin, where.distribution, where.version)
    for name, providers in clashing.items():
        shown = " and ".join(f"{p.origin} (plugin {p.plugin})" for p in providers)
        _report(pm, f"two plugins provide the {what} {name!r}: {shown}; neither is used "
                    f"(uninstall one of them)")
    pm.__dict__.setdefault("sbmlgpu_clashes", {}).update(
        {(what, name): providers for name, providers in clashing.items()})
    return found


# -- backends ------------------------------------------------------------------------------------
def _backend_items(answer, where: Provided) -> list[tuple[str, "Backend"]]:
    from .backend import Backend

    if answer is None:
        return []
    if isinstance(answer, Backend) or not isinstance(answer, (list, tuple)):
        answer = [answer]
    out = []
    for backend in answer:
        if isinstance(backend, type) and issubclass(backend, Backend):
            backend = backend()
        if not isinstance(backend, Backend) or not getattr(backend, "name", None):
            raise ValueError(f"returned {backend!r}; expected named sbmlgpu.backend.Backend "
                             f"instances")
        out.append((backend.name, backend))
    return out


def _backend_entries(pm: pluggy.PluginManager) -> dict[str, Provided]:
    """backend_entries, not copied: for reading only."""
    return _memo(pm, "backends", lambda: dict(sorted(
        _entries(pm, "sbmlgpu_backends", "backend", _backend_items).items())))


def backend_entries(pm: pluggy.PluginManager | None = None) -> dict[str, Provided]:
    """{backend name: Provided(backend, plugin, distribution, version)}, sorted by name;
    memoised per set of registered plugins, as _origins is: a run asks several times,
    and the same Backend instances let a loaded model keep its compiled programs."""
    return dict(_backend_entries(pm or manager()))


def backends(pm: pluggy.PluginManager | None = None) -> dict[str, "Backend"]:
    """{name: Backend} of every installed backend."""
    return {name: e.value for name, e in _backend_entries(pm or manager()).items()}


def _unknown_backend(name: str, installed, pm) -> OptionError:
    clash = getattr(pm or manager(), "sbmlgpu_clashes", {}).get(("backend", name))
    if clash:
        shown = " and ".join(p.origin for p in clash)
        return OptionError("backend", f"{name!r} is provided by two plugins ({shown}); "
                                      f"uninstall one of them")
    close = difflib.get_close_matches(name, installed, n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    listing = ", ".join(installed) or "none: no backend plugin is installed"
    return OptionError("backend", f"no backend {name!r}{hint}; installed: {listing}")


def backend(name: str, pm: pluggy.PluginManager | None = None) -> "Backend":
    """The installed backend called `name`; an OptionError listing the installed
    ones (and the closest names) if there is none."""
    return _entry(name, pm).value


def _entry(name: str, pm: pluggy.PluginManager | None) -> Provided:
    installed = _backend_entries(pm or manager())
    if name in installed:
        return installed[name]
    raise _unknown_backend(name, list(installed), pm)


def backends_for(kind: str, pm: pluggy.PluginManager | None = None) -> dict[str, "Backend"]:
    """{name: Backend} of the installed backends that implement task kind `kind`."""
    return {n: b for n, b in backends(pm).items() if b.implements(kind)}


def task_kinds(pm: pluggy.PluginManager | None = None) -> set[str]:
    """The task kinds at least one installed backend implements."""
    return {kind for b in backends(pm).values() for kind in b.task_kinds}


def backend_for(task_cls, name: str | None = None,
                pm: pluggy.PluginManager | None = None) -> "Backend":
    """The backend that answers tasks of `task_cls`: `name`, else the task's default
    (its fallback where the default is not installed), else the only installed backend
    that implements it; an OptionError otherwise. Memoised per set of plugins (every
    run asks), keyed by what of the task class it reads."""
    pm = pm or manager()
    key = ("backend_for", task_cls, task_cls.kind, task_cls.default_backend,
           getattr(task_cls, "fallback_backend", None), name)
    return _memo(pm, key, lambda: _backend_for(task_cls, name, pm))


def _backend_for(task_cls, name: str | None, pm: pluggy.PluginManager) -> "Backend":
    able = backends_for(task_cls.kind, pm)
    if name is None:
        default = task_cls.default_backend
        fallback = getattr(task_cls, "fallback_backend", None)
        if default is not None and default not in able and fallback in able:
            default = fallback  # the default's plugin is not installed here
        if default is not None:
            name = default
        elif len(able) == 1:
            return next(iter(able.values()))
        elif not able:
            raise OptionError("backend", f"no installed backend computes a {task_cls.kind} "
                                         f"(`sbmlgpu backends` lists what each one does)")
        else:
            raise OptionError("backend", f"several backends compute a {task_cls.kind}: "
                                         f"{', '.join(able)}; name one with --backend")
    chosen = backend(name, pm)
    if not chosen.implements(task_cls.kind):
        others = f"; backends that do: {', '.join(able)}" if able else ""
        raise OptionError("backend", f"backend {name!r} does not compute a {task_cls.kind} "
                                     f"(it does: {', '.join(chosen.task_kinds)}){others}")
    return chosen


def provider(name: str, pm: pluggy.PluginManager | None = None) -> tuple[str, str]:
    """(distribution, version) of the plugin that provides backend `name`."""
    entry = _entry(name, pm)
    return entry.distribution, entry.version


# -- result writers ------------------------------------------------------------------------------
def _writer_items(answer, where: Provided) -> list[tuple[tuple[str, str], Any]]:
    """Writers keyed by (result kind, format); a plain format name means a time-course
    writer (the form writers had before result kinds existed)."""
    if not answer:
        return []
    if not isinstance(answer, dict):
        raise ValueError(f"returned {answer!r}; expected {{(kind, format): writer}}")
    out = []
    for key, writer in answer.items():
        kind, fmt = (TIME_COURSE, key) if isinstance(key, str) else key
        if not callable(writer):
            raise ValueError(f"the writer for {kind} format {fmt!r} is not callable")
        out.append(((str(kind), str(fmt)), writer))
    return out


def writer_entries(pm: pluggy.PluginManager | None = None) -> dict[tuple[str, str], Provided]:
    return _entries(pm, "sbmlgpu_result_writers", "result format", _writer_items)


def writers(kind: str = TIME_COURSE, pm: pluggy.PluginManager | None = None) -> dict[str, Any]:
    """{format name: writer(result, path) -> list of paths written} for one result kind."""
    return {fmt: e.value for (k, fmt), e in writer_entries(pm).items() if k == kind}


def writer_for(kind: str, fmt: str, pm: pluggy.PluginManager | None = None):
    known = writers(kind, pm)
    if fmt == "h5":
        fmt = "hdf5"
    if fmt not in known:
        raise OptionError("format", f"no writer for {fmt!r} results of kind {kind}; known "
                                    f"formats: {', '.join(known) or 'none'}")
    return known[fmt]


def writer_suffix(kind: str, fmt: str, pm: pluggy.PluginManager | None = None) -> str:
    return getattr(writer_for(kind, fmt, pm), "suffix", "." + fmt)


# -- network passes and profile observers ----------------------------------------------------------
def _transform_order(impls) -> list:
    # pluggy keeps implementations as [trylast..., plain..., tryfirst...], each group
    # in registration order; we apply tryfirst ones first, then plain, then trylast.
    first = [i for i in impls if i.tryfirst]
    last = [i for i in impls if i.trylast]
    plain = [i for i in impls if not i.tryfirst and not i.trylast and not i.hookwrapper
             and not getattr(i, "wrapper", False)]
    return first + plain + last


def _transforms(pm: pluggy.PluginManager) -> list[tuple[Any, str, str]]:
    """(implementation, distribution, version) of each network pass, in the order
    they apply; memoised per set of plugins."""
    def order() -> list[tuple[Any, str, str]]:
        origins = _origins(pm)
        return [(impl, *origins.get(id(impl.plugin), ("(registered directly)", "")))
                for impl in _transform_order(
                    pm.hook.sbmlgpu_transform_network.get_hookimpls())]

    return _memo(pm, "transforms", order)


def has_transforms(pm: pluggy.PluginManager | None = None) -> bool:
    """True when some plugin implements `sbmlgpu_transform_network`."""
    return bool(_transforms(pm or manager()))


def transform(network: "Network", pm: pluggy.PluginManager | None = None) -> "Network":
    """Apply every plugin's `sbmlgpu_transform_network` in registration order. A pass
    may refuse the model (UnsupportedModelError); one that fails otherwise is
    reported and skipped."""
    pm = pm or manager()
    for impl, dist, version in _transforms(pm):
        try:
            out = impl.function(network=network)
        except UnsupportedModelError:
            raise
        except Exception as exc:  # noqa: BLE001 - a plugin's bug, reported with its name
            _report(pm, f"plugin {impl.plugin_name} ({dist} {version}) failed in "
                        f"sbmlgpu_transform_network() and was skipped: "
                        f"{type(exc).__name__}: {exc}")
            continue
        if out is None:
            continue
        from .ir import Network  # here: with no pass installed a run needs none of it

        if not isinstance(out, Network):
            raise PluginError(f"plugin {impl.plugin_name}: sbmlgpu_transform_network returned "
                              f"{type(out).__name__}, expected a Network or None")
        network = out
    return network


def profile_observers(pm: pluggy.PluginManager | None = None) -> list:
    """[callable(record)] for the profiler, one per observing plugin: empty when none
    observes launches, so that the profiler's hot path stays free. An observer that
    raises is reported once and not called again."""
    pm = pm or manager()
    calls = _memo(pm, "observers", lambda: list(_calls(pm, "sbmlgpu_profile_record")))
    return [_guarded_observer(pm, impl, dist, version) for impl, dist, version in calls]


def _guarded_observer(pm, impl, dist: str, version: str):
    broken = []

    def observe(record) -> None:
        if broken:
            return
        try:
            impl.function(record=record)
        except Exception as exc:  # noqa: BLE001 - a plugin's bug, reported with its name
            broken.append(exc)
            _report(pm, f"plugin {impl.plugin_name} ({dist} {version}) failed in "
                        f"sbmlgpu_profile_record() and is no longer called: "
                        f"{type(exc).__name__}: {exc}")
    return observe
