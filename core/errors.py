"""The typed errors of sbmlgpu.

Bad input must reach the user as one of these, with what is wrong and where,
never as a traceback, a GPU crash or a silently wrong number. The CLI prints
them as one-line messages and exits with a non-zero status.
"""

from __future__ import annotations

from dataclasses import dataclass


class SbmlGpuError(Exception):
    """Base class of every error sbmlgpu raises on purpose."""

    exit_code = 2


@dataclass(frozen=True)
class SBMLProblem:
    """One message from libsbml (or from our own checks) about an SBML file."""

    severity: str  # "error", "fatal", "warning"
    message: str
    line: int = 0
    column: int = 0
    code: int = 0

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line else "document"
        if self.line and self.column:
            where += f", column {self.column}"
        return f"{where}: {self.severity}: {self.message}"


class SBMLImportError(SbmlGpuError):
    """The input is not valid SBML (missing file, not XML, schema or consistency
    errors, empty model). Carries libsbml's messages with line numbers."""

    def __init__(self, source: str, summary: str, problems: tuple[SBMLProblem, ...] = ()):
        self.source = source
        self.summary = summary
        self.problems = tuple(problems)
        lines = [f"{source}: {summary}"]
        for p in self.problems[:20]:
            lines.append(f"  {p}")
        if len(self.problems) > 20:
            lines.append(f"  ... and {len(self.problems) - 20} more")
        super().__init__("\n".join(lines))


class UnsupportedModelError(SbmlGpuError):
    """Valid SBML that the importer or a backend does not handle.

    `features` maps a feature name (e.g. "algebraic rule", "delay()") to the ids of
    the elements that use it."""

    def __init__(self, features: dict[str, tuple[str, ...]] | list, who: str = "sbmlgpu"):
        if not isinstance(features, dict):
            merged: dict[str, list[str]] = {}
            for feature, ids in features:
                merged.setdefault(feature, []).extend(ids)
            features = merged
        self.features = {k: tuple(v) for k, v in features.items()}
        self.who = who
        parts = []
        for feature, ids in self.features.items():
            shown = ", ".join(ids[:8]) + (f", ... ({len(ids)} in all)" if len(ids) > 8 else "")
            parts.append(f"{feature} ({shown})" if ids else feature)
        super().__init__(f"{who} does not support: " + "; ".join(parts))


class OptionError(SbmlGpuError):
    """A bad option value: names the option, the value and what is allowed."""

    def __init__(self, option: str, message: str):
        self.option = option
        super().__init__(f"option {option}: {message}")


class DeviceError(SbmlGpuError):
    """No usable GPU, a driver or compiler failure, or a kernel that failed."""


class SimulationError(SbmlGpuError):
    """A simulation could not proceed (e.g. the integrator failed); says where and why."""


class InternalError(SbmlGpuError):
    """A bug in sbmlgpu, not in the model or the options: something it should handle
    and does not (e.g. a code generator that cannot print a construct the model
    uses). Never a refusal: the SBML Test Suite runner counts it as a failure. The
    message names what and where, so that it can be reported."""

    exit_code = 70  # EX_SOFTWARE, as the CLI's exit code for other internal errors
