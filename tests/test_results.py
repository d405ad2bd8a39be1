"""Result objects: shapes, named access, status, summary, writers (round trips), plot."""

import csv

import numpy as np
import pytest

from sbmlgpu.results import Status, TimeCourseResult, Summary, read_hdf5, read_npz


def ensemble_result(n=4, seed=1, failed=(2,)):
    rng = np.random.default_rng(seed)
    times = np.linspace(0, 1, 5)
    data = rng.normal(size=(n, len(times), 2))
    status = np.zeros(n, np.int8)
    for m in failed:
        status[m] = Status.step_size_underflow
        data[m, 3:] = np.nan
    return TimeCourseResult(times, ("S1", "S2"), data, status,
                  metadata={"model": "m", "backend": "fake", "seed": seed},
                  messages={m: "step size 1e-300 at t=0.6" for m in failed})


def test_one_member_data_is_three_dimensional_and_named_access_works():
    t = np.array([0.0, 1.0, 2.0])
    r = TimeCourseResult(t, ("A", "B"), np.column_stack([t, 2 * t]))
    assert r.data.shape == (1, 3, 2)
    assert r.n_members == 1 and r.n_failed == 0
    np.testing.assert_array_equal(r["B"], [[0.0, 2.0, 4.0]])
    assert "A" in r and r.keys() == ("A", "B")
    with pytest.raises(KeyError, match="did you mean A"):
        r["a"]


def test_shape_mismatch_is_refused():
    with pytest.raises(ValueError, match="expected"):
        TimeCourseResult(np.arange(3.0), ("A",), np.zeros((1, 4, 1)))
    with pytest.raises(ValueError, match="statuses"):
        TimeCourseResult(np.arange(3.0), ("A",), np.zeros((2, 3, 1)), status=[0])
    with pytest.raises(ValueError, match="status codes must be defined ones: ok=0"):
        # a code far from those core and the tests' own Status.define calls take
        TimeCourseResult(np.arange(3.0), ("A",), np.zeros((1, 3, 1)), status=[100])


def test_status_parse_and_messages_say_what_to_do():
    assert Status.parse("ok") is Status.ok
    assert Status.parse(np.int8(3)) is Status.non_finite
    assert Status.parse("nonfinite_state") is Status.non_finite
    assert Status.parse("integrator_failed") is Status.failed
    for s in Status:
        assert s.message and s.message != Status.ok.message or s is Status.ok
    assert "stiff" in Status.step_size_underflow.message


def test_summary_excludes_failed_members_and_says_so():
    r = ensemble_result().with_summary()
    ok = r.data[[0, 1, 3]]
    s = r.summary
    assert (s.n_used, s.n_excluded) == (3, 1)
    np.testing.assert_allclose(s.mean, ok.mean(axis=0))
    np.testing.assert_allclose(s.sd, ok.std(axis=0, ddof=1))
    np.testing.assert_allclose(s.quantile_values[s.quantiles.index(0.5)], np.median(ok, axis=0))
    assert "1 failed member excluded" in s.describe()
    assert np.isfinite(s.mean).all()  # the NaNs of the failed member did not leak in
    np.testing.assert_allclose(r.summary_of("S2")["mean"], ok.mean(axis=0)[:, 1])


def test_summary_of_one_member_has_no_sd_and_of_none_is_nan():
    one = Summary.of(np.ones((1, 3, 2)))
    assert np.isnan(one.sd).all() and (one.mean == 1).all()
    none = Summary.of(np.ones((2, 3, 2)), ok=np.array([False, False]))
    assert none.n_used == 0 and np.isnan(none.mean).all()


def test_summarized_result_drops_members_but_keeps_statuses():
    r = ensemble_result().with_summary(keep_members=False)
    assert r.data is None and r.n_members == 4 and r.n_failed == 1
    with pytest.raises(KeyError, match="summary"):
        r["S1"]


def read_csv(path):
    with open(path) as f:
        rows = list(csv.reader(f))
    return rows[0], np.array(rows[1:], dtype=float)


def test_csv_one_member_is_time_then_columns(tmp_path):
    t = np.array([0.0, 0.5, 1.0])
    values = np.column_stack([np.exp(-t), 1 / 3 + t])
    [path] = TimeCourseResult(t, ("A", "B"), values).to_csv(tmp_path / "r.csv")
    header, table = read_csv(path)
    assert header == ["time", "A", "B"]
    np.testing.assert_array_equal(table, np.column_stack([t, values]))  # exact: repr round-trips


def test_csv_ensemble_has_member_column_and_summary_file(tmp_path):
    r = ensemble_result().with_summary()
    written = r.to_csv(tmp_path / "r.csv")
    assert [p.name for p in written] == ["r.csv", "r_summary.csv"]
    header, table = read_csv(written[0])
    assert header == ["time", "member", "S1", "S2"]
    assert table.shape == (4 * 5, 4)
    member3 = table[table[:, 1] == 3]
    np.testing.assert_array_equal(member3[:, 2:], r.data[3])
    np.testing.assert_array_equal(member3[:, 0], r.times)
    header, summary = read_csv(written[1])
    assert header[:4] == ["time", "S1_mean", "S1_sd", "S1_q5"]
    assert "S2_q95" in header
    np.testing.assert_array_equal(summary[:, header.index("S2_mean")], r.summary.mean[:, 1])


def test_csv_of_summary_only_result(tmp_path):
    r = ensemble_result().with_summary(keep_members=False)
    [path] = r.to_csv(tmp_path / "s.csv")
    header, table = read_csv(path)
    assert header[0:3] == ["time", "S1_mean", "S1_sd"]
    np.testing.assert_array_equal(table[:, 2], r.summary.sd[:, 0])


@pytest.mark.parametrize("write,read,suffix", [("to_npz", read_npz, ".npz"),
                                               ("to_hdf5", read_hdf5, ".h5")])
@pytest.mark.parametrize("keep_members", [True, False])
def test_binary_writers_round_trip(tmp_path, write, read, suffix, keep_members):
    r = ensemble_result().with_summary(keep_members=keep_members)
    [path] = getattr(r, write)(tmp_path / f"r{suffix}")
    assert path.exists() and path.suffix == suffix
    back = read(path)
    assert back.ids == r.ids
    np.testing.assert_array_equal(back.times, r.times)
    np.testing.assert_array_equal(back.status, r.status)
    assert back.metadata == r.metadata and back.messages == r.messages
    if keep_members:
        np.testing.assert_array_equal(back.data, r.data)
    else:
        assert back.data is None
    np.testing.assert_array_equal(back.summary.quantile_values, r.summary.quantile_values)
    assert (back.summary.n_used, back.summary.n_excluded) == (3, 1)
    assert back.summary.quantiles == r.summary.quantiles


def test_write_picks_the_registered_writer_by_format(tmp_path):
    r = ensemble_result()
    assert r.write(tmp_path / "x.npz")[0].name == "x.npz"
    assert read_npz(tmp_path / "x.npz").n_members == 4
    from sbmlgpu.errors import OptionError

    with pytest.raises(OptionError, match="known formats: .*csv"):
        r.write(tmp_path / "x.xlsx")


def test_plot_writes_a_png_with_band_and_members(tmp_path):
    r = ensemble_result()
    fig = r.plot(tmp_path / "r.png", max_members=2)
    assert (tmp_path / "r.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ax = fig.axes[0]
    # 2 columns x (2 thin member lines + 1 mean line); one band per column
    assert len(ax.lines) == 6
    assert len(ax.collections) == 2
    assert "excluded" in ax.get_title() and "5–95 % band" in ax.get_title()


def test_plot_band_is_between_quantiles_or_mean_plus_minus_sd():
    from sbmlgpu.results.plot import band, band_name
    from sbmlgpu.results import Summary

    # a skewed ensemble of positive values: mean - sd < 0, the 5 % quantile is not
    data = np.exp(np.random.default_rng(0).normal(0, 1.5, size=(2000, 3, 1)))
    ok = np.ones(2000, bool)
    summary = Summary.of(data, ok, (0.05, 0.5, 0.95))
    lo, hi = band(summary, 0)
    assert np.allclose(lo, np.quantile(data[:, :, 0], 0.05, axis=0))
    assert np.allclose(hi, np.quantile(data[:, :, 0], 0.95, axis=0))
    assert (lo > 0).all() and (summary.mean[:, 0] - summary.sd[:, 0] < 0).all()
    plain = Summary.of(data, ok, ())
    lo, hi = band(plain, 0)
    assert np.allclose(lo, plain.mean[:, 0] - plain.sd[:, 0]) and band_name(plain) == "± sd"


def test_plot_single_member_draws_one_line_per_column():
    t = np.linspace(0, 1, 4)
    fig = TimeCourseResult(t, ("A", "B", "C"), np.ones((4, 3))).plot()
    assert len(fig.axes[0].lines) == 3 and not fig.axes[0].collections
