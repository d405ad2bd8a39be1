"""The Backend contract: what a plugin returns from `sbmlgpu_backends()`.

A backend is its method and nothing else: the framework finds it (plugins.py),
builds its options from the dataclass (cli.py), checks the model against
`supports()` before anything runs, and hands `compile()` a device (or None for
the CPU path). `Program.run()` gets the shared scheduler and profiler.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Sequence

import numpy as np

from .errors import OptionError, UnsupportedModelError

if TYPE_CHECKING:  # pragma: no cover
    from .ir import Network
    from .profile import Profiler
    from .results import Result
    from .runtime.base import Device
    from .schedule import Scheduler


def option(default: Any, help: str, *, choices: Sequence[Any] | None = None,
           minimum: float | None = None, maximum: float | None = None, cli: bool = True):
    """A backend option: a dataclass field with its help text and checks.

    The CLI turns every option into `--name-with-dashes`; the checks run in
    `BackendOptions.validate()`, which names the bad option in an `OptionError`."""
    meta = {"help": help, "choices": tuple(choices) if choices is not None else None,
            "minimum": minimum, "maximum": maximum, "cli": cli}
    if isinstance(default, (list, dict, set)):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass
class BackendOptions:
    """Base of every backend's options dataclass. Subclasses declare fields with
    `option(...)` and may override `check()` for checks across fields."""

    def validate(self) -> "BackendOptions":
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            meta = f.metadata
            name = f.name.replace("_", "-")
            if meta.get("choices") is not None and value not in meta["choices"]:
                allowed = ", ".join(map(str, meta["choices"]))
                raise OptionError(name, f"{value!r} is not one of: {allowed}")
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                if meta.get("minimum") is not None and value < meta["minimum"]:
                    raise OptionError(name, f"{value!r} is below the minimum {meta['minimum']}")
                if meta.get("maximum") is not None and value > meta["maximum"]:
                    raise OptionError(name, f"{value!r} is above the maximum {meta['maximum']}")
        self.check()
        return self

    def check(self) -> None:
        """Checks that involve several options; raise OptionError naming one."""

    @classmethod
    def from_mapping(cls, values: dict[str, Any]) -> "BackendOptions":
        """Options from a {name: value} mapping (names with '_' or '-'); unknown names
        are an OptionError listing the known ones."""
        known = {f.name: f for f in dataclasses.fields(cls)}
        kwargs = {}
        for key, value in values.items():
            name = key.replace("-", "_")
            if name not in known:
                raise OptionError(key, "unknown option; known: "
                                  + ", ".join(k.replace("_", "-") for k in known))
            kwargs[name] = value
        return cls(**kwargs).validate()


@dataclass
class RunRequest:
    """What the user asks of one run, shared by all backends.

    `times`: output times (the first is the start). `parameters`: an ensemble of
    parameter sets, columns named by SBML id (a subset of the model's parameters
    and initial values; the rest stay nominal), one row per ensemble member; None
    means one member at nominal values. `n`: ensemble size where no table gives it
    (e.g. SSA realisations). `seed`: keys the counter-based random generator."""

    times: np.ndarray
    parameters: dict[str, np.ndarray] | None = None
    n: int = 1
    seed: int = 0
    outputs: tuple[str, ...] | None = None  # SBML ids to report; None: the backend's default
    summary: bool = False  # ensemble mean/sd/quantiles instead of every trajectory
    progress: bool = True

    def __post_init__(self):
        self.times = np.asarray(self.times, dtype=float)
        if self.times.ndim != 1 or self.times.size < 1:
            raise OptionError("times", "need a one-dimensional array of at least one time")
        if np.any(np.diff(self.times) < 0) or not np.all(np.isfinite(self.times)):
            raise OptionError("times", "output times must be finite and non-decreasing")
        if self.parameters is not None:
            sizes = {k: np.asarray(v).shape for k, v in self.parameters.items()}
            lengths = {s[0] if s else 1 for s in sizes.values()}
            if len(lengths) > 1:
                raise OptionError("parameters", f"columns differ in length: {sizes}")
            self.n = max(lengths) if lengths else self.n

    @property
    def ensemble_size(self) -> int:
        return self.n


class Program(ABC):
    """A compiled model for one backend, ready to run many times."""

    #: kernel file name -> CUDA source, for `--keep-source DIR`; empty on the CPU path
    sources: dict[str, str]

    @abstractmethod
    def run(self, request: RunRequest, scheduler: "Scheduler", profiler: "Profiler") -> "Result":
        ...


class Backend(ABC):
    """One analysis method. Subclass, set the class attributes, implement the rest."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    options_class: ClassVar[type[BackendOptions]] = BackendOptions
    #: True for backends that never use a GPU: the framework does not look for one
    cpu_only: ClassVar[bool] = False

    @abstractmethod
    def supports(self, network: "Network") -> list[tuple[str, tuple[str, ...]]]:
        """The features of `network` this backend cannot handle, each with the ids of
        the elements that use them. Empty: the model is accepted."""

    @abstractmethod
    def compile(self, network: "Network", options: BackendOptions,
                device: "Device | None") -> Program:
        """Build a Program; `device` None means the CPU path."""

    def check_supported(self, network: "Network") -> None:
        missing = self.supports(network)
        if missing:
            raise UnsupportedModelError(list(missing), who=f"backend {self.name!r}")
