"""tests/shared_data.py: where the tests and benchmarks look for ../shared."""

from __future__ import annotations

from .shared_data import ABSENT, ENV, candidates, locate, parameters


def test_shared_beside_the_checkout_comes_before_shared_inside_it(tmp_path):
    root = tmp_path / "checkout"
    (root / "shared").mkdir(parents=True)
    assert locate(root, environ={}) == root / "shared"  # a copy that carries it inside
    (tmp_path / "shared").mkdir()
    assert locate(root, environ={}) == tmp_path / "shared"
    assert candidates(root, environ={}) == [tmp_path / "shared", root / "shared"]


def test_the_environment_variable_overrides_both_even_where_it_names_nothing(tmp_path):
    root = tmp_path / "checkout"
    (root / "shared").mkdir(parents=True)
    (tmp_path / "shared").mkdir()
    (tmp_path / "elsewhere").mkdir()
    assert locate(root, environ={ENV: str(tmp_path / "elsewhere")}) == tmp_path / "elsewhere"
    assert locate(root, environ={ENV: str(tmp_path / "missing")}) is None
    assert locate(root, environ={ENV: ""}) == tmp_path / "shared"  # empty: as if unset


def test_parameters_over_absent_data_skip_with_a_reason(tmp_path):
    assert parameters([1, 2], tmp_path, "cases") == [1, 2]
    (absent,) = parameters([], tmp_path / "none", "cases")
    (mark,) = absent.marks
    assert absent.values == (None,) and absent.id == "absent" and mark.name == "skip"
    # what is missing: the cases, or (run without any shared data) the whole folder
    assert "cases" in mark.kwargs["reason"] or mark.kwargs["reason"] == ABSENT
