"""The SBML model under PEtab conditions: parameter vectors, initial states and the
right-hand side evaluated over many members at once, and the model to simulate.

PEtab gives each run its initial state: the model's, with a condition's species
overrides, or the steady state of a preequilibration condition. Our ensembles set
initial values through parameter columns, and a value that an initial assignment
computes cannot be set that way. So every run simulates `explicit`: the model with
each state's initial value declared as a plain number (its initial assignment
removed), and the state itself computed here, per member, from the model's own
initial values (the ODE view's x0, evaluated with numpy in the members'
parameters), a preequilibration, and the condition's overrides.
"""

from __future__ import annotations

import dataclasses
from functools import cached_property

import numpy as np
import sympy as sp

from ..codegen.cse import eliminate, python_assignment, render_block
from ..codegen.numpy_printer import NumpyPrinter, array_namespace, define
from ..errors import UnsupportedModelError
from ..ir import TIME, Network
from ..runtime.host_threads import over_pieces
from ..views import AMOUNT, ode_system


#: members per piece of a host evaluation at least (ModelEvaluator._evaluate)
PIECE_MEMBERS = 1 << 14


class MemberParameters:
    """The ODE view's parameter vectors of M members, (n_p, M), without a copy per
    member of the rows that all share: row j is M values, or the model's one value
    (shape (1,)), which numpy broadcasts. `p[j]`: row j (what ModelEvaluator's
    functions read); `p.column(j)`: row j as M values (a view); `p.row(j)`: row j
    made per member, to write in place; `p.take(members)`."""

    def __init__(self, rows: list[np.ndarray], m: int):
        self.rows = rows
        self.shape = (len(rows), int(m))

    def __getitem__(self, j: int) -> np.ndarray:
        return self.rows[j]

    def column(self, j: int) -> np.ndarray:
        return np.broadcast_to(self.rows[j], (self.shape[1],))

    def row(self, j: int) -> np.ndarray:
        if self.rows[j].shape != (self.shape[1],):
            self.rows[j] = np.array(self.column(j))
        return self.rows[j]

    def members(self, start: int, stop: int) -> "MemberParameters":
        """Members start..stop-1 (views of the rows)."""
        return MemberParameters([r if r.shape == (1,) else r[start:stop] for r in self.rows],
                                stop - start)

    def take(self, members: np.ndarray) -> "MemberParameters":
        members = np.asarray(members, dtype=int)
        return MemberParameters([r if r.shape == (1,) else r[members] for r in self.rows],
                                len(members))


class ModelEvaluator:
    """Numpy functions of the ODE view of `network` over members: p is a
    MemberParameters (n_p, M), x is (n_x, M)."""

    def __init__(self, network: Network):
        self.network = network
        self.ode = ode_system(network)
        self.p_index = {pid: j for j, pid in enumerate(self.ode.p_ids)}
        self.x_index = {sid: i for i, sid in enumerate(self.ode.state_ids)}
        self._values: dict[tuple, object] = {}  # values(): one function per tuple of ids

    def _function(self, exprs, name: str):
        """f(t, x, p) -> the values of `exprs` over the members' arrays. Common
        subexpressions are computed once: a problem's initial states may be one
        analytic steady state repeated in each (Fiedler_BMCSystBiol2016: six
        expressions sharing one square root)."""
        symbols = {TIME: "t"}
        symbols.update({x: f"x[{i}]" for i, x in enumerate(self.ode.x)})
        symbols.update({p: f"p[{j}]" for j, p in enumerate(self.ode.p)})
        block = eliminate([sp.sympify(e) for e in exprs])
        lines, values = render_block(block, NumpyPrinter(symbols), declare=python_assignment)
        body = lines + [f"return [{', '.join(values)}]"]
        _, f = define(name, "t, x, p", body, array_namespace(), f"<sbmlgpu.petab {name}>")
        return f

    @cached_property
    def _x0(self):
        return self._function(self.ode.x0, "x0")

    @cached_property
    def _rhs(self):
        return self._function(self.ode.rhs, "rhs")

    def parameters(self, overrides: dict[str, np.ndarray], m: int, *,
                   owned: bool = False) -> MemberParameters:
        """(n_p, m): the model's values with `overrides` {SBML id: m values, or one}
        (NaN entries keep the model's value). `owned`: the m-value arrays are the
        caller's to give away (made for this call): rows without NaN are used as they
        are instead of copied (a row is written in place later: MemberParameters.row)."""
        # copies: a row is written in place (MemberParameters.row), never the model's
        rows = [self.ode.p_values[j:j + 1].copy() for j in range(len(self.ode.p_values))]
        for sid, values in overrides.items():
            j = self.p_index[sid]
            values = np.asarray(values, dtype=float)
            if values.size == 1:
                if not np.isnan(values.reshape(-1)[0]):
                    rows[j] = values.reshape(1).copy()  # one value for every member
                continue
            if values.shape != (m,):
                values = np.broadcast_to(values, (m,))  # a read-only view: copied below
            # min propagates NaN: one pass and no mask when there is none (the usual
            # case: a PEtab parameter's values, tiled over the runs)
            if values.size and not np.isnan(values.min()):
                rows[j] = values if owned and values.flags.writeable else np.array(values)
                continue
            keep = np.isnan(values)
            if not keep.all():
                rows[j] = np.where(keep, rows[j], values)
        return MemberParameters(rows, m)

    def _evaluate(self, f, count: int, t: float, x: np.ndarray, p: MemberParameters
                  ) -> np.ndarray:
        """(count, M): f(t, x, p)'s `count` values per member, evaluated in pieces of
        members on the host-memory threads (numpy releases the GIL in its loops, and a
        piece's temporaries stay in cache: 0.17 s on one thread for the initial states
        of 3 x 10^5 members of Fiedler_BMCSystBiol2016 on the GPU machine)."""
        m = p.shape[1]
        out = np.empty((count, m))

        def piece(a: int, b: int) -> None:
            with np.errstate(all="ignore"):  # here: numpy's error state is per thread
                values = f(t, x[:, a:b], p.members(a, b))
            for i, value in enumerate(values):
                out[i, a:b] = value  # a row of the piece, or one value for all
        over_pieces(piece, m, PIECE_MEMBERS)
        return out

    def initial_state(self, p: MemberParameters) -> np.ndarray:
        """(n_x, M): x(0) as the model computes it from p."""
        m = p.shape[1]
        x = np.zeros((len(self.ode.x), m))
        return self._evaluate(self._x0, len(self.ode.x), 0.0, x, p) if len(self.ode.x) else x

    def rhs(self, x: np.ndarray, p: MemberParameters, t: float) -> np.ndarray:
        return self._evaluate(self._rhs, len(x), t, x, p) if len(x) else x

    def values(self, ids, x: np.ndarray, p: MemberParameters, t: float) -> np.ndarray:
        """(len(ids), M): SBML values of `ids` at state x."""
        ids = tuple(ids)
        f = self._values.get(ids)
        if f is None:  # generated once per set of ids (sympy's CSE is not free)
            f = self._values[ids] = self._function([self.ode.value(i) for i in ids], "values")
        return self._evaluate(f, len(ids), t, x, p)

    def output_names(self) -> list[str]:
        """What a time course reports for each state, in state order: amount(S) for
        a species held as an amount, the id for the others."""
        return [f"amount({sid})" if kind == AMOUNT else sid
                for sid, kind in zip(self.ode.state_ids, self.ode.state_kinds)]


def without_initial_assignments(network: Network, ids) -> Network:
    """`network` where the values `ids` have no initial assignment: a PEtab condition
    sets them (their value in the file is a placeholder that every condition replaces;
    a species' as its SBML value, a concentration unless it has only substance units)."""
    return _as_numbers(network, set(ids), amounts=False) if ids else network


def explicit(network: Network) -> Network:
    """`network` with every state's initial value a plain number (an initial
    amount for species) and no initial assignment to a state, so that an ensemble
    column sets it."""
    ode = ode_system(network)
    states = set(ode.state_ids)
    rate_of = [a.variable for a in network.initial_assignments
               if a.variable in states and a.math.has(TIME)]
    if rate_of:
        raise UnsupportedModelError({"a state whose initial assignment depends on time":
                                     tuple(rate_of)}, who="sbmlgpu petab")
    return _as_numbers(network, states, amounts=True)


def _as_numbers(network: Network, ids: set, amounts: bool) -> Network:
    """The values `ids` as numbers in the file (0, a placeholder that a column or
    condition replaces) without initial assignments; species declared as amounts
    (`amounts`, or where they have only substance units), else as concentrations."""
    def species(s):
        if s.id not in ids:
            return s
        if amounts or s.has_only_substance_units:
            return dataclasses.replace(s, initial_amount=0.0, initial_concentration=None)
        return dataclasses.replace(s, initial_amount=None, initial_concentration=0.0)

    parameters = tuple(dataclasses.replace(q, value=0.0) if q.id in ids and q.value is None
                       else q for q in network.parameters)
    compartments = tuple(dataclasses.replace(c, size=0.0) if c.id in ids and c.size is None
                         else c for c in network.compartments)
    assignments = tuple(a for a in network.initial_assignments if a.variable not in ids)
    return dataclasses.replace(network, species=tuple(map(species, network.species)),
                               parameters=parameters, compartments=compartments,
                               initial_assignments=assignments)
