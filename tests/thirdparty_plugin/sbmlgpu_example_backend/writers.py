"""A result format: time courses as tab-separated text (`--format tsv`)."""

from __future__ import annotations

from pathlib import Path


def write_tsv(result, path: Path) -> list[Path]:
    """`time`, then one column per output; an ensemble adds a `member` column. A result
    that kept only its summary (`--summary`: `result.data` is None) is written as
    `time` and `<id>_mean`, `<id>_sd` columns."""
    lines = []
    if result.data is None:
        summary = result.summary
        lines.append("\t".join(["time"] + [f"{i}_{s}" for i in result.ids
                                           for s in ("mean", "sd")]))
        for k, t in enumerate(result.times):
            values = [v for j in range(len(result.ids))
                      for v in (summary.mean[k, j], summary.sd[k, j])]
            lines.append("\t".join(map(repr, [float(t), *map(float, values)])))
    else:
        lines.append("\t".join(["time", "member", *result.ids]))
        for member, table in enumerate(result.data):
            for t, row in zip(result.times, table):
                lines.append("\t".join([repr(float(t)), str(member), *map(repr, row.tolist())]))
    path.write_text("\n".join(lines) + "\n")
    return [path]


write_tsv.suffix = ".tsv"
