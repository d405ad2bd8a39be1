"""delay(x, d) with a negative d at the model's own values is refused at import (a
bad-input audit): SBML requires d >= 0, and every integrator read the look-up into the
future as the present state, writing exp(-t/2) for x' = -x(t + 1)/2 with exit 0."""

from __future__ import annotations

import pytest

from sbmlgpu import load
from sbmlgpu.errors import SBMLImportError
from tests.sbml_strings import model, parameter, reaction, species

DELAY = ('<apply><csymbol encoding="text" definitionURL='
         '"http://www.sbml.org/sbml/symbols/delay">delay</csymbol>{x}{d}</apply>')


def _rate_rule(d_math: str, *, value: float = -1.0, constant: bool = True) -> str:
    rule = ('<rateRule variable="S"><math xmlns="http://www.w3.org/1998/Math/MathML">'
            '<apply><times/><cn>-0.5</cn>' + DELAY.format(x="<ci>S</ci>", d=d_math)
            + '</apply></math></rateRule>')
    return model(species("S", 1.0), parameter("d", value, constant=constant), rules=rule)


@pytest.mark.parametrize("d_math,shown", [
    ("<ci>d</ci>", "-1"),                                           # a constant parameter
    ("<cn>-0.25</cn>", "-0.25"),                                    # a number
    ("<apply><minus/><ci>d</ci><cn>1</cn></apply>", "-2"),          # arithmetic of both
])
def test_a_negative_constant_delay_is_refused_naming_where(d_math, shown):
    with pytest.raises(SBMLImportError, match="a delay\\(\\) is negative or not a number") as info:
        load(_rate_rule(d_math))
    assert f"rateRule S: delay(S, " in str(info.value)
    assert f"has the delay {shown}; SBML requires a delay >= 0" in str(info.value)


@pytest.mark.parametrize("d_math", [
    "<apply><root/><cn>-1</cn></apply>",                     # sqrt(-1): imaginary
    "<apply><divide/><cn>1</cn><cn>0</cn></apply>",          # zoo
])
def test_a_delay_that_is_no_real_number_is_refused_so(d_math):
    """(they were reported as 'has the delay nan', found by a review)"""
    with pytest.raises(SBMLImportError, match="has the delay not a real number"):
        load(_rate_rule(d_math))


def test_a_kinetic_law_is_checked_too():
    law = DELAY.format(x="<ci>A</ci>", d="<ci>d</ci>")
    with pytest.raises(SBMLImportError, match="reaction R1: delay\\(A, d\\) has the delay -3"):
        load(model(species("A", 5.0), parameter("d", -3.0), reaction("R1", ["A"], [], law)))


@pytest.mark.parametrize("d_math,value,constant", [
    ("<ci>d</ci>", 1.0, True),    # a delay >= 0
    ("<cn>0</cn>", 1.0, True),
    ("<ci>S</ci>", 1.0, True),    # a state: not known before it runs, not refused here
    ("<ci>d</ci>", -1.0, False),  # a variable parameter: the same
    # lags with no value before the run (a review found these crashed the check)
    (DELAY.format(x="<cn>2</cn>", d="<cn>1</cn>"), 1.0, True),
    ('<apply><csymbol encoding="text" definitionURL="http://www.sbml.org/sbml/symbols/'
     'rateOf">rateOf</csymbol><ci>d</ci></apply>', 1.0, True),
])
def test_other_delays_load(d_math, value, constant):
    net = load(_rate_rule(d_math, value=value, constant=constant))
    assert [r.variable for r in net.rate_rules] == ["S"]
