"""Parameter specialisation: which parameters a kernel reads from a table, which are literals.

A kernel is specialised to one ensemble: the parameters the ensemble varies are
read per trajectory from a table; every other parameter becomes a literal in the
generated code (as in a hand-written kernel, where constants are literals, and nvcc
folds what it can). The literals are attached at printing time (`literals`, a map
from the parameter's symbol to its value), not substituted into the sympy
expressions: sympy distributes a number over a sum (10*(y - x) becomes -10*x + 10*y,
one more multiplication at every evaluation), which the model as written avoids.
Three exceptions are substituted: parameters equal to 0, 1 or -1 (they simplify the
expressions exactly); exponents (x**n with n fixed becomes x*x*..., and its
derivative n*x**(n-1) rather than n*x**n/x, which is NaN at x = 0); and divisions by
a fixed parameter, which become multiplications by its reciprocal (a multiplication
is several times cheaper than a division in fp64; the result differs by at most one
rounding).
"""

from __future__ import annotations

import math

import sympy as sp

from ..errors import OptionError
from ..views.ode import OdeSystem


def number(value: float) -> sp.Expr:
    """A file value as a sympy number: integers exactly (so that `1 * x` folds away),
    everything else as the exact binary double."""
    value = float(value)
    if math.isnan(value):
        return sp.nan
    if math.isinf(value):
        return sp.oo if value > 0 else -sp.oo
    if value.is_integer() and abs(value) < 2**53:
        return sp.Integer(int(value))
    return sp.Float(value, precision=53)


class ParameterSpecialisation:
    """The parameters of `ode` for one kernel: `varied` (SBML ids, in table column
    order) are read from the table as p[0], p[1], ...; the others take their SBML
    value, or the one in `fixed_values` (an ensemble's constant columns)."""

    def __init__(self, ode: OdeSystem, varied: tuple[str, ...],
                 fixed_values: dict[str, float] | None = None):
        index = {pid: i for i, pid in enumerate(ode.p_ids)}
        unknown = [v for v in varied if v not in index]
        if unknown:
            raise OptionError("parameters", f"{unknown[0]!r} is not a parameter, initial "
                                            f"value, compartment size or stoichiometry of "
                                            f"model {ode.network.id!r} that the ODE "
                                            f"view leaves free (known: "
                                            f"{', '.join(ode.p_ids[:15])} ...)")
        if len(set(varied)) != len(varied):
            raise OptionError("parameters", f"a parameter is varied twice: {varied}")
        values = {pid: float(v) for pid, v in zip(ode.p_ids, ode.p_values)}
        values.update({k: float(v) for k, v in (fixed_values or {}).items()})
        self.varied = tuple(varied)
        self.p_symbols = tuple(ode.p[index[v]] for v in varied)
        self._fixed: dict[sp.Basic, sp.Basic] = {}
        #: symbol -> number, printed as a literal (fixed parameters and reciprocals)
        self.literals: dict[sp.Symbol, float] = {}
        #: symbol of a literal -> the SBML id it stands for (`1/k` for a reciprocal)
        self.literal_ids: dict[sp.Symbol, str] = {}
        for pid, v in values.items():
            if pid in self.varied:
                continue
            symbol = ode.p[index[pid]]
            if v in (0.0, 1.0, -1.0):
                self._fixed[symbol] = sp.Integer(int(v))
                continue
            self.literals[symbol] = v
            self.literal_ids[symbol] = pid
            inverse = sp.Symbol(f"1/{symbol.name}", real=True)
            self._fixed[sp.Pow(symbol, -1)] = inverse
            self.literals[inverse] = _reciprocal(v)
            self.literal_ids[inverse] = f"1/{pid}"

    def specialise(self, e) -> sp.Basic:
        e = sp.sympify(e)
        if not self._fixed:
            return e
        e = e.xreplace(self._fixed)
        if self.literals and e.has(sp.Pow):
            # exponents as numbers: x**2 is x*x, and d(x**n)/dx = n*x**(n-1), not the
            # n*x**n/x that a symbolic n gives (NaN at x = 0)
            literal = set(self.literals)
            e = e.replace(lambda a: isinstance(a, sp.Pow) and bool(a.exp.free_symbols & literal),
                          lambda a: sp.Pow(a.base, self.numeric(a.exp)))
        return e

    def numeric(self, e) -> sp.Basic:
        """`e` (specialised) with the literals substituted: for numeric evaluation."""
        e = sp.sympify(e)
        if not self.literals:
            return e
        return e.xreplace({s: number(v) for s, v in self.literals.items()})


def _reciprocal(v: float) -> float:
    """1/v as IEEE division gives it (NaN stays NaN, +-inf gives 0)."""
    if math.isnan(v):
        return v
    if math.isinf(v):
        return 0.0
    return 1.0 / v
