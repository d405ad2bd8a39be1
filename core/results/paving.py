"""The result of an Estimation task: a paving of the unknown parameters' search box.

Set inversion (SIVIA) keeps two kinds of box: `feasible` (every output enclosure lies
inside its data interval: every point of the box is consistent with the data) and
`undetermined` (smaller than epsilon and not decided); everything else of the search
box was proved inconsistent and is `rejected` (counted by volume, not stored).
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from .base import Result, finish_figure, new_figure
from .writers import companion

VERDICTS = ("feasible", "undetermined")
COLOURS = {"feasible": "tab:green", "undetermined": "gold"}


@dataclass
class Paving(Result):
    """`lower`, `upper` (boxes, len(ids)); `verdict` (boxes,) codes into VERDICTS;
    `search` (len(ids), 2) the box searched; `statistics`: boxes evaluated, seconds..."""

    #: file suffix of the CSV output written by `sbmlgpu COMMAND -o OUTDIR`
    csv_suffix: ClassVar[str] = ".paving.csv"
    kind: ClassVar[str] = "estimation"

    ids: tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray
    verdict: np.ndarray
    search: np.ndarray
    epsilon: float
    statistics: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        self.ids = tuple(str(i) for i in self.ids)
        k = len(self.ids)
        self.lower = np.asarray(self.lower, dtype=float).reshape(-1, k)
        self.upper = np.asarray(self.upper, dtype=float).reshape(-1, k)
        self.search = np.asarray(self.search, dtype=float).reshape(k, 2)
        verdict = np.asarray(self.verdict)
        if verdict.dtype.kind in "US":
            unknown = sorted(set(verdict.tolist()) - set(VERDICTS))
            if unknown:
                raise ValueError(f"verdicts must be {VERDICTS}, not {unknown}")
            verdict = np.array([VERDICTS.index(v) for v in verdict.tolist()], dtype=np.int8)
        self.verdict = verdict.astype(np.int8).reshape(-1)
        if not (len(self.lower) == len(self.upper) == len(self.verdict)):
            raise ValueError("lower, upper and verdict must have one row per box")
        if self.verdict.size and (self.verdict.min() < 0 or self.verdict.max() >= len(VERDICTS)):
            raise ValueError(f"verdict codes must index {VERDICTS}")
        if np.any(self.lower > self.upper):
            raise ValueError("a box has lower > upper")
        if np.any(self.search[:, 0] > self.search[:, 1]):
            raise ValueError("the search box has lower > upper")
        self.epsilon = float(self.epsilon)
        self.statistics = dict(self.statistics)

    @property
    def n_boxes(self) -> int:
        return len(self.verdict)

    def boxes(self, verdict: str) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) of the boxes with one verdict."""
        mask = self.verdict == VERDICTS.index(verdict)
        return self.lower[mask], self.upper[mask]

    def volume(self, verdict: str) -> float:
        lo, hi = self.boxes(verdict)
        return float(np.prod(hi - lo, axis=1).sum()) if len(lo) else 0.0

    @property
    def volumes(self) -> dict[str, float]:
        """Volume feasible, undetermined and rejected (the rest of the search box)."""
        total = float(np.prod(self.search[:, 1] - self.search[:, 0]))
        out = {v: self.volume(v) for v in VERDICTS}
        out["rejected"] = max(total - sum(out.values()), 0.0)
        return out

    def failure_note(self) -> tuple[str | None, bool]:
        """(what the command says on stderr about boxes whose enclosure could not be
        carried through the data times, or None; whether every box evaluated failed,
        so that nothing was decided: the command's exit status 1)."""
        failed = int(self.statistics.get("boxes_integration_failed", 0) or 0)
        evaluated = int(self.statistics.get("boxes_evaluated", 0) or 0)
        if not failed:
            return None, False
        every = failed >= evaluated > 0
        text = (f"{'every one' if every else f'{failed:,}'} of the {evaluated:,} boxes "
                f"evaluated failed to carry their enclosure through the data times (kept as "
                f"undetermined, never rejected)"
                + ("; nothing was decided: try a larger --max-steps or --max-halvings, "
                   "or check the data times" if every else ""))
        return text, every

    def contains(self, point) -> str:
        """'feasible', 'undetermined' or 'rejected' for a point of the search space."""
        point = np.asarray(point, dtype=float).reshape(1, -1)
        inside = np.all((self.lower <= point) & (point <= self.upper), axis=1)
        verdicts = {VERDICTS[c] for c in self.verdict[inside]}
        return "feasible" if "feasible" in verdicts else verdicts.pop() if verdicts else "rejected"

    # -- output ---------------------------------------------------------------------
    def write_csv(self, path: Path) -> list[Path]:
        """`path`: one row per box kept, `verdict` then `<id>_lower,<id>_upper` per
        unknown; `<stem>.summary.csv`: `quantity,value` (boxes, volumes, epsilon and
        the backend's statistics)."""
        path = Path(path)
        header = ["verdict"] + [f"{i}_{side}" for i in self.ids for side in ("lower", "upper")]
        with open(path, "w", encoding="utf-8") as out:
            out.write(",".join(header) + "\n")
            for code, lo, hi in zip(self.verdict.tolist(), self.lower.tolist(),
                                    self.upper.tolist()):
                bounds = [repr(v) for pair in zip(lo, hi) for v in pair]
                out.write(",".join([VERDICTS[code], *bounds]) + "\n")
        summary = companion(path, "summary")
        rows = {"boxes_kept": self.n_boxes, "epsilon": self.epsilon,
                **{f"volume_{k}": v for k, v in self.volumes.items()}, **self.statistics}
        with open(summary, "w", encoding="utf-8", newline="") as out:
            writer = csv.writer(out, lineterminator="\n")  # a value with commas is quoted
            writer.writerow(("quantity", "value"))
            writer.writerows((key, repr(value)) for key, value in _flat(rows))
        return [path, summary]

    def arrays(self) -> dict[str, Any]:
        return {"ids": np.array(self.ids, dtype=str), "lower": self.lower,
                "upper": self.upper, "verdict": self.verdict,
                "verdict_names": np.array(VERDICTS, dtype=str), "search": self.search,
                "epsilon": np.array(self.epsilon),
                "statistics_json": json.dumps(self.statistics, default=str, sort_keys=True)}

    @classmethod
    def from_arrays(cls, a: dict[str, Any], metadata: dict) -> "Paving":
        names = [str(n) for n in np.asarray(a["verdict_names"]).tolist()]
        verdict = np.array([names[c] for c in np.asarray(a["verdict"]).tolist()], dtype=str)
        return cls(tuple(np.asarray(a["ids"]).tolist()), a["lower"], a["upper"], verdict,
                   a["search"], float(a["epsilon"]),
                   json.loads(str(a["statistics_json"])), metadata)

    def plot(self, path: str | Path | None = None):
        """The boxes: one panel for one or two unknowns, pairwise projections for more."""
        from matplotlib.patches import Rectangle

        k = len(self.ids)
        pairs = [(0, 0)] if k == 1 else list(combinations(range(k), 2))
        cols = min(3, len(pairs))
        rows = -(-len(pairs) // cols)
        fig = new_figure((4.5 * cols, 4 * rows))
        axes = fig.subplots(rows, cols, squeeze=False).reshape(-1)
        for ax, (i, j) in zip(axes, pairs):
            for code, lo, hi in zip(self.verdict, self.lower, self.upper):
                verdict = VERDICTS[code]
                y0, height = (0.0, 1.0) if k == 1 else (lo[j], hi[j] - lo[j])
                ax.add_patch(Rectangle((lo[i], y0), hi[i] - lo[i], height,
                                       facecolor=COLOURS[verdict], edgecolor="black",
                                       linewidth=0.2, alpha=0.8 if k <= 2 else 0.3))
            ax.set_xlim(*self.search[i])
            ax.set_xlabel(self.ids[i])
            if k == 1:
                ax.set_ylim(0, 1)
                ax.set_yticks([])
            else:
                ax.set_ylim(*self.search[j])
                ax.set_ylabel(self.ids[j])
        for ax in axes[len(pairs):]:
            ax.set_visible(False)
        fig.suptitle(f"{self.metadata.get('model') or ''} paving: green feasible, yellow "
                     f"undetermined, white rejected (epsilon {self.epsilon:g})".strip(),
                     fontsize="medium")
        return finish_figure(fig, path)

    def __repr__(self) -> str:
        counts = {v: int((self.verdict == c).sum()) for c, v in enumerate(VERDICTS)}
        return (f"Paving({self.n_boxes} box(es): {counts['feasible']} feasible, "
                f"{counts['undetermined']} undetermined; unknowns {', '.join(self.ids)})")


def _flat(rows: dict, prefix: str = ""):
    """(quantity, value) pairs of `rows`, a nested dict's entries as parent.key (the
    summary stays two columns: a dict's repr would hold commas)."""
    for key, value in rows.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from _flat(value, f"{name}.")
        else:
            yield name, value
