"""What every result has, whatever the analysis: its kind, its provenance, writers, plot.

A result kind is the kind of the task it answers (sbmlgpu.tasks): "time-course",
"steady-state", "estimation", "dbn". Writers are found by (kind, format) through
the `sbmlgpu_result_writers` hook (core's own csv, npz and hdf5 writers included), so
a plugin can add a format for one kind without touching the others.

Every result records what produced it in `metadata`: model, backend and the plugin
(distribution and version) providing it, options, seed, device, wall time, the task's
settings and the sbmlgpu version (sbmlgpu.api fills these in after the run).
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, ClassVar


class Result:
    """Base class of the result of every task kind."""

    #: the task kind this result answers (sbmlgpu.tasks.Task.kind)
    kind: ClassVar[str] = ""
    metadata: dict[str, Any]

    def write(self, path: str | Path, format: str | None = None) -> list[Path]:
        """Write with the writer registered for (this kind, `format`) (default: from the
        file suffix); returns every file written (writers may add companion files)."""
        from ..plugin_manager import writer_for

        path = Path(path)
        writer = writer_for(self.kind, format or path.suffix.lstrip(".") or "csv")
        written = writer(self, path)
        return [Path(p) for p in written] if written else [path]

    def to_csv(self, path: str | Path) -> list[Path]:
        return self.write(path, "csv")

    def to_npz(self, path: str | Path) -> list[Path]:
        return self.write(path, "npz")

    def to_hdf5(self, path: str | Path) -> list[Path]:
        return self.write(path, "hdf5")

    def plot(self, path: str | Path | None = None, **kwargs):  # pragma: no cover - abstract
        """A matplotlib Figure of the result (saved to `path` if given)."""
        raise NotImplementedError(f"{type(self).__name__} has no plot")

    def arrays(self) -> dict[str, Any]:  # pragma: no cover - abstract
        """Every array and scalar of the result by name (what NPZ and HDF5 hold)."""
        raise NotImplementedError

    @classmethod
    def from_arrays(cls, arrays: dict[str, Any], metadata: dict[str, Any]):  # pragma: no cover
        raise NotImplementedError


def close_ids(name: str, ids) -> str:
    """"; did you mean X, Y?" for the ids closest to a name that is not among them
    (ids are case-sensitive, so a case-only difference comes first); "" if none."""
    close = [i for i in ids if i.lower() == name.lower()]
    close += [i for i in difflib.get_close_matches(name, ids, n=3) if i not in close]
    return f"; did you mean {', '.join(close)}?" if close else ""


def new_figure(size=(8, 5)):
    """A matplotlib Figure with the Agg canvas: no global pyplot state, no GUI."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def finish_figure(fig, path=None):
    """Save `fig` to `path` (when given) and return it: the end of every `plot()`."""
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig
