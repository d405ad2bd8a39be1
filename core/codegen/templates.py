"""Kernel templates: one jinja2 environment for sbmlgpu and every plugin.

Kernels are `.cu` template files, never f-strings in Python code. A template is
named by the package that owns it and its file name:

    render("sbmlgpu.codegen", "common.cuh", precision="double")
    render("sbmlgpu.plugins.ode", "ode.cu", **context)

`sbmlgpu.codegen` and `sbmlgpu.ode` (core libraries) keep their templates in a
`templates/` folder; any other package (a backend) keeps them in its `kernels/`
folder. Inside a template, a plain name (`{% include "common.cuh" %}`) is looked
up in sbmlgpu.codegen's folder, and `"package:file"` in that package's folder
(`{% include "sbmlgpu.ode:rk4.cuh" %}`). Undefined variables are errors
(StrictUndefined), so a template never renders a silent blank; a template checks
its inputs with `{{ fail("message") }}`. `{{ status_defines() }}` (common.cuh uses it)
writes the member status codes of sbmlgpu.results.Status as SBMLGPU_STATUS_<NAME>.

`dump_sources` writes a Program's sources for `--keep-source DIR`.
"""

from __future__ import annotations

import importlib.util
import os
from functools import lru_cache
from pathlib import Path
from typing import Mapping

import jinja2

from ..errors import OptionError, SbmlGpuError

class TemplateError(SbmlGpuError):
    """A kernel template is missing, malformed or lacks a variable: a bug in the
    backend that renders it, reported with the template's name and line."""


CORE_PACKAGE = "sbmlgpu.codegen"
_FOLDER = {CORE_PACKAGE: "templates", "sbmlgpu.ode": "templates"}  # others: "kernels"


def template_folder(package: str) -> Path:
    """The folder that holds `package`'s templates."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise TemplateError(f"no package {package!r} to load kernel templates from")
    root = Path(list(spec.submodule_search_locations)[0])
    return root / _FOLDER.get(package, "kernels")


class PackageTemplateLoader(jinja2.BaseLoader):
    """Loads "package:file" from the package's template folder; "file" from core's."""

    def get_source(self, environment, template):
        package, sep, name = template.rpartition(":")
        package = package if sep else CORE_PACKAGE
        if not name or Path(name).is_absolute() or ".." in Path(name).parts:
            raise jinja2.TemplateNotFound(template)
        path = template_folder(package) / name
        if not path.is_file():
            raise jinja2.TemplateNotFound(template)
        mtime = path.stat().st_mtime_ns
        return path.read_text(encoding="utf-8"), str(path), \
            lambda: path.is_file() and path.stat().st_mtime_ns == mtime


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=PackageTemplateLoader(),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals["fail"] = _fail
    env.globals["status_defines"] = _status_defines
    return env


def _status_defines() -> str:
    """`{{ status_defines() }}`: the #defines of every member status defined now."""
    from ..results.status import Status

    return Status.c_defines()


def _fail(message: str):
    """`{{ fail("...") }}` in a template: stop rendering with this message."""
    raise TemplateError(message)


def render(package: str, name: str, /, **context) -> str:
    """Render template `name` of `package` with `context` (any names, `name` too)."""
    key = name if package == CORE_PACKAGE else f"{package}:{name}"
    try:
        return environment().get_template(key).render(**context)
    except jinja2.TemplateNotFound as e:
        raise TemplateError(f"no template {e.name!r} (looked in "
                            f"{template_folder(package)})") from None
    except jinja2.TemplateSyntaxError as e:
        raise TemplateError(f"{e.filename or key}, line {e.lineno}: {e.message}") from None
    except jinja2.UndefinedError as e:
        raise TemplateError(f"{package}:{name}: {e.message}") from None


def dump_sources(sources: Mapping[str, str], directory: str | os.PathLike) -> list[Path]:
    """Write each {file name: source} into `directory` (created if needed) and return
    the paths. Names must be plain file names."""
    directory = Path(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OptionError("keep-source", f"cannot create {directory}: {e.strerror}") from None
    written = []
    for name, source in sources.items():
        if not name or Path(name).name != name or name in (".", ".."):
            raise OptionError("keep-source", f"{name!r} is not a plain file name")
        path = directory / name
        try:
            path.write_text(source, encoding="utf-8")
        except OSError as e:
            raise OptionError("keep-source", f"cannot write {path}: {e.strerror}") from None
        written.append(path)
    return written
