"""Runs that cannot break (issue 14): the fast default and its fallback, limits checked
before anything is allocated, bad tables and options as one typed message."""

from pathlib import Path

import numpy as np
import pytest

import sbmlgpu
from sbmlgpu import cli
from sbmlgpu.ensemble import read_petab_parameters, read_table
from sbmlgpu.errors import OptionError, UnsupportedModelError
from sbmlgpu.tasks import TimeCourse
from sbmlgpu.tasks.limits import MAX_OUTPUT_TIMES, check_result_size
from sbmlgpu.tasks.estimation import read_measurements
from tests.sbml_strings import model as sbml_model
from tests.sbml_strings import parameter, reaction, species, write_decay_model

DELAYED_LAW = ("<apply><times/><ci>k</ci><apply><csymbol encoding='text' definitionURL="
               "'http://www.sbml.org/sbml/symbols/delay'>delay</csymbol><ci>A</ci>"
               "<cn>0.1</cn></apply></apply>")


@pytest.fixture
def decay(tmp_path):
    return write_decay_model(tmp_path)


@pytest.fixture
def delayed(tmp_path):
    path = tmp_path / "delayed.xml"
    path.write_text(sbml_model(species("A", 10) + species("B", 0), parameter("k", 1),
                               reaction("r", ["A"], ["B"], DELAYED_LAW)))
    return path


def run_main(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# -- the fast default ----------------------------------------------------------------------
def test_the_default_backend_is_ode_on_the_cpu_path(decay):
    result = sbmlgpu.run(decay, end=2.0, points=3, device="cpu", progress=False)
    assert result.metadata["backend"] == "ode" and result.metadata["device"].startswith("cpu")
    np.testing.assert_allclose(result["A"][0], 10 * np.exp(-0.5 * np.array([0, 1, 2])),
                               rtol=1e-6)


def test_a_model_ode_refuses_falls_back_to_the_reference_with_one_note(capsys, delayed,
                                                                        tmp_path):
    code, out, err = run_main(capsys, "run", delayed, "--end", 1, "--points", 3,
                              "-o", tmp_path / "o", "--format", "npz")
    assert code == 0, err
    notes = [line for line in err.splitlines() if "refuses this model" in line]
    assert len(notes) == 1 and "delay()" in notes[0] and "'reference'" in notes[0]
    assert sbmlgpu.results.read(tmp_path / "o" / "delayed.npz").metadata["backend"] \
        == "reference"


def test_a_named_backend_refusal_is_the_answer(capsys, delayed, tmp_path):
    code, _, err = run_main(capsys, "run", delayed, "--end", 1, "--backend", "ode",
                            "-o", tmp_path)
    assert code == 2 and "backend 'ode' does not support: delay()" in err
    with pytest.raises(UnsupportedModelError, match="delay"):
        sbmlgpu.run(delayed, "ode", end=1.0, device="cpu", progress=False)


def test_no_fallback_when_options_of_the_default_were_given(capsys, delayed, tmp_path):
    code, _, err = run_main(capsys, "run", delayed, "--end", 1, "--dt", "0.01",
                            "-o", tmp_path)
    assert code == 2 and "backend 'ode' does not support" in err
    assert "options of 'ode' were given" in err


# -- sizes checked before anything runs -------------------------------------------------------
def test_too_many_output_times_is_an_option_error_naming_need_and_limit(capsys, decay, tmp_path):
    code, _, err = run_main(capsys, "run", decay, "--end", 1, "--points", 100_000_000,
                            "-o", tmp_path)
    assert code == 2 and "100,000,000 output times would need 2.4 GB" in err
    assert f"the limit is {MAX_OUTPUT_TIMES:,} output times" in err
    assert not (tmp_path / "decay.csv").exists()


def test_an_ensemble_too_large_for_memory_and_disk_is_refused(capsys, decay, tmp_path):
    code, _, err = run_main(capsys, "run", decay, "--end", 1, "--ensemble", 10**10,
                            "--backend", "ssa", "-o", tmp_path)
    assert code == 2 and "option ensemble: 10,000,000,000 member(s)" in err
    assert "would need 2.42e+04 GB for the result; the limit is" in err
    code, _, err = run_main(capsys, "run", decay, "--end", 1, "--ensemble", 10**10,
                            "--sample", "k=uniform:0:1", "-o", tmp_path)
    assert code == 2 and "would need 160 GB for the parameter sets" in err


def test_the_result_size_counts_summary_rows_not_members(decay):
    network = sbmlgpu.load(decay)
    task = TimeCourse.between(end=1.0, points=11, n=10**6, summary=True)
    assert check_result_size(task, network, limit=10**6) < 10**4  # 11 x 3 x 10 x 8
    task = TimeCourse.between(end=1.0, points=11, n=10**6)
    with pytest.raises(OptionError, match=r"264 MB|0.264 GB"):
        check_result_size(task, network, limit=10**6)


# -- options ---------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", ["-1", str(2**64)])
def test_a_seed_outside_0_to_2_64_is_an_option_error(capsys, decay, tmp_path, seed):
    code, _, err = run_main(capsys, "run", decay, "--end", 1, "--backend", "reference",
                            "--seed", seed, "-o", tmp_path)
    assert code == 2 and "option seed" in err and "Traceback" not in err


def test_outputs_given_twice_are_reported_once_with_a_note(capsys, decay, tmp_path):
    code, _, err = run_main(capsys, "run", decay, "--end", 1, "--points", 2, "--backend",
                            "reference", "--outputs", "A,B,A", "-o", tmp_path)
    assert code == 0, err
    assert "outputs given more than once are reported once: A" in err
    assert Path(tmp_path / "decay.csv").read_text().splitlines()[0] == "time,A,B"


# -- tables ---------------------------------------------------------------------------------
def test_tables_take_tabs_as_well_as_commas(tmp_path):
    (tmp_path / "sets.tsv").write_text("k\tA\n0.1\t1\n1.0\t2\n")
    table = read_table(tmp_path / "sets.tsv")
    np.testing.assert_array_equal(table["k"], [0.1, 1.0])
    np.testing.assert_array_equal(table["A"], [1, 2])
    (tmp_path / "data.tsv").write_text("time\tid\tlower\tupper\n1\tA\t0\t2\n")
    data = read_measurements(tmp_path / "data.tsv")
    assert data.ids == ("A",) and list(data.upper) == [2.0]
    (tmp_path / "p.csv").write_text("parameterId,parameterScale,lowerBound,upperBound,"
                                    "nominalValue,estimate\nk,lin,0,1,0.5,1\n")
    [k] = read_petab_parameters(tmp_path / "p.csv")
    assert (k.id, k.upper, k.estimate) == ("k", 1.0, True)


def test_a_table_that_is_not_utf8_names_the_file_and_line(capsys, decay, tmp_path):
    (tmp_path / "sets.csv").write_bytes("k,A\n0.1,1\n0.2,2 \xb5M\n".encode("latin-1"))
    with pytest.raises(OptionError, match=r"sets.csv, line 3: not UTF-8 text \(byte 0xb5\)"):
        read_table(tmp_path / "sets.csv")
    code, _, err = run_main(capsys, "run", decay, "--end", 1, "--parameters",
                            tmp_path / "sets.csv", "-o", tmp_path)
    assert code == 2 and "line 3: not UTF-8" in err and "Traceback" not in err
