"""A bounded number option is finite (a bad-input audit): `run --rtol inf` and
`--atol inf` were taken at their word, the adaptive methods accepted one unchecked step
over each output interval and wrote a wrong time course with exit 0. Limits whose
"none" is inf (cme's --max-seconds, declared `infinite`) still take inf."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from sbmlgpu.backend import BackendOptions, option
from sbmlgpu.errors import OptionError
from tests.shared_data import ROOT

MODEL = ROOT / "sbml_models" / "lotka_volterra.xml"


@dataclass
class Example(BackendOptions):
    tol: float = option(1e-6, "a tolerance", minimum=0.0)
    limit: float = option(math.inf, "a limit whose none is inf", minimum=0.0, infinite=True)
    free: float = option(1.0, "a number with no bounds")


@pytest.mark.parametrize("value", [math.inf, -math.inf])
def test_an_infinite_bounded_number_is_refused_by_name(value):
    with pytest.raises(OptionError, match=r"option tol: -?inf is not a finite number"):
        Example.from_mapping({"tol": value})


def test_inf_stays_a_value_where_it_is_the_default_or_nothing_bounds_it():
    assert Example.from_mapping({"limit": math.inf, "free": math.inf}).limit == math.inf


@pytest.mark.parametrize("flags", [["--rtol", "inf"], ["--atol", "inf"],
                                   ["--max-step", "inf"], ["--h0", "inf"],
                                   ["--backend", "reference", "--atol", "inf"]])
def test_run_refuses_an_infinite_tolerance_or_step(flags, tmp_path, capsys):
    from sbmlgpu.cli import main

    code = main(["run", str(MODEL), "--cpu", "--end", "5", "--no-progress",
                 "-o", str(tmp_path / "out"), *flags])
    assert code == 2
    assert f"option {flags[-2].lstrip('-')}: inf is not a finite number" in capsys.readouterr().err
    assert not (tmp_path / "out" / "lotka_volterra.csv").exists()


def test_the_references_max_step_takes_inf_its_no_limit():
    from sbmlgpu.plugins.reference.backend import ReferenceOptions

    assert ReferenceOptions.from_mapping({"max_step": math.inf}).max_step == math.inf


def test_cme_max_seconds_takes_inf():
    from sbmlgpu.plugins.cme.options import CmeOptions

    assert CmeOptions.from_mapping({"max_seconds": math.inf}).max_seconds == math.inf
