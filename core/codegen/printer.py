"""sympy -> CUDA C expressions, in double or float precision.

`CudaPrinter` subclasses sympy's C99 printer but uses *only* the `_print_X`
methods written here (see `_print`): anything else -- an SBML csymbol the
kernel cannot evaluate (`rateOf`, `delay`), an unknown function, an integral, a
complex number -- raises `CodegenError` naming it, instead of whatever sympy's
generic printers would make of it.

Choices (each one is checked numerically in tests/test_codegen_printer.py):

- Numbers are always floating literals (`2.0`, `0.5f`), so no expression is
  ever evaluated in integer arithmetic (`1/2` is 0.5, never 0). A Float or a
  Rational prints as the correctly rounded literal of the target precision:
  Python's repr of the double (the shortest text that reads back to the same
  double, at most 17 significant digits), or numpy's for float32.
- Float precision uses the C99 `f`-suffixed functions (`expf`, `powf`, ...)
  and `f`-suffixed literals rather than CUDA's C++ overloads: the precision is
  then visible in the source, does not hang on overload resolution, and one
  stray double literal or call cannot silently promote a float kernel to
  double arithmetic (2x slower on an H100, 64x on consumer GPUs).
- `x**n` for an integer |n| <= POW_INLINE_MAX is a chain of multiplications
  (and one division if n < 0); `x**0.5` is sqrt, `x**-0.5` is 1/sqrt; other
  powers call pow. Every such result is printed parenthesised or as a call.
- Booleans are C int expressions (0/1): a relational is `(a < b)`, And/Or/Not
  are `&&`/`||`/`!`, Xor/Equivalent compare normalised truth values. Used as a
  number a boolean is therefore 0 or 1, as SBML requires (`print_value` makes
  the conversion explicit).
- Piecewise is a nested ternary; when no condition holds and there is no true
  fallback the value is NAN (SBML leaves it undefined; NAN makes it visible).
- oo/-oo print as INFINITY/-INFINITY and nan as NAN. zoo (sympy's unsigned
  complex infinity, what it makes of `1/0` or `-1/0` when it evaluates) also
  prints as NAN: its sign is lost, so either real infinity would be wrong half
  the time, while NAN propagates into a result that is visibly not a number.
  (Build `1/0` unevaluated and it prints as `1.0/0.0`, IEEE +inf.)
- A distrib draw (sbmlgpu.sbml.distrib.Draw) prints as a call of its sampler in
  distrib.cuh, `sbmlgpu_draw_normal(sbmlgpu_draws, mean, sd, lower, upper)`, cast to
  real_t (the samplers compute in double): the kernel that prints one includes
  distrib.cuh and declares `sbmlgpu_draws` where the draw is evaluated.
- Mod(a, b) has sympy's (Python's) sign convention, the sign of b, and is
  computed exactly by the helper `sbmlgpu_mod` in common.cuh; so printed code
  needs common.cuh (every kernel includes it).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Callable, Mapping

import numpy as np
import sympy as sp
from sympy.core.function import AppliedUndef
from sympy.logic.boolalg import Boolean, BooleanAtom, BooleanFunction
from sympy.printing.c import C99CodePrinter
from sympy.printing.precedence import PRECEDENCE, precedence

from ..errors import InternalError, OptionError
from .names import mangle

PRECISIONS = ("double", "float")
#: Largest |n| for which x**n is printed as multiplications instead of pow().
POW_INLINE_MAX = 4

# SBML names of the csymbol functions of ir.py (for messages).
_SBML_FUNCTION_NAMES = {"RateOf": "rateOf()", "Delay": "delay()"}

# sympy function class name -> C function (double); the float name adds 'f'.
_UNARY = {
    "exp": "exp", "sin": "sin", "cos": "cos", "tan": "tan",
    "asin": "asin", "acos": "acos", "atan": "atan",
    "sinh": "sinh", "cosh": "cosh", "tanh": "tanh",
    "asinh": "asinh", "acosh": "acosh", "atanh": "atanh",
    "floor": "floor", "ceiling": "ceil", "Abs": "fabs", "gamma": "tgamma",
}
# Reciprocal functions: f(x) = 1/g(x).
_RECIPROCAL = {"sec": "cos", "csc": "sin", "cot": "tan",
               "sech": "cosh", "csch": "sinh", "coth": "tanh"}
# Inverse reciprocal functions: f(x) = g(1/x) (sympy's conventions for real x).
_INVERSE_RECIPROCAL = {"asec": "acos", "acsc": "asin", "acot": "atan",
                       "asech": "acosh", "acsch": "asinh", "acoth": "atanh"}


class CodegenError(InternalError):
    """A construct a code generator cannot turn into correct code (`who` names the
    generator: the CUDA one, or a Python one built on it). A bug in sbmlgpu, not a
    refusal of the model: what a backend cannot simulate it refuses in supports()
    before any code is generated."""

    def __init__(self, construct: str, where: tuple[str, ...] | list[str] = (),
                 who: str = "the CUDA code generator"):
        self.construct = construct
        self.where = tuple(where)
        self.who = who
        at = f" (in {', '.join(self.where)})" if self.where else ""
        super().__init__(f"{who} cannot print {construct}{at}: this is a bug in sbmlgpu; "
                         f"please report it with the model")

    def at(self, where: str) -> "CodegenError":
        """The same error, naming the model element it came from."""
        return CodegenError(self.construct, (where,), self.who)

    def by(self, who: str) -> "CodegenError":
        """The same error, naming another generator."""
        return CodegenError(self.construct, self.where, who)


class CudaPrinter(C99CodePrinter):
    """Print sympy expressions as CUDA C.

    symbols: {sympy.Symbol: C text}, e.g. {x1: 'x[0]', k: 'p[3]', TIME: 't'}.
    precision: 'double' or 'float'.
    unmapped: what to do with a symbol missing from `symbols`: 'mangle' prints
        its C-safe name (for local variables the template declares), 'raise'
        raises CodegenError.
    """

    printmethod = "_cudacode"  # no sympy class defines this: nothing prints itself
    language = "CUDA"
    generator = "the CUDA code generator"  # who refuses, in a CodegenError
    # C spellings that the Python printers (numpy_printer.py) replace
    TRUE, FALSE = "true", "false"

    def __init__(self, symbols: Mapping[sp.Basic, str] | None = None,
                 precision: str = "double", unmapped: str = "mangle"):
        if precision not in PRECISIONS:
            raise OptionError("precision", f"{precision!r} is not one of: double, float")
        if unmapped not in ("mangle", "raise"):
            raise ValueError(f"unmapped must be 'mangle' or 'raise', not {unmapped!r}")
        super().__init__({"strict": False})
        self.symbols = dict(symbols or {})
        self.precision = precision
        self.unmapped = unmapped
        self._suffix = "f" if precision == "float" else ""

    # -- public API ------------------------------------------------------------
    @property
    def real_type(self) -> str:
        return "double" if self.precision == "double" else "float"

    def doprint(self, expr, assign_to=None, where: str | None = None) -> str:
        """C text of `expr` (numeric or boolean as it is). `where` names the model
        element in a CodegenError."""
        if assign_to is not None:
            raise ValueError("CudaPrinter prints expressions; use cse.py for statements")
        try:
            return self._print(sp.sympify(expr))
        except CodegenError as e:
            e = e.at(where) if where else e
            raise (e if e.who == self.generator else e.by(self.generator)) from None

    def print_value(self, expr, where: str | None = None) -> str:
        """C text of `expr` as a real number; a boolean becomes 1 or 0."""
        expr = sp.sympify(expr)
        text = self.doprint(expr, where=where)
        if is_boolean(expr):
            return self._conditional(text, self.literal(1), self.literal(0))
        return text

    def print_condition(self, expr, where: str | None = None) -> str:
        """C text of `expr` as a truth value; a number is true when non-zero."""
        expr = sp.sympify(expr)
        return self.doprint(expr, where=where) if is_boolean(expr) else \
            f"({self.doprint(expr, where=where)} != {self.literal(0)})"

    def literal(self, value: float) -> str:
        """A floating literal of the printer's precision, correctly rounded."""
        value = float(value)
        if math.isnan(value):
            return "NAN"
        if self.precision == "float":
            with np.errstate(over="ignore"):
                value32 = np.float32(value)
            if math.isinf(value32):
                return "INFINITY" if value32 > 0 else "-INFINITY"
            text = str(value32)
        else:
            if math.isinf(value):
                return "INFINITY" if value > 0 else "-INFINITY"
            text = repr(value)
        if not any(c in text for c in ".e"):
            text += ".0"
        return text + self._suffix

    def function(self, name: str) -> str:
        """The C math function `name` (double spelling) in this precision."""
        return name + self._suffix

    # -- dispatch: only methods written in this module -----------------------
    def _print(self, expr, **kwargs) -> str:
        if isinstance(expr, str):
            return expr
        method = _dispatch(type(self), type(expr))
        if method is None:
            raise CodegenError(_construct_name(expr))
        return method(self, expr, **kwargs)

    def parenthesize(self, item, level, strict=False):
        text = self._print(item)
        p = precedence(item)
        if p < level or (strict and p == level):
            return f"({text})"
        return text

    # -- atoms -------------------------------------------------------------------
    def _print_Symbol(self, expr):
        if expr in self.symbols:
            return self.symbols[expr]
        if self.unmapped == "raise":
            raise CodegenError(f"symbol {expr.name!r} (no value for it in this kernel)")
        if isinstance(expr, sp.Dummy):  # dummies with equal names are different symbols
            return mangle(f"{expr.name}#{expr.dummy_index}")
        return mangle(expr.name)

    def _print_Integer(self, expr):
        try:
            return self.literal(float(expr.p))
        except OverflowError:
            return self.literal(math.inf if expr.p > 0 else -math.inf)

    def _print_Rational(self, expr):
        return self.literal(float(expr))

    def _print_Float(self, expr):
        return self.literal(float(expr))

    def _print_NumberSymbol(self, expr):  # pi, E, EulerGamma, GoldenRatio, Catalan
        return self.literal(float(expr))

    def _print_Infinity(self, expr):
        return self.literal(math.inf)

    def _print_NegativeInfinity(self, expr):
        return self.literal(-math.inf)

    def _print_NaN(self, expr):
        return self.literal(math.nan)

    def _print_ComplexInfinity(self, expr):
        return self.literal(math.nan)  # unsigned: see the module docstring

    def _print_BooleanTrue(self, expr):
        return self.TRUE

    def _print_BooleanFalse(self, expr):
        return self.FALSE

    # -- arithmetic --------------------------------------------------------------
    def _print_Add(self, expr):
        terms = [self._print(a) for a in expr.args]
        out = terms[0]
        for t in terms[1:]:
            out += f" - {t[1:]}" if t.startswith("-") else f" + {t}"
        return out

    def _print_Mul(self, expr):
        coeff, rest = expr.as_coeff_Mul()
        sign = ""
        if coeff.is_extended_negative:
            coeff, sign = -coeff, "-"
        numerator: list[sp.Basic] = []
        denominator: list[sp.Basic] = []
        if coeff.is_Rational:
            if coeff.p != 1:
                numerator.append(sp.Integer(coeff.p))
            if coeff.q != 1:
                denominator.append(sp.Integer(coeff.q))
        elif coeff != 1:
            numerator.append(coeff)
        for factor in sp.Mul.make_args(rest):
            if factor.is_Pow and factor.exp.is_Number and factor.exp.is_extended_negative \
                    and factor.exp is not sp.S.NegativeInfinity:
                denominator.append(sp.Pow(factor.base, -factor.exp))
            else:
                numerator.append(factor)
        mul = PRECEDENCE["Mul"]
        num = "*".join(self.parenthesize(f, mul) for f in numerator) or self.literal(1)
        if not denominator:
            return sign + num
        if len(denominator) == 1:
            den = self.parenthesize(denominator[0], mul, strict=True)
        else:
            den = "(" + "*".join(self.parenthesize(f, mul) for f in denominator) + ")"
        return f"{sign}{num}/{den}"

    def _print_Pow(self, expr):
        base, exponent = expr.base, expr.exp
        if base is sp.S.Exp1:
            return f"{self.function('exp')}({self._print(exponent)})"
        if exponent.is_Number and exponent.is_finite:
            value = float(exponent)
            if value.is_integer() and abs(value) <= POW_INLINE_MAX:
                n = int(value)
                if n == 0:
                    return self.literal(1)
                factor = self.parenthesize(base, PRECEDENCE["Pow"])
                product = "*".join([factor] * abs(n))
                if n > 0:
                    return f"({product})" if n > 1 else factor
                return f"({self.literal(1)}/{product if n == -1 else f'({product})'})"
            if value == 0.5:
                return f"{self.function('sqrt')}({self._print(base)})"
            if value == -0.5:
                return f"({self.literal(1)}/{self.function('sqrt')}({self._print(base)}))"
        return f"{self.function('pow')}({self._print(base)}, {self._print(exponent)})"

    # -- functions ---------------------------------------------------------------
    def _print_Function(self, expr):
        name = type(expr).__name__
        if isinstance(expr, AppliedUndef):  # a user function, even one called `exp`
            raise CodegenError(_construct_name(expr))
        if name in _UNARY:
            return self._call(_UNARY[name], expr.args)
        if name in _RECIPROCAL:
            return f"({self.literal(1)}/{self._call(_RECIPROCAL[name], expr.args)})"
        if name in _INVERSE_RECIPROCAL:
            (arg,) = expr.args
            inner = f"{self.literal(1)}/{self.parenthesize(arg, PRECEDENCE['Mul'], strict=True)}"
            return f"{self.function(_INVERSE_RECIPROCAL[name])}({inner})"
        raise CodegenError(_construct_name(expr))

    #: the C name of the pointer to the draw stream (distrib.cuh) in printed draws
    DRAWS = "sbmlgpu_draws"

    def _print_Draw(self, expr):
        args = ", ".join([self.DRAWS, *(self._print(a) for a in expr.args[1:])])
        return f"(({self.real_type})sbmlgpu_draw_{expr.sbml_name}({args}))"

    def _print_log(self, expr):
        if len(expr.args) == 2:  # log(x, b), if built unevaluated
            x, b = expr.args
            return f"({self._call('log', (x,))}/{self._call('log', (b,))})"
        return self._call("log", expr.args)

    def _print_factorial(self, expr):
        (n,) = expr.args
        return f"{self.function('tgamma')}({self._print(n)} + {self.literal(1)})"

    def _print_sign(self, expr):
        (x,) = expr.args
        a = self._print(x)
        zero = self.literal(0)
        return self._conditional(f"({a}) > {zero}", self.literal(1),
                                 self._conditional(f"({a}) < {zero}", self.literal(-1), zero))

    def _print_Min(self, expr):
        return self._fold("fmin", expr.args)

    def _print_Max(self, expr):
        return self._fold("fmax", expr.args)

    def _print_Mod(self, expr):
        a, b = expr.args
        helper = "sbmlgpu_modf" if self.precision == "float" else "sbmlgpu_mod"
        return f"{helper}({self._print(a)}, {self._print(b)})"

    def _print_Piecewise(self, expr):
        pieces = []
        for value, cond in expr.args:
            pieces.append((value, cond))
            if cond is sp.true:
                break
        if pieces[-1][1] is sp.true:
            out = self._print(pieces.pop()[0])
        else:
            out = self.literal(math.nan)
        for value, cond in reversed(pieces):
            out = self._conditional(self._print(cond), self._print(value), out)
        return out

    def _print_ITE(self, expr):
        c, a, b = expr.args
        return self._conditional(self._print(c), self._print(a), self._print(b))

    # -- logic -------------------------------------------------------------------
    def _print_Relational(self, expr):
        op = {"==": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}.get(expr.rel_op)
        if op is None:
            raise CodegenError(f"relation {expr.rel_op}")
        return f"({self._print(expr.lhs)} {op} {self._print(expr.rhs)})"

    def _print_And(self, expr):
        return self._all([self._truth(a) for a in expr.args])

    def _print_Or(self, expr):
        return self._any([self._truth(a) for a in expr.args])

    def _print_Not(self, expr):
        return f"({self._negate(self._truth(expr.args[0]))})"

    def _print_Xor(self, expr):  # true when an odd number of arguments are true
        out = self._truth(expr.args[0])
        for a in expr.args[1:]:
            out = f"({out} != {self._truth(a)})"
        return out

    def _print_Implies(self, expr):
        a, b = expr.args
        return self._any([self._negate(self._truth(a)), self._truth(b)])

    def _print_Equivalent(self, expr):  # all true or all false
        first = self._truth(expr.args[0])
        return self._all([f"({first} == {self._truth(a)})" for a in expr.args[1:]])

    def _print_Nand(self, expr):
        return f"({self._negate(self._print_And(expr))})"

    def _print_Nor(self, expr):
        return f"({self._negate(self._print_Or(expr))})"

    # -- C's conditional and logical operators (the Python printers respell them) --
    CONDITIONAL = "({condition} ? {a} : {b})"
    AND, OR, NOT = " && ", " || ", "!"

    def _conditional(self, condition: str, a: str, b: str) -> str:
        return self.CONDITIONAL.format(condition=condition, a=a, b=b)

    def _all(self, truths: list[str]) -> str:
        return "(" + self.AND.join(truths) + ")"

    def _any(self, truths: list[str]) -> str:
        return "(" + self.OR.join(truths) + ")"

    def _negate(self, truth: str) -> str:
        return self.NOT + truth

    # -- helpers -----------------------------------------------------------------
    def _call(self, name: str, args) -> str:
        return f"{self.function(name)}({', '.join(self._print(a) for a in args)})"

    def _fold(self, name: str, args) -> str:
        args = list(args)
        out = self._print(args[-1])
        for a in reversed(args[:-1]):
            out = f"{self.function(name)}({self._print(a)}, {out})"
        return out

    def _truth(self, expr) -> str:
        """A 0/1 truth value, so that Xor and == compare truth, not numbers."""
        if is_boolean(expr):
            return self._print(expr)
        return f"({self._print(expr)} != {self.literal(0)})"


def is_boolean(expr) -> bool:
    """True for a truth-valued expression (a relational, And/Or/..., true/false, or a
    Piecewise whose values all are). A Symbol is a number here, although sympy
    also lets it stand in boolean positions."""
    if isinstance(expr, sp.Piecewise):
        return all(is_boolean(value) for value, _ in expr.args)
    return isinstance(expr, (Boolean, BooleanAtom, BooleanFunction)) and \
        not isinstance(expr, sp.Symbol)


def _construct_name(expr) -> str:
    name = type(expr).__name__
    if name in _SBML_FUNCTION_NAMES:
        return _SBML_FUNCTION_NAMES[name]
    if isinstance(expr, (sp.Function, AppliedUndef)):
        return f"function {name}()"
    return name


@lru_cache(maxsize=None)
def _dispatch(printer_class, expr_class) -> Callable | None:
    """The printing method for `expr_class`: the first class in its MRO that has a
    `_print_X` written in this module (or a subclass), else None."""
    for cls in expr_class.__mro__:
        method = _own_method(printer_class, "_print_" + cls.__name__)
        if method is not None:
            return method
    return None


def _own_method(cls, name: str) -> Callable | None:
    """`name` if CudaPrinter (or a subclass of it) defines it, else None."""
    for klass in cls.__mro__:
        if name in vars(klass):
            return vars(klass)[name]
        if klass is CudaPrinter:
            return None
    return None


def print_expr(expr, symbols: Mapping[sp.Basic, str] | None = None,
               precision: str = "double", where: str | None = None) -> str:
    """One-off printing: `CudaPrinter(symbols, precision).doprint(expr)`."""
    return CudaPrinter(symbols, precision).doprint(expr, where=where)
