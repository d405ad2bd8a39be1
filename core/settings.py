"""Declared settings: dataclass fields that carry their help text, checks and CLI form.

Backend options (sbmlgpu.backend.BackendOptions) and tasks (sbmlgpu.tasks) are both
dataclasses of such fields, so that one mechanism validates them (naming the bad one
in an OptionError), builds them from a mapping (the Python API) and turns them into
command-line flags (sbmlgpu.cli_options).

    @dataclass
    class MyOptions(BackendOptions):
        step: float = setting(1e-3, "fixed step size", minimum=0.0)
        bounds: dict = setting({}, "per-species bound", parse=pair(int), collect="dict",
                               metavar="ID=N", flag="bound")
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
from dataclasses import field
from typing import Any, Callable, Sequence

from .errors import OptionError

COLLECT = (None, "list", "dict")


def setting(default: Any, help: str, *, choices: Sequence[Any] | None = None,
            minimum: float | None = None, maximum: float | None = None, cli: bool = True,
            parse: Callable[[str], Any] | None = None, collect: str | None = None,
            metavar: str | None = None, flag: str | None = None, required: bool = False,
            infinite: bool = False):
    """A declared field with its help text and checks.

    `choices`, `minimum`, `maximum`: checked by `Settings.validate()`. `cli`: False keeps
    it off the command line. On the command line the field is `--name-with-dashes`
    (or `--flag`); `parse` turns one flag's text into a value (an OptionError or
    ValueError for bad text), and `collect` makes the flag repeatable: "list" gathers
    the parsed values, "dict" gathers (key, value) pairs (a key given twice is an
    error). `required`: the command line must give it (the Python API checks it in
    `validate()` as a value that is still None). A bounded number is finite unless
    `infinite`: a limit whose "none" is inf takes inf."""
    if collect not in COLLECT:
        raise ValueError(f"collect must be one of {COLLECT}")
    meta = {"help": help, "choices": tuple(choices) if choices is not None else None,
            "minimum": minimum, "maximum": maximum, "cli": cli, "parse": parse,
            "collect": collect, "metavar": metavar, "flag": flag, "required": required,
            "infinite": infinite}
    if isinstance(default, (list, dict, set)):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)


def option_name(f: dataclasses.Field) -> str:
    """The user-facing name of a field: its flag without dashes, or its name with '-'."""
    return f.metadata.get("flag") or f.name.replace("_", "-")


@functools.lru_cache(maxsize=None)
def _rules(cls) -> tuple:
    """Each field's (name, user-facing name, required, choices, minimum, maximum, is a
    switch, may be infinite), read once per class: every run validates its task and options (issue
    13's fixed cost)."""
    return tuple((f.name, option_name(f), bool(f.metadata.get("required")),
                  f.metadata.get("choices"), f.metadata.get("minimum"),
                  f.metadata.get("maximum"), f.type in (bool, "bool"),
                  bool(f.metadata.get("infinite")))
                 for f in dataclasses.fields(cls))


@functools.lru_cache(maxsize=None)
def _names(cls) -> tuple[str, ...]:
    """The field names of a settings class, read once (as_dict: every run's metadata)."""
    return tuple(f.name for f in dataclasses.fields(cls))


class Settings:
    """Base of every dataclass of declared fields (use as a dataclass mixin)."""

    def validate(self):
        """Check every field against its declaration, then `check()`; returns self."""
        for field_name, name, required, choices, minimum, maximum, switch, infinite_ok in \
                _rules(type(self)):
            value = getattr(self, field_name)
            if required and value is None:
                raise OptionError(name, "is required")
            # a switch takes True or False: "no" or 0 would be read as a truth value
            if switch and not (isinstance(value, bool) or getattr(value, "dtype", None) == bool):
                raise OptionError(name, f"{value!r} is not true or false")
            if choices is not None and value not in choices:
                allowed = ", ".join(map(str, choices))
                raise OptionError(name, f"{value!r} is not one of: {allowed}")
            # a bounded option is a number: text from a mapping (testsuite's
            # --backend-option rtol=abc) would fail the comparisons below with TypeError
            if (minimum is not None or maximum is not None) and value is not None and (
                    isinstance(value, bool) or not isinstance(value, numbers.Real)):
                raise OptionError(name, f"{value!r} is not a number")
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                if isinstance(value, float) and math.isnan(value):
                    raise OptionError(name, "NaN is not a value")
                # a bounded number is finite: an infinite tolerance or step would be
                # taken at its word (--rtol inf integrated in one unchecked step and
                # wrote a wrong answer); limits say "none" with 0, or are declared
                # `infinite`
                if isinstance(value, float) and math.isinf(value) and not infinite_ok and (
                        minimum is not None or maximum is not None):
                    raise OptionError(name, f"{value!r} is not a finite number")
                if minimum is not None and value < minimum:
                    raise OptionError(name, f"{value!r} is below the minimum {minimum}")
                if maximum is not None and value > maximum:
                    raise OptionError(name, f"{value!r} is above the maximum {maximum}")
        self.check()
        return self

    def check(self) -> None:
        """Checks that involve several fields; raise OptionError naming one."""

    @classmethod
    def from_mapping(cls, values: dict[str, Any]):
        """An instance from a {name: value} mapping (names with '_' or '-'); unknown
        names are an OptionError listing the known ones. Validated."""
        known = {f.name: f for f in dataclasses.fields(cls) if f.init}
        kwargs = {}
        for key, value in values.items():
            name = str(key).replace("-", "_")
            if name not in known:
                raise OptionError(str(key), "unknown option; known: "
                                  + ", ".join(option_name(k) for k in known.values()
                                              if not k.metadata.get("internal")))
            kwargs[name] = value
        return cls(**kwargs).validate()

    def as_dict(self) -> dict[str, Any]:
        """{field name: value}, for result metadata (JSON-friendly where possible)."""
        return {name: getattr(self, name) for name in _names(type(self))}


# -- parsers for command-line values ------------------------------------------------------
def pair(value: Callable[[str], Any] = str, what: str = "VALUE"):
    """Parser of `ID=VALUE` into (id, value(VALUE))."""
    def parse(text: str):
        key, sep, rest = text.partition("=")
        if not sep or not key.strip() or not rest.strip():
            raise ValueError(f"{text!r}: write ID={what}")
        try:
            return key.strip(), value(rest.strip())
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{text!r}: {exc}") from None
    parse.__name__ = f"pair_{getattr(value, '__name__', 'value')}"
    return parse


def output_folder(text: str) -> str:
    """-o OUTDIR: a folder name that is not empty and not an existing file (an empty
    one wrote into the working directory, a file gave the OS's "File exists")."""
    import argparse
    from pathlib import Path

    if not text.strip():
        raise argparse.ArgumentTypeError("an empty name: give the folder for the results")
    if Path(text).exists() and not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text}: exists and is not a folder")
    return text


def make_output_folder(path) -> None:
    """Create the results folder -o names (with its parents), an OptionError naming it
    where the OS refuses (a read-only place, /proc)."""
    from pathlib import Path

    try:
        Path(path).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OptionError("outdir", f"{path}: cannot create the folder "
                                    f"({exc.strerror or exc})") from None


def interval(text: str) -> tuple[float, float]:
    """`LOW:HIGH` -> (low, high), finite with low <= high."""
    parts = text.split(":")
    if len(parts) != 2:
        raise ValueError(f"{text!r} is not LOW:HIGH")
    try:
        low, high = float(parts[0]), float(parts[1])
    except ValueError:
        raise ValueError(f"{text!r} is not LOW:HIGH with two numbers") from None
    if not (math.isfinite(low) and math.isfinite(high)) or low > high:
        raise ValueError(f"{text!r}: need finite LOW <= HIGH")
    return low, high


def whole(text: str) -> int:
    """A whole number from text ('80', not '80.5')."""
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a whole number") from None


def float_list(text: str) -> list[float]:
    try:
        return [float(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise ValueError(f"{text!r} is not a comma-separated list of numbers") from None


def id_list(text: str) -> list[str]:
    return [x for x in text.replace(" ", "").split(",") if x]
