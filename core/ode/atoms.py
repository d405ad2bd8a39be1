"""Relational atoms: the continuous functions whose sign changes are located in time.

A trigger is a boolean formula over relations `lhs REL rhs`. Each relation that
can change between events (it depends on time or the state) becomes an *atom*
g = lhs - rhs, whose sign the integrator watches; the trigger is then a boolean
function of the atoms' truth values, which follow from the signs. Relations in
the right-hand side (piecewise conditions) are watched as well, so that the
integrator restarts exactly at a switch instead of stepping over it.

Relations that cannot change between events (only parameters and values that
events set) are left in the trigger and evaluated as they are.

One implementation for every integrator: the CPU reference (core/reference) and
the generated kernels (core/ode/model.py, templates/events.cuh) split triggers
here, so that both locate the same crossings. What differs is passed in: which
functions make a relation dynamic besides time and the states (the reference's
delay()), and how a trigger names the truth value of a relation (its symbols).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import sympy as sp
from sympy.core.relational import Relational
from sympy.logic.boolalg import BooleanAtom, BooleanFunction

from ..ir import TIME

# relation codes, shared with the kernels (templates/prelude.cuh: ode_truth)
GT, GE, LT, LE, EQ, NE = range(6)
REL_CODE = {
    sp.StrictGreaterThan: GT,
    sp.GreaterThan: GE,
    sp.StrictLessThan: LT,
    sp.LessThan: LE,
    sp.Equality: EQ,
    sp.Unequality: NE,
}
REL_TEXT = (">", ">=", "<", "<=", "==", "!=")
NAN_SIGN = 2  # the sign class of NaN: every relation is false on it, except !=


def truth(rel: int, sign: int) -> bool:
    """The value of `g REL 0` from the sign class of g (-1, 0, 1 or NAN_SIGN)."""
    if sign == NAN_SIGN:
        return rel == NE
    if rel == GT:
        return sign > 0
    if rel == GE:
        return sign >= 0
    if rel == LT:
        return sign < 0
    if rel == LE:
        return sign <= 0
    if rel == EQ:
        return sign == 0
    return sign != 0


def sign_class(v: float) -> int:
    if v > 0:
        return 1
    if v < 0:
        return -1
    if v == 0:
        return 0
    return NAN_SIGN


# _TRUTH[rel, sign + 1] for sign classes -1, 0, 1, NAN_SIGN
_TRUTH = np.array([[truth(rel, s) for s in (-1, 0, 1, NAN_SIGN)] for rel in range(6)])


def sign_classes(g: np.ndarray) -> np.ndarray:
    """sign_class of every element, as an int array."""
    g = np.asarray(g, dtype=float)
    s = np.sign(g)
    s[np.isnan(g)] = NAN_SIGN
    return s.astype(np.int64)


def truths(rels: np.ndarray, signs: np.ndarray) -> np.ndarray:
    """truth(rel, sign) elementwise."""
    return _TRUTH[rels, signs + 1]


@dataclass(frozen=True)
class AtomUse:
    """One relation inside a trigger: atom `atom` compared with REL `rel` to zero."""

    atom: int
    rel: int


def use_symbol(k: int) -> sp.Symbol:
    """The symbol of the k-th use in a split trigger (the kernels' naming: `b@k` is
    no SBML id and no symbol of the ODE view)."""
    return sp.Symbol(f"b@{k}")


class AtomTable:
    """Collects atoms (deduplicated by their function g) and their uses in triggers.

    `states`: the state symbols. `also_dynamic`: sympy function classes that make a
    relation dynamic as well (the reference's delay(), whose value moves with time).
    `symbol`: the symbol of the k-th use in a split trigger.
    Per atom, `relations` keeps the relation that made it and `origins` where that
    relation was found (the `origin` given to split_trigger/add_switches), so that
    generated code can say what each watched function is."""

    def __init__(self, states: set[sp.Symbol], also_dynamic: tuple[type, ...] = (),
                 symbol: Callable[[int], sp.Symbol] = use_symbol):
        self.states = states
        self.also_dynamic = tuple(also_dynamic)
        self.symbol = symbol
        self.functions: list[sp.Expr] = []
        self.relations: list[Relational] = []
        self.origins: list[str] = []
        self._index: dict[sp.Expr, int] = {}
        self.uses: list[AtomUse] = []
        self._use_index: dict[AtomUse, int] = {}
        self.in_trigger: set[int] = set()

    def is_dynamic(self, e: sp.Basic) -> bool:
        return bool(e.has(TIME) or (self.also_dynamic and e.has(*self.also_dynamic))
                    or (e.free_symbols & self.states))

    def atom(self, g: sp.Expr, relation: Relational | None = None, origin: str = "") -> int:
        if g not in self._index:
            self._index[g] = len(self.functions)
            self.functions.append(g)
            self.relations.append(relation)
            self.origins.append(origin)
        return self._index[g]

    def split_trigger(self, trigger: sp.Basic, origin: str = "") -> sp.Basic:
        """The trigger with each dynamic relation replaced by the symbol of its use."""
        if isinstance(trigger, Relational) and type(trigger) in REL_CODE:
            if not self.is_dynamic(trigger):
                return trigger
            lhs, rhs = trigger.args
            i = self.atom(lhs - rhs, trigger, origin)
            self.in_trigger.add(i)
            self.add_switches(lhs, origin)
            self.add_switches(rhs, origin)
            use = AtomUse(i, REL_CODE[type(trigger)])
            if use not in self._use_index:
                self._use_index[use] = len(self.uses)
                self.uses.append(use)
            return self.symbol(self._use_index[use])
        if isinstance(trigger, BooleanFunction):
            return trigger.func(*[self.split_trigger(a, origin) for a in trigger.args])
        if isinstance(trigger, BooleanAtom):
            return trigger
        # anything else is evaluated as it stands (its switches are still watched)
        self.add_switches(trigger, origin)
        return trigger

    def add_switches(self, e: sp.Basic, origin: str = "") -> set[int]:
        """Watch every dynamic relation inside `e` (piecewise conditions); returns the
        indices of their atoms."""
        found: set[int] = set()
        if not isinstance(e, sp.Basic):
            return found
        for r in e.atoms(Relational):
            if type(r) in REL_CODE and self.is_dynamic(r):
                lhs, rhs = r.args
                found.add(self.atom(lhs - rhs, r, origin))
        return found
