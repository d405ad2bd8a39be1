"""The plugin manager: finds every plugin through the entry-point group `sbmlgpu`.

Built-in backends (sbmlgpu.plugins.*) and third-party ones are found the same
way, from the entry points in their distributions' metadata; core never imports a
plugin package. Only core's own result writers are registered directly.

(Named plugin_manager, not plugins: `sbmlgpu.plugins` is the package of built-in
backends.)
"""

from __future__ import annotations

import difflib
import functools
import importlib.metadata
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pluggy

from . import hookspecs
from .errors import OptionError, SbmlGpuError

if TYPE_CHECKING:  # pragma: no cover
    from .backend import Backend
    from .ir import Network

GROUP = "sbmlgpu"
CORE = "sbmlgpu (core)"


class PluginError(SbmlGpuError):
    """An installed plugin is broken: fails to import, returns the wrong thing, or
    clashes with another plugin. Names the distributions involved."""


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


def _check_entry_point_names() -> None:
    # pluggy skips an entry point whose name is already registered, silently; a
    # second distribution that reuses a name would vanish without a word.
    seen: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        for ep in dist.entry_points:
            if ep.group != GROUP:
                continue
            name = dist.metadata["Name"]
            if ep.name in seen and seen[ep.name] != name:
                raise PluginError(
                    f"two distributions register the plugin name {ep.name!r} in the "
                    f"entry-point group {GROUP!r}: {seen[ep.name]} and {name}; "
                    f"uninstall one of them")
            seen[ep.name] = name


def _find_broken_entry_point(error: Exception) -> str:
    for dist in importlib.metadata.distributions():
        for ep in dist.entry_points:
            if ep.group == GROUP:
                try:
                    ep.load()
                except Exception as exc:  # noqa: BLE001 - reporting which plugin broke
                    return (f"the plugin {ep.name!r} ({ep.value}) of distribution "
                            f"{dist.metadata['Name']} {dist.version} fails to load: "
                            f"{type(exc).__name__}: {exc}")
    return f"loading the plugins of entry-point group {GROUP!r} failed: {error}"


def new_manager(entry_points: bool = True) -> pluggy.PluginManager:
    """A fresh manager with the hook specs and core's writers; with the installed
    plugins unless `entry_points` is False (tests register their own)."""
    from . import result_writers

    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.register(result_writers, name=CORE)
    if entry_points:
        _check_entry_point_names()
        try:
            pm.load_setuptools_entrypoints(GROUP)
        except Exception as exc:  # noqa: BLE001 - a plugin's import error, reported as ours
            raise PluginError(_find_broken_entry_point(exc)) from exc
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginError(f"a plugin implements a hook sbmlgpu does not define: {exc}") from exc
    return pm


@functools.lru_cache(maxsize=1)
def manager() -> pluggy.PluginManager:
    """The process-wide manager, loaded once."""
    return new_manager()


def reset() -> None:
    """Forget the loaded plugins (after installing one, and in tests)."""
    manager.cache_clear()


def _origins(pm: pluggy.PluginManager) -> dict[int, tuple[str, str]]:
    origins = {id(plugin): (dist.metadata["Name"], dist.version)
               for plugin, dist in pm.list_plugin_distinfo()}
    from . import __version__
    from . import result_writers
    origins[id(result_writers)] = ("sbmlgpu", __version__)
    return origins


def _collect(pm: pluggy.PluginManager, hook_name: str) -> list[tuple[Any, Provided]]:
    """(answer, where it came from) per implementation, in registration order."""
    origins = _origins(pm)
    out = []
    for impl in getattr(pm.hook, hook_name).get_hookimpls():
        if impl.hookwrapper or getattr(impl, "wrapper", False):
            continue
        dist, version = origins.get(id(impl.plugin), ("(registered directly)", ""))
        try:
            answer = impl.function()  # the collected hooks take no arguments
        except SbmlGpuError:
            raise
        except Exception as exc:  # noqa: BLE001 - a plugin's bug, reported with its name
            raise PluginError(f"plugin {impl.plugin_name} ({dist} {version}) failed in "
                              f"{hook_name}(): {type(exc).__name__}: {exc}") from exc
        out.append((answer, Provided(None, impl.plugin_name, dist, version)))
    return out


def _entries(pm: pluggy.PluginManager | None, hook_name: str, what: str,
             items) -> dict[str, Provided]:
    pm = pm or manager()
    found: dict[str, Provided] = {}
    for answer, where in _collect(pm, hook_name):
        for name, value in items(answer, where):
            if name in found:
                first = found[name]
                raise PluginError(
                    f"two plugins provide the {what} {name!r}: {first.origin} "
                    f"(plugin {first.plugin}) and {where.origin} (plugin {where.plugin}); "
                    f"uninstall one of them")
            found[name] = Provided(value, where.plugin, where.distribution, where.version)
    return found


def _backend_items(answer, where: Provided):
    from .backend import Backend

    if answer is None:
        return
    if isinstance(answer, Backend) or not isinstance(answer, (list, tuple)):
        answer = [answer]
    for backend in answer:
        if isinstance(backend, type) and issubclass(backend, Backend):
            backend = backend()
        if not isinstance(backend, Backend) or not getattr(backend, "name", None):
            raise PluginError(
                f"plugin {where.plugin} ({where.origin}) returned {backend!r} from "
                f"sbmlgpu_backends(); expected named sbmlgpu.backend.Backend instances")
        yield backend.name, backend


def backend_entries(pm: pluggy.PluginManager | None = None) -> dict[str, Provided]:
    """{backend name: Provided(backend, plugin, distribution, version)}, sorted by name."""
    entries = _entries(pm, "sbmlgpu_backends", "backend", _backend_items)
    return dict(sorted(entries.items()))


def backends(pm: pluggy.PluginManager | None = None) -> dict[str, "Backend"]:
    """{name: Backend} of every installed backend."""
    return {name: e.value for name, e in backend_entries(pm).items()}


def backend(name: str, pm: pluggy.PluginManager | None = None) -> "Backend":
    """The installed backend called `name`; an OptionError listing the installed
    ones (and the closest names) if there is none."""
    installed = backends(pm)
    if name in installed:
        return installed[name]
    close = difflib.get_close_matches(name, installed, n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    listing = ", ".join(installed) or "none: no backend plugin is installed"
    raise OptionError("backend", f"no backend {name!r}{hint}; installed: {listing}")


def provider(name: str, pm: pluggy.PluginManager | None = None) -> tuple[str, str]:
    """(distribution, version) of the plugin that provides backend `name`."""
    backend(name, pm)  # the error for an unknown name
    entry = backend_entries(pm)[name]
    return entry.distribution, entry.version


def _writer_items(answer, where: Provided):
    if not answer:
        return
    if not isinstance(answer, dict):
        raise PluginError(f"plugin {where.plugin} ({where.origin}) returned {answer!r} from "
                          f"sbmlgpu_result_writers(); expected {{format: writer}}")
    for fmt, writer in answer.items():
        if not callable(writer):
            raise PluginError(f"plugin {where.plugin} ({where.origin}): the writer for "
                              f"format {fmt!r} is not callable")
        yield str(fmt), writer


def writer_entries(pm: pluggy.PluginManager | None = None) -> dict[str, Provided]:
    return _entries(pm, "sbmlgpu_result_writers", "result format", _writer_items)


def writers(pm: pluggy.PluginManager | None = None) -> dict[str, Any]:
    """{format name: writer(result, path) -> list of paths written}."""
    return {name: e.value for name, e in writer_entries(pm).items()}


def writer_for(fmt: str, pm: pluggy.PluginManager | None = None):
    known = writers(pm)
    if fmt == "h5":
        fmt = "hdf5"
    if fmt not in known:
        raise OptionError("format", f"no writer for {fmt!r}; known formats: {', '.join(known)}")
    return known[fmt]


def writer_suffix(fmt: str, pm: pluggy.PluginManager | None = None) -> str:
    return getattr(writer_for(fmt, pm), "suffix", "." + fmt)


def _transform_order(impls) -> list:
    # pluggy keeps implementations as [trylast..., plain..., tryfirst...], each group
    # in registration order; we apply tryfirst ones first, then plain, then trylast.
    first = [i for i in impls if i.tryfirst]
    last = [i for i in impls if i.trylast]
    plain = [i for i in impls if not i.tryfirst and not i.trylast and not i.hookwrapper
             and not getattr(i, "wrapper", False)]
    return first + plain + last


def transform(network: "Network", pm: pluggy.PluginManager | None = None) -> "Network":
    """Apply every plugin's `sbmlgpu_transform_network` in registration order."""
    from .ir import Network

    pm = pm or manager()
    for impl in _transform_order(pm.hook.sbmlgpu_transform_network.get_hookimpls()):
        out = impl.function(network=network)
        if out is None:
            continue
        if not isinstance(out, Network):
            raise PluginError(f"plugin {impl.plugin_name}: sbmlgpu_transform_network returned "
                              f"{type(out).__name__}, expected a Network or None")
        network = out
    return network


def notify_profile_record(record, pm: pluggy.PluginManager | None = None) -> None:
    """Hand one profiler record to every `sbmlgpu_profile_record` observer."""
    (pm or manager()).hook.sbmlgpu_profile_record(record=record)


def profile_observers(pm: pluggy.PluginManager | None = None) -> list:
    """[callable(record)] for the profiler: empty when no plugin observes launches,
    so that the profiler's hot path stays free."""
    pm = pm or manager()
    if not pm.hook.sbmlgpu_profile_record.get_hookimpls():
        return []
    return [functools.partial(notify_profile_record, pm=pm)]
