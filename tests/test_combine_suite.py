"""COMBINE archives built from SBML Test Suite cases (SED-ML written with libsedml, packed
with libcombine): the reports that `sbmlgpu omex` writes equal each case's results.csv
within the case's own tolerances, read back from reports.h5 and from the CSV."""

from __future__ import annotations

import csv

import h5py
import numpy as np
import pytest

# the GPU machine may lack them (no cp312 wheels carried): skip there, saying so, rather
# than fail the whole run's collection
pytest.importorskip("libcombine", reason="python-libcombine is not installed")
pytest.importorskip("libsedml", reason="python-libsedml is not installed")

from sbmlgpu.combine import run_omex  # noqa: E402
from sbmlgpu.testsuite.cases import Case  # noqa: E402
from sbmlgpu.testsuite.compare import compare  # noqa: E402

from .combine_build import suite_case_archive  # noqa: E402
from .shared_data import SEMANTIC, needs_semantic  # noqa: E402

# a representative set: the third time-course case of each tag (events with and without
# delay and priority, assignment/rate/algebraic rules, initial assignments, amounts and
# concentrations, hasOnlySubstanceUnits, delay(), rateOf, conversion factors, ...);
# 00939 uses delay() (the ode kernel's history)
CASES = ["00003", "00463", "00113", "00033", "00078", "00184", "00037", "00074", "00073",
         "00963", "00084", "00853", "00939", "00053", "00027", "00059", "00009", "01121",
         "00129", "00111", "01251"]


def read_csv_report(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return [r[0] for r in rows], np.array([[float(x) for x in r[1:]] for r in rows])


@needs_semantic
@pytest.mark.parametrize("number", CASES)
def test_suite_case_archive_matches_results(number, tmp_path):
    check_suite_case_archive(number, tmp_path, "cpu")


def check_suite_case_archive(number, tmp_path, device) -> None:
    """The archive of suite case `number` run on `device`: its reports (HDF5 and CSV)
    equal the case's results within its tolerances."""
    case = Case(number, SEMANTIC / number)
    archive, variables = suite_case_archive(case, tmp_path / f"{number}.omex")
    outcome = run_omex(archive, tmp_path / "out", device=device, plots=False)

    with h5py.File(tmp_path / "out" / "reports.h5") as h5:
        ds = h5["simulation.sedml/results"]
        data = ds[:]
        assert list(ds.attrs["sedmlDataSetLabels"]) == ["time", *variables]
        assert list(ds.attrs["sedmlDataSetIds"]) == ["ds_time"] + [f"ds_g_{v}"
                                                                   for v in variables]
        assert ds.attrs["sedmlId"] == "results"
    settings = case.settings()
    times, expected = case.expected()
    assert data.shape == (1 + len(variables), settings.steps + 1)
    # some tables round their times (00963: 9 digits)
    np.testing.assert_allclose(data[0], times, rtol=0,
                               atol=1e-6 * settings.duration / settings.steps)
    passed, worst = compare(times, {v: data[k + 1] for k, v in enumerate(variables)},
                            {v: expected[v] for v in variables}, settings.absolute,
                            settings.relative)
    assert passed, worst

    labels, table = read_csv_report(tmp_path / "out" / "simulation.sedml" / "results.csv")
    assert labels == ["time", *variables]
    np.testing.assert_array_equal(table, data)  # the CSV holds the same numbers
    assert outcome.reports["simulation.sedml"]["results"].shape == data.shape
