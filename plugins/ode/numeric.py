"""numpy functions of a KernelModel's expressions (for the stiffness check and the numpy engine).

Model symbols are named like `x@S1`, which is not a Python identifier; sympy's
lambdify then renames them one by one against every atom of the expressions (slow:
minutes for a model with hundreds of symbols). Renaming them to plain `x_0`, `p_0`,
`t` first keeps it to a fraction of a second.
"""

from __future__ import annotations

import warnings

import sympy as sp

from sbmlgpu.ir import TIME

from sbmlgpu.ode.model import KernelModel


def lambdify(model: KernelModel, exprs, with_states: bool = True):
    """f(t, *x, *p) (or f(t, *p) without states) -> list of the values of `exprs`."""
    t = sp.Symbol("t_", real=True)
    xs = [sp.Symbol(f"x_{i}", real=True) for i in range(model.n_states)]
    ps = [sp.Symbol(f"p_{j}", real=True) for j in range(len(model.p_symbols))]
    mapping = {TIME: t, **dict(zip(model.x, xs)), **dict(zip(model.p_symbols, ps))}
    renamed = [model.numeric(e).xreplace(mapping) for e in exprs]
    args = [t, *xs, *ps] if with_states else [t, *ps]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sp.lambdify(args, renamed, "numpy", dummify=False)
