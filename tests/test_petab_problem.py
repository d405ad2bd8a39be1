"""sbmlgpu.petab on a small PEtab problem written here, whose answers are known in
closed form: production and decay of A (d[A]/dt = kp - kd [A], in a compartment of
size 2, so concentrations and amounts differ), conditions that set a parameter by
number and by parameterId and a species' initial concentration, a preequilibration,
a steady-state (t = inf) measurement, lin/normal and log10/laplace observables with
per-row observable and noise parameters. Also the likelihood against petab's
calculate_llh, ensembles, the command, petab's Simulator interface and bad input."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from sbmlgpu.errors import OptionError, UnsupportedModelError
from tests import sbml_strings as s

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning",
                                        "ignore::FutureWarning", "ignore::UserWarning")
petab = pytest.importorskip("petab.v1", reason="the petab extra is not installed")

from sbmlgpu.petab import PetabSimulator, simulate_problem  # noqa: E402

SIZE = 2.0
SBML = s.model(
    s.species("A", 1.0, concentration=True),
    s.parameter("kp", 1.0) + s.parameter("kd", 0.5),
    s.reaction("make", [], ["A"], "<apply><times/><ci>kp</ci><ci>c</ci></apply>")
    + s.reaction("decay", ["A"], [], "<apply><times/><ci>kd</ci><ci>A</ci><ci>c</ci></apply>"),
    size=SIZE)

CONDITIONS = """conditionId\tkp\tA
c1\t1\t
c2\tkp_c2\t3
pre\t0.5\t
"""
OBSERVABLES = """observableId\tobservableFormula\tnoiseFormula\tobservableTransformation\tnoiseDistribution
obs_A\tA\tsigma_A\tlin\tnormal
obs_scaled\tobservableParameter1_obs_scaled * A\tnoiseParameter1_obs_scaled\tlog10\tlaplace
"""
MEASUREMENTS = """observableId\tpreequilibrationConditionId\tsimulationConditionId\tmeasurement\ttime\tobservableParameters\tnoiseParameters
obs_A\t\tc1\t1.1\t0\t\t
obs_A\t\tc1\t1.4\t1\t\t
obs_A\t\tc1\t1.9\t5\t\t
obs_A\t\tc2\t3.2\t0\t\t
obs_A\t\tc2\t3.0\t1.5\t\t
obs_A\t\tc2\t4.1\tinf\t\t
obs_scaled\tpre\tc1\t2.2\t0\t2\t0.1
obs_scaled\tpre\tc1\t3.5\t3\t2\t0.2
obs_A\tpre\tc1\t1.0\t2\t\t
"""
PARAMETERS = """parameterId\tparameterScale\tlowerBound\tupperBound\tnominalValue\testimate
kd\tlog10\t0.01\t10\t0.5\t1
kp_c2\tlin\t0\t5\t2\t1
sigma_A\tlog10\t0.01\t1\t0.2\t1
"""
YAML = """format_version: 1
parameter_file: parameters.tsv
problems:
- condition_files: [conditions.tsv]
  measurement_files: [measurements.tsv]
  observable_files: [observables.tsv]
  sbml_files: [model.xml]
"""


def write_problem(folder, **replace) -> "Path":
    files = {"model.xml": SBML, "conditions.tsv": CONDITIONS, "observables.tsv": OBSERVABLES,
             "measurements.tsv": MEASUREMENTS, "parameters.tsv": PARAMETERS,
             "problem.yaml": YAML}
    files.update(replace)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder / "problem.yaml"


def expected(kd=0.5, kp_c2=2.0) -> np.ndarray:
    """The simulation column, in closed form: [A](t) = kp/kd + (A0 - kp/kd) e^(-kd t)."""
    def a(t, a0, kp):
        return kp / kd + (a0 - kp / kd) * math.exp(-kd * t)

    pre = 0.5 / kd  # the steady state of condition `pre`
    return np.array([a(0, 1, 1), a(1, 1, 1), a(5, 1, 1), a(0, 3, kp_c2), a(1.5, 3, kp_c2),
                     kp_c2 / kd, 2 * a(0, pre, 1), 2 * a(3, pre, 1), a(2, pre, 1)])


@pytest.fixture(scope="module")
def problem(tmp_path_factory):
    return write_problem(tmp_path_factory.mktemp("petab"))


@pytest.fixture(scope="module")
def nominal(problem):
    return simulate_problem(problem, device="cpu")


def test_nominal_simulation_is_the_closed_form(nominal):
    assert nominal.failures() == []
    # the steady state is reached to |dx/dt| <= 1e-9 + 1e-6 |x|: 1e-5 relative
    np.testing.assert_allclose(nominal.simulation[:, 0], expected(), rtol=1e-5)


def test_likelihood_equals_petab_calculate_llh(nominal, tmp_path):
    p = nominal.problem.problem
    sims = nominal.simulation_df(0)
    llh = petab.calculate_llh(p.measurement_df, sims, p.observable_df, p.parameter_df)
    assert nominal.llh == pytest.approx(llh, rel=1e-12, abs=1e-12)
    chi2 = petab.calculate_chi2(p.measurement_df, sims, p.observable_df, p.parameter_df)
    assert nominal.chi2[0] == pytest.approx(chi2, rel=1e-12)


def test_simulation_table_keeps_the_measurement_rows(nominal):
    table = nominal.simulation_df(0)
    meas = nominal.problem.measurements
    assert "measurement" not in table.columns and "simulation" in table.columns
    assert list(table["time"]) == list(meas["time"])
    assert list(table["observableId"]) == list(meas["observableId"])


def test_ensemble_is_vectorised_over_members_and_member_values_are_used(problem, nominal):
    sets = {"kd": [0.5, 0.25, 1.0], "kp_c2": [2.0, 1.0, 4.0]}
    result = simulate_problem(problem, parameters=sets, device="cpu")
    assert result.n_members == 3 and result.failures() == []
    for j in range(3):
        np.testing.assert_allclose(result.simulation[:, j],
                                   expected(sets["kd"][j], sets["kp_c2"][j]), rtol=1e-5)
    # member 0 is the nominal set: the same likelihood as the nominal run
    assert result.nll[0] == pytest.approx(-nominal.llh, rel=1e-9)
    p = nominal.problem.problem
    for j in (1, 2):
        llh = petab.calculate_llh(p.measurement_df, result.simulation_df(j), p.observable_df,
                                  p.parameter_df)
        assert result.nll[j] == pytest.approx(-llh, rel=1e-9)


def test_sampled_ensemble_stays_within_the_bounds_on_their_scale(problem):
    result = simulate_problem(problem, ensemble=16, seed=3, device="cpu")
    kd = result.sets["kd"]
    assert kd.shape == (16,) and np.all((kd >= 0.01) & (kd <= 10))
    assert np.log10(kd).std() > 0.3  # spread on the log scale, not crowded at the top
    again = simulate_problem(problem, ensemble=16, seed=3, device="cpu")
    np.testing.assert_array_equal(again.nll, result.nll)


def test_command_writes_the_tables(problem, tmp_path, capsys):
    from sbmlgpu.cli import main

    assert main(["petab", str(problem), "-o", str(tmp_path / "nominal"), "--cpu"]) == 0
    out = capsys.readouterr().out
    import json

    import pandas as pd

    llh = json.loads((tmp_path / "nominal" / "likelihood.json").read_text())
    assert f"log-likelihood: {llh['llh']:.12g}" in out
    table = pd.read_csv(tmp_path / "nominal" / "simulations.tsv", sep="\t")
    np.testing.assert_allclose(table["simulation"], expected(), rtol=1e-5)
    assert main(["petab", str(problem), "-o", str(tmp_path / "ens"), "--cpu",
                 "--ensemble", "4"]) == 0
    objective = pd.read_csv(tmp_path / "ens" / "objective.tsv", sep="\t")
    assert list(objective.columns) == ["member", "kd", "kp_c2", "sigma_A", "nllh", "chi2",
                                       "status"]
    assert list(objective["member"]) == [0, 1, 2, 3] and set(objective["status"]) == {"ok"}
    sets = tmp_path / "sets.csv"
    sets.write_text("kd,kp_c2\n0.5,2\n0.25,1\n")
    assert main(["petab", str(problem), "-o", str(tmp_path / "table"), "--cpu",
                 "--parameters", str(sets)]) == 0
    objective = pd.read_csv(tmp_path / "table" / "objective.tsv", sep="\t")
    assert list(objective["kd"]) == [0.5, 0.25] and list(objective["kp_c2"]) == [2, 1]
    assert objective["nllh"][0] == pytest.approx(-llh["llh"], rel=1e-9)
    assert objective["nllh"][1] != pytest.approx(objective["nllh"][0], rel=1e-3)


def test_petab_simulator_subclass(problem):
    p = petab.Problem.from_yaml(str(problem))
    simulator = PetabSimulator(p, path=problem, device="cpu")
    assert isinstance(simulator, petab.simulate.Simulator)
    table = simulator.simulate(noise=False)
    np.testing.assert_allclose(table["simulation"], expected(), rtol=1e-5)
    # without the path, from the problem's own SBML document
    table = PetabSimulator(p, device="cpu").simulate_without_noise()
    np.testing.assert_allclose(table["simulation"], expected(), rtol=1e-5)


# -- bad input ------------------------------------------------------------------------------
def test_missing_yaml(tmp_path):
    with pytest.raises(OptionError, match="no such file"):
        simulate_problem(tmp_path / "absent.yaml")


def test_yaml_that_is_not_petab(tmp_path):
    path = tmp_path / "other.yaml"
    path.write_text("name: not a petab problem\nitems: [1, 2]\n")
    with pytest.raises(OptionError, match="not a PEtab problem"):
        simulate_problem(path)
    path.write_text("{{{ not: yaml")
    with pytest.raises(OptionError, match="not a readable YAML"):
        simulate_problem(path)


def test_unknown_parameter_in_table(problem, tmp_path):
    table = tmp_path / "sets.csv"
    table.write_text("kd,k_unknown\n0.5,1\n")
    with pytest.raises(OptionError, match="'k_unknown' is not a parameterId"):
        simulate_problem(problem, parameters=table, device="cpu")


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_set_with_a_value_that_is_not_finite_is_not_scored(problem, bad):
    """A NaN would read as an empty condition cell (kp_c2 sets kp in c2) and leave the
    model's own kp in place: a different objective with no word. Such a set gets its
    own status and no numbers; the other sets of the call are scored as without it."""
    from sbmlgpu.petab import objective
    from sbmlgpu.petab.result import PARAMETER_NOT_FINITE

    prepared = objective(problem, device="cpu")
    good = prepared({"kd": [0.5, 0.25], "kp_c2": [2.0, 1.0]})
    mixed = prepared({"kd": [0.5, 0.5, 0.25, bad], "kp_c2": [2.0, bad, 1.0, 2.0]})
    unscored = int(PARAMETER_NOT_FINITE)
    assert mixed.status.tolist() == [0, unscored, 0, unscored]
    assert np.isnan(mixed.nll[[1, 3]]).all() and np.isnan(mixed.chi2[[1, 3]]).all()
    # (another ensemble: the steady state's search and steps may differ in rounding)
    np.testing.assert_allclose(mixed.nll[[0, 2]], good.nll, rtol=1e-6)
    assert [(j, s) for j, s, _ in mixed.failures()] == [(1, PARAMETER_NOT_FINITE),
                                                        (3, PARAMETER_NOT_FINITE)]
    assert mixed.messages[1] == PARAMETER_NOT_FINITE.message
    # nothing simulated for them is shown as theirs
    assert np.isnan(mixed.simulation[:, [1, 3]]).all()
    assert np.isfinite(mixed.simulation[:, [0, 2]]).all()
    # nor does a first call of such sets steer the method kept for the calls after it
    steered = objective(problem, device="cpu")
    steered({"kd": [bad, bad, bad]})
    nominal = objective(problem, device="cpu")
    nominal({"kd": [0.5, 0.5, 0.5]})
    assert steered.method == nominal.method
    # the same from a table file, through the command's path
    table = problem.parent / "sets_not_finite.csv"
    table.write_text(f"kd,kp_c2\n0.5,2\n0.5,{bad}\n")
    result = simulate_problem(problem, parameters=table, device="cpu")
    assert result.status.tolist() == [0, unscored]


@pytest.mark.parametrize("n, message", [(0, "must be a positive integer"),
                                         (10**14, "would need .* GB for the parameter sets")])
def test_an_ensemble_size_that_cannot_be_is_an_option_error(problem, n, message):
    with pytest.raises(OptionError, match=message):
        simulate_problem(problem, ensemble=n, device="cpu")


def test_unsupported_noise_distribution_is_refused(tmp_path):
    path = write_problem(tmp_path, **{"observables.tsv": OBSERVABLES.replace("laplace",
                                                                             "cauchy")})
    with pytest.raises(UnsupportedModelError, match="noiseDistribution cauchy.*obs_scaled"):
        simulate_problem(path)


def test_missing_table_file_is_named(tmp_path):
    path = write_problem(tmp_path)
    (tmp_path / "observables.tsv").unlink()
    with pytest.raises(OptionError, match="observables.tsv"):
        simulate_problem(path)


def test_condition_column_that_is_not_in_the_model(tmp_path):
    path = write_problem(tmp_path, **{"conditions.tsv": CONDITIONS.replace(
        "conditionId\tkp\tA", "conditionId\tkp\tB_unknown")})
    with pytest.raises(UnsupportedModelError, match="B_unknown"):
        simulate_problem(path, device="cpu")


def test_command_bad_input_exit_2_without_traceback(tmp_path, capsys):
    from sbmlgpu.cli import main

    assert main(["petab", str(tmp_path / "absent.yaml"), "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "no such file" in err and "Traceback" not in err


def test_condition_sets_a_species_that_is_not_a_state(tmp_path):
    # E is a constant species (a parameter of the ODE view, not a state): its override
    # must reach the kinetic law, d[A]/dt = kp*[E] - kd*[A]
    sbml = s.model(
        s.species("A", 1.0, concentration=True)
        + s.species("E", 1.0, concentration=True, constant=True, boundary=True),
        s.parameter("kp", 1.0) + s.parameter("kd", 0.5),
        s.reaction("make", [], ["A"], "<apply><times/><ci>kp</ci><ci>E</ci><ci>c</ci></apply>"
                   ).replace("<kineticLaw>", '<listOfModifiers><modifierSpeciesReference '
                                             'species="E"/></listOfModifiers><kineticLaw>')
        + s.reaction("decay", ["A"], [],
                     "<apply><times/><ci>kd</ci><ci>A</ci><ci>c</ci></apply>"),
        size=SIZE)
    conditions = "conditionId\tkp\tE\nc1\t1\t\nc3\t1\t3\n"
    measurements = ("observableId\tsimulationConditionId\tmeasurement\ttime\n"
                    "obs_A\tc1\t1\t2\nobs_A\tc3\t1\t2\n")
    path = write_problem(tmp_path, **{"model.xml": sbml, "conditions.tsv": conditions,
                                      "measurements.tsv": measurements})
    result = simulate_problem(path, device="cpu")
    kd = 0.5
    expected_a = [kp / kd + (1 - kp / kd) * math.exp(-kd * 2) for kp in (1.0, 3.0)]
    np.testing.assert_allclose(result.simulation[:, 0], expected_a, rtol=1e-6)


def test_missing_petab_package_is_a_typed_error_naming_the_extra(problem, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "petab.v1", None)  # import petab.v1 -> ImportError
    with pytest.raises(OptionError, match=r"pip install 'sbmlgpu\[petab\]'"):
        simulate_problem(problem)


def _without_column(table: str, column: str) -> str:
    rows = [line.split("\t") for line in table.strip("\n").split("\n")]
    k = rows[0].index(column)
    return "\n".join("\t".join(r[:k] + r[k + 1:]) for r in rows) + "\n"


@pytest.mark.parametrize("column", ["measurement", "time", "observableId",
                                    "simulationConditionId"])
def test_a_measurement_table_without_a_required_column_is_named(tmp_path, column):
    path = write_problem(tmp_path, **{"measurements.tsv": _without_column(MEASUREMENTS,
                                                                          column)})
    with pytest.raises(OptionError, match=f"the measurement table has no column {column}"):
        simulate_problem(path)


@pytest.mark.parametrize("column, old, new, shown", [
    ("measurement", "\t1.4\t1\t", "\tabc\t1\t", "line 3 ('abc')"),
    ("measurement", "\t1.4\t1\t", "\t\t1\t", "line 3 (empty or NaN)"),
    ("measurement", "\t1.4\t1\t", "\tinf\t1\t", "line 3 (inf)"),
    ("time", "\t1.4\t1\t", "\t1.4\tlater\t", "line 3 ('later')"),
    ("time", "\t1.4\t1\t", "\t1.4\t\t", "line 3 (empty or NaN)")])
def test_a_measurement_or_time_that_is_no_number_is_named_by_line(tmp_path, column, old, new,
                                                                  shown):
    assert MEASUREMENTS.count(old) == 1
    path = write_problem(tmp_path, **{"measurements.tsv": MEASUREMENTS.replace(old, new)})
    with pytest.raises(OptionError, match=re.escape(f"{column} column holds a value") + ".*"
                       + re.escape(shown)):
        simulate_problem(path)


def test_a_noise_sigma_that_is_not_positive_is_not_scored(problem):
    """sigma_A (lin/normal observable) of -0.2 in a set: the normal's sigma**2 scored it
    as +0.2, a finite likelihood with status ok (a bad-input audit). Now the set's
    objective is NaN with non_finite_objective, whose message names a sigma that is not
    positive; on the numpy path (simulate_problem) and the compiled one (the prepared
    objective), the set beside it scored as without it."""
    from sbmlgpu.petab import objective
    from sbmlgpu.petab.result import NON_FINITE_OBJECTIVE

    sets = {"sigma_A": [0.2, -0.2]}
    table = problem.parent / "sets_negative_sigma.csv"
    table.write_text("sigma_A\n0.2\n-0.2\n")
    for result in (simulate_problem(problem, parameters=table, device="cpu"),
                   objective(problem, device="cpu")(sets)):
        assert result.status.tolist() == [0, int(NON_FINITE_OBJECTIVE)]
        assert np.isfinite(result.nll[0]) and np.isnan(result.nll[1])
    assert "not positive" in NON_FINITE_OBJECTIVE.message


def test_a_measurement_table_of_a_header_only_is_refused(tmp_path):
    path = write_problem(tmp_path, **{"measurements.tsv": MEASUREMENTS.split("\n")[0] + "\n"})
    with pytest.raises(OptionError, match="the measurement table has no rows"):
        simulate_problem(path)


@pytest.mark.parametrize("flag", ["2", "yes", ""])
def test_an_estimate_flag_other_than_0_or_1_is_refused(tmp_path, flag):
    table = PARAMETERS.replace("kp_c2\tlin\t0\t5\t2\t1", f"kp_c2\tlin\t0\t5\t2\t{flag}")
    assert table != PARAMETERS
    path = write_problem(tmp_path, **{"parameters.tsv": table})
    with pytest.raises(OptionError, match=f"estimate of kp_c2 is {flag!r}; PEtab allows 0 or 1"):
        simulate_problem(path)
