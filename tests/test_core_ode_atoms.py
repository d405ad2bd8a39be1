"""sbmlgpu.ode.atoms: the one trigger splitting that the CPU reference and the kernels
share (what counts as dynamic and how uses are named are the caller's)."""

from __future__ import annotations

import numpy as np
import sympy as sp

from sbmlgpu.ir import TIME, Delay
from sbmlgpu.ode.atoms import (EQ, GE, GT, NAN_SIGN, NE, AtomTable, AtomUse, sign_class,
                               sign_classes, truth, truths, use_symbol)

x, y = sp.symbols("x@a x@b", real=True)
k = sp.Symbol("p@k", real=True)


def test_dynamic_relations_become_atoms_and_static_ones_stay():
    table = AtomTable({x, y})
    trigger = sp.And(x > 3, k > 1, sp.Or(TIME >= 2, sp.Eq(x, y)))
    split = table.split_trigger(trigger, "event E")
    assert {(table.functions[u.atom], u.rel) for u in table.uses} == \
        {(x - 3, GT), (TIME - 2, GE), (x - y, EQ)}
    # each dynamic relation is replaced by the symbol of its use; k > 1 stays
    by_relation = {table.relations[u.atom]: use_symbol(i) for i, u in enumerate(table.uses)}
    assert set(by_relation) == {x > 3, TIME >= 2, sp.Eq(x, y)}
    assert split == trigger.xreplace(by_relation)
    assert table.origins == ["event E"] * 3 and table.in_trigger == {0, 1, 2}
    first = table.uses[0]
    # the same relation again: the same atom and use; a piecewise switch: an atom only
    assert table.split_trigger(table.relations[first.atom]) == use_symbol(0)
    table.add_switches(sp.Piecewise((1, y < 2), (0, True)), "rate of b")
    assert table.functions[-1] == y - 2 and table.origins[-1] == "rate of b"
    assert len(table.uses) == 3


def test_the_caller_says_what_else_is_dynamic_and_names_the_uses():
    delayed = Delay(k, sp.Integer(1)) > 2  # no state, no time: static unless told
    assert AtomTable({x}).split_trigger(delayed) == delayed
    table = AtomTable({x}, also_dynamic=(Delay,), symbol=lambda u: sp.Symbol(f"b_{u}"))
    assert table.split_trigger(delayed) == sp.Symbol("b_0")
    assert table.functions == [Delay(k, sp.Integer(1)) - 2]


def test_truth_tables_and_sign_classes():
    assert [sign_class(v) for v in (-2.0, 0.0, 3.0, float("nan"))] == [-1, 0, 1, NAN_SIGN]
    g = np.array([-2.0, 0.0, 3.0, np.nan])
    assert list(sign_classes(g)) == [-1, 0, 1, NAN_SIGN]
    assert truth(NE, NAN_SIGN) and not truth(EQ, NAN_SIGN) and truth(GE, 0)
    rels = np.array([GT, GE, EQ, NE])
    assert list(truths(rels, sign_classes(g))) == [False, True, False, True]
