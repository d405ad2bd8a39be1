"""The `cme` backend end to end on the CPU path: the command and the Python function,
laws with known stationary distributions, the toggle switch against our SSA, files,
and bad input."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binom, poisson

import sbmlgpu
from sbmlgpu.errors import OptionError, UnsupportedModelError
from sbmlgpu.results import read
from tests.sbml_strings import model, parameter, reaction, species

MODELS = Path(__file__).resolve().parents[1] / "sbml_models"


def ci(name: str) -> str:
    return f"<ci>{name}</ci>"


def times(*args: str) -> str:
    return "<apply><times/>" + "".join(args) + "</apply>"


BIRTH_DEATH = model(
    species("X", 0, hosu=True),
    parameter("k", 12.0) + parameter("g", 1.5),
    reaction("birth", [], ["X"], ci("k")) + reaction("death", ["X"], [], times(ci("g"), ci("X"))))

ISOMERISATION = model(
    species("A", 30, hosu=True) + species("B", 0, hosu=True),
    parameter("kf", 2.0) + parameter("kr", 3.0),
    reaction("forward", ["A"], ["B"], times(ci("kf"), ci("A")))
    + reaction("back", ["B"], ["A"], times(ci("kr"), ci("B"))))


def write(tmp_path, text: str, name: str = "m.xml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def steady(path, **kw):
    kw.setdefault("device", "cpu")
    return sbmlgpu.steady_state(path, backend="cme", **kw)


@pytest.mark.parametrize("solver", ["jacobi", "aggregation"])
def test_birth_death_is_poisson(tmp_path, solver):
    dist = steady(write(tmp_path, BIRTH_DEATH), bounds={"X": 70}, tol=1e-13,
                  options={"solver": solver, "coarsest": 8})
    x = dist.states[:, 0]
    assert sorted(x.tolist()) == list(range(71))
    exact = poisson.pmf(x, 12.0 / 1.5)
    assert np.abs(dist.probability - exact / exact.sum()).sum() <= 1e-6
    d = dist.diagnostics
    assert d["converged"] and d["residual"] <= 1e-13 and d["solver"] == solver
    assert d["boundary_states"] == 1  # only X = 70, where a birth would leave
    assert d["truncation_error_indicator"] == pytest.approx(dist.probability[x == 70][0])
    assert d["bounds"] == {"X": 70} and d["bound_origin"]["X"] == "--bound"


def test_conserved_isomerisation_is_binomial_without_a_bound(tmp_path):
    dist = steady(write(tmp_path, ISOMERISATION), tol=1e-13)
    a = dist.states[:, dist.index("A")]
    b = dist.states[:, dist.index("B")]
    assert np.all(a + b == 30) and dist.n_states == 31
    exact = binom.pmf(a, 30, 3.0 / 5.0)  # A holds each molecule with kr / (kf + kr)
    assert np.abs(dist.probability - exact).sum() <= 1e-8
    assert dist.diagnostics["truncation_error_indicator"] == 0.0
    assert "A + B" in dist.diagnostics["bound_origin"]["A"]


def test_command_writes_states_marginals_and_npz(tmp_path):
    path = write(tmp_path, BIRTH_DEATH, "bd.xml")
    out = tmp_path / "out"
    for fmt in ("csv", "npz"):
        done = subprocess.run([sys.executable, "-m", "sbmlgpu", "steady-state", str(path),
                               "--backend", "cme", "--cpu", "--bound", "X=40", "--tol", "1e-12",
                               "--format", fmt, "-o", str(out)],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    table = np.genfromtxt(out / "bd.csv", delimiter=",", names=True)
    assert table.dtype.names == ("X", "probability") and len(table) == 41
    rows = (out / "bd.csv").read_text().splitlines()
    assert rows[1].split(",")[0] in {str(k) for k in range(41)}  # a copy number: "7", not "7.0"
    marginals = (out / "bd.marginals.csv").read_text().splitlines()
    assert marginals[0] == "id,count,probability" and len(marginals) == 42
    back = read(out / "bd.npz")
    assert back.diagnostics["n_states"] == 41 and back.diagnostics["solver"]
    assert np.allclose(np.sort(back.probability), np.sort(table["probability"]), rtol=1e-12)


def test_toggle_switch_marginals_agree_with_our_ssa():
    """Long SSA runs of the toggle switch against the CME stationary marginals: the
    SSA's state at a late time, over many realisations, samples the stationary law."""
    path = MODELS / "cme_toggle_switch.xml"
    dist = steady(path, bounds={"Pa": 250, "Pb": 250}, tol=1e-9)
    assert dist.diagnostics["truncation_error_indicator"] < 1e-8
    n = 3000
    run = sbmlgpu.run(path, backend="ssa", times=[0.0, 60.0], n=n, seed=11, device="cpu",
                      outputs=["Pa", "Pb"])
    for sbml_id in ("Pa", "Pb"):
        values, p = dist.marginal(sbml_id)
        mean = float(values @ p)
        sd = float(np.sqrt(((values - mean) ** 2) @ p))
        sample = run[sbml_id][:, -1]
        z = (sample.mean() - mean) / (sd / np.sqrt(n))
        assert abs(z) < 4, (sbml_id, sample.mean(), mean)
        # and the shape: probability of the low and high halves
        for cut in (40, 80):
            p_cme = float(p[values < cut].sum())
            p_ssa = float(np.mean(sample < cut))
            assert abs(p_ssa - p_cme) < 4 * np.sqrt(p_cme * (1 - p_cme) / n) + 1e-3, \
                (sbml_id, cut, p_ssa, p_cme)


def test_unbounded_species_is_an_option_error_naming_it(tmp_path):
    with pytest.raises(OptionError, match=r"X.*--bound"):
        steady(write(tmp_path, BIRTH_DEATH))


@pytest.mark.parametrize("bounds, match", [({"Y": 3}, "Y"), ({"X": -1}, "X=-1"),
                                            ({"X": 2.5}, "X=2.5")])
def test_bad_bounds_are_option_errors(tmp_path, bounds, match):
    with pytest.raises(OptionError, match=match):
        steady(write(tmp_path, BIRTH_DEATH), bounds=bounds)


@pytest.mark.parametrize("tol, match", [(1.0, "at most 1"), (5.0, "at most 1"),
                                        (math.inf, "not a finite number")])
def test_a_tolerance_every_vector_meets_is_refused_before_any_work(tmp_path, tol, match,
                                                                   monkeypatch):
    """The normalised residual of any vector is at most 1: --tol 1 (or inf) returned
    the uniform starting guess as the steady state (a bad-input audit)."""
    from sbmlgpu.plugins.cme import statespace

    def enumerated(*args, **kwargs):
        raise AssertionError("the state space was enumerated for a tolerance refused")

    monkeypatch.setattr(statespace, "enumerate_states", enumerated)
    with pytest.raises(OptionError, match=f"tol.*{match}"):
        steady(write(tmp_path, BIRTH_DEATH), bounds={"X": 20}, tol=tol)


def test_rate_rule_and_event_are_refused_by_name(tmp_path):
    rule = ('<rateRule variable="k"><math xmlns="http://www.w3.org/1998/Math/MathML">'
            '<cn>1</cn></math></rateRule>')
    text = BIRTH_DEATH.replace('<parameter id="k" value="12.0" constant="true"/>',
                               '<parameter id="k" value="12.0" constant="false"/>')
    text = text.replace("</listOfParameters>", f"</listOfParameters><listOfRules>{rule}"
                                               "</listOfRules>")
    with pytest.raises(UnsupportedModelError, match=r"rate rule.*k"):
        steady(write(tmp_path, text), bounds={"X": 5})


def test_state_space_over_the_limit_is_refused_before_it_is_built(tmp_path):
    with pytest.raises(OptionError, match=r"state"):
        steady(write(tmp_path, BIRTH_DEATH), bounds={"X": 10_000}, options={"max_states": 100})


def test_unconverged_is_an_error_not_a_file(tmp_path):
    path = write(tmp_path, BIRTH_DEATH, "bd.xml")
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "sbmlgpu", "steady-state", str(path),
                           "--backend", "cme", "--cpu", "--bound", "X=60", "--tol", "1e-15",
                           "--solver", "jacobi", "--max-sweeps", "200", "-o", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "residual" in done.stderr and "200 Jacobi sweeps" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (out / "bd.csv").exists()


def partial(path, **kw):
    """The last iterate of a solve stopped by its sweep limit (on the error)."""
    from sbmlgpu.plugins.cme.solvers import ConvergenceError

    with pytest.raises(ConvergenceError) as stopped:
        sbmlgpu.steady_state(path, backend="cme", **kw)
    return stopped.value.result


@pytest.mark.gpu
def test_gpu_path_equals_cpu_path_on_the_toggle_switch():
    """The same matrix and the same 3,000 Jacobi sweeps (the bistable switch does not
    converge that fast) give the same iterate on both paths, in two storage formats;
    aggregation converges to the same distribution on both."""
    path = MODELS / "cme_toggle_switch.xml"
    bounds = {"Pa": 120, "Pb": 120}
    jacobi = {"solver": "jacobi", "max_sweeps": 3000}
    cpu = partial(path, bounds=bounds, tol=1e-15, device="cpu", options=jacobi)
    assert cpu.diagnostics["jacobi_sweeps"] == 3000
    for matrix_format in ("dia+sell", "csr"):
        gpu = partial(path, bounds=bounds, tol=1e-15, device="auto",
                      options={**jacobi, "matrix_format": matrix_format})
        assert gpu.diagnostics["engine"].startswith("gpu")
        assert np.array_equal(gpu.states, cpu.states)
        assert gpu.diagnostics["jacobi_sweeps"] == 3000
        assert np.abs(gpu.probability - cpu.probability).max() <= 1e-12
    on_cpu = steady(path, bounds=bounds, tol=1e-10, options={"solver": "aggregation"})
    on_gpu = sbmlgpu.steady_state(path, backend="cme", device="auto", bounds=bounds,
                                  tol=1e-10, options={"solver": "aggregation"})
    assert on_gpu.diagnostics["converged"] and on_cpu.diagnostics["converged"]
    assert np.abs(on_gpu.probability - on_cpu.probability).sum() <= 1e-7


@pytest.mark.parametrize("bounds", [{"X": 0}])
def test_a_single_state_has_probability_one(tmp_path, bounds):
    """No transition can fire (a birth would leave the bound): A = 0 and p = (1)."""
    dist = steady(write(tmp_path, BIRTH_DEATH), bounds=bounds)
    assert dist.n_states == 1 and dist.probability.tolist() == [1.0]
    assert dist.diagnostics["converged"] and dist.diagnostics["residual"] == 0.0
    assert dist.diagnostics["truncation_error_indicator"] == 1.0  # all of it at the bound


def test_unconverged_exits_with_status_1(tmp_path):
    path = write(tmp_path, BIRTH_DEATH, "bd.xml")
    done = subprocess.run([sys.executable, "-m", "sbmlgpu", "steady-state", str(path),
                           "--backend", "cme", "--cpu", "--bound", "X=40", "--max-sweeps", "1",
                           "--check-every", "1", "-o", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "residual" in done.stderr
