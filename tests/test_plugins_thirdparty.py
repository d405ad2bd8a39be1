"""A third-party backend, installed with pip like any plugin, is listed and runs.

tests/thirdparty_plugin is a separate distribution (sbmlgpu-example-backend) with an
entry point in the group `sbmlgpu`. It is installed with `pip --target` into a
temporary folder (no network, nothing installed into the environment), found
through PYTHONPATH by fresh `sbmlgpu` processes, and removed afterwards.
"""

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

PLUGIN_SOURCE = Path(__file__).parent / "thirdparty_plugin"

DECAY_SBML = """<?xml version="1.0" encoding="UTF-8"?>
<sbml xmlns="http://www.sbml.org/sbml/level3/version2/core" level="3" version="2">
  <model id="decay">
    <listOfCompartments><compartment id="c" size="1" constant="true"/></listOfCompartments>
    <listOfSpecies>
      <species id="A" compartment="c" initialConcentration="10" hasOnlySubstanceUnits="false"
               boundaryCondition="false" constant="false"/>
    </listOfSpecies>
    <listOfParameters><parameter id="k" value="0.5" constant="true"/></listOfParameters>
    <listOfReactions>
      <reaction id="R1" reversible="false">
        <listOfReactants><speciesReference species="A" stoichiometry="1" constant="true"/></listOfReactants>
        <kineticLaw><math xmlns="http://www.w3.org/1998/Math/MathML">
          <apply><times/><ci>k</ci><ci>A</ci><ci>c</ci></apply>
        </math></kineticLaw>
      </reaction>
    </listOfReactions>
  </model>
</sbml>
"""


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


@pytest.fixture
def installed(tmp_path):
    reason = why_no_wheel_build()
    if reason:
        pytest.skip(f"cannot build the example plugin offline: {reason} "
                    f"(pip install 'setuptools>=70.1')")
    source = tmp_path / "source"  # a copy: the build writes egg-info next to the sources
    shutil.copytree(PLUGIN_SOURCE, source,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    target = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
         "--no-index", "--disable-pip-version-check", "--target", str(target), str(source)],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert list(target.glob("sbmlgpu_example_backend-0.1.0.dist-info"))
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([str(target), *filter(None, [os.environ.get("PYTHONPATH")])])}
    try:
        yield env
    finally:  # uninstall: the plugin lived only in this folder
        shutil.rmtree(target, ignore_errors=True)
        shutil.rmtree(source, ignore_errors=True)


def sbmlgpu(env, *args):
    return subprocess.run([sys.executable, "-m", "sbmlgpu", *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=600)


def test_example_backend_is_listed_runs_and_is_right(installed, tmp_path):
    listing = sbmlgpu(installed, "backends")
    assert listing.returncode == 0, listing.stderr
    assert "euler" in listing.stdout
    assert "plugin: sbmlgpu-example-backend 0.1.0 (entry point 'euler')" in listing.stdout
    assert "reference" in listing.stdout  # the built-in one is still there

    help_text = sbmlgpu(installed, "run", "--backend", "euler", "--help").stdout
    assert "options of backend 'euler'" in help_text and "--step STEP" in help_text

    model = tmp_path / "decay.xml"
    model.write_text(DECAY_SBML)
    out = tmp_path / "out"
    run = sbmlgpu(installed, "run", model, "--backend", "euler", "--step", "1e-4", "--end", 2,
                  "--points", 5, "-o", out, "--ensemble", 2, "--sample", "k=uniform:0.2:1")
    assert run.returncode == 0, run.stderr
    assert f"wrote {out / 'decay.csv'}" in run.stdout
    lines = (out / "decay.csv").read_text().splitlines()
    assert lines[0] == "time,member,A"
    table = np.array([[float(x) for x in line.split(",")] for line in lines[1:]])
    from sbmlgpu.ensemble import sample

    k = sample({"k": "uniform:0.2:1"}, 2, seed=0)["k"]
    exact = 10 * np.exp(-k[table[:, 1].astype(int)] * table[:, 0])
    # Euler with h = 1e-4 is first order: error about h*k^2*t/2 relative
    np.testing.assert_allclose(table[:, 2], exact, rtol=2e-4)
    assert not np.allclose(table[:, 2], 10 * np.exp(-0.5 * table[:, 0]))  # k really varied

    bad = sbmlgpu(installed, "run", model, "--backend", "euler", "--step", "0", "--end", 1,
                  "-o", out)
    assert bad.returncode == 2
    assert bad.stderr.strip() == "sbmlgpu: error: option step: 0.0 must be positive"

    info = sbmlgpu(installed, "info", model)
    assert "euler      accepts" in info.stdout


def test_the_plugin_is_gone_after_the_test():
    listing = subprocess.run([sys.executable, "-m", "sbmlgpu", "backends"], capture_output=True,
                             text=True, timeout=600)
    assert "euler" not in listing.stdout
