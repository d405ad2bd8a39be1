"""Copy-number bounds: the user's --bound, else a conservation law that implies one.

A conservation law is a weight vector w >= 0 over the species with N w = 0 for the
(R, S) net stoichiometry N: every firing leaves w . x unchanged, so from the initial
state x0 every reachable state has w . x = w . x0 and, all counts being >= 0,
x_k <= (w . x0) / w_k. The same holds for w with N w <= 0 (no reaction increases
w . x: a law that degradation only lowers, as S1 + 2*S2 <= 100 when S1 decays and
2 S1 <=> S2), and dropping reactions at a bound keeps it true, so those bound too.
For a species without --bound the tightest such bound is a linear programme
(scipy's HiGHS): minimise w . x0 subject to N w <= 0, w >= 0, w_k = 1. Its optimum
is a vertex, a vector of small rationals: it is rebuilt exactly (fractions) and
checked in exact arithmetic before it is used, so a bound never rests on rounding.
The law is recorded as text ("A + B = 10", or "S1 + 2*S2 <= 100" when reactions
can lower it) for the result's `bound_origin`.

A species that no such law bounds needs --bound (an OptionError naming it): the
enumeration would not end.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Mapping, Sequence

import numpy as np

from sbmlgpu.errors import OptionError

#: What `bound_origin` says for a bound the user gave.
GIVEN = "--bound"
# The largest denominator a vertex of these programmes plausibly has (stoichiometries
# are small whole numbers); a rebuilt w that fails the exact check is not used.
_MAX_DENOMINATOR = 10**6


def check_given(species: Sequence[str], fixed: Sequence[str],
                given: Mapping[str, object]) -> dict[str, int]:
    """The user's bounds as {species: int}; OptionError naming ids that are no state
    species and values that are not whole numbers >= 0."""
    columns = set(species)
    bad_ids = [sid for sid in given if sid not in columns]
    if bad_ids:
        fixed_ones = [sid for sid in bad_ids if sid in set(fixed)]
        why = (f" ({', '.join(fixed_ones)}: fixed, never changes)" if fixed_ones else "")
        raise OptionError("bound", f"{', '.join(bad_ids)}: a bound is for a species that "
                                   f"reactions change ({', '.join(species) or 'none'}){why}")
    out = {}
    bad_values = []
    for sid, value in given.items():
        try:
            whole = int(value)
            ok = not isinstance(value, bool) and whole == value and whole >= 0
        except (TypeError, ValueError, OverflowError):
            ok = False
        if not ok or whole > np.iinfo(np.int32).max - 1:
            bad_values.append(f"{sid}={value!r}")
        else:
            out[sid] = whole
    if bad_values:
        raise OptionError("bound", f"{', '.join(bad_values)}: a bound is a whole number from "
                                   f"0 to {np.iinfo(np.int32).max - 1}")
    return out


def tightest_law(stoichiometry: np.ndarray, x0: np.ndarray, k: int) -> list[Fraction] | None:
    """The law w (w >= 0, N w <= 0, w_k = 1, exact fractions) that bounds species k
    tightest from x0, or None when no such law covers k."""
    from scipy.optimize import linprog

    n_reactions, n_species = stoichiometry.shape
    fix_k = np.zeros((1, n_species))
    fix_k[0, k] = 1.0
    # a tiny cost on every weight breaks ties towards laws with fewer species (the
    # same bound, a shorter text); any feasible w gives a valid bound
    cost = np.asarray(x0, dtype=float) + 1e-9
    found = linprog(cost, A_ub=stoichiometry.astype(float) if n_reactions else None,
                    b_ub=np.zeros(n_reactions) if n_reactions else None,
                    A_eq=fix_k, b_eq=[1.0], bounds=[(0, None)] * n_species, method="highs")
    if found.status != 0:  # infeasible: nothing bounds k (unbounded cannot happen: c > 0)
        return None
    w = [Fraction(float(v)).limit_denominator(_MAX_DENOMINATOR) for v in found.x]
    w[k] = Fraction(1)
    exact = min(w) >= 0 and all(_change(row, w) <= 0 for row in stoichiometry)
    return w if exact else None


def _change(row: np.ndarray, w: Sequence[Fraction]) -> Fraction:
    """How much one firing of a reaction changes w . x (exactly)."""
    return sum((int(n) * wi for n, wi in zip(row, w)), Fraction(0))


def law_text(species: Sequence[str], w: Sequence[Fraction], total: Fraction,
             conserved: bool = True) -> str:
    """`A + 2*B = 10` (`<=` when reactions can lower it): the law with whole weights."""
    scale = math.lcm(*(f.denominator for f in w), total.denominator)
    terms = [(int(f * scale), sid) for f, sid in zip(w, species) if f]
    left = " + ".join(sid if c == 1 else f"{c}*{sid}" for c, sid in terms)
    return f"{left} {'=' if conserved else '<='} {int(total * scale)}"


def resolve_bounds(species: Sequence[str], stoichiometry: np.ndarray, x0: np.ndarray,
                   given: Mapping[str, int]) -> tuple[dict[str, int], dict[str, str]]:
    """(bound per species, where each came from): `given` (already checked), else
    the tightest conservation law; OptionError naming the species nothing bounds."""
    bounds: dict[str, int] = {}
    origin: dict[str, str] = {}
    unbounded = []
    stoichiometry = np.asarray(stoichiometry, dtype=np.int64)
    for k, sid in enumerate(species):
        if sid in given:
            bounds[sid], origin[sid] = int(given[sid]), GIVEN
            continue
        w = tightest_law(stoichiometry, x0, k)
        if w is None:
            unbounded.append(sid)
            continue
        total = sum((wi * int(c) for wi, c in zip(w, x0)), Fraction(0))
        bounds[sid] = math.floor(total)  # w_k = 1
        conserved = all(_change(row, w) == 0 for row in stoichiometry)
        origin[sid] = law_text(species, w, total, conserved)
    if unbounded:
        raise OptionError("bound", f"no conservation law bounds {', '.join(unbounded)}: give "
                                   f"--bound ID=N for "
                                   f"{'it' if len(unbounded) == 1 else 'each'} (the largest "
                                   f"copy number to enumerate)")
    too_low = [f"{sid} starts at {int(c)} > --bound {sid}={bounds[sid]}"
               for sid, c in zip(species, x0) if c > bounds[sid]]
    if too_low:
        raise OptionError("bound", "; ".join(too_low) + ": the initial state must lie "
                                                       "inside the bounds")
    return bounds, origin
