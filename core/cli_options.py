"""Command-line flags built from declared fields (sbmlgpu.settings): backend options and tasks.

Every field declared with `setting(...)` / `option(...)` becomes `--name-with-dashes`
(or its `flag`) with the field's type, its help text, choices, limits and default;
a repeatable field (`collect`) takes the flag several times. A backend option whose
name clashes with a flag the command already has becomes `--BACKEND-name`.
"""

from __future__ import annotations

import argparse
import dataclasses
import numbers
import types
import typing
from typing import Any, Callable

from .errors import OptionError
from .settings import option_name

BACKEND_DEST = "backend_option__"
TASK_DEST = "task_field__"


def _unwrap_optional(tp):
    origin = typing.get_origin(tp)
    if origin in (typing.Union, getattr(types, "UnionType", None)):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def argument_type(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """`parse` for argparse: its ValueError/OptionError becomes a usage error (exit 2)
    that quotes the bad text."""
    def convert(text: str):
        try:
            return parse(text)
        except (ValueError, OptionError) as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    convert.__name__ = getattr(parse, "__name__", "value")
    return convert


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


def _default(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return None


def _number(value) -> str:
    """A limit as a user types it: integers whole (1048576, not :g's 1.04858e+06)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return str(int(value))
    return f"{value:g}"


def _help(f: dataclasses.Field) -> str:
    meta = f.metadata
    text = meta.get("help", "")
    limits = []
    if meta.get("minimum") is not None:
        limits.append(f"at least {_number(meta['minimum'])}")
    if meta.get("maximum") is not None:
        limits.append(f"at most {_number(meta['maximum'])}")
    if limits:
        text += f" ({', '.join(limits)})"
    if meta.get("required"):
        text += " (required)"
    default = _default(f)
    if default not in (None, {}, [], ()) and "[default:" not in text:
        text += f" [default: {default}]"
    return text.replace("%", "%%")


def add_settings(group, cls, dest_prefix: str, clash_prefix: str | None = None,
                 parser: argparse.ArgumentParser | None = None) -> list[str]:
    """Add a flag for every CLI field of the dataclass `cls` to `group`; returns the
    flags added. A flag the parser already has becomes `--<clash_prefix>-name`."""
    hints = typing.get_type_hints(cls)
    owner = parser if parser is not None else group
    added = []
    for f in dataclasses.fields(cls):
        meta = f.metadata
        if not f.init or not meta.get("cli", True):
            continue
        flag = "--" + option_name(f)
        if flag in owner._option_string_actions and clash_prefix:  # noqa: SLF001 - no API
            flag = f"--{clash_prefix}-{option_name(f)}"
        kwargs: dict[str, Any] = {"dest": dest_prefix + f.name, "default": argparse.SUPPRESS,
                                  "help": _help(f)}
        if meta.get("parse") is not None:
            kwargs["type"] = argument_type(meta["parse"])
            kwargs["metavar"] = meta.get("metavar") or f.name.upper()
            if meta.get("collect"):
                kwargs["action"] = "append"
        else:
            kind, extra = _argument_kind(hints.get(f.name, str))
            kwargs.update(extra)
            if kind is not None:
                kwargs["type"] = kind
                kwargs["metavar"] = meta.get("metavar") or f.name.upper()
            if meta.get("choices") is not None:
                kwargs["choices"] = list(meta["choices"])
                kwargs.pop("metavar", None)
        group.add_argument(flag, **kwargs)
        added.append(flag)
    return added


def collected(args: argparse.Namespace, dest_prefix: str, cls=None) -> dict[str, Any]:
    """{field name: value} of the fields given on the command line; repeatable fields
    gathered (a "dict" field given the same key twice is an OptionError)."""
    meta = {f.name: f.metadata for f in dataclasses.fields(cls)} if cls is not None else {}
    out = {}
    for key, value in vars(args).items():
        if not key.startswith(dest_prefix):
            continue
        name = key[len(dest_prefix):]
        collect = meta.get(name, {}).get("collect")
        if collect == "dict":
            gathered: dict = {}
            for k, v in value:
                if k in gathered:
                    flag = meta[name].get("flag") or name.replace("_", "-")
                    raise OptionError(flag, f"{k!r} is given twice")
                gathered[k] = v
            value = gathered
        out[name] = value
    return out


def add_backend_options(parser: argparse.ArgumentParser, backend) -> list[str]:
    """Add the backend's options as a group; returns the option strings added."""
    group = parser.add_argument_group(
        f"options of backend {backend.name!r}",
        f"{backend.description} (other backends: sbmlgpu COMMAND --backend NAME --help)")
    return add_settings(group, backend.options_class, BACKEND_DEST, backend.name, parser)


def collected_options(args: argparse.Namespace) -> dict[str, Any]:
    """{field name: value} of the backend options given on the command line."""
    return collected(args, BACKEND_DEST)


def add_task_arguments(parser: argparse.ArgumentParser, task_cls) -> list[str]:
    """The task's own flags: generated from its fields, then its extra ones."""
    group = parser.add_argument_group(f"{task_cls.kind} settings")
    added = add_settings(group, task_cls, TASK_DEST, None, parser)
    task_cls.add_extra_arguments(parser)
    return added


def collected_task_fields(args: argparse.Namespace, task_cls) -> dict[str, Any]:
    return collected(args, TASK_DEST, task_cls)
