"""libsbml MathML AST -> sympy.

SBML math mixes numbers and booleans freely (true is 1 in arithmetic, a nonzero
number is true in a condition), while sympy keeps them apart. So every node is
converted as it is, and coerced where it is used: `as_number` turns a boolean b
into Piecewise((1, b), (0, True)); `as_bool` turns a number x into x != 0.

Function definitions are inlined by libsbml before this runs; a call that is
left (a function we do not know) is an UnsupportedModelError naming it.
"""

from __future__ import annotations

import math
import sys

import libsbml
import sympy as sp
from sympy.core.relational import Relational
from sympy.logic.boolalg import Boolean, BooleanAtom, BooleanFunction

from ..errors import UnsupportedModelError
from ..ir import AVOGADRO_VALUE, TIME, Delay, RateOf, sym
from .distrib import DRAWS, URL_PREFIX, make_draw


class MathContext:
    """Where an expression comes from, for error messages."""

    def __init__(self, where: str):
        self.where = where

    def unsupported(self, what: str) -> UnsupportedModelError:
        return UnsupportedModelError({what: (self.where,)}, who="the SBML importer")


def is_boolean(e) -> bool:
    # not isinstance(e, Boolean): sympy's Symbol is a Boolean too
    return isinstance(e, (BooleanAtom, Relational, BooleanFunction))


def as_number(e: sp.Basic) -> sp.Expr:
    if is_boolean(e):
        if e is sp.true:
            return sp.Integer(1)
        if e is sp.false:
            return sp.Integer(0)
        return sp.Piecewise((sp.Integer(1), e), (sp.Integer(0), True))
    return e


def as_bool(e: sp.Basic) -> Boolean:
    if is_boolean(e):
        return e
    if e.is_number:
        if e is sp.nan:
            return sp.true  # NaN is nonzero, and C agrees: (NaN != 0) is true
        return sp.true if e != 0 else sp.false
    return sp.Ne(e, 0, evaluate=False)


_UNARY = {
    libsbml.AST_FUNCTION_ABS: sp.Abs,
    libsbml.AST_FUNCTION_ARCCOS: sp.acos,
    libsbml.AST_FUNCTION_ARCCOSH: sp.acosh,
    libsbml.AST_FUNCTION_ARCCOT: sp.acot,
    libsbml.AST_FUNCTION_ARCCOTH: sp.acoth,
    libsbml.AST_FUNCTION_ARCCSC: sp.acsc,
    libsbml.AST_FUNCTION_ARCCSCH: sp.acsch,
    libsbml.AST_FUNCTION_ARCSEC: sp.asec,
    libsbml.AST_FUNCTION_ARCSECH: sp.asech,
    libsbml.AST_FUNCTION_ARCSIN: sp.asin,
    libsbml.AST_FUNCTION_ARCSINH: sp.asinh,
    libsbml.AST_FUNCTION_ARCTAN: sp.atan,
    libsbml.AST_FUNCTION_ARCTANH: sp.atanh,
    libsbml.AST_FUNCTION_CEILING: sp.ceiling,
    libsbml.AST_FUNCTION_COS: sp.cos,
    libsbml.AST_FUNCTION_COSH: sp.cosh,
    libsbml.AST_FUNCTION_COT: sp.cot,
    libsbml.AST_FUNCTION_COTH: sp.coth,
    libsbml.AST_FUNCTION_CSC: sp.csc,
    libsbml.AST_FUNCTION_CSCH: sp.csch,
    libsbml.AST_FUNCTION_EXP: sp.exp,
    libsbml.AST_FUNCTION_FACTORIAL: sp.factorial,
    libsbml.AST_FUNCTION_FLOOR: sp.floor,
    libsbml.AST_FUNCTION_LN: sp.log,
    libsbml.AST_FUNCTION_SEC: sp.sec,
    libsbml.AST_FUNCTION_SECH: sp.sech,
    libsbml.AST_FUNCTION_SIN: sp.sin,
    libsbml.AST_FUNCTION_SINH: sp.sinh,
    libsbml.AST_FUNCTION_TAN: sp.tan,
    libsbml.AST_FUNCTION_TANH: sp.tanh,
}

_RELATIONAL = {
    libsbml.AST_RELATIONAL_EQ: sp.Eq,
    libsbml.AST_RELATIONAL_NEQ: sp.Ne,
    libsbml.AST_RELATIONAL_GT: sp.Gt,
    libsbml.AST_RELATIONAL_GEQ: sp.Ge,
    libsbml.AST_RELATIONAL_LT: sp.Lt,
    libsbml.AST_RELATIONAL_LEQ: sp.Le,
}


def _number(value: float) -> sp.Expr:
    if math.isnan(value):
        return sp.nan
    if math.isinf(value):
        return sp.oo if value > 0 else -sp.oo
    if value == int(value) and abs(value) < 2**53:
        return sp.Integer(int(value))
    # the double as an exact rational: sympy folds literal numbers as it builds an
    # expression (0.1 * 3 becomes one number), and Floats fold with rounding to 53
    # bits; rationals fold exactly, so the expression keeps the file's exact value
    # (printers round each folded constant once; interval code encloses it)
    return sp.Rational(value)


#: digits of a function of literal numbers evaluated at import (below)
NUMERIC_DIGITS = 40


def _numeric(e: sp.Expr) -> sp.Expr:
    """A function of literal numbers that sympy keeps symbolic (acos(1/2) = pi/3,
    atan(14/5), 2**(1/3)) as a number: 40 digits, far beyond a double, so printers
    round it once and interval code (which encloses a Float of more than 53 bits by its
    neighbouring doubles) stays sound; kept symbolic, such constants make the
    algebraic-rule solver and every later simplification slow.

    A function of literal numbers with no real value (sqrt(-4), ln(-4), acos(2),
    (-8)^(1/3)) is NaN, as the double arithmetic SBML prescribes makes it (sympy
    would continue into the complex numbers, which no backend can print); a run
    flags the NaN where it reaches a state."""
    if isinstance(e, sp.Expr) and e.is_number and e.is_finite and e.is_extended_real is False:
        return sp.nan  # (decided without evaluating: sqrt(-4) is 2*I)
    if isinstance(e, sp.Expr) and e.is_number and not e.is_Rational and e.is_finite is not False \
            and not e.free_symbols:
        value = e.evalf(NUMERIC_DIGITS)
        if value.is_Float and e.is_finite:
            if abs(value) > sys.float_info.max:  # beyond a double: what C computes
                return sp.oo if value > 0 else -sp.oo
            return value
        if value.is_number and sp.im(value) != 0:  # acos(2): complex once evaluated
            return sp.nan
    return e


def _odd(b: float) -> bool:
    return b == int(b) and int(b) % 2 == 1


# Functions of literal numbers whose exact value can outgrow a double by far: the
# double function (OverflowError past the largest double) and the sign of the
# infinity C gets then. sympy would compute exp(exp(exp(...))), 10^(10^10) or
# factorial(10^9) exactly or to 40 digits, which takes hours.
_IN_DOUBLES = {
    sp.Pow: (math.pow, lambda a, b: -1 if a < 0 and _odd(b) else 1),
    sp.exp: (math.exp, lambda a: 1),
    sp.factorial: (lambda n: math.gamma(n + 1), lambda n: 1),
    sp.sinh: (math.sinh, lambda a: -1 if a < 0 else 1),
    sp.cosh: (math.cosh, lambda a: 1),
}


def _overflowing(f, *args) -> sp.Expr | None:
    """±oo where f of these literal numbers overflows a double, as the double
    arithmetic SBML prescribes gives; None otherwise (f is then built as usual)."""
    if f not in _IN_DOUBLES or not all(a.is_number and a.is_extended_real and a.is_finite
                                       for a in args):
        return None
    function, sign = _IN_DOUBLES[f]
    try:
        values = [float(a) for a in args]
        function(*values)
    except OverflowError:
        return sp.oo if sign(*values) > 0 else -sp.oo
    except (ValueError, ZeroDivisionError, TypeError):
        pass
    return None


def _compare(rel, a, b):
    """rel(a, b), with IEEE rules where sympy refuses to order: a comparison with
    NaN (or complex infinity, from a literal 1/0) is false, except '!='."""
    undefined = (sp.nan, sp.zoo)
    if a in undefined or b in undefined:
        return sp.true if rel is sp.Ne else sp.false
    try:
        return rel(a, b)
    except TypeError:
        return rel(a, b, evaluate=False)


def _trunc(x: sp.Expr) -> sp.Expr:
    """Rounding toward zero, written with floor so every printer can print it."""
    return sp.sign(x) * sp.floor(sp.Abs(x))


_ASSOCIATIVE = (libsbml.AST_PLUS, libsbml.AST_TIMES, libsbml.AST_LOGICAL_AND, libsbml.AST_LOGICAL_OR)


def _operands(node: libsbml.ASTNode) -> list[libsbml.ASTNode]:
    """The operands of an associative operator, nested applications of the same
    operator merged, without recursion: libsbml reads an n-ary <plus/> as a chain of
    binary nodes, so a flat sum of a few hundred terms is as deep as it is long."""
    t = node.getType()
    out, todo = [], [node]
    while todo:
        n = todo.pop()
        if n.getType() == t and (n is node or n.getNumChildren() >= 2):
            todo.extend(n.getChild(i) for i in reversed(range(n.getNumChildren())))
        else:
            out.append(n)
    return out


def _rem(a: sp.Expr, b: sp.Expr) -> sp.Expr:
    """rem(a, b) = a - b*trunc(a/b), C's fmod. A literal 0 divisor gives NaN (fmod's
    value): written out, sympy would fold 0*trunc(a/0) to 0 and return a."""
    if b.is_zero:
        return sp.nan
    return a - b * _trunc(a / b)


def _distrib_name(node: libsbml.ASTNode) -> str | None:
    """The distrib csymbol a node calls (libsbml types them when the package is
    enabled; otherwise its definitionURL says), or None."""
    url = node.getDefinitionURLString() if node.getType() in _DISTRIB_TYPES or \
        node.getType() == libsbml.AST_FUNCTION else ""
    if url.startswith(URL_PREFIX) and url[len(URL_PREFIX):] in DRAWS:
        return url[len(URL_PREFIX):]
    return _DISTRIB_TYPES.get(node.getType())


_DISTRIB_TYPES = {getattr(libsbml, f"AST_DISTRIB_FUNCTION_{name.upper()}"): name
                  for name in DRAWS if hasattr(libsbml, f"AST_DISTRIB_FUNCTION_{name.upper()}")}


class MathConverter:
    def __init__(self, ctx: MathContext):
        self.ctx = ctx

    def convert(self, node: libsbml.ASTNode) -> sp.Basic:
        t = node.getType()
        if t in _ASSOCIATIVE:
            kids = _operands(node)
        else:
            kids = [node.getChild(i) for i in range(node.getNumChildren())]

        # numbers and constants
        if t == libsbml.AST_INTEGER:
            return sp.Integer(node.getInteger())
        if t in (libsbml.AST_REAL, libsbml.AST_REAL_E):
            return _number(node.getReal())
        if t == libsbml.AST_RATIONAL:
            return sp.Rational(node.getNumerator(), node.getDenominator())
        if t == libsbml.AST_CONSTANT_E:
            return sp.E
        if t == libsbml.AST_CONSTANT_PI:
            return sp.pi
        if t == libsbml.AST_CONSTANT_TRUE:
            return sp.true
        if t == libsbml.AST_CONSTANT_FALSE:
            return sp.false
        if t == libsbml.AST_NAME_TIME:
            return TIME
        if t == libsbml.AST_NAME_AVOGADRO:
            return sp.Float(AVOGADRO_VALUE)
        if t == libsbml.AST_NAME:
            return sym(node.getName())

        num = lambda k: as_number(self.convert(k))  # noqa: E731
        boo = lambda k: as_bool(self.convert(k))  # noqa: E731

        # arithmetic
        if t == libsbml.AST_PLUS:
            return sp.Add(*[num(k) for k in kids]) if kids else sp.Integer(0)
        if t == libsbml.AST_MINUS:
            if len(kids) == 1:
                return -num(kids[0])
            self._arity(node, kids, 2)
            return num(kids[0]) - num(kids[1])
        if t == libsbml.AST_TIMES:
            return sp.Mul(*[num(k) for k in kids]) if kids else sp.Integer(1)
        if t == libsbml.AST_DIVIDE:
            self._arity(node, kids, 2)
            return num(kids[0]) / num(kids[1])
        if t in (libsbml.AST_POWER, libsbml.AST_FUNCTION_POWER):
            self._arity(node, kids, 2)
            return self._apply(sp.Pow, num(kids[0]), num(kids[1]))
        if t == libsbml.AST_FUNCTION_ROOT:
            if len(kids) == 1:
                return _numeric(sp.sqrt(num(kids[0])))
            self._arity(node, kids, 2)
            return _numeric(sp.Pow(num(kids[1]), 1 / num(kids[0])))
        if t == libsbml.AST_FUNCTION_LOG:
            if len(kids) == 1:
                return _numeric(sp.log(num(kids[0]), 10))
            self._arity(node, kids, 2)
            return _numeric(sp.log(num(kids[1]), num(kids[0])))
        if t in _UNARY:
            self._arity(node, kids, 1)
            return self._apply(_UNARY[t], num(kids[0]))
        if t == libsbml.AST_FUNCTION_MAX:
            return sp.Max(*[num(k) for k in kids]) if kids else -sp.oo
        if t == libsbml.AST_FUNCTION_MIN:
            return sp.Min(*[num(k) for k in kids]) if kids else sp.oo
        if t == libsbml.AST_FUNCTION_QUOTIENT:
            self._arity(node, kids, 2)
            return sp.floor(num(kids[0]) / num(kids[1]))
        if t == libsbml.AST_FUNCTION_REM:
            self._arity(node, kids, 2)
            return _rem(num(kids[0]), num(kids[1]))

        # logic
        if t == libsbml.AST_LOGICAL_AND:
            return sp.And(*[boo(k) for k in kids])
        if t == libsbml.AST_LOGICAL_OR:
            return sp.Or(*[boo(k) for k in kids])
        if t == libsbml.AST_LOGICAL_XOR:
            return sp.Xor(*[boo(k) for k in kids])
        if t == libsbml.AST_LOGICAL_NOT:
            self._arity(node, kids, 1)
            return sp.Not(boo(kids[0]))
        if t == libsbml.AST_LOGICAL_IMPLIES:
            self._arity(node, kids, 2)
            return sp.Implies(boo(kids[0]), boo(kids[1]))
        if t in _RELATIONAL:
            return self._relational(_RELATIONAL[t], [num(k) for k in kids])
        if t == libsbml.AST_FUNCTION_PIECEWISE:
            return self._piecewise(kids)

        # csymbols
        if t == libsbml.AST_FUNCTION_DELAY:
            self._arity(node, kids, 2)
            return Delay(num(kids[0]), num(kids[1]))
        if t == libsbml.AST_FUNCTION_RATE_OF:
            self._arity(node, kids, 1)
            if kids[0].getType() != libsbml.AST_NAME:
                raise self.ctx.unsupported("rateOf of an expression (SBML allows only an identifier)")
            return RateOf(sym(kids[0].getName()))

        name = _distrib_name(node)
        if name is not None:
            return make_draw(name, [num(k) for k in kids], self.ctx.where)

        if t == libsbml.AST_FUNCTION:
            raise self.ctx.unsupported(f"call of undefined function '{node.getName()}'")
        if t == libsbml.AST_LAMBDA:
            raise self.ctx.unsupported("lambda outside a function definition")
        name = node.getName() or libsbml.formulaToL3String(node) or f"AST type {t}"
        raise self.ctx.unsupported(f"MathML element '{name}'")

    @staticmethod
    def _apply(f, *args) -> sp.Expr:
        """f(*args), folded to a number (or ±oo) where the args are numbers."""
        overflow = _overflowing(f, *args)
        return overflow if overflow is not None else _numeric(f(*args))

    def _arity(self, node, kids, n):
        if len(kids) != n:
            what = node.getName() or libsbml.formulaToL3String(node)
            raise self.ctx.unsupported(f"'{what}' with {len(kids)} arguments (expects {n})")

    def _relational(self, rel, args):
        if len(args) < 2:
            raise self.ctx.unsupported(f"relational with {len(args)} argument(s)")
        parts = [_compare(rel, a, b) for a, b in zip(args, args[1:])]
        return parts[0] if len(parts) == 1 else sp.And(*parts)

    def _piecewise(self, kids):
        pieces = []
        for i in range(0, len(kids) - 1, 2):
            pieces.append((self.convert(kids[i]), as_bool(self.convert(kids[i + 1]))))
        otherwise = self.convert(kids[-1]) if len(kids) % 2 == 1 else None
        values = [v for v, _ in pieces] + ([otherwise] if otherwise is not None else [])
        if values and all(is_boolean(v) for v in values):
            # a piecewise of booleans is a boolean: (c1 and v1) or (!c1 and c2 and v2) ...
            terms, before = [], []
            for v, c in pieces:
                terms.append(sp.And(*before, c, v))
                before.append(sp.Not(c))
            if otherwise is not None:
                terms.append(sp.And(*before, otherwise))
            return sp.Or(*terms)
        args = [(as_number(v), c) for v, c in pieces]
        # no otherwise: SBML leaves the value undefined; NaN makes that visible
        args.append((as_number(otherwise) if otherwise is not None else sp.nan, True))
        return sp.Piecewise(*args)


def convert_math(node: libsbml.ASTNode | None, where: str, *, boolean: bool = False):
    """MathML -> sympy; `boolean` for triggers and other conditions."""
    if node is None:
        return None
    e = MathConverter(MathContext(where)).convert(node)
    return as_bool(e) if boolean else as_number(e)
