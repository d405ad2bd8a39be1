"""SED-ML math (data generators, computeChange, setValue, functionalRange) evaluated with
numpy. The MathML goes through the SBML importer's converter (core/sbml/math.py), so
SED-ML math means what SBML math means; symbols are the element's variables and
parameters."""

from __future__ import annotations

from typing import Mapping

import numpy as np

from ..errors import OptionError, UnsupportedModelError
from .libraries import libsedml


def compile_math(ast, where: str):
    """(function of {name: value}, the names it uses) for a libsedml ASTNode."""
    import libsbml
    import sympy as sp

    from ..sbml.math import convert_math

    if ast is None:
        raise OptionError("math", f"{where}: no math")
    text = libsedml().writeMathMLToString(ast)
    node = libsbml.readMathMLFromString(text)
    if node is None:
        raise OptionError("math", f"{where}: its math cannot be read")
    expr = convert_math(node, where)
    if expr.has(sp.zoo, sp.nan):  # x/0 folds to complex infinity, 0/0 to NaN: lambdify
        # cannot print them (a KeyError reached the user as an internal error)
        raise OptionError("math", f"{where}: its math divides by zero (the value is undefined "
                                  f"whatever the variables)")
    symbols = sorted(expr.free_symbols, key=lambda s: s.name)
    names = [s.name for s in symbols]
    function = sp.lambdify(symbols, expr, modules="numpy")

    def evaluate(values: Mapping[str, object]):
        missing = [n for n in names if n not in values]
        if missing:
            raise OptionError("math", f"{where}: {', '.join(missing)} is not a variable, "
                                      f"parameter or range of this element")
        with np.errstate(all="ignore"):  # NaN/inf are reported as values, as the math says
            return np.asarray(function(*(np.asarray(values[n], dtype=float)
                                         for n in names)), dtype=float)

    return evaluate, names


def evaluate_math(ast, values: Mapping[str, object], where: str) -> np.ndarray:
    try:
        function, _ = compile_math(ast, where)
        return function(values)
    except UnsupportedModelError:
        raise
    except ValueError as exc:  # shapes that do not broadcast
        raise OptionError("math", f"{where}: {exc}") from None
