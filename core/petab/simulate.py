"""Simulating a PEtab problem: every (condition, parameter set) as one batched
time-course ensemble through sbmlgpu's API.

Member k*n + j of an ensemble is run k (a distinct pair of preequilibration and
simulation condition, in the measurement table's order) with parameter set j.
Stages, each one ensemble:

1. preequilibration (only runs that name one): from the preequilibration
   condition's initial state, simulate until the state is steady;
2. the time course of every run, output times = the union of the measurement
   times (and 0), from the steady state of stage 1 with the simulation condition's
   species overrides re-applied, or from the simulation condition's initial state;
   each run's members end at the run's own last measurement time
   (TimeCourse.member_ends), as a simulation of that condition alone would;
3. steady states under the simulation condition, for measurements at t = inf.

A steady state is reached when |dx/dt| <= STEADY_ATOL + STEADY_RTOL * |x| for
every state (dx/dt evaluated from the model's right-hand side at the simulated
state, as AMICI checks it); the ensemble runs to each of STEADY_TIMES and takes the
latest time at which the test holds. Members that never pass it get the status
`no_steady_state`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..results.status import Status
from .conditions import Conditions, assigned_by_conditions
from .model import MemberParameters, ModelEvaluator, explicit, without_initial_assignments
from .problem import PetabProblem

#: status codes of sbmlgpu.petab: fixed and apart from the low codes that backends
#: take in order with Status.define (so that importing this module moves none of theirs)
PETAB_CODES = 40
STEADY_TIMES = np.array([0.0, 1.0, 10.0, 1e2, 1e3, 1e4, 1e5, 1e6])
STEADY_RTOL = 1e-6
STEADY_ATOL = 1e-9
NO_STEADY_STATE = Status.define(
    "no_steady_state", f"no steady state by t = {STEADY_TIMES[-1]:g} (|dx/dt| stayed above "
                       f"{STEADY_ATOL:g} + {STEADY_RTOL:g}*|x|); the PEtab preequilibration "
                       f"or t = inf measurement of this member has no value",
    code=PETAB_CODES)


@dataclass
class Runs:
    """The distinct runs of the measurement table and, per measurement row, its run
    and output time."""

    pairs: list[tuple[str | None, str]]  # (preequilibration condition or None, condition)
    row_run: np.ndarray  # (R,) index into pairs
    row_time: np.ndarray  # (R,) measurement time (inf: steady state)
    times: np.ndarray  # output times of stage 2 (0 and every finite measurement time)
    row_time_index: np.ndarray  # (R,) index into times (-1 for inf)
    #: per run, its last finite measurement time (times[0] where it has none: its
    #: rows are all at t = inf, which stage 3 computes from the initial state)
    ends: np.ndarray | None = None

    @classmethod
    def of(cls, p: PetabProblem) -> "Runs":
        meas = p.measurements
        pre = (meas["preequilibrationConditionId"] if "preequilibrationConditionId"
               in meas.columns else [None] * len(meas))
        pairs: dict[tuple, int] = {}
        row_run = []
        for a, b in zip(pre, meas["simulationConditionId"]):
            key = (a if isinstance(a, str) and a.strip() else None, str(b))
            row_run.append(pairs.setdefault(key, len(pairs)))
        row_time = np.asarray(meas["time"], dtype=float)
        times = np.unique(np.concatenate([[0.0], row_time[np.isfinite(row_time)]]))
        index = np.where(np.isfinite(row_time),
                         np.searchsorted(times, np.where(np.isfinite(row_time), row_time, 0)),
                         -1)
        row_run = np.array(row_run, dtype=int)
        ends = np.full(len(pairs), times[0])
        finite = np.isfinite(row_time)
        np.maximum.at(ends, row_run[finite], row_time[finite])
        return cls(list(pairs), row_run, row_time, times, index, ends)


class RowValues:
    """One model id's values at the measurement rows the host scores, read as a
    (rows, n) array is (`values[where]`: the rows `where`, NaN where none was added)
    but never held whole: each row's n values are a vector of a source array that
    is already there (a time course's values at the row's run and time, a run's
    steady state). Measured (Blasi_CellSystems2016: 252 rows at t = inf, 16 model
    ids, 10^5 sets): the whole arrays were 3.2 GB of NaN filled every call, about
    1 s of a 3.6 s call, for the 252 x 10^5 values the formulas read."""

    def __init__(self, n_rows: int, n: int):
        self.shape = (n_rows, n)
        self._source = np.full(n_rows, -1)  # which source holds each row
        self._index = np.zeros((n_rows, 0), dtype=np.int64)  # where in it
        self._sources: list[np.ndarray] = []

    def add(self, positions: np.ndarray, source: np.ndarray, *index: np.ndarray) -> None:
        """Rows `positions` read source[index[0][i], index[1][i], ...] (a vector of n
        values); `source` (..., n), one index array per leading axis."""
        positions = np.asarray(positions, dtype=np.int64)
        if self._index.shape[1] < len(index):
            self._index = np.pad(self._index, ((0, 0), (0, len(index) - self._index.shape[1])))
        self._source[positions] = len(self._sources)
        for axis, values in enumerate(index):
            self._index[positions, axis] = values
        self._sources.append(source)

    def __getitem__(self, where) -> np.ndarray:
        where = np.arange(self.shape[0])[where]
        out = np.full((len(where), self.shape[1]), np.nan)
        for k, source in enumerate(self._sources):
            mine = np.flatnonzero(self._source[where] == k)
            if mine.size:
                index = self._index[where[mine], :source.ndim - 1]
                out[mine] = source[tuple(index.T)]
        return out


@dataclass
class Simulated:
    """Model values at the measurement rows `rows` (indices into the measurement
    table): {SBML id: RowValues, read as (len(rows), n)}, and per (run, set) the status code
    (n_runs, n). With an objective reduced on the device, `rows` are only those at
    t = inf (steady states, computed on the host) and `reduced` holds (nll, chi2)
    per set summed over the rows at finite times, whose values never came back."""

    values: dict[str, RowValues]
    status: np.ndarray
    rows: np.ndarray
    messages: dict[tuple[int, int], str] = field(default_factory=dict)
    reduced: tuple[np.ndarray, np.ndarray] | None = None
    #: the ode backend's method of the main stage (None: another backend)
    method: str | None = None
    #: the runs with rows at t = inf and the model ids' values at their steady
    #: states, (ids, runs * n) in member order (NaN where none was found)
    steady: "SteadyValues | None" = None


@dataclass
class SteadyValues:
    """What the rows at t = inf read: the runs that have such rows (indices into
    Runs.pairs, ascending) and `values[q, k * n + j]`, model id q (in the order of
    the ids `Simulation.run` was given) at the steady state of run runs[k] with set j."""

    runs: list[int]
    values: np.ndarray  # (ids, len(runs) * n)


class Simulation:
    """One problem through `backend` on `device`. What does not depend on the
    parameter sets (the model simulated, its numpy functions) is built once, so that
    every `run` of this object, whatever its sets, reuses the compiled program that
    sbmlgpu.api keeps per loaded model (generated kernels, engines)."""

    def __init__(self, problem: PetabProblem, *, backend: str | None = "ode", device="auto",
                 options=None, fixed_columns: bool = False):
        self.problem = problem
        network = without_initial_assignments(problem.network, assigned_by_conditions(problem))
        self.ev = ModelEvaluator(network)
        self.explicit = explicit(network)
        self.backend, self.device, self.options = backend, device, options
        # fixed_columns: every model value that the parameter table or a condition can
        # set is a column of every run, and stays one where alike over the ensemble
        # (TimeCourse.table_columns), so that runs with any values share one kernel;
        # otherwise only the values that differ from the model's are columns
        ids = [q.id for q in problem.parameters] + list(problem.problem.condition_df.columns)
        self.always = {i for i in ids if i in self.ev.p_index and i not in self.ev.x_index} \
            if fixed_columns else set()
        self.fixed_columns = fixed_columns
        self.method: str | None = None  # the ode backend's method of the last stage

    # -- one ensemble ---------------------------------------------------------------------
    def time_course(self, p: MemberParameters, x0: np.ndarray, times: np.ndarray,
                    reduce=None, ends: np.ndarray | None = None):
        """The explicit model from x0 with parameters p (original view's vectors).
        Every stage varies the same columns and reports the same outputs (set by
        `run`), so that all stages run one compiled kernel. `reduce`: see run;
        `ends`: each member's end time (TimeCourse.member_ends)."""
        from ..api import execute
        from ..tasks import TimeCourse

        ev = self.ev
        columns = {sid: x0[i] for sid, i in ev.x_index.items()}
        columns.update({pid: p.column(ev.p_index[pid]) for pid in self.varied})
        task = TimeCourse(times=times, parameters=columns, outputs=self.outputs or None,
                          reduce=reduce, progress=False, member_ends=ends,
                          table_columns=tuple(columns) if self.fixed_columns else ())
        result = execute(self.explicit, task, self.backend, options=self.options,
                         device=self.device).result
        self.method = result.metadata.get("method") \
            if result.metadata.get("backend") == "ode" else None
        return result

    def _plan(self, p_matrices, ids: list[str], steady: bool) -> None:
        """The parameters that differ from the model's anywhere (and, with
        fixed_columns, every one a table can set), and the outputs."""
        ev = self.ev
        nominal = ev.ode.p_values[:, None]
        self.varied = []
        for pid, j in ev.p_index.items():
            if pid in ev.x_index:
                continue
            if pid in self.always or any(
                    not np.all((p[j] == nominal[j]) | (np.isnan(p[j]) & np.isnan(nominal[j])))
                    for p in p_matrices):
                self.varied.append(pid)
        states = ev.output_names() if steady else []
        self.outputs = tuple(dict.fromkeys([*states, *ids]))

    def steady_state(self, p: MemberParameters, x0: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, dict]:
        """(x at steady state (n_x, M), status (M,), messages)."""
        ev = self.ev
        m = p.shape[1]
        if not len(ev.x_index):
            return x0.copy(), np.zeros(m, np.int8), {}
        result = self.time_course(p, x0, STEADY_TIMES)
        # the states at one steady time at a time (most members are steady at the last:
        # one gather of (M, n_x), not a copy of every time's)
        columns = [result.index(o) for o in ev.output_names()]
        x = np.full_like(x0, np.nan)
        found = np.zeros(m, bool)
        for ti in range(len(STEADY_TIMES) - 1, 0, -1):
            # the latest steady time wins: earlier times look only at the members not
            # steady yet (most are at the last one: one right-hand side over all)
            left = np.flatnonzero(~found)
            if not left.size:
                break
            every = left.size == m
            state = (result.data[:, ti, columns] if every
                     else result.data[left[:, None], ti, columns]).T
            f = ev.rhs(state, p if every else p.take(left), STEADY_TIMES[ti])
            with np.errstate(invalid="ignore"):
                steady = np.all(np.isfinite(state) & np.isfinite(f) &
                                (np.abs(f) <= STEADY_ATOL + STEADY_RTOL * np.abs(state)), axis=0)
            x[:, left[steady]] = state[:, steady]
            found[left[steady]] = True
        status = np.where(found, int(Status.ok), int(NO_STEADY_STATE)).astype(np.int8)
        # a member that failed before any steady time keeps the integrator's status
        failed = (result.status != int(Status.ok)) & ~found
        status[failed] = result.status[failed]
        # the integrator's own words for the members not steady (the others' status
        # message is read where the failures are listed)
        messages = {int(i): text for i, text in result.messages.items() if not found[int(i)]}
        return x, status, messages

    # -- the problem ------------------------------------------------------------------------
    def run(self, runs: Runs, ids: list[str], sets: dict[str, np.ndarray], n: int,
            objective=None) -> Simulated:
        """n parameter sets (`sets`: {parameterId: n values or one}). `objective(outputs)`:
        makes the reduction.ObjectiveReduction of the time courses' outputs; where the
        backend reduces on its device, the rows at finite times are scored there
        (Simulated.reduced) and never copied back."""
        ev = self.ev
        cond = Conditions(self.problem, ev, sets, n)
        n_runs = len(runs.pairs)
        status = np.zeros((n_runs, n), np.int8)
        messages: dict[tuple[int, int], str] = {}
        self.method = None

        def record(run_ids: list[int], codes: np.ndarray, notes: dict[int, str],
                   base: int = 0) -> None:
            """Failures of `run_ids` (codes: their members, run after run); `notes`: the
            backend's own words, keyed by base + the member's index in `codes`. Only the
            members with words are visited (a failed member without any reads its
            status's message: _member_status), so thousands of failures cost no loop."""
            codes = codes.reshape(len(run_ids), n)
            fresh = np.empty_like(codes, dtype=bool)
            for k, run in enumerate(run_ids):
                fresh[k] = (status[run] == 0) & (codes[k] != 0)
                status[run][fresh[k]] = codes[k][fresh[k]]
            for key, text in notes.items():
                k, j = divmod(int(key) - base, n)
                if 0 <= k < len(run_ids) and fresh[k, j] and text:
                    messages[(run_ids[k], j)] = text

        # initial states of every run under its simulation condition
        sims = [b for _, b in runs.pairs]
        p = cond.parameters(sims)
        x0 = ev.initial_state(p)
        pre_runs = [k for k, (a, _) in enumerate(runs.pairs) if a is not None]
        pre_conditions = sorted({runs.pairs[k][0] for k in pre_runs})
        p_pre = cond.parameters(pre_conditions) if pre_runs else p.take([])
        x_pre = ev.initial_state(p_pre)
        # the overrides also set p (species that are not states): before planning
        cond.apply_to_state(pre_conditions, x_pre, p_pre)
        cond.apply_to_state(sims, x0, p)
        # the time courses report the model ids the formulas read only where rows at
        # finite times read them: a steady state's values are computed from its states
        # (ev.values), so a problem of rows at t = inf alone downloads the states only
        self._plan((p, p_pre), ids if bool(np.any(runs.row_time_index >= 0)) else [],
                   steady=bool(pre_runs) or bool(np.any(runs.row_time_index < 0)))
        if pre_runs:
            x_ss, codes, notes = self.steady_state(p_pre, x_pre)
            for k in pre_runs:
                c = pre_conditions.index(runs.pairs[k][0])
                x0[:, k * n:(k + 1) * n] = x_ss[:, c * n:(c + 1) * n]
                record([k], codes[c * n:(c + 1) * n], notes, base=c * n)
            cond.apply_to_state(sims, x0, p)  # again, on the steady states

        timed = runs.row_time_index >= 0
        reduced, result = None, None
        if timed.any():
            reduce = objective(self.outputs) if objective is not None else None
            ends = np.repeat(runs.ends, n) if runs.ends is not None else None
            result = self.time_course(p, x0, runs.times, reduce, ends)
            record(list(range(n_runs)), result.status, result.messages)
            if "reduced" in result.metadata:
                reduced = reduce.per_set(*(result.metadata["reduced"][name]
                                           for name in reduce.names))
        method = self.method
        # the rows whose model values the host needs: all, or those at t = inf
        rows = np.flatnonzero(~timed) if reduced is not None else np.arange(len(timed))
        values = {sid: RowValues(len(rows), n) for sid in ids}
        steady = None
        if result is not None and reduced is None:
            where = np.flatnonzero(timed)
            for sid in ids:
                # (runs, times, sets) view of the (runs * sets, times) values
                courses = result[sid].reshape(n_runs, n, -1).transpose(0, 2, 1)
                values[sid].add(where, courses, runs.row_run[where],
                                runs.row_time_index[where])
        if (~timed).any():
            inf_runs = sorted(set(runs.row_run[~timed].tolist()))
            cols = np.concatenate([np.arange(k * n, (k + 1) * n) for k in inf_runs])
            p_inf = p.take(cols)
            x_ss, codes, notes = self.steady_state(p_inf, x0[:, cols])
            record(inf_runs, codes, notes)
            at = ev.values(ids, x_ss, p_inf, float(STEADY_TIMES[-1])) if ids else None
            steady = SteadyValues(inf_runs, np.asarray(at, dtype=float).reshape(len(ids), -1)
                                  if ids else np.zeros((0, len(cols))))
            slot = np.full(n_runs, -1)
            slot[inf_runs] = np.arange(len(inf_runs))
            position = np.full(len(timed), -1)
            position[rows] = np.arange(len(rows))
            steady_rows = np.flatnonzero(~timed)
            for q, sid in enumerate(ids):
                # every row of a run at t = inf reads the run's one steady state
                values[sid].add(position[steady_rows], at[q].reshape(len(inf_runs), n),
                                slot[runs.row_run[steady_rows]])
            method = method or self.method
        return Simulated(values, status, rows, messages, reduced, method, steady)
