"""-o OUTDIR of run, petab and omex: an empty name (it wrote into the working folder),
an existing file and a place the OS refuses are one error naming -o/outdir, exit 2
(found by a bad-input audit: the OS's "[Errno 17] File exists" named no option)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sbmlgpu import cli

LV = str(Path(__file__).resolve().parents[1] / "sbml_models" / "lotka_volterra.xml")
RUN = ["run", LV, "--cpu", "--end", "1", "--points", "3"]


def _exit(argv) -> int:
    try:
        return cli.main(argv)
    except SystemExit as stop:  # argparse's own errors
        return int(stop.code)


@pytest.mark.parametrize("make, words", [
    (lambda tmp: "", "an empty name"),
    (lambda tmp: (tmp / "a_file").write_text("x") and str(tmp / "a_file"),
     "exists and is not a folder"),
    (lambda tmp: "/proc/sbmlgpu-no/such", "cannot create the folder")])
def test_a_bad_outdir_is_one_error_naming_it(tmp_path, capsys, make, words):
    assert _exit([*RUN, "-o", make(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert words in err and ("-o/--outdir" in err or "option outdir" in err), err


def test_a_good_outdir_is_created_with_its_parents(tmp_path, capsys):
    out = tmp_path / "a" / "b"
    assert _exit([*RUN, "-o", str(out)]) == 0, capsys.readouterr().err
    assert (out / "lotka_volterra.csv").is_file()
