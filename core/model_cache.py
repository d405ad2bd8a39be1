"""The compiled-model cache: a second run of the same file skips libsbml, sympy and
code generation (issue 13, fixed cost of a small run).

An entry is one JSON file, `<cache>/models/<key>.json` (<cache>: $SBMLGPU_CACHE_DIR,
else ~/.cache/sbmlgpu, as the nvcc and host build caches), keyed by everything that
changes what a run computes:

- the SBML file's bytes (sha256), the sbmlgpu version, the Python version;
- the code installed (`*.py`, `*.cu`, `*.cuh` of sbmlgpu and its plugin package:
  name, size, modification time), since an entry holds generated kernel text: a
  template or a code generator changed without a new version (an update from git)
  misses;
- the backend as asked for (None: the task's default), its options as given, the
  device as asked for ("auto", "cpu", GPU indices);
- the compilers: the host C++ compiler's and nvcc's resolved paths, sizes and
  modification times, $CXX and $SBMLGPU_EXTRA_CXXFLAGS (a new toolkit misses);
- the installed plugins (name, distribution, version): a backend that changed
  misses too. Where a plugin's network pass (`sbmlgpu_transform_network`) is
  installed the cache is not used at all: a pass may read more than the file.

It holds what a run needs that would otherwise come from the model: the backend
chosen, the device it ran on, the model's id and source (for the metadata), the
checked forms of the task's ids (outputs) per set of ids asked for, and the
backend's own state: for `ode`, its kernels' source text, the method chosen per
parameter values, the host library's path (plugins/ode/specialised.py, warm.py).

The protocol with a backend (duck-typed, optional): `program.warm_state(previous)`
returns a JSON-able state (merging the previous entry's), and
`backend.restore(state, options, device)` returns a Program that runs from it,
raising `Miss` for a run it has no kernel for; the caller then runs cold and
stores the merged state. Every failure to read an entry (damaged, truncated,
another format) is a miss: the entry is removed and rebuilt, never an error.

Disable it with $SBMLGPU_MODEL_CACHE=0 (or `sbmlgpu run --no-cache`); clear it by
deleting the folder (`model_cache.clear()`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import shutil
import sys
import tempfile
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any, Mapping

log = logging.getLogger("sbmlgpu")

#: the layout of an entry; another value is a miss
FORMAT = 1
#: "0", "off", "no" or "false" disables the cache
ENABLE_ENV = "SBMLGPU_MODEL_CACHE"
_OFF = ("0", "off", "no", "false")


class Miss(Exception):
    """A cached program cannot answer this run (e.g. other varied parameters): run cold."""


def enabled() -> bool:
    return os.environ.get(ENABLE_ENV, "1").strip().lower() not in _OFF


def directory() -> Path:
    from .runtime.cache import default_directory

    return default_directory() / "models"


def clear() -> None:
    """Remove every entry (the compiled libraries and cubins stay: they have caches
    of their own, keyed by source text)."""
    shutil.rmtree(directory(), ignore_errors=True)


def model_file(model) -> Path | None:
    """The file `model` names, or None (SBML text, a Network, a libsbml document)."""
    if isinstance(model, os.PathLike) or (isinstance(model, str) and "<" not in model
                                          and "\n" not in model):
        try:
            path = Path(model)
            return path if path.is_file() else None
        except (OSError, ValueError):
            return None
    return None


def _stamp(path: str | None) -> list | None:
    if path is None:
        return None
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError:
        return [real]
    return [real, st.st_size, st.st_mtime_ns]


def build_environment() -> tuple:
    """What chooses how host kernels are built, read at every build: the compiler
    ($CXX, else the first on PATH) and $SBMLGPU_EXTRA_CXXFLAGS. A program compiled
    under other values is another program."""
    from .runtime import host

    return host.compiler_environment()


def compilers() -> dict[str, Any]:
    """What identifies the compilers a run may use, without running them."""
    from .codegen import compile_check
    from .runtime import host

    return {"cxx": _stamp(host.find_compiler()), "nvcc": _stamp(compile_check.nvcc_path()),
            "environment": build_environment()}


def _options(options) -> Any:
    if options is None or isinstance(options, Mapping):
        return dict(options or {})
    if is_dataclass(options):
        return {"class": type(options).__qualname__, **asdict(options)}
    return repr(options)


def _plugins() -> list:
    from . import plugin_manager

    pm = plugin_manager.manager()
    origins = plugin_manager._origins(pm)  # noqa: SLF001 - the same table provider() reads
    return sorted([name, *origins.get(id(plugin), ("", ""))]
                  for name, plugin in pm.list_name_plugin())


@functools.lru_cache(maxsize=1)
def _templates() -> str:
    """A digest of the installed code's and kernel templates' names, sizes and
    modification times (once per process)."""
    import sbmlgpu
    import sbmlgpu.plugins

    stamps = []
    for package in (sbmlgpu, sbmlgpu.plugins):
        for root in package.__path__:
            for folder, subfolders, files in os.walk(root):
                subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
                for name in sorted(files):
                    if name.endswith((".py", ".cu", ".cuh")):
                        info = os.stat(os.path.join(folder, name))
                        stamps.append((os.path.relpath(os.path.join(folder, name), root),
                                       info.st_size, info.st_mtime_ns))
    return hashlib.sha256(json.dumps(stamps).encode("utf-8")).hexdigest()


def key(path: Path, *, kind: str, backend: str | None, options, device) -> str:
    """The entry's key for a run of `path` (see the module's docstring)."""
    from . import __version__

    payload = {
        "format": FORMAT, "sbmlgpu": __version__, "python": list(sys.version_info[:2]),
        "model": hashlib.sha256(path.read_bytes()).hexdigest(), "task": kind,
        "backend": backend, "options": _options(options),
        "device": device if isinstance(device, (str, int)) else list(device),
        "compilers": compilers(), "plugins": _plugins(), "templates": _templates(),
    }
    text = json.dumps(payload, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def entry_path(entry_key: str) -> Path:
    return directory() / f"{entry_key}.json"


def load(entry_key: str) -> dict | None:
    """The entry, or None: missing, or unreadable (then removed, to be rebuilt)."""
    path = entry_path(entry_key)
    try:
        data = path.read_bytes()
    except OSError:
        return None
    try:
        entry = json.loads(data)  # bytes: a damaged encoding is a ValueError here too
        if not isinstance(entry, dict) or entry.get("format") != FORMAT \
                or entry.get("key") != entry_key:
            raise ValueError("not an entry of this format")
        return entry
    except ValueError as exc:
        log.debug(f"model cache: removing the damaged entry {path} ({exc})")
        path.unlink(missing_ok=True)
        return None


def store(entry_key: str, entry: dict) -> None:
    """Write the entry atomically; a cache that cannot be written costs only time."""
    path = entry_path(entry_key)
    entry = {**entry, "format": FORMAT, "key": entry_key}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(entry, f)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except (OSError, TypeError, ValueError) as exc:
        log.debug(f"model cache: not writing {path} ({exc})")


def bound_key(task) -> str:
    """Which of a task's fields its check against the model reads (TimeCourse: the
    varied ids and the outputs as asked): the checked outputs are kept per value."""
    outputs = getattr(task, "outputs", None)
    return json.dumps([sorted(getattr(task, "parameters", None) or ()),
                       None if outputs is None else list(outputs)])
