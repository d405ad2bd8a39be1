"""Command-line options built from a backend's options dataclass.

Every field declared with `sbmlgpu.backend.option(...)` becomes `--name-with-dashes`
with the field's type, its help text, choices, limits and default; a name that
clashes with one of `sbmlgpu run`'s own options becomes `--BACKEND-name`.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from typing import Any

from .backend import Backend

DEST_PREFIX = "backend_option__"


def _unwrap_optional(tp):
    origin = typing.get_origin(tp)
    if origin in (typing.Union, getattr(types, "UnionType", None)):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _argument_kind(tp) -> tuple[Any, dict]:
    """(type for argparse, extra add_argument keywords) for a field type."""
    tp = _unwrap_optional(tp)
    if tp is bool:
        return None, {"action": argparse.BooleanOptionalAction}
    origin = typing.get_origin(tp)
    if origin in (list, tuple, set, frozenset):
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        element = args[0] if args else str
        return element if element in (int, float, str) else str, {"nargs": "+"}
    if tp in (int, float, str):
        return tp, {}
    return str, {}


def _help(f: dataclasses.Field) -> str:
    meta = f.metadata
    text = meta.get("help", "")
    limits = []
    if meta.get("minimum") is not None:
        limits.append(f"at least {meta['minimum']:g}")
    if meta.get("maximum") is not None:
        limits.append(f"at most {meta['maximum']:g}")
    if limits:
        text += f" ({', '.join(limits)})"
    if f.default is not dataclasses.MISSING:
        default = f.default
    elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        default = f.default_factory()  # type: ignore[misc]
    else:
        default = None
    if default is not None:
        text += f" [default: {default}]"
    return text.replace("%", "%%")


def add_backend_options(parser: argparse.ArgumentParser, backend: Backend) -> list[str]:
    """Add the backend's options as a group; returns the option strings added."""
    cls = backend.options_class
    hints = typing.get_type_hints(cls)
    group = parser.add_argument_group(
        f"options of backend {backend.name!r}",
        f"{backend.description} (other backends: sbmlgpu run --backend NAME --help)")
    added = []
    for f in dataclasses.fields(cls):
        if not f.metadata.get("cli", True):
            continue
        flag = "--" + f.name.replace("_", "-")
        if flag in parser._option_string_actions:  # noqa: SLF001 - argparse offers no API
            flag = f"--{backend.name}-{f.name.replace('_', '-')}"
        kind, extra = _argument_kind(hints.get(f.name, str))
        kwargs: dict[str, Any] = {"dest": DEST_PREFIX + f.name, "default": argparse.SUPPRESS,
                                  "help": _help(f), **extra}
        if kind is not None:
            kwargs["type"] = kind
            kwargs["metavar"] = f.name.upper()
        if f.metadata.get("choices") is not None:
            kwargs["choices"] = list(f.metadata["choices"])
            kwargs.pop("metavar", None)
        group.add_argument(flag, **kwargs)
        added.append(flag)
    return added


def collected_options(args: argparse.Namespace) -> dict[str, Any]:
    """{field name: value} of the backend options given on the command line."""
    return {key[len(DEST_PREFIX):]: value for key, value in vars(args).items()
            if key.startswith(DEST_PREFIX)}
