"""The Task contract: what a user asks, whatever backend computes it.

A task is a small dataclass of declared fields (sbmlgpu.settings), like backend
options: it validates itself (`validate()`), checks its SBML ids against the model
once, at the edge (`bind(network)`), and generates its CLI subcommand
(sbmlgpu.cli: one per task kind some installed backend implements) and its Python
function (sbmlgpu.api.task_function). A backend declares the task kinds it
implements (`Backend.tasks`) and returns a result of the task's `result_class`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ..settings import Settings

if TYPE_CHECKING:  # pragma: no cover
    import argparse

    from ..ir import Network


@dataclass
class Task(Settings):
    """Base of every task. Subclasses set the class attributes and declare fields."""

    #: the kind of analysis; also the kind of its result ("time-course", ...)
    kind: ClassVar[str] = ""
    #: the CLI subcommand (`sbmlgpu COMMAND`) and the Python function (`sbmlgpu.NAME`)
    command: ClassVar[str] = ""
    function: ClassVar[str] = ""
    #: one line for `sbmlgpu --help`, and the subcommand's description
    title: ClassVar[str] = ""
    description: ClassVar[str] = ""
    #: the backend used when none is named (None: the only installed one that can)
    default_backend: ClassVar[str | None] = None
    #: where a model the default backend refuses goes when no backend was named
    #: (None: the refusal is the answer); api.choose_backend notes the change
    fallback_backend: ClassVar[str | None] = None
    #: the sbmlgpu.results class a backend returns for this task
    result_class: ClassVar[type] = object

    # How the work reports progress is not part of the question, but backends read it
    # from the task they run; keyword-only so that it never shifts positional fields.
    progress: bool = field(default=True, kw_only=True,
                           metadata={"help": "show progress", "cli": False,
                                     "internal": True})

    def bind(self, network: "Network"):
        """Validate the fields, then check every SBML id against `network` (typed
        OptionErrors naming the id and the closest known ones). Returns self."""
        self.validate()
        self.check_network(network)
        return self

    def check_network(self, network: "Network") -> None:
        """Checks of the fields against the model (ids, kinds); override."""

    def describe(self) -> dict[str, Any]:
        """The task's settings for a result's metadata: small values as they are,
        arrays and long tables by their shape."""
        out = {"kind": self.kind}
        for f in dataclasses.fields(self):
            if f.name == "progress":
                continue
            out[f.name] = _brief(getattr(self, f.name))
        return out

    # -- the command line (beyond the generated flags of the declared fields) -----------
    @classmethod
    def add_extra_arguments(cls, parser: "argparse.ArgumentParser") -> None:
        """Flags that are not one declared field each (e.g. output times as
        --start/--end/--points); override."""

    @classmethod
    def from_arguments(cls, values: dict[str, Any], args: "argparse.Namespace",
                       network: "Network"):
        """The task from the declared fields given on the command line (`values`) and
        the extra flags (`args`); override to read the extras."""
        return cls(**values)


def _brief(value) -> Any:
    if isinstance(value, np.ndarray):
        if value.size <= 16:
            return value.tolist()
        return f"array of shape {value.shape}"
    if isinstance(value, dict):
        if all(np.ndim(v) == 0 for v in value.values()) and len(value) <= 64:
            return {str(k): _brief(v) for k, v in value.items()}
        return {str(k): _brief(np.asarray(v)) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and len(value) > 16:
        return f"{len(value)} entries"
    if isinstance(value, tuple):
        return [_brief(v) for v in value]
    return value
