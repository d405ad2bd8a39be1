"""Relational atoms: the continuous functions whose sign changes are located in time.

A trigger is a boolean formula over relations `lhs REL rhs`. Each relation that
can change between events (it depends on time or the state) becomes an *atom*
g = lhs - rhs, whose sign the integrator watches; the trigger is then a boolean
function of the atoms' truth values, which follow from the signs. Relations in
the right-hand side (piecewise conditions) are watched as well, so that the
integrator restarts exactly at a switch instead of stepping over it.

Relations that cannot change between events (only parameters and values that
events set) are left in the trigger and evaluated as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import sympy as sp
from sympy.core.relational import Relational
from sympy.logic.boolalg import BooleanAtom, BooleanFunction

from ..ir import TIME, Delay
from .codegen import DelayCall

# relation codes
GT, GE, LT, LE, EQ, NE = range(6)
_REL_CODE = {
    sp.StrictGreaterThan: GT,
    sp.GreaterThan: GE,
    sp.StrictLessThan: LT,
    sp.LessThan: LE,
    sp.Equality: EQ,
    sp.Unequality: NE,
}
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


class AtomTable:
    """Collects atoms (deduplicated by their function g) and their uses in triggers."""

    def __init__(self, states: set[sp.Symbol]):
        self.states = states
        self.functions: list[sp.Expr] = []
        self._index: dict[sp.Expr, int] = {}
        self.uses: list[AtomUse] = []
        self._use_index: dict[AtomUse, int] = {}
        self.in_trigger: set[int] = set()

    def is_dynamic(self, e: sp.Basic) -> bool:
        return bool(e.has(TIME) or e.has(Delay) or e.has(DelayCall)
                    or (e.free_symbols & self.states))

    def atom(self, g: sp.Expr) -> int:
        if g not in self._index:
            self._index[g] = len(self.functions)
            self.functions.append(g)
        return self._index[g]

    def split_trigger(self, trigger: sp.Basic) -> sp.Basic:
        """The trigger with each dynamic relation replaced by a symbol b_k (k: use)."""
        if isinstance(trigger, Relational) and type(trigger) in _REL_CODE:
            if not self.is_dynamic(trigger):
                return trigger
            lhs, rhs = trigger.args
            i = self.atom(lhs - rhs)
            self.in_trigger.add(i)
            self.add_switches(lhs)
            self.add_switches(rhs)
            use = AtomUse(i, _REL_CODE[type(trigger)])
            if use not in self._use_index:
                self._use_index[use] = len(self.uses)
                self.uses.append(use)
            return sp.Symbol(f"b_{self._use_index[use]}")
        if isinstance(trigger, BooleanFunction):
            return trigger.func(*[self.split_trigger(a) for a in trigger.args])
        if isinstance(trigger, BooleanAtom):
            return trigger
        # anything else is evaluated as it stands (its switches are still watched)
        self.add_switches(trigger)
        return trigger

    def add_switches(self, e: sp.Basic) -> None:
        """Watch every dynamic relation inside `e` (piecewise conditions)."""
        if not isinstance(e, sp.Basic):
            return
        for r in e.atoms(Relational):
            if type(r) in _REL_CODE and self.is_dynamic(r):
                lhs, rhs = r.args
                self.atom(lhs - rhs)
