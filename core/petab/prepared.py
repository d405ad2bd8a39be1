"""`sbmlgpu.petab.objective(problem)`: a PEtab problem's objective prepared once and
evaluated for many parameter sets, call after call, as an estimation loop uses it.

What does not depend on the sets is done once: the problem read and checked, the
observable and noise formulas parsed, the runs (condition pairs) and output times,
the model simulated (so that sbmlgpu.api's per-model program, with its generated
kernels and engines, is reused), the objective kernel's text and row tables
(reduction.ObjectiveRows). A call builds the runs x sets ensemble's parameter
columns, simulates every run of every set as one batched ensemble per stage, and
returns a PetabResult: nllh, chi2 and status per set. On the GPU the likelihood of
the rows at finite times is reduced there (one pair of numbers per member comes
back); the host scores only the rows at t = inf, with the objective kernel's host
build (`_steady_compiled`), or, where the time courses come back (CPU path,
reference backend, one set), every row in numpy.

With `keep_kernel` (the default) every call runs one kernel: the ode backend's
`--method auto` choice of the first call is kept for the calls after it, with auto's
later passes' method (OdeOptions.later_as_auto: an estimation loop sees one integrator
throughout, each member integrated as in the first call, and a call skips the method check,
which reads every member's parameters), and every value the parameter table or a
condition can set is a column of the ensemble's table whatever its values (none
becomes a constant compiled into the kernel, which other values would compile
again). `simulate_problem` (keep_kernel False) checks the method and makes alike
columns constants, as a one-off run should.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping

import numpy as np

from ..errors import OptionError
from ..results.status import Status
from .likelihood import summed_terms
from .messages import FailureMessages, first_failures
from .observables import Formulas
from .problem import PetabProblem, load_problem
from .reduction import CHI2, NLL, ObjectiveRows
from .result import NON_FINITE_OBJECTIVE, PARAMETER_NOT_FINITE, PetabResult
from .simulate import Runs, Simulation
from .values import nominal_sets, not_finite_sets, sampled_sets, set_count, table_sets


class PreparedObjective:
    """A PEtab problem's objective, prepared once (module doc). Call it with
    parameter sets: {parameterId: values} (linear scale; ids left out stay nominal),
    a 2-D array (sets x `parameter_ids`, linear scale), a CSV path, or nothing (the
    nominal set)."""

    def __init__(self, problem, *, backend: str | None = "ode", device="auto", options=None,
                 keep_kernel: bool = True):
        self.problem = problem if isinstance(problem, PetabProblem) else load_problem(problem)
        p = self.problem
        self.formulas = Formulas(p)
        self.runs = Runs.of(p)
        self.backend = backend
        self.keep_kernel = keep_kernel
        self.simulation = Simulation(p, backend=backend, device=device, options=options,
                                     fixed_columns=keep_kernel)
        #: the estimated parameters, in the order of a 2-D array's columns
        self.parameter_ids = [q.id for q in p.parameters if q.estimate]
        self.method: str | None = None  # the kept method (keep_kernel), once chosen
        self._rows: dict[tuple[str, ...], ObjectiveRows] = {}
        # the rows at t = inf (None: not printable), and their host build's thread
        self._steady_rows: dict[tuple[str, ...], ObjectiveRows | None] = {}
        self._steady_build: threading.Thread | None = None
        meas = p.measurements
        obs = p.problem.observable_df
        ids = meas["observableId"].to_numpy()
        self._measurement = meas["measurement"].to_numpy(float)
        self._scale = _column(obs, "observableTransformation", "lin").reindex(ids) \
            .to_numpy().astype(str)
        self._distribution = _column(obs, "noiseDistribution", "normal").reindex(ids) \
            .to_numpy().astype(str)

    # -- the sets ---------------------------------------------------------------------------
    def sets(self, parameters=None) -> dict[str, np.ndarray]:
        """{parameterId: values} of every parameter of the table from what a call is
        given (see the class doc)."""
        if parameters is None:
            return nominal_sets(self.problem)
        if isinstance(parameters, Mapping):
            return table_sets(self.problem, dict(parameters))
        if isinstance(parameters, np.ndarray) or isinstance(parameters, (list, tuple)):
            x = np.asarray(parameters, dtype=float)
            x = x[None, :] if x.ndim == 1 else x
            if x.ndim != 2 or x.shape[1] != len(self.parameter_ids):
                raise OptionError("parameters", f"an array of parameter sets needs one column "
                                                f"per estimated parameter "
                                                f"({len(self.parameter_ids)}: "
                                                f"{', '.join(self.parameter_ids[:5])}...), "
                                                f"not shape {x.shape}")
            return table_sets(self.problem, {pid: x[:, k]
                                             for k, pid in enumerate(self.parameter_ids)})
        return table_sets(self.problem, parameters)

    def sampled(self, n: int, seed: int = 0) -> PetabResult:
        """The objective of n sets sampled within the bounds (`sbmlgpu petab --ensemble`)."""
        return self.evaluate(sampled_sets(self.problem, n, seed))

    def __call__(self, parameters=None) -> PetabResult:
        return self.evaluate(self.sets(parameters))

    # -- one call -----------------------------------------------------------------------------
    def evaluate(self, sets: dict[str, np.ndarray]) -> PetabResult:
        """nllh, chi2 and status of every set of `sets` ({parameterId: values} of every
        parameter of the table, as `sets()` makes them)."""
        p = self.problem
        n = set_count(sets)
        given = sets
        unscored = not_finite_sets(sets, n)
        if unscored is not None:
            # they run with the nominal values in place of theirs: a NaN or an infinite
            # rate must neither cost steps nor steer the method kept for later calls
            sets = _nominal_where(p, sets, unscored)
        # an ensemble's objective is reduced on the GPU where the ode backend runs there
        # (no time courses come back); one member keeps its simulation table
        reduction = (lambda outputs: self._rows_for(outputs).for_sets(sets, n)) \
            if n > 1 and self.backend == "ode" else None
        if reduction is not None and bool(np.any(self.runs.row_time_index < 0)):
            self._start_steady_build()  # (g++ while the ensembles run)
        simulated = self.simulation.run(self.runs, self.formulas.model_ids, sets, n, reduction)
        # an ensemble whose host scores only rows at t = inf (those at finite times
        # were reduced on the device, or there are none) scores them compiled too
        only_steady = (reduction is not None and simulated.steady is not None
                       and bool(np.all(self.runs.row_time_index[simulated.rows] < 0)))
        compiled = self._steady_compiled(simulated, sets, n) if only_steady else None
        if compiled is not None:  # no simulated values kept, as for the reduced rows
            (nll, chi2), rows = compiled, simulated.rows[:0]
            sim = sigma = np.empty((0, n))
        else:
            rows = simulated.rows
            sim, sigma = self.formulas.evaluate(simulated.values, sets, n, rows)
            nll, chi2 = summed_terms(self._measurement[rows], sim, sigma, self._scale[rows],
                                     self._distribution[rows])
        if simulated.reduced is not None:  # the rows at finite times, scored on the device
            nll = simulated.reduced[0] + nll
            chi2 = simulated.reduced[1] + chi2
        status, messages = _member_status(simulated, self.runs)
        bad = (status == int(Status.ok)) & ~(np.isfinite(nll) & np.isfinite(chi2))
        status[bad] = int(NON_FINITE_OBJECTIVE)  # messages reads it: no run failed them
        if unscored is not None:  # what ran for them is the nominal set's, not theirs
            status[unscored] = int(PARAMETER_NOT_FINITE)
            messages.unrun(unscored)
            nll, chi2 = np.where(unscored, np.nan, nll), np.where(unscored, np.nan, chi2)
            sim, sigma = np.where(unscored, np.nan, sim), np.where(unscored, np.nan, sigma)
        if self.keep_kernel:
            self._keep(simulated.method)
        return PetabResult(p, given, nll, chi2, status, messages, rows, sim, sigma,
                           simulated.reduced is not None, simulated.method)

    def _steady_compiled(self, simulated, sets, n: int):
        """(nll, chi2) per set of the rows at t = inf, scored by the objective kernel's
        host build on the host's cores from the runs' steady states (simulated.steady),
        or None where that build cannot be made (no C++ compiler: numpy scores them).
        Measured (Blasi_CellSystems2016, 252 rows at t = inf, 10^5 sets, a fake GPU on
        the 2-core development machine): numpy's formulas and terms took 2.5 s of the
        call's 3.1 s host time."""
        from ..errors import DeviceError
        from ..runtime.host import host_cores

        steady = simulated.steady
        rows = self._steady_rows_for()
        if rows is None:
            return None
        reduction = rows.for_sets(sets, n)
        try:
            reduction.build_host("double")
        except (DeviceError, OSError):
            return None
        members = (np.asarray(steady.runs, dtype=np.uint64)[:, None] * np.uint64(n)
                   + np.arange(n, dtype=np.uint64)).reshape(-1)
        status = simulated.status[steady.runs].reshape(-1)
        data = np.ascontiguousarray(steady.values.T)[:, None, :]  # (members, 1 time, ids)
        scored = reduction.on_host(data, status, members, threads=host_cores())
        runs = len(steady.runs)
        return (scored[NLL].reshape(runs, n).sum(axis=0),
                scored[CHI2].reshape(runs, n).sum(axis=0))

    def _steady_rows_for(self) -> ObjectiveRows | None:
        """The row tables of the rows at t = inf (their outputs: the formulas' model
        ids), or None where the kernel's printer cannot print a formula (numpy, whose
        lambdify may, scores them then)."""
        from ..codegen.printer import CodegenError

        ids = tuple(self.formulas.model_ids)
        if ids not in self._steady_rows:
            try:
                self._steady_rows[ids] = ObjectiveRows.build(
                    self.formulas, self.runs, [q.id for q in self.problem.parameters], ids,
                    steady=True)
            except CodegenError:
                self._steady_rows[ids] = None  # (not tried again by later calls)
        return self._steady_rows[ids]

    def _start_steady_build(self) -> None:
        """The host build that scores the rows at t = inf, started in a thread on the
        first call (seconds of g++ where the disk cache has none), so that it runs
        beside the ensembles; _steady_compiled then waits for it (host_library's lock)
        or finds it made. A build that fails stays failed (host_library keeps it), and
        numpy scores those rows."""
        if self._steady_build is not None:
            return
        rows = self._steady_rows_for()

        def build() -> None:
            try:
                rows.host_library("double")
            except Exception:  # noqa: BLE001 - kept by host_library; numpy scores them
                pass

        self._steady_build = threading.Thread(target=build, daemon=True,
                                              name="sbmlgpu-petab-steady-build")
        if rows is not None:
            self._steady_build.start()

    def _rows_for(self, outputs: tuple[str, ...]) -> ObjectiveRows:
        if outputs not in self._rows:
            self._rows[outputs] = ObjectiveRows.build(
                self.formulas, self.runs, [q.id for q in self.problem.parameters], outputs)
        return self._rows[outputs]

    def _keep(self, method: str | None) -> None:
        """Run the calls after this one with the method `--method auto` chose now (and,
        on the ode backend, its later passes' method as auto runs them: every call
        integrates each member as this one did)."""
        if method is None or self.method is not None:
            return
        options = self.simulation.options
        # `method` is the ode backend's (Simulation.method: None for another backend's
        # runs): members past --pass-steps keep auto's later method (bdf)
        kept = {"method": method, "later_as_auto": True}
        if isinstance(options, Mapping):
            if options.get("method", "auto") != "auto":
                return
            options = {**options, **kept}
        elif options is None:
            options = kept
        elif getattr(options, "method", None) == "auto":
            options = dataclasses.replace(options, **kept)
        else:
            return
        self.method = method
        self.simulation.options = options


def objective(problem, *, backend: str | None = "ode", device="auto", options=None,
              keep_kernel: bool = True) -> PreparedObjective:
    """A PEtab problem (a YAML path or a loaded PetabProblem) prepared for repeated
    evaluation: `objective(problem)(sets)` returns a PetabResult (`.nllh`, `.chi2`,
    `.status` per set). `backend`, `device`, `options`: as simulate_problem's.
    docs/petab.md has an example."""
    return PreparedObjective(problem, backend=backend, device=device, options=options,
                             keep_kernel=keep_kernel)


def _column(df, name: str, default: str):
    import pandas as pd

    if name not in df.columns:
        return pd.Series(default, index=df.index)
    return df[name].fillna(default).replace("", default)


def _nominal_where(problem: PetabProblem, sets: dict[str, np.ndarray],
                   unscored: np.ndarray) -> dict[str, np.ndarray]:
    """`sets` with every value of the `unscored` sets replaced by its nominal value."""
    nominal = {q.id: q.nominal for q in problem.parameters}
    out = {}
    for pid, values in sets.items():
        v = np.broadcast_to(np.asarray(values, dtype=float), unscored.shape)
        out[pid] = np.where(unscored, nominal.get(pid, np.nan), v)
    return out


def _member_status(simulated, runs: Runs) -> tuple[np.ndarray, FailureMessages]:
    """A member (set) fails with the first failure of any of its runs."""
    status, first_run = first_failures(simulated.status)
    where = [f"condition {sim}" + (f" after preequilibration {pre}" if pre else "")
             for pre, sim in runs.pairs]
    return status, FailureMessages(status, first_run, where, simulated.messages)
