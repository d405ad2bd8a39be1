"""The network a DBN approximation counts: variables, their parents, the CPT layout.

The variables are the ODE's state variables (species, and parameters or
compartments that rules change), in model order; a variable's value is its SBML
value (a species' concentration, unless it has only substance units), as
`sbmlgpu run` reports it. The parents of x_i at slice k+1 are the variables of x_i's
right-hand side and x_i itself at slice k (Liu et al. 2009), in model order.

Sampled parameters (and other sampled constants that are not states) are parameter
nodes: variables after the states that keep their value, each its own only parent.

A dense CPT of variable v has K**len(parents) rows per transition (the parents'
bins, the first parent most significant: numpy.ravel_multi_index) and K columns
(v's bin at the next slice); all dense tables lie one after another in one
unsigned 32-bit count buffer, transition-major within each variable. A variable
whose table has more than `max_dense_rows` rows (a reaction network with a hub
species: BIOMD0000000088 has one with 28 parents) is counted sparsely on the host
from the bin records instead (counting.py): only visited configurations exist there.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from sbmlgpu.views.ode import OdeSystem


@dataclass(frozen=True)
class DbnStructure:
    variables: tuple[str, ...]
    parents: dict[str, tuple[str, ...]]
    bins: int
    slices: int  # transitions (time slices after the initial one)
    max_dense_rows: int

    @classmethod
    def of(cls, ode: OdeSystem, parameter_nodes: tuple[str, ...], bins: int, slices: int,
           max_dense_rows: int) -> "DbnStructure":
        """`parameter_nodes`: sampled ids that are not states (parameters, constant
        species, compartment sizes): variables that keep their value, after the
        states, each its own only parent and a parent of the states whose rates use it."""
        variables = (*ode.state_ids, *parameter_nodes)
        p_index = {pid: j for j, pid in enumerate(ode.p_ids)}
        symbol = {x: i for i, x in enumerate(ode.x)}
        symbol.update({ode.p[p_index[pid]]: len(ode.state_ids) + j
                       for j, pid in enumerate(parameter_nodes)})
        parents = {}
        for i, (sid, f) in enumerate(zip(ode.state_ids, ode.rhs)):
            uses = {symbol[s] for s in getattr(f, "free_symbols", ()) if s in symbol} | {i}
            parents[sid] = tuple(variables[j] for j in sorted(uses))
        for pid in parameter_nodes:
            parents[pid] = (pid,)
        return cls(variables, parents, int(bins), int(slices), int(max_dense_rows))

    def rows(self, variable: str) -> int:
        """Parent configurations of `variable`: K**len(parents)."""
        return self.bins ** len(self.parents[variable])

    def is_dense(self, variable: str) -> bool:
        return self.rows(variable) <= self.max_dense_rows

    @cached_property
    def dense(self) -> tuple[str, ...]:
        return tuple(v for v in self.variables if self.is_dense(v))

    @cached_property
    def sparse(self) -> tuple[str, ...]:
        return tuple(v for v in self.variables if not self.is_dense(v))

    @cached_property
    def bases(self) -> dict[str, int]:
        """Each dense variable's start in the count buffer per transition: its
        offset is slices x base, so that the kernels (which multiply by the launch's
        transitions) do not depend on the number of slices."""
        out, at = {}, 0
        for v in self.dense:
            out[v] = at
            at += self.rows(v) * self.bins
        return out

    @cached_property
    def offsets(self) -> dict[str, int]:
        """Where each dense variable's CPTs start in the count buffer (elements)."""
        return {v: self.slices * base for v, base in self.bases.items()}

    @cached_property
    def count_elements(self) -> int:
        return sum(self.slices * self.rows(v) * self.bins for v in self.dense)

    def parent_indices(self, variable: str) -> tuple[int, ...]:
        position = {v: j for j, v in enumerate(self.variables)}
        return tuple(position[p] for p in self.parents[variable])
