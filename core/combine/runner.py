"""`run_omex`: every SED-ML file of a COMBINE archive, its tasks, data generators and
outputs, written under OUTDIR (reports.h5, CSV per report, PNG per plot)."""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import OptionError, UnsupportedModelError
from . import kisao
from .archive import inside, open_archive
from .libraries import libsedml
from .models import ModelSources
from .outputs import (collect, data_generators, needed_ids, pad_rows, write_csv,
                      write_hdf5, write_plot)
from .simulate import RunSettings
from .tasks import TaskRunner

log = logging.getLogger("sbmlgpu")
#: libsedml's error ids below this are the XML layer's (not well-formed) and the
#: document's own (not a SED-ML document, unknown level/version): nothing to run
DOCUMENT_ERRORS = 10100


@dataclass
class OmexOutcome:
    """What a run wrote: files, and per SED-ML location {output id: rows}."""

    files: list[Path] = field(default_factory=list)
    reports: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)


def run_omex(archive: str | Path, outdir: str | Path, *, backend: str | None = None,
             device="auto", algorithm_substitution: str = kisao.DEFAULT_POLICY,
             plots: bool = True) -> OmexOutcome:
    """Run every SED-ML file of the COMBINE archive `archive` (the master first) and
    write OUTDIR/reports.h5, OUTDIR/<sedml>/<report>.csv and a PNG per plot.

    `backend`: run every simulation on this backend (default: the algorithm's, see
    docs/combine.md); `device`: "auto", "cpu" or GPU indices, as for sbmlgpu.run;
    `algorithm_substitution`: NONE or SIMILAR_APPROXIMATIONS (unknown KiSAO ids run
    on ode with a warning). Raises OptionError, UnsupportedModelError,
    SBMLImportError, SimulationError naming the file and element."""
    import h5py

    if algorithm_substitution not in kisao.POLICIES:
        raise OptionError("algorithm-substitution", f"{algorithm_substitution!r}: choose "
                                                    f"one of {', '.join(kisao.POLICIES)}")
    settings = RunSettings(backend, device, algorithm_substitution)
    outdir = Path(outdir)
    outcome = OmexOutcome()
    with tempfile.TemporaryDirectory(prefix="sbmlgpu-omex-") as folder:
        opened = open_archive(archive, folder)
        outdir.mkdir(parents=True, exist_ok=True)
        h5_path = outdir / "reports.h5"
        with h5py.File(h5_path, "w") as h5:
            for location in opened.sedml:
                reports = run_sedml(opened, location, settings, outdir, h5, outcome.files,
                                    plots)
                outcome.reports[location] = reports
        outcome.files.insert(0, h5_path)
    return outcome


def read_sedml(path: Path, location: str):
    """The SED-ML document. XML that cannot be read is an OptionError; libsedml's
    validation errors are warnings, as it holds every version to the newest one's
    rules (a subTask without `order`, optional in L1V3, is an error to it): whatever
    we cannot run is refused later, by name."""
    doc = libsedml().readSedMLFromString(path.read_text(encoding="utf-8", errors="replace"))
    problems = [doc.getError(k) for k in range(doc.getNumErrors())
                if doc.getError(k).getSeverity() >= 2]  # LIBSEDML_SEV_ERROR and worse
    fatal = [e for e in problems if e.getSeverity() >= 3 or e.getErrorId() < DOCUMENT_ERRORS]
    if fatal:
        text = "; ".join(f"line {e.getLine()}: {e.getMessage().strip()}" for e in fatal[:5])
        raise OptionError("input", f"{location}: not valid SED-ML ({text})")
    for e in problems[:10]:
        log.warning(f"{location}, line {e.getLine()}: {' '.join(e.getMessage().split())} "
                    f"(libsedml; carrying on)")
    return doc


def run_sedml(opened, location: str, settings: RunSettings, outdir: Path, h5, files,
              plots: bool) -> dict[str, np.ndarray]:
    path = inside(opened.folder, location, str(opened.path))
    doc = read_sedml(path, location)
    sources = ModelSources(doc, path, Path(opened.folder).resolve(), location)
    runner = TaskRunner(doc, sources, settings, location)
    needs = needed_ids(doc, location)
    for k in range(doc.getNumTasks()):  # a task no output uses still runs (and can fail)
        needs.setdefault(doc.getTask(k).getId(), [])
    results = {task_id: runner.run(task_id, ids) for task_id, ids in needs.items()}
    generators = data_generators(doc, results, location)
    reports = {}
    for output in doc.getListOfOutputs():
        kind = output.getElementName()
        where = f"{location}, {kind} {output.getId()!r}"
        if kind not in ("report", "plot2D", "plot3D"):
            raise UnsupportedModelError({f"SED-ML output {kind}": (output.getId(),)},
                                        who="sbmlgpu omex")
        items = collect(output, generators, where)
        data = pad_rows(items)
        write_hdf5(h5, location, output, items, data)
        if kind == "report":
            reports[output.getId()] = data
            files.append(write_csv(outdir / location / f"{output.getId()}.csv", items, data))
        elif plots:
            files.append(write_plot(outdir / location / f"{output.getId()}.png", output,
                                    generators))
    return reports
