"""The PEtab objective reduced where the time courses are (kernels/objective.cu).

An ensemble of N parameter sets on the GPU computes N x runs time courses; copying
them back to evaluate the likelihood in numpy moves gigabytes for N numbers. The
`ObjectiveRows` of a problem (the kernel's text, the row tables) are built once
(sbmlgpu.petab.objective keeps them from call to call); an `ObjectiveReduction`
(those rows and one call's per-set values q) is handed to the ode backend with the time-course task
(`TimeCourse.reduce`): after each batch's integration the GPU engine runs the
objective kernel on the batch's device buffer and returns, per member (a run and a
set), the sums of the negative log-likelihood and chi2 terms over that run's
measurement rows at finite times. `Simulation.run` adds them up per set. The same
kernel text builds for the host (its SBMLGPU_HOST_ENTRY): it scores the members the
ode backend's host pass integrates, and the rows at t = inf (steady states, found on
the host) from row tables of their own (`ObjectiveRows.build(..., steady=True)`);
tests compare it with the numpy computation (likelihood.summed_terms).

The tables the kernel reads (all per measurement row at a finite time, or with
`steady` at t = inf, rows grouped by run): run_rows (CSR offsets per run), the output-time index, the
observable, the measurement, the time; the placeholder slots (a number or a
parameterId's per-set value); q, the per-set values of every parameterId the
formulas or slots name, (n_q, n_sets) row-major (the only table that changes
from call to call).
"""

from __future__ import annotations

import ctypes
import re
import threading
from dataclasses import dataclass, field

import numpy as np

from ..codegen.printer import print_expr
from ..codegen.templates import render
from ..errors import OptionError
from ..ode.sinks import LAUNCH_ORDER
from .observables import PLACEHOLDERS, Formulas

PACKAGE = "sbmlgpu.petab"
KERNEL = "sbmlgpu_petab_objective"
BLOCK = 128
#: what the reduction adds to a member's results (MemberResults extras)
NLL, CHI2 = "petab_nll", "petab_chi2"
_LOCK = threading.Lock()
#: members at least per thread of a threaded on_host (fewer: not worth a thread)
HOST_CHUNK = 4096
#: the host builds' (g++ runs seconds: not under _LOCK, which every device launch takes)
_HOST_LOCK = threading.Lock()


@dataclass
class RowTables:
    """The measurement rows the kernel scores, grouped by run (see the module doc)."""

    run_rows: np.ndarray  # (runs + 1,) int32
    time_index: np.ndarray  # (rows,) int32
    observable: np.ndarray  # (rows,) int32
    measurement: np.ndarray  # (rows,) float64
    t: np.ndarray  # (rows,) float64
    slot_q: np.ndarray  # (rows, slots) int32, -1: a number
    slot_value: np.ndarray  # (rows, slots) float64


@dataclass
class ObjectiveRows:
    """What the objective kernel needs of a problem, whatever the parameter sets:
    its text for each precision (the formulas, printed once), the row tables, and
    which parameterIds q holds. Built once per problem and outputs; `for_sets`
    makes the reduction of one call (its q), sharing the compiled kernels."""

    formulas: Formulas
    outputs: tuple[str, ...]
    tables: RowTables
    q_ids: tuple[str, ...]
    observables: list[dict]
    slots: int
    _kernels: dict = field(default_factory=dict, repr=False)  # (device, precision) ->

    @classmethod
    def build(cls, formulas: Formulas, runs, parameter_ids, outputs: tuple[str, ...],
              steady: bool = False) -> "ObjectiveRows":
        """`runs`: simulate.Runs; `parameter_ids`: the parameter table's ids (the keys
        of every set); `outputs`: the time-course task's outputs (the columns of the
        device buffer), which hold every model id the formulas use. `steady`: the rows
        at t = inf instead, each reading output time 0 of a one-time "course" (its
        run's steady state: PreparedObjective._steady_compiled)."""
        problem = formulas.problem
        meas = problem.measurements
        known = set(parameter_ids)
        oids = list(formulas.observable)
        slot_names = {oid: _slot_names(formulas, oid) for oid in oids}
        slots = max((len(v) for v in slot_names.values()), default=0)
        q_ids: dict[str, int] = {}

        def q_index(pid: str) -> int:
            return q_ids.setdefault(pid, len(q_ids))

        observables = []
        for oid in oids:
            symbols = {}  # the formulas' own symbols (petab's carry assumptions)
            for symbol in sorted({s for e in (formulas.observable[oid], formulas.noise[oid])
                                  for s in e.free_symbols}, key=lambda s: s.name):
                symbols[symbol] = _symbol_text(symbol.name, oid, outputs, slot_names[oid],
                                               known, q_index, problem.path)
            obs = problem.problem.observable_df.loc[oid]
            observables.append({
                "id": oid,
                "observable": print_expr(formulas.observable[oid], symbols,
                                         where=f"observableFormula of {oid}"),
                "noise": print_expr(formulas.noise[oid], symbols,
                                    where=f"noiseFormula of {oid}"),
                "scale": _cell(obs, "observableTransformation", "lin"),
                "distribution": _cell(obs, "noiseDistribution", "normal")})

        order = np.argsort(runs.row_run, kind="stable")
        at_inf = runs.row_time_index[order] < 0
        timed = order[at_inf] if steady else order[~at_inf]  # (the rows scored)
        obs_ids = meas["observableId"].to_numpy()
        slot_q = np.full((len(timed), max(slots, 1)), -1, np.int32)
        slot_value = np.full((len(timed), max(slots, 1)), np.nan)
        counts = {oid: _slot_counts(formulas, oid) for oid in oids}
        cells = {column: meas[column].to_numpy() for _, column in PLACEHOLDERS
                 if column in meas.columns}
        for r, row in enumerate(timed):
            oid = str(obs_ids[row])
            where = f"measurement row {row + 2}"
            for k, value in enumerate(_row_slots(counts[oid], cells, row, known, where)):
                if isinstance(value, str):
                    slot_q[r, k] = q_index(value)
                else:
                    slot_value[r, k] = value
        rows_per_run = np.bincount(runs.row_run[timed], minlength=len(runs.pairs))
        tables = RowTables(
            run_rows=np.concatenate([[0], np.cumsum(rows_per_run)]).astype(np.int32),
            time_index=(np.zeros(len(timed)) if steady
                        else runs.row_time_index[timed]).astype(np.int32),
            observable=np.array([oids.index(str(obs_ids[r])) for r in timed], np.int32),
            measurement=meas["measurement"].to_numpy(float)[timed],
            t=runs.row_time[timed].astype(float),
            slot_q=np.ascontiguousarray(slot_q), slot_value=np.ascontiguousarray(slot_value))
        return cls(formulas, tuple(outputs), tables, tuple(q_ids), observables, slots)

    def for_sets(self, sets: dict[str, np.ndarray], n: int) -> "ObjectiveReduction":
        """The reduction of one call: q, the sets' values of the parameterIds the
        formulas and placeholders name, (n_q, n) row-major."""
        q = np.empty((max(len(self.q_ids), 1), n))
        q[0] = 0.0
        for k, pid in enumerate(self.q_ids):
            q[k] = sets[pid]  # one value (broadcast) or one per set
        return ObjectiveReduction(self, int(n), q)

    # -- the kernel ---------------------------------------------------------------------
    def source(self, precision: str) -> str:
        return render(PACKAGE, "objective.cu", precision=precision,
                      observables=self.observables, slots=self.slots)

    def host_library(self, precision: str):
        """The kernel text's host build (its SBMLGPU_HOST_ENTRY), loaded: it scores the
        members a GPU run integrates on the host's cores, and the rows at t = inf
        (ObjectiveReduction.on_host)."""
        from ..errors import DeviceError
        from ..runtime.host import load

        with _HOST_LOCK:
            key = ("host", precision)
            if key not in self._kernels:
                try:
                    library = load("#define SBMLGPU_HOST_ENTRY 1\n" + self.source(precision),
                                   f"petab_objective_{precision}.cu", openmp=False)
                except (DeviceError, OSError) as exc:
                    self._kernels[key] = exc  # not built again by the problem's later calls
                    raise
                library.sbmlgpu_petab_objective_host.restype = ctypes.c_int
                self._kernels[key] = library
            if isinstance(self._kernels[key], Exception):
                raise self._kernels[key]
            return self._kernels[key]

    def kernel(self, device, precision: str):
        with _LOCK:  # the scheduler's device threads share a reduction
            key = (device.index, precision)
            if key not in self._kernels:
                module = device.compile(self.source(precision),
                                        name=f"petab_objective_{precision}.cu")
                self._kernels[key] = module.function(KERNEL)
            return self._kernels[key]


@dataclass
class ObjectiveReduction:
    """What the GPU engine needs to score a batch of one call: the prepared rows
    (kernel, tables), the sets' q, and `launch` (one batch). The rows' tables and q go
    to each device once per call (`release()` frees them after the run): uploaded per
    batch they were 14 copies of Bachmann_MSB2011's 10^5-set q, 0.2 s of its call on
    the H200."""

    rows: ObjectiveRows
    n_sets: int
    q: np.ndarray  # (n_q, n_sets) float64
    #: device index -> the tables' buffers on that device (launch's arguments)
    _on_device: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    names = (NLL, CHI2)

    def _tables_on(self, device) -> list:
        with _LOCK:  # the scheduler's device threads share a reduction
            buffers = self._on_device.get(device.index)
            if buffers is None:
                t = self.tables
                buffers = []
                try:
                    for a in (t.run_rows, t.time_index, t.observable, t.measurement, t.t,
                              t.slot_q, t.slot_value, self.q):
                        buffers.append(device.to_device(a))
                except BaseException:
                    for buffer in buffers:
                        buffer.free()
                    raise
                self._on_device[device.index] = buffers
            return buffers

    def release(self) -> None:
        """Free the tables the launches left on the devices (the ode backend calls it
        when its run ends, whatever way it ends)."""
        with _LOCK:
            held, self._on_device = self._on_device, {}
        for buffers in held.values():
            for buffer in buffers:
                buffer.free()

    @classmethod
    def build(cls, formulas: Formulas, runs, sets: dict[str, np.ndarray], n: int,
              outputs: tuple[str, ...]) -> "ObjectiveReduction":
        """Rows and q at once (one call)."""
        return ObjectiveRows.build(formulas, runs, sets, outputs).for_sets(sets, n)

    @property
    def outputs(self) -> tuple[str, ...]:
        return self.rows.outputs

    @property
    def tables(self) -> RowTables:
        return self.rows.tables

    def source(self, precision: str) -> str:
        return self.rows.source(precision)

    def launch(self, device, out_buf, status_buf, members_arg, first_member: int, b: int,
               n_outputs: int, precision: str, keep, profiler=None) -> dict[str, np.ndarray]:
        """Score one batch whose time courses are in `out_buf` (the trajectory sink's
        layout); returns {NLL: (b,), CHI2: (b,)} in launch order. `keep`: registers
        a device buffer for freeing with the batch's."""
        kernel = self.rows.kernel(device, precision)
        t = self.tables
        args = [np.int64(b), np.int64(self.n_sets), out_buf, np.int32(n_outputs), status_buf,
                members_arg, np.uint64(first_member)]
        args += self._tables_on(device)
        nll_buf = keep(device.alloc(max(b, 1) * 8))
        chi2_buf = keep(device.alloc(max(b, 1) * 8))
        timing = kernel.launch(((b + BLOCK - 1) // BLOCK,), (BLOCK,), args + [nll_buf, chi2_buf])
        if profiler is not None:
            rows = float(len(t.time_index)) * b / max(len(t.run_rows) - 1, 1)
            profiler.record_launch(kernel, timing, device, flops=30.0 * rows,
                                   bytes=rows * 8.0 * (1 + len(self.outputs) / 4),
                                   precision="double")
        return {NLL: device.from_device(nll_buf, (b,), np.float64),
                CHI2: device.from_device(chi2_buf, (b,), np.float64)}

    def build_host(self, precision: str) -> None:
        """The host build on_host needs, made now (the ode backend's host pass builds it
        with its own kernel, in the background)."""
        self.rows.host_library(precision)

    def on_host(self, data: np.ndarray, status: np.ndarray, members: np.ndarray,
                threads: int = 1) -> dict[str, np.ndarray]:
        """Score members on the host: those a GPU run integrated on the host's cores
        (the ode backend's host pass, whose time courses never reach the device), or
        the runs' steady states for the rows at t = inf: `data` (m, times,
        outputs) of the kernel's dtype, `status` (m,), `members` (m,) their member
        numbers; {NLL: (m,), CHI2: (m,)} as `launch` returns them, from the same
        kernel text built for the host. `threads` > 1: the members split over that
        many threads (ctypes lets go of the GIL during each call)."""
        m = len(members)
        if threads > 1 and m >= 2 * HOST_CHUNK:
            from concurrent.futures import ThreadPoolExecutor

            self.rows.host_library("double" if data.dtype == np.float64 else "float")
            size = max(HOST_CHUNK, -(-m // threads))
            with ThreadPoolExecutor(threads) as pool:
                parts = list(pool.map(lambda s: self.on_host(
                    data[s:s + size], status[s:s + size], members[s:s + size]),
                    range(0, m, size)))
            return {name: np.concatenate([part[name] for part in parts])
                    for name in self.names}
        precision = "double" if data.dtype == np.float64 else "float"
        library = self.rows.host_library(precision)
        # the trajectory sink's layout: out[(k * n_outputs + c) * m + i]
        out = np.ascontiguousarray(np.moveaxis(data, 0, -1))
        status = np.ascontiguousarray(status, np.int8)
        ids = np.ascontiguousarray(members, np.uint64)
        t = self.tables
        nll, chi2 = np.empty(max(m, 1)), np.empty(max(m, 1))
        if m:
            tables = (t.run_rows, t.time_index, t.observable, t.measurement, t.t, t.slot_q,
                      t.slot_value, np.ascontiguousarray(self.q), nll, chi2)

            def ptr(a: np.ndarray):
                return a.ctypes.data_as(ctypes.c_void_p)

            # first_member LAUNCH_ORDER: member i's time courses are in column i
            library.sbmlgpu_petab_objective_host(
                ctypes.c_longlong(m), ctypes.c_longlong(self.n_sets), ptr(out),
                ctypes.c_int(data.shape[2]), ptr(status), ptr(ids),
                ctypes.c_ulonglong(LAUNCH_ORDER), *[ptr(a) for a in tables])
        return {NLL: nll[:m], CHI2: chi2[:m]}

    def per_set(self, nll: np.ndarray, chi2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Members' sums (runs x sets, member order) added up per set."""
        runs = len(self.tables.run_rows) - 1
        return (nll.reshape(runs, self.n_sets).sum(axis=0),
                chi2.reshape(runs, self.n_sets).sum(axis=0))


# -- the formulas' symbols ----------------------------------------------------------------
def _slot_names(formulas: Formulas, oid: str) -> list[str]:
    """Placeholder names of observable `oid` in slot order: observableParameter1..k,
    then noiseParameter1..k."""
    names = []
    for kind, _ in PLACEHOLDERS:
        count = max(formulas.placeholders(formulas.observable[oid], kind, oid),
                    formulas.placeholders(formulas.noise[oid], kind, oid))
        names += [f"{kind}{k}_{oid}" for k in range(1, count + 1)]
    return names


def _symbol_text(name, oid, outputs, slots, known, q_index, path) -> str:
    """C text of a formula's symbol, in the precedence of Formulas._values."""
    if name in outputs:
        return f"PETAB_OUT({outputs.index(name)}) /* {name} */"
    if name in slots:
        return f"row->ph[{slots.index(name)}] /* {name} */"
    if name == oid:
        return "y"
    if name in known:
        return f"PETAB_Q({q_index(name)}) /* {name} */"
    if name in ("time", "t"):
        return "row->t"
    raise OptionError("problem", f"{path}: the formula of {oid} uses {name!r}, which is "
                                 f"neither a model id, a parameterId nor a placeholder")


def _slot_counts(formulas: Formulas, oid: str) -> list[tuple[str, int]]:
    """[(measurement-table column, placeholders)] of observable `oid`, slot order."""
    return [(column, max(formulas.placeholders(formulas.observable[oid], kind, oid),
                         formulas.placeholders(formulas.noise[oid], kind, oid)))
            for kind, column in PLACEHOLDERS]


def _row_slots(counts, cells, row: int, known, where: str) -> list:
    """The row's placeholder values in slot order (`counts`: _slot_counts; `cells`:
    {column: the measurement table's column}): numbers, or parameterIds (str) whose
    per-set values q holds."""
    from .values import split_overrides

    out: list = []
    for column, count in counts:
        if not count:
            continue
        cell = cells[column][row] if column in cells else None
        for entry in split_overrides(cell, count, f"{where}, {column}"):
            out.append(_entry(entry, known, where))
    return out


_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$|^[+-]?(inf|nan)$", re.I)


def _entry(entry, known, where: str):
    """A number (NaN when empty), or a parameterId of `known` (its name: read per set);
    anything else is values.resolve's OptionError."""
    from .values import resolve

    text = None if isinstance(entry, (int, float, np.integer, np.floating)) else str(entry).strip()
    if text is not None and text in known and not _NUMBER.match(text):
        return text
    return float(resolve(entry, {}, 1, where)[0])


def _cell(row, column: str, default: str) -> str:
    value = row.get(column, default) if hasattr(row, "get") else default
    if value is None or (isinstance(value, float) and np.isnan(value)) or value == "":
        return default
    return str(value)
