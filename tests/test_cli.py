"""The `sbmlgpu` command: in-process through main(argv) and as a subprocess."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import sbmlgpu
from sbmlgpu import cli, plugin_manager
from sbmlgpu.results import read_npz
from tests.sbml_strings import DECAY_SBML, write_decay_model



@pytest.fixture
def model(tmp_path):
    return write_decay_model(tmp_path)


def run_main(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def read_csv(path):
    lines = Path(path).read_text().splitlines()
    return lines[0].split(","), np.array([[float(x) for x in line.split(",")]
                                          for line in lines[1:]])


# -- help, version, backends -------------------------------------------------------
def test_no_command_prints_usage_and_fails(capsys):
    code, out, err = run_main(capsys)
    assert code == 2 and "usage: sbmlgpu" in err and "backends" in err


def test_version(capsys):
    code, out, _ = run_main(capsys, "--version")
    assert code == 0 and out.strip() == f"sbmlgpu {sbmlgpu.__version__}"


def test_backends_lists_name_description_and_distribution(capsys):
    code, out, _ = run_main(capsys, "backends")
    assert code == 0
    assert "reference  the scipy CPU reference, one trajectory per parameter set" in out
    assert f"plugin: sbmlgpu {sbmlgpu.__version__}" in out


def test_run_help_is_complete_and_includes_backend_options(capsys):
    code, out, _ = run_main(capsys, "run", "--backend", "reference", "--help")
    assert code == 0
    for flag in ("--backend", "--start", "--end", "--points", "--times", "--ensemble",
                 "--parameters", "--sample", "--petab-parameters", "--seed", "--summary",
                 "--outputs", "--outdir", "--format", "--plot", "--profile", "--keep-source",
                 "--cpu", "--devices", "--no-progress",
                 # the reference backend's options, built from its dataclass
                 "--rtol", "--atol", "--method", "--max-step"):
        assert flag in out, flag
    assert "{LSODA,BDF,Radau,RK45,DOP853,RK23}" in out
    assert "[default: 1e-08]" in out
    assert "{csv,npz,hdf5}" in out


def test_testsuite_command_delegates_its_arguments(capsys):
    code, out, _ = run_main(capsys, "testsuite", "--help")
    assert code == 0 and "CASES_DIR" in out


def test_testsuite_without_its_module_is_a_message(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "sbmlgpu.testsuite", None)
    code, _, err = run_main(capsys, "testsuite", "cases")
    assert code == 2 and "sbmlgpu.testsuite, which is not installed" in err


# -- run -------------------------------------------------------------------------------
def test_run_writes_csv_and_says_where(capsys, model, tmp_path):
    out_dir = tmp_path / "out"
    code, out, err = run_main(capsys, "run", model, "--end", 4, "--points", 5, "-o", out_dir)
    assert code == 0, err
    assert out.splitlines() == [f"wrote {out_dir / 'decay.csv'}"]
    header, table = read_csv(out_dir / "decay.csv")
    assert header == ["time", "A", "B"]
    t = np.linspace(0, 4, 5)
    np.testing.assert_allclose(table[:, 0], t)
    np.testing.assert_allclose(table[:, 1], 10 * np.exp(-0.5 * t), rtol=1e-6)
    np.testing.assert_allclose(table[:, 1] + table[:, 2], 10, rtol=1e-9)


def test_run_backend_options_reach_the_backend(capsys, model, tmp_path):
    code, _, err = run_main(capsys, "run", model, "--times", "0,1,2", "-o", tmp_path,
                            "--backend", "reference", "--rtol", "1e-6", "--method", "BDF",
                            "--format", "npz")
    assert code == 0, err
    result = read_npz(tmp_path / "decay.npz")
    assert result.metadata["options"]["rtol"] == 1e-6
    assert result.metadata["options"]["method"] == "BDF"
    np.testing.assert_array_equal(result.times, [0, 1, 2])


def test_run_ensemble_from_samples_with_summary_and_plot(capsys, model, tmp_path):
    code, out, err = run_main(capsys, "run", model, "--end", 2, "--points", 3, "-o", tmp_path,
                              "--ensemble", 20, "--sample", "k=loguniform:0.1:1", "--seed", 3,
                              "--summary", "--plot", "--outputs", "A")
    assert code == 0, err
    assert f"wrote {tmp_path / 'decay.csv'}" in out and f"wrote {tmp_path / 'decay.png'}" in out
    header, table = read_csv(tmp_path / "decay.csv")
    assert header[:3] == ["time", "A_mean", "A_sd"]
    from sbmlgpu.ensemble import sample

    k = sample({"k": "loguniform:0.1:1"}, 20, seed=3)["k"]
    exact = 10 * np.exp(-np.outer(k, [0.0, 1.0, 2.0]))
    np.testing.assert_allclose(table[:, 1], exact.mean(axis=0), rtol=1e-6)
    assert (tmp_path / "decay.png").stat().st_size > 1000


def test_run_parameters_table_gives_the_members(capsys, model, tmp_path):
    (tmp_path / "sets.csv").write_text("k,A\n0.1,1\n1.0,2\n")
    code, _, err = run_main(capsys, "run", model, "--end", 1, "--points", 2, "-o", tmp_path,
                            "--parameters", tmp_path / "sets.csv")
    assert code == 0, err
    header, table = read_csv(tmp_path / "decay.csv")
    assert header == ["time", "member", "A", "B"]
    np.testing.assert_allclose(table[:, 2], [1, np.exp(-0.1), 2, 2 * np.exp(-1.0)], rtol=1e-6)


def test_run_hdf5_and_profile_and_keep_source(capsys, model, tmp_path):
    code, out, err = run_main(capsys, "run", model, "--end", 1, "-o", tmp_path,
                              "--backend", "reference", "--format", "hdf5", "--profile", tmp_path / "p" / "prof.json",
                              "--keep-source", tmp_path / "src")
    assert code == 0, err
    assert f"wrote {tmp_path / 'decay.h5'}" in out
    from sbmlgpu.results import read_hdf5

    assert read_hdf5(tmp_path / "decay.h5").data.shape == (1, 101, 2)
    assert "generated no source code" in err  # the CPU path has no kernels to keep
    if (Path(sbmlgpu.__file__).parent / "profile.py").exists():
        # the profile's folder is created, as -o's is
        assert json.loads((tmp_path / "p" / "prof.json").read_text()) is not None
        assert (tmp_path / "p" / "prof.trace.json").exists()
        assert f"wrote {tmp_path / 'p' / 'prof.json'}" in out


# -- errors become one message ------------------------------------------------------------
@pytest.mark.parametrize("args,message", [
    (["--end", "1", "--backend", "reference", "--rtol", "0"],
     "option rtol: 0.0 is below the minimum"),
    (["--end", "1", "--method", "Euler"], "invalid choice: 'Euler'"),
    (["--end", "1", "--backend", "refrence"], "no backend 'refrence' (did you mean reference?)"),
    (["--times", "0,1", "--end", "2"], "give either --times or --start/--end/--points"),
    ([], "option end: give the end time"),
    (["--end", "1", "--sample", "k=uniform:1"], "option sample: 'uniform:1' is not a distribution"),
    (["--end", "1", "--sample", "kk=uniform:0:1", "--ensemble", "2"],
     "option sample: 'kk' is not a parameter, species, compartment or species reference of the model; did you mean k?"),
    (["--end", "1", "--outputs", "A,a2"], "option outputs: 'a2' is not an id"),
    (["--end", "1", "--ensemble", "0"], "option ensemble"),
    (["--end", "1", "--backend", "reference", "--devices", "0"],
     "option device: backend 'reference' runs on the CPU only"),
    (["--end", "-1"], "option end"),
])
def test_bad_input_is_one_message_without_traceback(capsys, model, tmp_path, args, message):
    code, _, err = run_main(capsys, "run", model, "-o", tmp_path, *args)
    assert code == 2
    assert message in err
    assert "Traceback" not in err


def test_a_missing_model_file_is_an_import_error_message(capsys, tmp_path):
    code, _, err = run_main(capsys, "run", tmp_path / "none.xml", "--end", 1, "-o", tmp_path)
    assert code == 2 and "none.xml" in err and err.startswith("sbmlgpu: error:")


def test_a_bug_is_one_line_and_debug_shows_the_traceback(capsys, model, monkeypatch, tmp_path):
    def broken(args):
        raise RuntimeError("boom")

    monkeypatch.setattr(cli, "cmd_info", broken)
    code, _, err = run_main(capsys, "info", model)
    assert code == cli.EXIT_INTERNAL and "internal error: RuntimeError: boom" in err
    with pytest.raises(RuntimeError):
        cli.main(["--debug", "info", str(model)])


def test_all_members_failing_exits_1_and_lists_them(capsys, tmp_path):
    sqrt_model = DECAY_SBML.replace(
        '<apply><times/><ci>k</ci><ci>A</ci><ci>c</ci></apply>',
        '<apply><root/><apply><minus/><ci>A</ci><cn>20</cn></apply></apply>')
    (tmp_path / "bad.xml").write_text(sqrt_model)
    code, out, err = run_main(capsys, "run", tmp_path / "bad.xml", "--end", 1, "-o", tmp_path)
    assert code == 1
    assert "1 of 1 member(s) failed" in err and "member 0: non_finite" in err
    assert f"wrote {tmp_path / 'bad.csv'}" in out  # what there is, is still written


# -- info ------------------------------------------------------------------------------------
def test_info_lists_size_features_and_backends(capsys, model):
    code, out, _ = run_main(capsys, "info", model)
    assert code == 0
    assert "model: decay" in out
    assert "species: 2" in out and "reactions: 1" in out
    assert "  reactions: R1" in out
    assert "  reference  accepts" in out


def test_info_says_why_a_backend_refuses(capsys, model, use_backends):
    from tests.test_plugins import FakeBackend

    class Picky(FakeBackend):
        def supports(self, network):
            return [("reactions", tuple(r.id for r in network.reactions))]

    use_backends(Picky("picky"), FakeBackend("fine"))
    code, out, _ = run_main(capsys, "info", model)
    assert code == 0
    assert "  picky  refuses: reactions (R1)" in out
    assert "  fine   accepts" in out


# -- as a program ------------------------------------------------------------------------------
def console(*args, **kw):
    exe = Path(sys.executable).with_name("sbmlgpu")
    command = [str(exe)] if exe.exists() else [sys.executable, "-m", "sbmlgpu"]
    return subprocess.run(command + [str(a) for a in args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"}, timeout=300, **kw)


def test_console_script_runs_and_reports(model, tmp_path):
    proc = console("run", model, "--end", 1, "--points", 3, "-o", tmp_path / "o")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"wrote {tmp_path / 'o' / 'decay.csv'}"


def test_python_dash_m_gives_messages_not_tracebacks(tmp_path):
    (tmp_path / "bad.xml").write_text("<sbml>not really")
    proc = subprocess.run([sys.executable, "-m", "sbmlgpu", "info", str(tmp_path / "bad.xml")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.startswith("sbmlgpu: error:") and "Traceback" not in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "sbmlgpu", "backends"], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0 and "reference" in proc.stdout
