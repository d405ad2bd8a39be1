"""Time-course plots of a Result (matplotlib, Agg: no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

from .base import finish_figure, new_figure

if TYPE_CHECKING:  # pragma: no cover
    from .time_course import TimeCourseResult

MAX_COLUMNS = 12  # more lines than this make an unreadable plot


def plot_result(result: "TimeCourseResult", path: str | Path | None = None,
                ids: Sequence[str] | None = None, max_members: int = 5):
    """One axes with a line per column. An ensemble: mean line, a band between the
    outermost quantiles of the summary (5 % and 95 % by default; mean ± sd when it
    has none), and up to `max_members` ok members as thin lines. Returns the Figure
    (not shown)."""
    ids = list(ids) if ids is not None else list(result.ids[:MAX_COLUMNS])
    columns = [result.index(i) for i in ids]
    fig = new_figure((8, 5))
    ax = fig.add_subplot()
    t = result.times
    summary = result.summary
    single = result.data is not None and result.data.shape[0] == 1
    if summary is None and not single and result.data is not None:
        summary = result.with_summary().summary
    colors = [f"C{k % 10}" for k in range(len(ids))]
    for color, sbml_id, j in zip(colors, ids, columns):
        if single:
            ax.plot(t, result.data[0, :, j], color=color, label=sbml_id)
            continue
        if result.data is not None and max_members > 0:
            for m in np.flatnonzero(result.ok)[:max_members]:
                ax.plot(t, result.data[m, :, j], color=color, alpha=0.25, linewidth=0.7)
        mean = summary.mean[:, j]
        ax.plot(t, mean, color=color, label=f"{sbml_id} (mean)")
        lo, hi = band(summary, j)
        if np.isfinite(lo).any():
            ax.fill_between(t, lo, hi, color=color, alpha=0.2, linewidth=0)
    ax.set_xlabel("time")
    ax.set_ylabel("value")
    title = result.metadata.get("model") or ""
    if not single and summary is not None:
        title = f"{title}  mean, {band_name(summary)} {summary.describe()}".strip()
    if title:
        ax.set_title(title, fontsize="medium")
    if ids:
        ax.legend(fontsize="small", ncol=2 if len(ids) > 6 else 1)
    if len(result.ids) > len(ids) and ids == list(result.ids[:MAX_COLUMNS]):
        ax.text(0.99, 0.01, f"first {len(ids)} of {len(result.ids)} columns",
                transform=ax.transAxes, ha="right", va="bottom", fontsize="x-small")
    return finish_figure(fig, path)


def _band_quantiles(summary) -> tuple[int, int] | None:
    """Indices of the outermost quantiles below and above the median, if any."""
    qs = list(summary.quantiles)
    below = [k for k, q in enumerate(qs) if q < 0.5]
    above = [k for k, q in enumerate(qs) if q > 0.5]
    if not below or not above:
        return None
    return min(below, key=lambda k: qs[k]), max(above, key=lambda k: qs[k])


def band(summary, j: int) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) edge of column j's band: between quantiles where the summary
    has them (an ensemble of positive values is often skewed, and mean ± sd then
    reaches below zero), else mean ± sd."""
    pair = _band_quantiles(summary)
    if pair is not None:
        return summary.quantile_values[pair[0], :, j], summary.quantile_values[pair[1], :, j]
    mean, sd = summary.mean[:, j], summary.sd[:, j]
    return mean - sd, mean + sd


def band_name(summary) -> str:
    pair = _band_quantiles(summary)
    if pair is None:
        return "± sd"
    lo, hi = (summary.quantiles[k] for k in pair)
    return f"{100 * lo:g}–{100 * hi:g} % band"
