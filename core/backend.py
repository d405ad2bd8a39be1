"""The Backend contract: what a plugin returns from `sbmlgpu_backends()`.

A backend is its method and nothing else: the framework finds it (plugin_manager.py),
builds its options from the dataclass (cli_options.py), checks the model against
`supports()` before anything runs, and hands `compile()` a device (or None for the
CPU path). `Program.run(task, scheduler, profiler)` answers one task (sbmlgpu.tasks)
with a result of that task's kind (sbmlgpu.results). A backend declares the task
kinds it implements in `tasks`; one compiled Program may answer many tasks (e.g.
ensembles with other parameter values), which is why the task goes to `run`.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from .errors import UnsupportedModelError
from .settings import Settings, setting
from .tasks import Task, TimeCourse

if TYPE_CHECKING:  # pragma: no cover
    from .ir import Network
    from .profile import Profiler
    from .results import Result
    from .runtime.base import Device
    from .schedule import Scheduler

#: A backend option: a dataclass field with its help text and checks (sbmlgpu.settings).
option = setting

@dataclass
class BackendOptions(Settings):
    """Base of every backend's options dataclass. Subclasses declare fields with
    `option(...)` and may override `check()` for checks across fields."""

    @classmethod
    def coerce(cls, options: "BackendOptions | None"):
        """`options` as this class: itself if it is one, else its fields (those this
        class declares; None: the defaults) read into a new instance, unchecked. What
        compile() does with whatever options object it is handed."""
        if isinstance(options, cls):
            return options
        return cls.from_mapping(dataclasses.asdict(options) if options is not None else {})


class Program(ABC):
    """A compiled model for one backend, ready to answer many tasks."""

    #: kernel file name -> CUDA source, for `--keep-source DIR`; empty on the CPU path
    sources: dict[str, str]

    @abstractmethod
    def run(self, task: Task, scheduler: "Scheduler", profiler: "Profiler") -> "Result":
        """The result of `task` (of `type(task).result_class`)."""


class Backend(ABC):
    """One analysis method. Subclass, set the class attributes, implement the rest."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    options_class: ClassVar[type[BackendOptions]] = BackendOptions
    #: the task classes (sbmlgpu.tasks) this backend answers
    tasks: ClassVar[tuple[type[Task], ...]] = (TimeCourse,)
    #: True for backends that never use a GPU: the framework does not look for one
    cpu_only: ClassVar[bool] = False
    #: True for backends whose CPU path integrates one member on a core faster than one
    #: GPU thread does (ode): device "auto" then runs an ensemble of no more members than
    #: the host has cores on the CPU path, where a GPU launch would only add its latency
    few_members_on_cpu: ClassVar[bool] = False

    @abstractmethod
    def supports(self, network: "Network") -> list[tuple[str, tuple[str, ...]]]:
        """The features of `network` this backend cannot handle, each with the ids of
        the elements that use them. Empty: the model is accepted."""

    @abstractmethod
    def compile(self, network: "Network", options: BackendOptions,
                device: "Device | None") -> Program:
        """Build a Program; `device` None means the CPU path."""

    def implements(self, kind: str) -> bool:
        """True when this backend answers tasks of `kind` ("time-course", ...)."""
        return any(t.kind == kind for t in self.tasks)

    @property
    def task_kinds(self) -> tuple[str, ...]:
        return tuple(t.kind for t in self.tasks)

    def check_supported(self, network: "Network") -> None:
        missing = self.supports(network)
        if missing:
            raise UnsupportedModelError(list(missing), who=f"backend {self.name!r}")
