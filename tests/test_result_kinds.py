"""One result class per task kind: checks, tables, NPZ/HDF5 round trips through read(),
plots; the extensible member status; each member's varied values."""

import csv

import numpy as np
import pytest

from sbmlgpu.results import (DbnResult, Paving, StateDistribution, Status, TimeCourseResult,
                             read)


def rows(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


# -- status -------------------------------------------------------------------------------
def test_a_backend_can_define_a_status_with_its_own_message():
    negative = Status.define("negative_propensity_test", "a propensity became negative: "
                                                          "check the kinetic laws")
    assert int(negative) > int(Status.failed)
    assert Status(int(negative)) is negative and Status.negative_propensity_test is negative
    assert Status.parse("negative_propensity_test") is negative
    assert Status.define("negative_propensity_test", negative.message) is negative  # same
    with pytest.raises(ValueError, match="already defined"):
        Status.define("negative_propensity_test", "another message")
    with pytest.raises(ValueError, match="would hide"):
        Status.define("message", "x")
    assert f"#define SBMLGPU_STATUS_NEGATIVE_PROPENSITY_TEST {int(negative)}" in \
        Status.c_defines()
    assert "#define SBMLGPU_STATUS_OK 0" in Status.c_defines()
    result = TimeCourseResult([0.0, 1.0], ("A",), np.zeros((2, 2, 1)), status=[0, negative])
    assert [s for _, s, _ in result.failures()] == [negative]


def test_status_codes_read_back_by_name():
    # a file written where code 2 meant "non_finite" and 3 "step_size_underflow"
    names = ["ok", "max_steps", "non_finite", "step_size_underflow", "unknown_to_us"]
    codes = Status.from_names(np.array([0, 2, 3, 4]), names)
    assert [Status(c) for c in codes] == [Status.ok, Status.non_finite,
                                          Status.step_size_underflow, Status.failed]
    with pytest.raises(ValueError, match="outside"):
        Status.from_names(np.array([7]), names)


# -- time courses: members -------------------------------------------------------------------
def ensemble():
    times = np.linspace(0, 1, 3)
    data = np.arange(4 * 3 * 2, dtype=float).reshape(4, 3, 2)
    return TimeCourseResult(times, ("S1", "S2"), data, members={"k1": [0.1, 0.2, 0.3, 0.4],
                                                                 "S1": [1, 2, 3, 4]},
                            metadata={"model": "m"})


def test_members_csv_holds_each_members_values(tmp_path):
    written = ensemble().to_csv(tmp_path / "m.csv")
    assert written == [tmp_path / "m.csv", tmp_path / "m.members.csv"]
    table = rows(tmp_path / "m.members.csv")
    assert table[0] == ["member", "k1", "S1"]
    assert [float(x) for x in table[3][1:]] == [0.3, 3.0] and table[3][0] == "2"


def test_members_survive_summary_and_binary_round_trips(tmp_path):
    r = ensemble().with_summary(keep_members=False)
    assert set(r.members) == {"k1", "S1"}
    for path in r.to_npz(tmp_path / "r.npz") + r.to_hdf5(tmp_path / "r.h5"):
        back = read(path)
        assert isinstance(back, TimeCourseResult)
        np.testing.assert_array_equal(back.members["k1"], [0.1, 0.2, 0.3, 0.4])
        assert list(back.members) == ["k1", "S1"]


def test_members_must_have_one_value_each():
    with pytest.raises(ValueError, match="members\\['k1'\\] has 2 values for 4 members"):
        TimeCourseResult([0.0], ("A",), np.zeros((4, 1, 1)), members={"k1": [1, 2]})


# -- distribution -------------------------------------------------------------------------------
def birth_death():
    from scipy.stats import poisson

    counts = np.arange(0, 30)
    return StateDistribution(("A",), counts[:, None], poisson.pmf(counts, 5.0),
                             {"residual": 1e-12, "truncation_error_bound": 1e-9, "solver": "x"},
                             {"model": "bd"})


def test_distribution_marginals_mean_and_tables(tmp_path):
    d = birth_death()
    assert d.integral and abs(d.mean("A") - 5.0) < 1e-6
    written = d.to_csv(tmp_path / "bd.csv")
    assert written == [tmp_path / "bd.csv", tmp_path / "bd.marginals.csv"]
    table = rows(written[0])
    assert table[0] == ["A", "probability"] and float(table[6][1]) == d.probability[5]
    marginals = rows(written[1])
    assert marginals[0] == ["id", "count", "probability"] and marginals[6][:2] == ["A", "5"]
    with pytest.raises(KeyError, match="did you mean A"):
        d.marginal("a")


def test_a_deterministic_steady_state_is_one_state_of_probability_one(tmp_path):
    d = StateDistribution(("A", "B"), [[0.25, 1.5]], [1.0])
    assert not d.integral
    marginals = rows(d.to_csv(tmp_path / "s.csv")[1])
    assert marginals[0] == ["id", "value", "probability"] and marginals[1] == ["A", "0.25", "1.0"]


def test_distribution_refuses_bad_probabilities():
    with pytest.raises(ValueError, match="finite and not negative"):
        StateDistribution(("A",), [[0], [1]], [0.5, -0.1])
    with pytest.raises(ValueError, match="2 probabilities for 3 states"):
        StateDistribution(("A",), [[0], [1], [2]], [0.5, 0.5])


def test_two_species_plot_has_the_landscape(tmp_path):
    xs, ys = np.meshgrid(np.arange(4), np.arange(3))
    states = np.column_stack([xs.ravel(), ys.ravel()])
    p = np.full(len(states), 1 / len(states))
    fig = StateDistribution(("X", "Y"), states, p).plot(tmp_path / "d.png")
    assert (tmp_path / "d.png").stat().st_size > 1000
    assert len(fig.axes) == 4  # two marginals, the heat map, its colour bar


def test_landscape_of_two_wide_species_sums_over_the_others(tmp_path):
    # a gene G (0/1) and two proteins: the landscape is over the proteins, G summed out
    states = np.array([[g, x, y] for g in (0, 1) for x in range(3) for y in range(4)])
    p = np.random.default_rng(3).random(len(states))
    d = StateDistribution(("G", "X", "Y"), states, p / p.sum())
    assert d.default_landscape() == ("X", "Y")
    xs, ys, grid = d.landscape("X", "Y")
    assert xs.tolist() == [0, 1, 2] and ys.tolist() == [0, 1, 2, 3]
    both = (states[:, 1] == 2) & (states[:, 2] == 1)
    assert grid[1, 2] == pytest.approx(d.probability[both].sum())
    fig = d.plot(tmp_path / "g.png")
    assert [a.get_xlabel() for a in fig.axes[3:4]] == ["X"] and fig.axes[3].get_ylabel() == "Y"
    assert len(d.plot(landscape=None).axes) == 3
    with pytest.raises(KeyError, match="no species 'Z'"):
        d.plot(landscape=("X", "Z"))


# -- paving ------------------------------------------------------------------------------------------
def paving():
    return Paving(("p1", "p2"), lower=[[0, 0], [0.5, 0], [0.5, 0.5]],
                  upper=[[0.5, 0.5], [0.75, 0.25], [0.625, 0.625]],
                  verdict=["feasible", "undetermined", "undetermined"],
                  search=[[0, 1], [0, 1]], epsilon=0.2,
                  statistics={"boxes_evaluated": 21, "seconds": 0.5}, metadata={"model": "lv"})


def test_paving_volumes_and_point_lookup():
    p = paving()
    v = p.volumes
    assert v["feasible"] == 0.25 and v["undetermined"] == 0.0625 + 0.015625
    assert abs(v["rejected"] - (1 - 0.25 - 0.078125)) < 1e-15
    assert p.contains([0.1, 0.1]) == "feasible"
    assert p.contains([0.6, 0.1]) == "undetermined"
    assert p.contains([0.9, 0.9]) == "rejected"


def test_paving_csv_and_summary(tmp_path):
    written = paving().to_csv(tmp_path / "lv.paving.csv")
    assert written[1] == tmp_path / "lv.paving.summary.csv"
    table = rows(written[0])
    assert table[0] == ["verdict", "p1_lower", "p1_upper", "p2_lower", "p2_upper"]
    assert table[2] == ["undetermined", "0.5", "0.75", "0.0", "0.25"]
    summary = dict(rows(written[1])[1:])
    assert summary["boxes_kept"] == "3" and summary["boxes_evaluated"] == "21"
    assert float(summary["volume_feasible"]) == 0.25


def test_paving_refuses_bad_boxes():
    with pytest.raises(ValueError, match="verdicts must be"):
        Paving(("p",), [[0]], [[1]], ["maybe"], [[0, 1]], 0.1)
    with pytest.raises(ValueError, match="lower > upper"):
        Paving(("p",), [[1]], [[0]], ["feasible"], [[0, 1]], 0.1)


def test_paving_plots_pairwise_projections(tmp_path):
    three = Paving(("a", "b", "c"), [[0, 0, 0]], [[1, 1, 1]], ["feasible"],
                   [[0, 2], [0, 2], [0, 2]], 0.1)
    fig = three.plot(tmp_path / "p.png")
    assert sum(ax.get_visible() for ax in fig.axes) == 3  # (a,b), (a,c), (b,c)
    assert (tmp_path / "p.png").exists()


# -- DBN -------------------------------------------------------------------------------------------
def dbn():
    K, T = 3, 2
    counts = {"x": np.zeros((T, K * K, K), int), "y": np.zeros((T, K, K), int)}
    counts["x"][0, 4, 1] = 6  # parents (x, y) in bins (1, 1) -> x in bin 1, six times
    counts["x"][0, 4, 2] = 2
    counts["y"][1, 0, 0] = 8
    counted = np.full((T + 1, 2, K), 1 / K)
    return DbnResult(("x", "y"), [0.0, 1.0, 2.0], [[0, 1, 2, 3], [0, 0.5, 1, 1.5]],
                     {"x": ("x", "y"), "y": ("y",)}, counts, counted, metadata={"model": "m"})


def test_dbn_cpts_keep_counts_and_mark_unvisited_configurations():
    d = dbn()
    cpt = d.cpt("x", 0)
    np.testing.assert_allclose(cpt[4], [0, 0.75, 0.25])
    assert np.isnan(cpt[0]).all()  # never visited: marked, not filled in
    assert 4 not in d.unvisited("x", 0) and 0 in d.unvisited("x", 0)


def test_dbn_marginals_csv_and_round_trips(tmp_path):
    d = dbn()
    [path] = d.to_csv(tmp_path / "m.marginals.csv")
    table = rows(path)
    assert table[0] == ["time", "id", "bin", "lower", "upper", "counted", "inferred"]
    assert table[1][:5] == ["0.0", "x", "0", "0.0", "1.0"] and table[1][6] == ""
    assert len(table) == 1 + 3 * 2 * 3
    for written in d.to_npz(tmp_path / "m.npz") + d.to_hdf5(tmp_path / "m.h5"):
        back = read(written)
        assert isinstance(back, DbnResult) and back.parents == d.parents
        np.testing.assert_array_equal(back.counts["x"], d.counts["x"])
        assert back.inferred is None


def test_dbn_refuses_counts_of_the_wrong_shape():
    d = dbn()
    with pytest.raises(ValueError, match="counts of x have shape"):
        DbnResult(d.variables, d.times, d.edges, d.parents,
                  {"x": np.zeros((2, 3, 3)), "y": d.counts["y"]}, d.counted)


@pytest.mark.parametrize("make", [birth_death, paving, dbn])
def test_every_kind_round_trips_through_npz_and_hdf5_with_metadata(tmp_path, make):
    result = make()
    for path in result.to_npz(tmp_path / "r.npz") + result.to_hdf5(tmp_path / "r.h5"):
        back = read(path)
        assert type(back) is type(result) and back.metadata == result.metadata
        for key, value in result.arrays().items():
            if isinstance(value, np.ndarray):
                np.testing.assert_array_equal(back.arrays()[key], value)
    fig = result.plot(tmp_path / "r.png")
    assert fig is not None and (tmp_path / "r.png").exists()


def test_read_refuses_other_files_with_a_typed_error(tmp_path):
    from sbmlgpu.errors import SbmlGpuError
    from sbmlgpu.results import ResultFileError

    assert issubclass(ResultFileError, SbmlGpuError)
    with pytest.raises(ResultFileError, match="takes .npz or .h5"):
        read(tmp_path / "x.csv")
    np.savez(tmp_path / "other.npz", a=np.arange(3))
    with pytest.raises(ResultFileError, match="not a result written by sbmlgpu"):
        read(tmp_path / "other.npz")
    (tmp_path / "text.h5").write_text("not hdf5")
    with pytest.raises(ResultFileError, match="not a readable HDF5 file"):
        read(tmp_path / "text.h5")
    (tmp_path / "text.npz").write_text("not npz")
    with pytest.raises(ResultFileError, match="not a readable .npz"):
        read(tmp_path / "text.npz")
