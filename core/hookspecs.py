"""The hook specifications of sbmlgpu (pluggy project "sbmlgpu", prefix `sbmlgpu_`).

A plugin is a module (or any object) with functions named like the stubs below,
decorated with `hookimpl`, and registered through an entry point in the group
`sbmlgpu` of its distribution (docs/plugins.md). The built-in backends register
exactly that way. Each docstring states how the framework calls the hook and what
it does with the answers.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable

import pluggy

if TYPE_CHECKING:  # pragma: no cover
    from .backend import Backend
    from .ir import Network
    from .results import Result

PROJECT = "sbmlgpu"

hookspec = pluggy.HookspecMarker(PROJECT)
#: Decorate plugin functions with this: `from sbmlgpu.hookspecs import hookimpl`.
hookimpl = pluggy.HookimplMarker(PROJECT)

#: A result writer: writes `result` to `path` (the caller chooses the file name, with
#: the writer's `suffix` attribute if it has one, else "." + the format name) and
#: returns the paths it wrote (a writer may write companion files), or None for [path].
ResultWriter = Callable[["Result", Path], "list[Path] | None"]


@hookspec
def sbmlgpu_backends() -> list[Backend]:
    """Collected list: every plugin returns a list of the backends it provides
    (instances of `sbmlgpu.backend.Backend`).

    The framework calls each implementation separately, so that it knows which
    distribution provides which backend. Backend names must be unique over all
    installed plugins: a name given twice is reported naming both distributions,
    and neither is used. An implementation that raises is reported and skipped.
    Keep this cheap: create backend objects here, compile nothing.
    """


@hookspec
def sbmlgpu_transform_network(network: Network) -> Network | None:
    """A pass over the IR before any backend sees the model.

    Applied in plugin registration order (`tryfirst`/`trylast` move an
    implementation to the front/back); each implementation gets the result of
    the one before. Return a new Network (the IR is immutable) or None to leave
    the model as it is. Raise `UnsupportedModelError` for a model the pass
    cannot handle.
    """


@hookspec
def sbmlgpu_profile_record(record) -> None:
    """Observer of kernel launches: called with every record the profiler takes
    (one per launch: kernel, grid, block, time, registers, bytes moved...).

    All implementations are called; return values are ignored. Called on the hot
    path, so do little work here (append to a list, send to a monitor).
    """


@hookspec
def sbmlgpu_result_writers() -> dict[tuple[str, str] | str, ResultWriter]:
    """Collected dicts: every plugin returns {(result kind, format name): writer}; a
    plain format name is a writer of time courses ("time-course").

    Result kinds are the task kinds ("time-course", "steady-state", "estimation",
    "dbn"). The writers of all plugins are merged (a key given by two plugins is
    reported naming both distributions, and neither is used); `--format NAME` of the
    commands of that kind and `result.write(path, NAME)` use them. Core's own csv,
    npz and hdf5 writers of every kind are provided through this hook too.
    """
