"""Parameter sets: tables, sampling (Philox keyed by seed and id), PEtab tables, id checks."""

import numpy as np
import pytest
import sympy as sp
from scipy import stats

from sbmlgpu import ir
from sbmlgpu.ensemble import (check_ids, combine, parse_distribution, parse_sample, read_table,
                              sample, sample_petab, sample_table, uniforms)
from sbmlgpu.errors import OptionError
from sbmlgpu.ir import sym


def network():
    one = sp.Integer(1)
    return ir.Network(
        id="m",
        compartments=(ir.Compartment("cell", 1.0),),
        species=(ir.Species("A", "cell", initial_concentration=1.0),
                 ir.Species("B", "cell", initial_concentration=0.0)),
        parameters=(ir.Parameter("k_on", 0.5), ir.Parameter("k_off", 0.1),
                    ir.Parameter("y", None, constant=False), ir.Parameter("z", None)),
        reactions=(ir.Reaction("R1", (ir.SpeciesReference("A", one),),
                               (ir.SpeciesReference("B", one),), (), sym("k_on") * sym("A")),),
        assignment_rules=(ir.AssignmentRule("y", 2 * sym("A")),),
        initial_assignments=(ir.InitialAssignment("z", 2 * sym("k_on")),),
    )


def test_table_csv_and_npz(tmp_path):
    (tmp_path / "p.csv").write_text("k_on,A\n0.1,1\n0.2, 2.5\n")
    t = read_table(tmp_path / "p.csv")
    np.testing.assert_array_equal(t["k_on"], [0.1, 0.2])
    np.testing.assert_array_equal(t["A"], [1.0, 2.5])
    np.savez(tmp_path / "p.npz", k_on=np.array([1.0, 2.0, 3.0]), B=np.zeros(3))
    t = read_table(tmp_path / "p.npz")
    assert set(t) == {"k_on", "B"} and len(t["B"]) == 3


@pytest.mark.parametrize("text,match", [
    ("k_on,A\n0.1\n", "line 2: 1 values for 2 columns"),
    ("k_on,A\n0.1,x\n", "line 2, column A: 'x' is not a number"),
    ("k_on,k_on\n1,2\n", "each column once"),
    ("k_on\n", "no rows"),
])
def test_bad_tables_say_where(tmp_path, text, match):
    (tmp_path / "p.csv").write_text(text)
    with pytest.raises(OptionError, match=match):
        read_table(tmp_path / "p.csv")


def test_npz_with_unequal_arrays_is_refused(tmp_path):
    np.savez(tmp_path / "p.npz", a=np.zeros(2), b=np.zeros(3))
    with pytest.raises(OptionError, match="differ in length"):
        read_table(tmp_path / "p.npz")


def test_unknown_id_names_it_and_close_matches():
    with pytest.raises(OptionError) as e:
        check_ids(network(), ["k_onn"])
    assert "'k_onn'" in str(e.value) and "did you mean k_on" in str(e.value)
    assert e.value.option == "parameters"


def test_ids_computed_by_rules_cannot_be_chosen():
    with pytest.raises(OptionError, match="assignment rule"):
        check_ids(network(), ["y"])
    with pytest.raises(OptionError, match="initial assignment"):
        check_ids(network(), ["z"])
    with pytest.raises(OptionError, match="not a parameter"):
        check_ids(network(), ["R1"])  # a reaction's rate is not a value to choose
    check_ids(network(), ["k_on", "A", "cell"])


def test_streams_are_keyed_by_seed_and_id_and_prefix_stable():
    a = uniforms(7, "k_on", 1000)
    assert ((a > 0) & (a < 1)).all()
    np.testing.assert_array_equal(uniforms(7, "k_on", 10), a[:10])  # independent of n
    assert not np.allclose(uniforms(7, "k_off", 10), a[:10])
    assert not np.allclose(uniforms(8, "k_on", 10), a[:10])
    # adding another sampled id does not change this one's values
    one = sample({"k_on": "uniform:0:1"}, 50, seed=3)["k_on"]
    two = sample({"A": "normal:1:0.1", "k_on": "uniform:0:1"}, 50, seed=3)["k_on"]
    np.testing.assert_array_equal(one, two)


def test_sampled_distributions_have_the_right_law():
    n = 20000
    s = sample({"u": "uniform:2:5", "lu": "loguniform:1e-3:1e1", "nm": "normal:3:0.5",
                "tn": "normal:0:1:-0.5:2"}, n, seed=11)
    assert stats.kstest(s["u"], stats.uniform(2, 3).cdf).pvalue > 1e-3
    assert stats.kstest(np.log(s["lu"]), stats.uniform(np.log(1e-3), np.log(1e4)).cdf).pvalue > 1e-3
    assert stats.kstest(s["nm"], stats.norm(3, 0.5).cdf).pvalue > 1e-3
    assert s["tn"].min() >= -0.5 and s["tn"].max() <= 2
    assert stats.kstest(s["tn"], stats.truncnorm(-0.5, 2).cdf).pvalue > 1e-3


@pytest.mark.parametrize("text,match", [
    ("uniform:2", "not a distribution"),
    ("gamma:1:2", "not a distribution"),
    ("uniform:3:1", "LOW must be below HIGH"),
    ("loguniform:0:1", "0 < LOW"),
    ("normal:1:-1", "sd must be positive"),
    ("normal:1:1:2:1", "LOW must be below HIGH"),
    ("uniform:a:1", "not a number"),
    # draws that would be inf for every member (a bad-input audit)
    ("uniform:-1e308:1e308", "beyond the double range"),
    ("normal:0:1e308", "sd is beyond"),
    ("normal:0:1e-300:1:2", "1e[+]300 sds from the mean"),
])
def test_bad_distribution_specs(text, match):
    with pytest.raises(OptionError, match=match):
        parse_distribution(text)


def test_a_truncated_normal_far_in_its_tail_is_still_drawn_inside_its_bounds():
    """30 sds out is drawable (scipy's truncnorm): not refused by the tail check."""
    values = sample({"x": parse_distribution("normal:0:1:30:31")}, 1000, seed=3)["x"]
    assert np.all(np.isfinite(values)) and values.min() >= 30 and values.max() <= 31


def test_parse_sample_needs_id_equals_spec():
    assert parse_sample("k_on=uniform:0:1")[0] == "k_on"
    with pytest.raises(OptionError, match="ID=SPEC"):
        parse_sample("uniform:0:1")


def test_seed_must_fit_philox_key():
    with pytest.raises(OptionError, match="seed"):
        uniforms(-1, "k", 3)
    with pytest.raises(OptionError, match="seed"):
        uniforms(2**64, "k", 3)


PETAB = ("parameterId\tparameterScale\tlowerBound\tupperBound\tnominalValue\testimate\n"
         "k_on\tlog10\t0.001\t10\t0.5\t1\n"
         "k_off\tlin\t0.5\t1.5\t0.1\t1\n"
         "A\tlin\t0\t10\t3\t0\n"
         "sd_obs\tlog10\t0.01\t1\t0.1\t1\n")


def test_petab_samples_on_the_parameter_scale_within_bounds(tmp_path):
    (tmp_path / "parameters.tsv").write_text(PETAB)
    sets, left_out = sample_petab(tmp_path / "parameters.tsv", 5000, seed=2, network=network())
    assert left_out == ["sd_obs"]  # a noise parameter, not in the model
    k = sets["k_on"]
    assert k.min() >= 1e-3 and k.max() <= 10
    # uniform in log10: about half of the values below the geometric midpoint 0.1
    assert abs((k < 0.1).mean() - 0.5) < 0.03
    assert stats.kstest(sets["k_off"], stats.uniform(0.5, 1.0).cdf).pvalue > 1e-3
    np.testing.assert_array_equal(sets["A"], 3.0)  # not estimated: nominal


def test_petab_errors(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("parameterId\tlowerBound\nk\t1\n")
    with pytest.raises(OptionError, match="missing columns: parameterScale"):
        sample_petab(bad, 2, 0)
    bad.write_text(PETAB.replace("k_on\tlog10\t0.001", "k_on\tlog10\t-1"))
    with pytest.raises(OptionError, match="k_on has scale log10 but lowerBound"):
        sample_petab(bad, 2, 0)
    bad.write_text(PETAB.replace("k_on\tlog10", "k_on\tlogit"))
    with pytest.raises(OptionError, match="line 2: parameterScale 'logit'"):
        sample_petab(bad, 2, 0)


def test_combine_table_samples_and_sizes(tmp_path):
    (tmp_path / "p.csv").write_text("k_on\n0.1\n0.2\n0.3\n")
    sets, n, notes, sources = combine(network(), table=tmp_path / "p.csv",
                                      samples=["A=uniform:0:1"], seed=4)
    assert n == 3 and len(sets["A"]) == 3 and not notes
    assert sources == {"k_on": "parameters", "A": "sample"}
    with pytest.raises(OptionError, match="4 members asked for"):
        combine(network(), table=tmp_path / "p.csv", n=4)
    with pytest.raises(OptionError, match="already given by parameters"):
        combine(network(), table=tmp_path / "p.csv", samples=["k_on=uniform:0:1"])
    with pytest.raises(OptionError, match="needs an ensemble size"):
        combine(network(), samples=["A=uniform:0:1"])
    assert combine(network(), n=5) == (None, 5, [], {})


def test_combine_reports_petab_parameters_left_out(tmp_path):
    (tmp_path / "parameters.tsv").write_text(PETAB)
    sets, n, notes, _ = combine(network(), petab=tmp_path / "parameters.tsv", n=3, seed=1)
    assert set(sets) == {"k_on", "k_off", "A"} and n == 3
    assert "sd_obs" in notes[0]


@pytest.mark.parametrize("threads", [1, 3])
def test_sample_table_holds_the_draws_of_sample_in_the_ids_order(threads):
    specs = {"a": "uniform:1:2", "b": "loguniform:1e-3:1e3", "c": "normal:0:1",
             "d": "uniform:-5:5"}
    ids = ["c", "a", "d", "b"]
    drawn = sample(specs, 1000, 7)
    table = sample_table(specs, ids, 1000, 7, threads=threads)
    np.testing.assert_array_equal(table, np.stack([drawn[i] for i in ids]))
    single = sample_table(specs, ids, 1000, 7, np.float32, threads=threads)
    assert single.dtype == np.float32
    np.testing.assert_array_equal(single, table.astype(np.float32))
    assert sample_table(specs, [], 5, 7).shape == (0, 5)
