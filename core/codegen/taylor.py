"""Interval Taylor coefficients of x' = f(x, c, t), generated from the sympy rhs.

The interval backend encloses ODE solutions by Taylor series. Their coefficients
come from automatic-differentiation recurrences (Moore 1966; Griewank, "Evaluating
derivatives", ch. 13): with x[k] the k-th Taylor coefficient of x(t) about t0,
x[k+1] = f(x, c, t)[k] / (k + 1), and f[k] follows from the coefficients 0..k of
its operands, node by node of the expression DAG:

    u + v, u - v   w[k] = u[k] +- v[k]
    u * v          w[k] = sum_{j<=k} u[j] v[k-j]
    u / v          w[k] = (u[k] - sum_{1<=j<=k} v[j] w[k-j]) / v[0]
    exp u          w[k] = (1/k) sum_{1<=j<=k} j u[j] w[k-j]
    log u          w[k] = (u[k] - (1/k) sum_{1<=j<k} j w[j] u[k-j]) / u[0]
    u ** a         w[k] = (1/(k u[0])) sum_{0<=j<k} (a (k-j) - j) u[k-j] w[j]
    sqrt u         w[k] = (u[k] - sum_{1<=j<k} w[j] w[k-j]) / (2 w[0])
    sin u, cos u   s[k] = (1/k) sum j u[j] c[k-j],  c[k] = -(1/k) sum j u[j] s[k-j]

Every operation is interval arithmetic rounded outward (interval.cuh), so the
coefficients enclose those of every solution through the input box; the
recurrences themselves live in taylor.cuh, this module writes the call sequence.

`TaylorFunction` turns a list of expressions into one C function

    void NAME(int K, ival *x, const ival *c, ival t0)

that fills x[k*dim + i] for k = 1..K from x[0*dim + i] (the series inputs: states,
and any extra series such as the variational matrix), with constants c (parameters
as intervals or points) and time t = t0 + s (t0 an interval). Nodes that depend on
no series input are computed once, before the loop over k. With K = 0 the function
only evaluates the constants; `interval_values` writes plain interval evaluation
(order 0) of other expressions (outputs, initial values) with the same DAG builder.

Non-smooth or discontinuous constructs (piecewise, min/max, abs, floor, relations)
have no Taylor expansion: they raise TaylorError naming the construct, which the
backend turns into an UnsupportedModelError.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import sympy as sp

from ..errors import SbmlGpuError

class TaylorError(SbmlGpuError):
    """An expression with a construct that has no Taylor expansion here."""

    def __init__(self, construct: str, where: str = ""):
        self.construct = construct
        self.where = where
        super().__init__(f"{construct} has no interval Taylor expansion"
                         + (f" (in {where})" if where else ""))


@dataclass(frozen=True)
class Node:
    """One DAG node: `op` over node indices `args`; `series` False: a constant
    interval (no dependence on the series inputs or on time)."""

    op: str
    args: tuple[int, ...]
    series: bool
    text: str = ""  # "input"/"const" nodes: the C expression of the value
    exponent: str = ""  # "powc": the C expression of the (constant) exponent


@dataclass
class Dag:
    """Expression DAG with structural sharing (sympy expressions are hashable)."""

    series_inputs: Mapping[sp.Symbol, str]  # symbol -> C expression of coefficient j: "{j}"
    constants: Mapping[sp.Symbol, str]  # symbol -> C expression of an ival
    time: sp.Symbol | None = None
    nodes: list[Node] = field(default_factory=list)
    _memo: dict = field(default_factory=dict)
    where: str = ""

    def add(self, node: Node) -> int:
        key = (node.op, node.args, node.text, node.exponent)
        if key not in self._memo:
            self._memo[key] = len(self.nodes)
            self.nodes.append(node)
        return self._memo[key]

    def const(self, text: str) -> int:
        return self.add(Node("const", (), False, text))

    def number(self, value) -> int:
        return self.const(interval_literal(value))

    def op(self, op: str, *args: int, exponent: str = "") -> int:
        series = any(self.nodes[a].series for a in args)
        return self.add(Node(op, tuple(args), series, exponent=exponent))

    def build(self, expr: sp.Basic) -> int:
        key = ("expr", expr)
        if key in self._memo:
            return self._memo[key]
        index = self._build(expr)
        self._memo[key] = index
        return index

    def _build(self, e: sp.Basic) -> int:
        if e in self.series_inputs:
            return self.add(Node("input", (), True, self.series_inputs[e]))
        if self.time is not None and e == self.time:
            return self.add(Node("time", (), True))
        if e in self.constants:
            return self.const(self.constants[e])
        if e.is_Number or e.is_NumberSymbol:
            if not e.is_finite or not e.is_real:
                raise TaylorError(f"the number {e}", self.where)
            return self.number(e)
        if isinstance(e, sp.Symbol):
            raise TaylorError(f"the symbol {e.name}", self.where)
        if e.is_Add:
            return self._fold("add", e.args)
        if e.is_Mul:
            return self._mul(e)
        if e.is_Pow:
            return self._pow(*e.args)
        if isinstance(e, sp.exp):
            return self.op("exp", self.build(e.args[0]))
        if isinstance(e, sp.log):
            if len(e.args) != 1:
                return self.op("div", self.op("log", self.build(e.args[0])),
                               self.op("log", self.build(e.args[1])))
            return self.op("log", self.build(e.args[0]))
        if isinstance(e, (sp.sin, sp.cos)):
            return self.op(type(e).__name__, self.build(e.args[0]))
        if isinstance(e, sp.tan):
            u = self.build(e.args[0])
            return self.op("div", self.op("sin", u), self.op("cos", u))
        raise TaylorError(_describe(e), self.where)

    def _fold(self, op: str, args) -> int:
        ordered = sorted(args, key=sp.default_sort_key)
        acc = self.build(ordered[0])
        for a in ordered[1:]:
            coeff, rest = a.as_coeff_Mul()
            if coeff.is_Number and coeff < 0 and rest != 1:  # a - b rather than a + (-1)*b
                acc = self.op("sub", acc, self.build(-a))
            else:
                acc = self.op("add", acc, self.build(a))
        return acc

    def _mul(self, e: sp.Mul) -> int:
        coeff, rest = e.as_coeff_Mul()
        factors = sorted(sp.Mul.make_args(rest), key=sp.default_sort_key)
        numerator = [f for f in factors if not _is_reciprocal(f)]
        denominator = [1 / f for f in factors if _is_reciprocal(f)]
        acc = self._product(numerator) if numerator else None
        if denominator:
            den = self._product(denominator)
            acc = self.op("div", acc if acc is not None else self.number(1), den)
        if coeff == -1:
            return self.op("neg", acc)
        if coeff != 1:
            return self.op("mul", self.number(coeff), acc)
        return acc

    def _product(self, factors) -> int:
        acc = self.build(factors[0])
        for f in factors[1:]:
            acc = self.op("mul", acc, self.build(f))
        return acc

    def _pow(self, base: sp.Expr, exponent: sp.Expr) -> int:
        if exponent.is_Integer:
            n = int(exponent)
            if n < 0:
                return self.op("div", self.number(1), self._pow(base, -exponent))
            if n == 0:
                return self.number(1)
            return self._integer_power(self.build(base), n)
        if exponent == sp.Rational(1, 2):
            return self.op("sqrt", self.build(base))
        if exponent.free_symbols & (set(self.series_inputs) | {self.time}):
            # b ** e with e a series: exp(e log b)
            return self.op("exp", self.op("mul", self.build(exponent),
                                          self.op("log", self.build(base))))
        b = self.build(base)
        if not self.nodes[b].series:
            return self.op("exp", self.op("mul", self.build(exponent), self.op("log", b)))
        return self.op("powc", b, exponent=self._constant_text(exponent))

    def _integer_power(self, b: int, n: int) -> int:
        """b**n by squaring: squares use the tighter tay_sqr recurrence."""
        if n == 1:
            return b
        half = self._integer_power(b, n // 2)
        square = self.op("sqr", half)
        return self.op("mul", square, b) if n % 2 else square

    def _constant_text(self, expr: sp.Expr) -> str:
        """A constant exponent as an ival C expression (a temporary constant node)."""
        index = self.build(expr)
        if self.nodes[index].series:
            raise TaylorError(f"the exponent {expr}", self.where)
        return f"k{index}"


def _is_reciprocal(f: sp.Expr) -> bool:
    return bool(f.is_Pow and f.exp.is_Number and f.exp.is_negative)


def _describe(e: sp.Basic) -> str:
    if isinstance(e, sp.Piecewise):
        return "a piecewise expression"
    if isinstance(e, (sp.Min, sp.Max)):
        return f"{type(e).__name__.lower()}()"
    if isinstance(e, sp.Abs):
        return "abs()"
    if isinstance(e, (sp.floor, sp.ceiling)):
        return f"{type(e).__name__}()"
    if isinstance(e, (sp.core.relational.Relational, sp.logic.boolalg.Boolean)):
        return "a condition"
    name = getattr(getattr(e, "func", None), "__name__", type(e).__name__)
    return f"the function {name}()"


def interval_literal(value) -> str:
    """An ival C expression that encloses an exact number: a double that equals it
    is a point; a rational p/q an outward-rounded division; anything else (pi, a
    Float of more than 53 bits) the two neighbouring doubles around its value."""
    value = sp.sympify(value)
    if isinstance(value, sp.Rational) and abs(value.p) <= 2 ** 53 and value.q <= 2 ** 53:
        p, q = float(value.p), float(value.q)
        return f"iv_point({p!r})" if q == 1 else f"iv_div(iv_point({p!r}), iv_point({q!r}))"
    f = float(value)
    if isinstance(value, sp.Float) and sp.Rational(f) == sp.Rational(value):
        return f"iv_point({f!r})"  # the double is the number (SBML values are doubles)
    return f"iv_make({math.nextafter(f, -math.inf)!r}, {math.nextafter(f, math.inf)!r})"


@dataclass(frozen=True)
class TaylorFunction:
    """C text of one Taylor-coefficient function (see the module docstring)."""

    name: str
    dim: int  # series inputs per coefficient (the stride of x)
    text: str
    series_nodes: int  # nodes with a coefficient array (local memory: x ORDER+1 ivals)


def taylor_function(name: str, rhs: Sequence[sp.Expr], states: Sequence[sp.Symbol],
                    constants: Mapping[sp.Symbol, str], time: sp.Symbol | None,
                    labels: Sequence[str] = (), where: str = "") -> TaylorFunction:
    """x' = rhs(states, constants, time): states[i]'s coefficient k is x[k*dim + i].

    `constants`: symbol -> C expression of its ival; `labels`: a comment per state
    (its SBML id) so the generated code names what it computes."""
    dim = len(states)
    if len(rhs) != dim:
        raise ValueError(f"{len(rhs)} right-hand sides for {dim} states")
    dag = Dag({x: f"x[(j)*{dim} + {i}]" for i, x in enumerate(states)}, constants, time,
              where=where)
    outputs = []
    for i, f in enumerate(rhs):
        dag.where = f"{where}: d/dt {labels[i] if labels else states[i]}" if where else ""
        outputs.append(dag.build(sp.sympify(f)))
    return TaylorFunction(name, dim, _emit(name, dim, dag, outputs, labels, states),
                          sum(1 for n in dag.nodes if n.series and n.op != "input"))


def _emit(name, dim, dag: Dag, outputs, labels, states) -> str:
    lines = [f"/* Taylor coefficients of {dim} series by automatic differentiation "
             f"(sbmlgpu.codegen.taylor): x[k*{dim}+i], k = 1..K, from x[0*{dim}+i]. */",
             f"SBMLGPU_HD void {name}(int K, ival *x, const ival *c, ival t0)", "{",
             "    (void)c; (void)t0;"]
    used = _reachable(dag, outputs)
    for index in used:  # constants first, once
        if not dag.nodes[index].series:
            lines.append(f"    const ival k{index} = {_constant(dag, index)};")
    series = [i for i in used if dag.nodes[i].series and dag.nodes[i].op != "input"]
    for index in series:
        lines.append(f"    ival n{index}[SBMLGPU_TAYLOR_ORDER + 1];")
        if dag.nodes[index].op in ("sin", "cos"):
            lines.append(f"    ival n{index}_pair[SBMLGPU_TAYLOR_ORDER + 1];")
    lines.append("    for (int k = 0; k < K; ++k) {")
    for index in series:
        lines.append(f"        {_series_step(dag, index)}")
    for i, out in enumerate(outputs):
        label = labels[i] if labels else str(states[i])
        node = dag.nodes[out]
        if not node.series:
            value = f"(k == 0 ? k{out} : iv_point(0.0))"
        elif node.op == "input":
            value = node.text.replace("(j)", "(k)")
        else:
            value = f"n{out}[k]"
        lines.append(f"        x[(k + 1)*{dim} + {i}] = iv_div({value}, "
                     f"iv_point((double)(k + 1)));  /* {_comment(label)} */")
    lines += ["    }", "}"]
    return "\n".join(lines) + "\n"


def _comment(text: str) -> str:
    return str(text).replace("*/", "* /")


def _reachable(dag: Dag, outputs) -> list[int]:
    seen: set[int] = set()
    stack = list(outputs)
    while stack:
        i = stack.pop()
        if i in seen:
            continue
        seen.add(i)
        stack.extend(dag.nodes[i].args)
        if dag.nodes[i].exponent:
            stack.append(int(dag.nodes[i].exponent[1:]))
    return sorted(seen)


def _constant(dag: Dag, index: int) -> str:
    node = dag.nodes[index]
    a = [f"k{i}" for i in node.args]
    if node.op == "const":
        return node.text
    if node.op == "powc":
        return f"iv_pow({a[0]}, {node.exponent})"
    return f"iv_{node.op}({', '.join(a)})"


def _series_step(dag: Dag, index: int) -> str:
    """Coefficient k of series node `index` from the operands' coefficients 0..k."""
    node = dag.nodes[index]
    out = f"n{index}"
    if node.op == "time":
        return f"{out}[k] = k == 0 ? t0 : iv_point(k == 1 ? 1.0 : 0.0);"
    operands = [_operand(dag, i) for i in node.args]
    if node.op in ("sin", "cos"):
        sin, cos = (out, out + "_pair") if node.op == "sin" else (out + "_pair", out)
        return f"tay_sincos({operands[0][0]}, {sin}, {cos}, k);"
    if node.op in ("neg", "sqr"):
        return f"{out}[k] = tay_{node.op}({operands[0][0]}, k);"
    if node.op in ("exp", "log", "sqrt"):
        return f"{out}[k] = tay_{node.op}({operands[0][0]}, {out}, k);"
    if node.op == "powc":
        return f"{out}[k] = tay_pow({operands[0][0]}, {node.exponent}, {out}, k);"
    (a, a_series), (b, b_series) = operands
    op = node.op
    if not a_series and op in ("add", "mul"):  # commutative: constant second
        (a, a_series), (b, b_series) = (b, b_series), (a, a_series)
    if a_series and b_series:
        tail = f", {out}, k" if op == "div" else ", k"
        return f"{out}[k] = tay_{op}({a}, {b}{tail});"
    if a_series:
        return f"{out}[k] = tay_{op}_sc({a}, {b}, k);"
    tail = f", {out}, k" if op == "div" else ", k"
    return f"{out}[k] = tay_{op}_cs({a}, {b}{tail});"


def _operand(dag: Dag, index: int) -> tuple[str, bool]:
    """(C text, is a series): a constant's ival, or a series as tay_s (pointer and
    stride: the inputs live strided in x, node arrays contiguously)."""
    node = dag.nodes[index]
    if not node.series:
        return f"k{index}", False
    if node.op == "input":
        return f"tay_series(&{node.text.replace('(j)', '0')}, {len(dag.series_inputs)})", True
    return f"tay_series(n{index}, 1)", True


def interval_values(name: str, exprs: Sequence[sp.Expr], inputs: Mapping[sp.Basic, str],
                    labels: Sequence[str] = (), where: str = "") -> str:
    """C text of `void NAME(const ival *x, const ival *c, ival t, ival *y)`: y[i] =
    exprs[i] in interval arithmetic (the natural interval extension), `inputs`
    mapping every symbol (time too) to the C expression of its ival."""
    dag = Dag({}, inputs, None, where=where)
    outputs = []
    for i, e in enumerate(exprs):
        dag.where = f"{where}: {labels[i]}" if where and labels else where
        outputs.append(dag.build(sp.sympify(e)))
    lines = [f"/* {len(exprs)} value(s) in interval arithmetic (sbmlgpu.codegen.taylor) */",
             f"SBMLGPU_HD void {name}(const ival *x, const ival *c, ival t, ival *y)", "{",
             "    (void)x; (void)c; (void)t;"]
    for index in _reachable(dag, outputs):
        lines.append(f"    const ival k{index} = {_constant(dag, index)};")
    for i, out in enumerate(outputs):
        label = f"  /* {_comment(labels[i])} */" if labels else ""
        lines.append(f"    y[{i}] = k{out};{label}")
    lines.append("}")
    return "\n".join(lines) + "\n"
