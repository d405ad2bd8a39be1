"""What a PEtab condition does to the model, for every parameter set at once.

For condition c and n parameter sets: the parameter vectors of the ODE view (the
parameter table's values of model parameters, then the condition's parameter and
compartment overrides), the initial state the model computes from them, and the
condition's species overrides applied to a state (NaN cells keep the value).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import UnsupportedModelError
from .model import ModelEvaluator
from .problem import PetabProblem
from .values import resolve_cell

META_COLUMNS = ("conditionName",)


class Conditions:
    def __init__(self, problem: PetabProblem, evaluator: ModelEvaluator,
                 sets: dict[str, np.ndarray], n: int):
        self.problem = problem
        self.ev = evaluator
        self.sets = sets
        self.n = n
        net = evaluator.network  # the problem's, less what conditions_set_assigned frees
        table = problem.problem.condition_df
        self.table = table
        who = f"sbmlgpu petab ({problem.path})"
        self.model_parameters = {}  # parameter-table ids that are model values
        for pid, values in sets.items():
            if net.kind_of(pid) is None:
                continue  # an observable, noise or condition-only parameter
            if pid not in evaluator.p_index:
                raise UnsupportedModelError({"a parameter-table entry for a model value that "
                                             "a rule or initial assignment computes": (pid,)},
                                            who=who)
            self.model_parameters[pid] = values
        self.columns = [c for c in table.columns if c not in META_COLUMNS]
        for column in self.columns:
            kind = net.kind_of(column)
            if kind not in ("parameter", "compartment", "species"):
                raise UnsupportedModelError({"a condition-table column that is not a "
                                             "parameter, compartment or species of the "
                                             "model": (column,)}, who=who)
            if column not in evaluator.p_index and column not in evaluator.x_index:
                raise UnsupportedModelError({"a condition that sets a value a rule or an "
                                             "initial assignment computes (of a value that "
                                             "is not a state)": (column,)}, who=who)
        self.species = [c for c in self.columns if net.kind_of(c) == "species"]
        self.others = [c for c in self.columns if c not in self.species]

    def _cells(self, conditions: list[str], column: str) -> list:
        """Each condition's cell of `column`: a float (NaN: empty) or n values."""
        return [resolve_cell(self.table.at[c, column], self.sets,
                             f"condition {c}, column {column}") for c in conditions]

    def _per_member(self, cells: list, base: np.ndarray | None, empty: float) -> np.ndarray:
        """The (len(cells) * n,) row of member k*n + j: cell k (its set j's value), or
        where the cell is empty (NaN) the member's `base` value, else `empty`. Written
        run by run in one pass: the row of a problem of 36 runs and 10^5 sets is
        3.6 x 10^6 values, and building it from per-run arrays, a concatenation and a
        np.where took five (0.39 s of a 3.5 s objective call on the H200's host)."""
        n = self.n
        row = np.empty(len(cells) * n)
        for k, cell in enumerate(cells):
            part = row[k * n:(k + 1) * n]
            fill = base[k * n:(k + 1) * n] if base is not None else empty
            if isinstance(cell, float):
                part[:] = fill if math.isnan(cell) else cell
            else:
                part[:] = cell
                missing = np.isnan(cell)
                if missing.any():
                    part[missing] = fill[missing] if base is not None else empty
        return row

    def parameters(self, conditions: list[str]):
        """model.MemberParameters (n_p, len(conditions) * n): member k*n + j is
        condition k, set j."""
        m = len(conditions) * self.n
        overrides = {pid: np.tile(v, len(conditions)) for pid, v in self.model_parameters.items()}
        for column in self.others:
            if column not in self.ev.p_index:
                continue  # a state (rate rule): set in the state
            cells = self._cells(conditions, column)
            if all(isinstance(c, float) and math.isnan(c) for c in cells):
                continue  # no condition sets it
            # an empty cell keeps the parameter table's value, else the model's (NaN:
            # ModelEvaluator.parameters puts the model's value there)
            overrides[column] = self._per_member(cells, overrides.get(column), math.nan)
        return self.ev.parameters(overrides, m, owned=True)  # tiled or written: new arrays

    def apply_to_state(self, conditions: list[str], x: np.ndarray, p: np.ndarray) -> None:
        """Set the conditions' overrides of states (species, and values with rate rules)
        in x (n_x, M) in place; a species given as a concentration becomes an amount.
        Species that are not states are parameters of the view: set in p."""
        if not conditions:
            return
        for column in self.columns:
            in_state = column in self.ev.x_index
            if column not in self.species and not in_state:
                continue  # a parameter or compartment: set in p already
            runs = self._cells(conditions, column)
            if all(isinstance(c, float) and math.isnan(c) for c in runs):
                continue
            cells = self._per_member(runs, None, math.nan)
            given = ~np.isnan(cells)
            value = cells
            if column in self.species:
                value = self._species_value(column, cells, x, p, in_state)
            if in_state:
                row = x[self.ev.x_index[column]]
            else:
                row = p.row(self.ev.p_index[column])
            row[given] = value[given]

    def _species_value(self, sid: str, cells: np.ndarray, x, p, in_state: bool) -> np.ndarray:
        """The condition's value (the species' SBML value: a concentration unless it
        has only substance units) in the units its slot holds."""
        s = self.ev.network.species_by_id[sid]
        size = self.ev.values([s.compartment], x, p, 0.0)[0]
        if in_state:
            kind = self.ev.ode.state_kinds[self.ev.x_index[sid]]
            holds_amount = kind == "amount"
        else:  # a parameter of the view: the initial value as the file declares it
            holds_amount = s.initial_amount is not None
        if holds_amount and not s.has_only_substance_units:
            return cells * size
        if not holds_amount and s.has_only_substance_units:
            return cells / size
        return cells


def assigned_by_conditions(problem: PetabProblem) -> list[str]:
    """Condition-table columns whose model value an initial assignment computes: the
    condition replaces the assignment (PEtab), so every condition must give a value."""
    net = problem.network
    table = problem.problem.condition_df
    columns = [c for c in table.columns if c not in META_COLUMNS
               and c in net.initial_assignment_by_variable]
    for column in columns:
        cells = table[column]
        empty = [str(c) for c, v in cells.items()
                 if v is None or (isinstance(v, float) and math.isnan(v))
                 or (isinstance(v, str) and not v.strip())]
        if empty:
            raise UnsupportedModelError(
                {f"a condition that keeps the initial assignment of {column} (an empty "
                 f"cell) while others replace it": tuple(empty)},
                who=f"sbmlgpu petab ({problem.path})")
    return columns
