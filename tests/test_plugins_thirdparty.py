"""Third-party plugins, installed with pip like any plugin: the example distribution
(tests/thirdparty_plugin: a time-course backend, a steady-state backend, a writer) is
listed and runs; a deliberately broken distribution (tests/broken_plugin) is reported and
skipped while everything else works.

Each is installed with `pip --target` into a temporary folder (no network, nothing
installed into the environment), found through PYTHONPATH by fresh `sbmlgpu`
processes, and removed afterwards.
"""

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.sbml_strings import write_decay_model

TESTS = Path(__file__).parent
EXAMPLE = TESTS / "thirdparty_plugin"
BROKEN = TESTS / "broken_plugin"
MODELS = TESTS.parent / "sbml_models"


def why_no_wheel_build() -> str | None:
    """pip builds the plugin with this environment's setuptools (no build isolation,
    so no network); setuptools before 70.1 also needs the `wheel` package."""
    if importlib.util.find_spec("setuptools") is None:
        return "setuptools is not installed"
    import setuptools

    major, minor = (int(x) for x in setuptools.__version__.split(".")[:2])
    if (major, minor) < (70, 1) and importlib.util.find_spec("wheel") is None:
        return f"setuptools {setuptools.__version__} needs the 'wheel' package to build wheels"
    return None


def pip_install(sources, tmp_path) -> dict:
    """Install the distributions in `sources` into tmp_path/site; the environment that
    finds them."""
    reason = why_no_wheel_build()
    if reason:
        pytest.skip(f"cannot build the plugins offline: {reason} (pip install 'setuptools>=70.1')")
    copies = []
    for source in sources:  # copies: the build writes egg-info next to the sources
        copy = tmp_path / "sources" / source.name
        shutil.copytree(source, copy,
                        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        copies.append(str(copy))
    target = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
         "--no-index", "--disable-pip-version-check", "--target", str(target), *copies],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(target), *filter(None, [os.environ.get("PYTHONPATH")])])}


@pytest.fixture
def installed(tmp_path):
    env = pip_install([EXAMPLE], tmp_path)
    assert list((tmp_path / "site").glob("sbmlgpu_example_backend-0.1.0.dist-info"))
    yield env
    shutil.rmtree(tmp_path / "site", ignore_errors=True)  # uninstall


@pytest.fixture
def installed_with_broken(tmp_path):
    env = pip_install([EXAMPLE, BROKEN], tmp_path)
    yield env
    shutil.rmtree(tmp_path / "site", ignore_errors=True)


def sbmlgpu(env, *args, cwd=None):
    return subprocess.run([sys.executable, "-m", "sbmlgpu", *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=600, cwd=cwd)


def test_example_time_course_backend_is_listed_runs_and_is_right(installed, tmp_path):
    listing = sbmlgpu(installed, "backends")
    assert listing.returncode == 0, listing.stderr
    assert "euler" in listing.stdout and "newton" in listing.stdout
    assert "plugin: sbmlgpu-example-backend 0.1.0 (entry point 'euler')" in listing.stdout
    assert "reference" in listing.stdout  # the built-in one is still there
    assert "problems" not in listing.stdout and listing.stderr == ""

    help_text = sbmlgpu(installed, "run", "--backend", "euler", "--help").stdout
    assert "options of backend 'euler'" in help_text and "--step STEP" in help_text

    model = write_decay_model(tmp_path)
    out = tmp_path / "out"
    run = sbmlgpu(installed, "run", model, "--backend", "euler", "--step", "1e-4", "--end", 2,
                  "--points", 5, "-o", out, "--ensemble", 2, "--sample", "k=uniform:0.2:1")
    assert run.returncode == 0, run.stderr
    assert f"wrote {out / 'decay.csv'}" in run.stdout
    lines = (out / "decay.csv").read_text().splitlines()
    assert lines[0] == "time,member,A,B"
    table = np.array([[float(x) for x in line.split(",")] for line in lines[1:]])
    from sbmlgpu.ensemble import sample

    k = sample({"k": "uniform:0.2:1"}, 2, seed=0)["k"]
    exact = 10 * np.exp(-k[table[:, 1].astype(int)] * table[:, 0])
    # Euler with h = 1e-4 is first order: error about h*k^2*t/2 relative
    np.testing.assert_allclose(table[:, 2], exact, rtol=2e-4)
    assert not np.allclose(table[:, 2], 10 * np.exp(-0.5 * table[:, 0]))  # k really varied
    members = (out / "decay.members.csv").read_text().splitlines()
    assert members[0] == "member,k" and float(members[2].split(",")[1]) == k[1]

    bad = sbmlgpu(installed, "run", model, "--backend", "euler", "--step", "0", "--end", 1,
                  "-o", out)
    assert bad.returncode == 2
    assert bad.stderr.strip() == "sbmlgpu: error: option step: 0.0 must be positive"

    info = sbmlgpu(installed, "info", model)
    assert "euler      accepts (time-course)" in info.stdout
    assert "newton     accepts (steady-state)" in info.stdout


def test_example_steady_state_backend_runs_through_its_command(installed, tmp_path):
    """The toy third-party backend for a task that is not a time course: its command
    exists because it is installed, and its result is written as CSV, NPZ and HDF5."""
    from sbmlgpu.results import StateDistribution, read

    model = MODELS / "seir_linear.xml"
    p1, p2, p3, p4, N = 0.5, 0.1, 0.4, 0.2, 1000.0  # the model's values (Sharma)
    x1 = p1 * N / (p1 + p2)
    x2 = p2 * x1 / (p1 + p3)
    x3 = p3 * x2 / (p1 + p4)
    exact = [x1, x2, x3, p4 * x3 / p1]
    for fmt, name in (("csv", "seir_linear.csv"), ("npz", "seir_linear.npz"),
                      ("hdf5", "seir_linear.h5")):
        out = tmp_path / fmt
        run = sbmlgpu(installed, "steady-state", model, "--backend", "newton", "--format", fmt,
                      "-o", out)
        assert run.returncode == 0, run.stderr
        assert f"wrote {out / name}" in run.stdout
    header, values = (tmp_path / "csv" / "seir_linear.csv").read_text().splitlines()
    assert header == "x1,x2,x3,x4,probability"
    np.testing.assert_allclose([float(v) for v in values.split(",")], exact + [1.0], rtol=1e-12)
    for path in (tmp_path / "npz" / "seir_linear.npz", tmp_path / "hdf5" / "seir_linear.h5"):
        result = read(path)
        assert isinstance(result, StateDistribution)
        np.testing.assert_allclose(result.states[0], exact, rtol=1e-12)
        assert result.metadata["backend"] == "newton"
        assert result.metadata["plugin"] == "sbmlgpu-example-backend 0.1.0"
        assert result.diagnostics["residual"] <= 1e-8
    refused = sbmlgpu(installed, "steady-state", model, "--backend", "newton", "--bound",
                      "x1=5", "-o", tmp_path / "x")
    assert refused.returncode == 2
    assert refused.stderr.strip() == ("sbmlgpu: error: option bound: newton finds a "
                                      "deterministic steady state; truncation bounds do not "
                                      "apply")


def test_a_broken_plugin_is_reported_and_everything_else_works(installed_with_broken,
                                                                 tmp_path):
    env = installed_with_broken
    import_problem = ("plugin 'broken-import' (sbmlgpu_broken_plugin.missing_dependency) of "
                      "distribution sbmlgpu-broken-plugin 0.1.0 fails to load and was skipped: "
                      "ModuleNotFoundError")
    hook_problem = ("plugin broken-hook (sbmlgpu-broken-plugin 0.1.0) failed in "
                    "sbmlgpu_backends() and was skipped: RuntimeError: deliberately broken "
                    "backend hook")
    listing = sbmlgpu(env, "backends")
    assert listing.returncode == 0, listing.stderr
    for name in ("euler", "newton", "ode", "reference", "ssa"):
        assert f"\n{name} " in "\n" + listing.stdout
    problems = listing.stdout.split("plugins with problems (skipped):")[1]
    assert import_problem in problems and hook_problem in problems
    for problem in (import_problem, hook_problem):  # and once each on stderr
        assert listing.stderr.count(problem) == 1, listing.stderr

    model = write_decay_model(tmp_path)
    out = tmp_path / "out"
    run = sbmlgpu(env, "run", model, "--end", 1, "--points", 3, "-o", out)
    assert run.returncode == 0, run.stderr
    assert (out / "decay.csv").exists()
    assert run.stderr.count(import_problem) == 1
    assert run.stderr.count("sbmlgpu_transform_network() and was skipped: RuntimeError: "
                            "deliberately broken network pass") == 1
    steady = sbmlgpu(env, "steady-state", MODELS / "seir_linear.xml", "--backend", "newton",
                     "-o", out)
    assert steady.returncode == 0, steady.stderr
