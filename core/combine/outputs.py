"""SED-ML outputs: data generators evaluated over task results, reports written to
OUTDIR/reports.h5 and CSV, plots drawn to PNG (BioSimulators' conventions).

reports.h5: a dataset per report (and per plot) at `<SED-ML location>/<output id>`;
rows are the report's data sets (a plot's data generators), padded with NaN to one
shape; attributes `_type`, `uri`, `sedmlId`, `sedmlName`, `sedmlDataSetIds`,
`sedmlDataSetLabels`, `sedmlDataSetNames`, `sedmlDataSetDataTypes`,
`sedmlDataSetShapes`. CSV: `OUTDIR/<SED-ML location>/<report id>.csv`, one row per
data set (its label first), as BioSimulators writes them; a data set of more than
one dimension (repeated tasks) gives one row per leading index, labelled
`label[i,j]`.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from ..errors import OptionError, UnsupportedModelError
from .mathexpr import evaluate_math
from .simulate import TIME
from .xpath import model_id

TYPES = {"report": "SedReport", "plot2D": "SedPlot2D", "plot3D": "SedPlot3D"}


def variable_name(variable, where: str) -> str:
    """The SBML id (or TIME) a data generator's variable reads."""
    if variable.isSetSymbol():
        symbol = variable.getSymbol()
        if symbol != TIME:
            raise UnsupportedModelError({f"SED-ML symbol {symbol}": (variable.getId(),)},
                                        who="sbmlgpu omex")
        return TIME
    return model_id(variable.getTarget(), f"{where}, variable {variable.getId()!r}")


def needed_ids(doc, where: str) -> dict[str, list[str]]:
    """{task id: the ids its results must hold} over every data generator."""
    needs: dict[str, list[str]] = {}
    for g in doc.getListOfDataGenerators():
        for v in g.getListOfVariables():
            name = variable_name(v, f"{where}, data generator {g.getId()!r}")
            needs.setdefault(v.getTaskReference(), [])
            if name not in needs[v.getTaskReference()]:
                needs[v.getTaskReference()].append(name)
    return needs


def data_generators(doc, results: dict[str, dict[str, np.ndarray]],
                    where: str) -> dict[str, np.ndarray]:
    out = {}
    for g in doc.getListOfDataGenerators():
        g_where = f"{where}, data generator {g.getId()!r}"
        values = {p.getId(): p.getValue() for p in g.getListOfParameters()}
        for v in g.getListOfVariables():
            task = v.getTaskReference()
            if task not in results:
                raise OptionError("taskReference", f"{g_where}: variable {v.getId()!r} "
                                                   f"refers to no task ({task!r})")
            values[v.getId()] = results[task][variable_name(v, g_where)]
        out[g.getId()] = evaluate_math(g.getMath(), values, g_where)
    return out


def pad_rows(items: list[tuple[str, str, str, np.ndarray]]):
    """The rows' values padded with NaN to one shape: (rows, *shape)."""
    arrays = [np.asarray(a, dtype=float) for *_, a in items]
    rank = max((a.ndim for a in arrays), default=0)
    arrays = [a.reshape((1,) * (rank - a.ndim) + a.shape) for a in arrays]
    shape = tuple(max(s) for s in zip(*(a.shape for a in arrays))) if arrays else ()
    data = np.full((len(arrays), *shape), np.nan)
    for k, a in enumerate(arrays):
        data[(k, *(slice(0, n) for n in a.shape))] = a
    return data


def collect(output, generators: dict[str, np.ndarray], where: str):
    """[(id, label, name, values)] of an output's rows."""
    kind = output.getElementName()
    if kind == "report":
        items = []
        for d in output.getListOfDataSets():
            ref = d.getDataReference()
            if ref not in generators:
                raise OptionError("dataReference", f"{where}: data set {d.getId()!r} "
                                                   f"refers to no data generator ({ref!r})")
            items.append((d.getId(), d.getLabel() or d.getId(), d.getName(), generators[ref]))
        return items
    refs = []
    for c in plot_items(output):
        refs += [r for r in c[1:] if r not in refs]
    missing = [r for r in refs if r not in generators]
    if missing:
        raise OptionError("dataReference", f"{where}: no data generator {', '.join(missing)}")
    return [(r, r, "", generators[r]) for r in refs]


def plot_items(output):
    """[(curve or surface, x, y[, z])] of a plot."""
    if output.getElementName() == "plot2D":
        return [(c, c.getXDataReference(), c.getYDataReference())
                for c in output.getListOfCurves()]
    return [(s, s.getXDataReference(), s.getYDataReference(), s.getZDataReference())
            for s in output.getListOfSurfaces()]


def write_hdf5(h5, location: str, output, items, data) -> None:
    path = f"{location}/{output.getId()}"
    if path in h5:
        del h5[path]
    group = h5.require_group(location)
    group.attrs["uri"] = location
    group.attrs["combineArchiveLocation"] = location
    ds = h5.create_dataset(path, data=data)
    ds.attrs["_type"] = TYPES[output.getElementName()]
    ds.attrs["uri"] = path
    ds.attrs["sedmlId"] = output.getId()
    ds.attrs["sedmlName"] = output.getName()
    ds.attrs["sedmlDataSetIds"] = [i for i, *_ in items]
    ds.attrs["sedmlDataSetLabels"] = [label for _, label, *_ in items]
    ds.attrs["sedmlDataSetNames"] = [name for _, _, name, _ in items]
    ds.attrs["sedmlDataSetDataTypes"] = ["float64"] * len(items)
    ds.attrs["sedmlDataSetShapes"] = [",".join(str(n) for n in np.shape(a))
                                      for *_, a in items]


def write_csv(path: Path, items, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        for (_, label, _, _), row in zip(items, data):
            row = np.asarray(row)
            if row.ndim <= 1:
                writer.writerow([label, *np.atleast_1d(row).tolist()])
                continue
            for index in np.ndindex(row.shape[:-1]):
                writer.writerow([f"{label}[{','.join(map(str, index))}]", *row[index].tolist()])
    return path


def write_plot(path: Path, output, generators: dict[str, np.ndarray]) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    three = output.getElementName() == "plot3D"
    fig = plt.figure(figsize=(8, 5))
    ax = fig.add_subplot(projection="3d") if three else fig.add_subplot()
    for item, *refs in plot_items(output):
        arrays = [np.asarray(generators[r], dtype=float) for r in refs]
        arrays = [a.reshape(-1, a.shape[-1]) if a.ndim > 1 else np.atleast_1d(a)[None]
                  for a in arrays]
        label = item.getName() or item.getId() or refs[-1]
        for k in range(max(a.shape[0] for a in arrays)):  # one line per iteration
            line = [a[min(k, a.shape[0] - 1)] for a in arrays]
            ax.plot(*line, label=label if k == 0 else None)
    if not three:
        curves = list(output.getListOfCurves())
        if any(c.isSetLogX() and c.getLogX() for c in curves):
            ax.set_xscale("log")
        if any(c.isSetLogY() and c.getLogY() for c in curves):
            ax.set_yscale("log")
    items = plot_items(output)
    if items:  # the axes are named by the first curve's (surface's) data generators
        ax.set_xlabel(items[0][1])
        ax.set_ylabel(items[0][2] if len(items) == 1 or three else "")
        if three:
            ax.set_zlabel(items[0][3])
    ax.set_title(output.getName() or output.getId())
    ax.legend(loc="best", fontsize="small")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
