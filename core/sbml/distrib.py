"""SBML distrib: the csymbols that draw from a distribution, as sympy functions.

The distrib package (L3 v1) adds csymbols `http://www.sbml.org/sbml/symbols/distrib/NAME`
whose value is a fresh random draw each time the math is evaluated. Each becomes a
`Draw` subclass here, with its arguments in one canonical form: the SBML forms with
fewer arguments are completed at import (cauchy(scale) and laplace(scale) have
location 0; an untruncated draw has bounds -oo and oo), so the printers have one
signature per distribution.

Every draw carries a *site* number as its first argument, unique in the model: two
draws in one expression (`normal(0, 1) - normal(0, 1)`) must stay two draws, while
sympy would fold two equal function calls into one (to 0 here) and common
subexpression elimination would merge them. The site number is only that; the
printers do not print it. (Where the ODE view substitutes one initial assignment
into several initial values, the copies keep their site, so one evaluation draws
once for them, as SBML means.)

Truncation bounds are inclusive at both ends (for the discrete distributions this is
what the SBML Test Suite expects: binomial(100, 0.2, 15, 32) has mean 20.60, the mean
on [15, 32]); for a continuous distribution an end has probability 0.
"""

from __future__ import annotations

import itertools

import sympy as sp

from ..errors import SBMLImportError

URL_PREFIX = "http://www.sbml.org/sbml/symbols/distrib/"


class Draw(sp.Function):
    """A random draw: args (site, *parameters, lower, upper) -- the bounds only for
    the distributions SBML lets truncate. Never evaluated, never simplified away."""

    sbml_name = "draw"
    parameters: tuple[str, ...] = ()
    truncatable = True
    # SBML argument counts this csymbol accepts -> how to complete them (below)
    forms: tuple[int, ...] = ()
    is_real = True

    @classmethod
    def eval(cls, *args):
        return None  # a draw has no value until it is drawn

    @property
    def site(self) -> int:
        return int(self.args[0])

    @property
    def params(self) -> tuple[sp.Expr, ...]:
        return tuple(self.args[1:1 + len(self.parameters)])

    @property
    def bounds(self) -> tuple[sp.Expr, sp.Expr]:
        if not self.truncatable:
            return -sp.oo, sp.oo
        return self.args[-2], self.args[-1]

    @classmethod
    def complete(cls, args: list[sp.Expr]) -> list[sp.Expr]:
        """The canonical (parameters..., lower, upper) from SBML's arguments."""
        n = len(cls.parameters)
        if len(args) == n:
            params, bounds = args, [-sp.oo, sp.oo]
        else:  # n + 2: parameters and truncation bounds
            params, bounds = args[:n], args[n:]
        return list(params) + (list(bounds) if cls.truncatable else [])

    def _sympystr(self, printer) -> str:  # readable in messages: normal(0, 1, -oo, oo)
        return f"{self.sbml_name}({', '.join(printer.doprint(a) for a in self.args[1:])})"


def _draw_class(class_name: str, sbml_name: str, parameters: tuple[str, ...],
                forms: tuple[int, ...], truncatable: bool = True) -> type[Draw]:
    nargs = 1 + len(parameters) + (2 if truncatable else 0)
    return type(class_name, (Draw,), {"sbml_name": sbml_name, "parameters": parameters,
                                      "forms": forms, "truncatable": truncatable,
                                      "nargs": nargs})


Normal = _draw_class("Normal", "normal", ("mean", "stdev"), (2, 4))
Uniform = _draw_class("Uniform", "uniform", ("minimum", "maximum"), (2,), truncatable=False)
Bernoulli = _draw_class("Bernoulli", "bernoulli", ("prob",), (1,), truncatable=False)
Binomial = _draw_class("Binomial", "binomial", ("nTrials", "probabilityOfSuccess"), (2, 4))
Cauchy = _draw_class("Cauchy", "cauchy", ("location", "scale"), (1, 2, 4))
ChiSquare = _draw_class("ChiSquare", "chisquare", ("degreesOfFreedom",), (1, 3))
Exponential = _draw_class("Exponential", "exponential", ("rate",), (1, 3))
Gamma = _draw_class("Gamma", "gamma", ("shape", "scale"), (2, 4))
Laplace = _draw_class("Laplace", "laplace", ("location", "scale"), (1, 2, 4))
LogNormal = _draw_class("LogNormal", "lognormal", ("mean", "stdev"), (2, 4))
Poisson = _draw_class("Poisson", "poisson", ("rate",), (1, 3))
Rayleigh = _draw_class("Rayleigh", "rayleigh", ("scale",), (1, 3))

#: SBML csymbol name -> class, for every distribution of distrib L3 v1
DRAWS: dict[str, type[Draw]] = {c.sbml_name: c for c in (
    Normal, Uniform, Bernoulli, Binomial, Cauchy, ChiSquare, Exponential, Gamma, Laplace,
    LogNormal, Poisson, Rayleigh)}
#: the ones whose values are whole numbers
DISCRETE = frozenset({"bernoulli", "binomial", "poisson"})

_sites = itertools.count()


def make_draw(sbml_name: str, args: list[sp.Expr], where: str) -> Draw:
    """The Draw for csymbol `sbml_name` with SBML's `args`; SBMLImportError naming
    `where` for an argument count the csymbol does not have."""
    cls = DRAWS[sbml_name]
    if len(args) not in cls.forms:
        counts = " or ".join(str(n) for n in cls.forms)
        raise SBMLImportError(where, f"distrib csymbol '{sbml_name}' has "
                              f"{len(args)} argument(s); it takes {counts}")
    if sbml_name in ("cauchy", "laplace") and len(args) == 1:
        args = [sp.Integer(0), args[0]]  # the one-argument form is (scale), location 0
    return cls(sp.Integer(next(_sites)), *cls.complete(list(args)))


def draws_in(expr) -> list[Draw]:
    """The draws in `expr` (a sympy expression or anything else: none)."""
    if not isinstance(expr, sp.Basic):
        return []
    return sorted(expr.atoms(Draw), key=lambda d: d.site)


def has_draw(expr) -> bool:
    return isinstance(expr, sp.Basic) and expr.has(Draw)


__all__ = ["Draw", "DRAWS", "DISCRETE", "URL_PREFIX", "make_draw", "draws_in", "has_draw",
           *(c.__name__ for c in DRAWS.values())]
