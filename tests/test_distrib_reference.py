"""The reference's distrib draws (core/reference/draws.py: numpy's Generator on
Philox, scipy.stats for truncation) against the same laws and criteria as the
kernels' samplers (test_distrib_samplers.py): goodness of fit p > P_MIN at a fixed
seed, every draw inside its bounds, invalid arguments raising InvalidDraw."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from sbmlgpu.reference.draws import Draws, InvalidDraw

from .test_distrib_samplers import INVALID, LAWS, P_MIN, _chisquare_p

N = 1500


@pytest.mark.parametrize("name", sorted(LAWS))
def test_reference_draws_match_their_law(name):
    draw, law, discrete = LAWS[name]
    args = [float(a) for a in draw.args[1:]]
    sampler = Draws(seed=20261124, member=3)
    values = np.array([sampler(draw.sbml_name, *args) for _ in range(N)])
    lo, hi = (float(b) for b in draw.bounds)
    assert np.all((values >= lo) & (values <= hi))
    p = _chisquare_p(values, law) if discrete else float(stats.kstest(values, law.cdf).pvalue)
    assert p > P_MIN, f"{name}: goodness of fit p = {p:.2e}"


@pytest.mark.parametrize("name", sorted(set(INVALID) - {"gamma_range_without_mass"}))
def test_reference_refuses_invalid_arguments(name):
    draw = INVALID[name]
    with pytest.raises(InvalidDraw, match=f"distrib draw {draw.sbml_name}"):
        Draws(0)(draw.sbml_name, *[float(a) for a in draw.args[1:]])


def test_members_have_their_own_streams():
    first = [Draws(5, m)("normal", 0.0, 1.0, -np.inf, np.inf) for m in range(4)]
    again = [Draws(5, m)("normal", 0.0, 1.0, -np.inf, np.inf) for m in range(4)]
    assert first == again and len(set(first)) == 4
