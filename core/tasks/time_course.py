"""TimeCourse: time courses of one run or of an ensemble (`sbmlgpu run`, `sbmlgpu.run`)."""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Sequence

import numpy as np

from ..errors import OptionError
from ..results import TimeCourseResult
from ..settings import float_list, id_list, setting
from .base import Task

if TYPE_CHECKING:  # pragma: no cover
    import argparse

    from ..ir import Network

log = logging.getLogger("sbmlgpu")
DEFAULT_POINTS = 101


def output_times(start: float = 0.0, end: float | None = None, points: int | None = None,
                 times: Sequence[float] | np.ndarray | None = None) -> np.ndarray:
    """Either explicit `times` or `points` evenly spaced times from start to end."""
    if times is not None:
        if end is not None or points is not None:
            raise OptionError("times", "give either times or start/end/points, not both")
        return np.asarray(times, dtype=float)
    if end is None:
        raise OptionError("end", "give the end time (and points), or the output times")
    points = DEFAULT_POINTS if points is None else points
    if isinstance(points, bool) or not isinstance(points, (int, np.integer)) or points < 2:
        raise OptionError("points", f"{points!r}: need an integer of at least 2")
    if not (np.isfinite(start) and np.isfinite(end) and end > start):
        raise OptionError("end", f"{end!r} must be a finite time after start {start!r}")
    start, end, points = float(start), float(end), int(points)
    if points > KEPT_GRID_POINTS:
        return np.linspace(start, end, points)
    return _even_grid(start.hex(), end.hex(), points).copy()  # the caller's own array


#: evenly spaced grids of at most this many times are kept (_even_grid)
KEPT_GRID_POINTS = 10_000


@functools.lru_cache(maxsize=16)
def _even_grid(start: str, end: str, points: int) -> np.ndarray:
    """np.linspace(start, end, points), kept: a repeated run asks for the same grid,
    and linspace costs ~5 us, a copy 0.2 (issue 13's fixed cost). Keyed by the
    float.hex of start and end: 0.0 and -0.0 are equal keys but other grids."""
    grid = np.linspace(float.fromhex(start), float.fromhex(end), points)
    grid.setflags(write=False)  # shared by every caller: copied, never changed
    return grid


@dataclass
class TimeCourse(Task):
    """What the user asks of a time course.

    `times`: output times (the first is the start). `parameters`: an ensemble of
    parameter sets, columns named by SBML id (parameters, initial values,
    compartment sizes, stoichiometries; the rest stay as the model says), one row
    per member; None means one member at the model's values. `n`: ensemble size
    where no table gives it (e.g. SSA realisations). `seed`: keys the counter-based
    random generator. `outputs`: what to report (None: the backend's default).
    `summary`: ensemble mean/sd/quantiles instead of every trajectory."""

    kind: ClassVar[str] = "time-course"
    command: ClassVar[str] = "run"
    function: ClassVar[str] = "run"
    title: ClassVar[str] = "simulate a model (time courses of one run or an ensemble)"
    description: ClassVar[str] = (
        "Simulate MODEL with a backend. Output times: "
        "--start/--end/--points or --times. An ensemble comes from a parameter table, "
        "sampled distributions, a PEtab parameter table, or --ensemble N members at the "
        "model's values (stochastic backends).")
    # ode: compiled, on the GPU where there is one and its native CPU path otherwise
    # (the one-core scipy reference took 10 min for the README's ensemble, ode 14 s);
    # what ode refuses (delay(), fast reactions, ...) runs on the reference instead
    default_backend: ClassVar[str | None] = "ode"
    fallback_backend: ClassVar[str | None] = "reference"
    result_class: ClassVar[type] = TimeCourseResult

    times: np.ndarray = setting(None, "output times", cli=False)
    parameters: dict[str, np.ndarray] | None = setting(None, "parameter sets", cli=False)
    n: int = setting(1, "ensemble size", cli=False)
    seed: int = setting(0, "seed of the random streams (Philox keyed by seed and SBML id / "
                           "member)", minimum=0)
    outputs: tuple[str, ...] | None = setting(
        None, "comma-separated outputs: an SBML id (its SBML value: a species' "
              "concentration unless it has only substance units), [S] or concentration(S) "
              "for a species' concentration, amount(S) for its amount; columns keep these "
              "names [default: every species' value, then the parameters and compartments "
              "that change]",
        parse=id_list, metavar="IDS")
    summary: bool = setting(False, "keep the ensemble mean, sd and quantiles (over members "
                                   "that succeeded) instead of every trajectory")
    #: a per-member reduction of the time courses where they are computed, instead of
    #: the time courses (the ode backend on a GPU; e.g. sbmlgpu.petab.objective's);
    #: a backend that cannot returns the time courses, and its result's metadata has
    #: no "reduced"
    reduce: Any = field(default=None, repr=False, compare=False,
                        metadata={"cli": False, "help": "", "internal": True})
    #: columns of `parameters` that stay columns of the backend's table even where
    #: alike over the ensemble (the ode backend makes the others constants of its
    #: kernel): a caller that runs again with other values (sbmlgpu.petab.objective)
    #: then reuses one kernel
    table_columns: tuple[str, ...] = field(default=(), repr=False, compare=False,
                                           metadata={"cli": False, "help": "",
                                                     "internal": True})
    #: each member's own end time (n values, or one for all; inf: the last output
    #: time): member j integrates to the last output time at or before its end, as a
    #: run of those times alone would, and its later outputs are NaN. A PEtab
    #: problem's conditions are measured over different spans (Bachmann_MSB2011: on
    #: average a fifth of the longest), so an ensemble of all its runs need not
    #: integrate each to the longest. The ode backend (its kernels, numpy's engine) and
    #: the reference backend stop each member there; any other backend's time courses
    #: are cut afterwards (`cut_after_ends`), its statuses then the whole span's
    member_ends: Any = field(default=None, repr=False, compare=False,
                             metadata={"cli": False, "help": "", "internal": True})
    #: {id: the option that gave its values} (--sample, ...), for error messages
    sources: dict[str, str] = field(default_factory=dict, init=False, repr=False,
                                    metadata={"cli": False, "help": "", "internal": True})

    def __post_init__(self):
        self.times = np.asarray(self.times, dtype=float)
        if self.times.ndim != 1 or self.times.size < 1:
            raise OptionError("times", "need a one-dimensional array of at least one time")
        # ufunc methods, not np.diff / np.any: the same test at a quarter of the cost
        if not np.isfinite(self.times).all() or (self.times[1:] < self.times[:-1]).any():
            raise OptionError("times", "output times must be finite and non-decreasing")
        if self.parameters is not None:
            sizes = {k: np.asarray(v).shape for k, v in self.parameters.items()}
            lengths = {s[0] if s else 1 for s in sizes.values()}
            if len(lengths) > 1:
                raise OptionError("parameters", f"columns differ in length: {sizes}")
            self.n = max(lengths) if lengths else self.n
        if self.outputs is not None:
            self.outputs = tuple(str(o) for o in self.outputs)

    @property
    def ensemble_size(self) -> int:
        return self.n

    def own_times(self) -> np.ndarray | None:
        """How many of `times` each member integrates to (member_ends: the count of
        output times at or before its end, at least 1), int32 (n,); None where every
        member has all of them."""
        if self.member_ends is None:
            return None
        # kept: a run asks for them more than once (the kernel's table, the notes)
        kept = self.__dict__.get("_own_times")
        if kept is not None and kept[0] is self.member_ends:
            return kept[1]
        ends = np.broadcast_to(np.asarray(self.member_ends, dtype=float), (int(self.n),))
        # per stretch of neighbours with one end (a PEtab run's members): a search per
        # stretch, not per member (3.6 x 10^6 members: 30 ms -> 6 ms here)
        starts = np.concatenate([[0], np.flatnonzero(ends[1:] != ends[:-1]) + 1]) \
            if ends.size else np.zeros(0, np.int64)
        counts = np.clip(np.searchsorted(self.times, ends[starts], side="right"), 1,
                         len(self.times)).astype(np.int32)
        if bool((counts == len(self.times)).all()):
            counts = None
        else:
            counts = np.repeat(counts, np.diff(np.append(starts, ends.size)))
        self.__dict__["_own_times"] = (self.member_ends, counts)
        return counts

    def cut_after_ends(self, data: np.ndarray) -> None:
        """NaN in `data` (members, times, outputs) after each member's own output
        times (own_times): what a backend that integrates every member to the last
        time does so that its result reads as the ode kernels' does."""
        counts = self.own_times()
        if counts is None or data is None or not data.size:
            return
        for count in np.unique(counts[counts < len(self.times)]):
            data[np.flatnonzero(counts == count), int(count):, :] = np.nan

    def check(self) -> None:
        n = self.n
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise OptionError("n", f"{n!r}: the ensemble size must be a positive integer")
        seed = self.seed
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) \
                or not 0 <= int(seed) < 2**64:
            raise OptionError("seed", f"{seed!r}: need an integer from 0 to 2^64 - 1")
        if self.member_ends is not None:
            ends = np.asarray(self.member_ends, dtype=float)
            if ends.ndim > 1 or (ends.ndim == 1 and ends.size not in (1, int(n))):
                raise OptionError("member_ends", f"{ends.size} end times for {n} members "
                                                 f"(give one per member, or one for all)")
            if np.isnan(ends).any() or (ends == -np.inf).any():
                raise OptionError("member_ends", "end times must be numbers (inf: the "
                                                 "last output time), not NaN or -inf")
            if self.summary:
                raise OptionError("member_ends", "members with their own end times have "
                                                 "no ensemble summary at the later times; "
                                                 "ask for the time courses")

    def check_network(self, network: "Network") -> None:
        if self.parameters:
            from ..ensemble import check_ids

            for sbml_id in self.parameters:  # each named by the option that gave it
                check_ids(network, [sbml_id], self.sources.get(sbml_id, "parameters"))
        if self.outputs is not None:
            from ..outputs import check_outputs

            names = tuple(o.name for o in check_outputs(network, self.outputs))
            self.outputs = tuple(dict.fromkeys(names))  # a column once, in first order
            if len(self.outputs) < len(names):
                twice = sorted({n for n in names if names.count(n) > 1})
                log.info(f"outputs given more than once are reported once: "
                         f"{', '.join(twice)}")

    def describe(self) -> dict[str, Any]:
        times = self.times
        out = {"kind": self.kind, "times": f"{len(times)} from {times[0]:g} to {times[-1]:g}",
               "members": int(self.n), "varied": list(self.parameters or ()),
               "seed": int(self.seed), "summary": bool(self.summary)}
        if self.outputs is not None:
            out["outputs"] = list(self.outputs)
        return out

    # -- command line --------------------------------------------------------------------
    @classmethod
    def add_extra_arguments(cls, parser: "argparse.ArgumentParser") -> None:
        from ..cli_options import argument_type

        t = parser.add_argument_group("output times")
        t.add_argument("--start", type=float, default=0.0, help="first output time [default: 0]")
        t.add_argument("--end", type=float, help="last output time (required unless --times)")
        t.add_argument("--points", type=int,
                       help=f"number of evenly spaced output times, start and end included "
                            f"[default: {DEFAULT_POINTS}]")
        t.add_argument("--times", type=argument_type(float_list), metavar="LIST",
                       help="explicit output times, comma-separated (instead of "
                            "start/end/points)")
        e = parser.add_argument_group("ensembles")
        e.add_argument("--ensemble", type=int, metavar="N",
                       help="number of members (with --sample/--petab-parameters, or repeated "
                            "runs of a stochastic backend) [default: 1, or the table's rows]")
        e.add_argument("--parameters", metavar="TABLE",
                       help="parameter sets: CSV with a header of SBML ids and one row per "
                            "member, or NPZ with one array per id")
        e.add_argument("--sample", action="append", default=[], metavar="ID=SPEC",
                       help="sample an SBML id from uniform:LOW:HIGH, loguniform:LOW:HIGH or "
                            "normal:MEAN:SD[:LOW:HIGH] (repeatable; needs --ensemble or a "
                            "table)")
        e.add_argument("--petab-parameters", metavar="TSV",
                       help="PEtab parameter table: estimated parameters sampled uniformly "
                            "within their bounds on their parameterScale, the others at "
                            "nominalValue")

    @classmethod
    def from_arguments(cls, values: dict[str, Any], args: "argparse.Namespace",
                       network: "Network") -> "TimeCourse":
        from .. import ensemble

        if args.times is not None and (args.end is not None or args.points is not None):
            raise OptionError("times", "give either --times or --start/--end/--points")
        seed = values.get("seed", 0)
        parameters, n, notes, sources = ensemble.combine(
            network, table=args.parameters, samples=args.sample, petab=args.petab_parameters,
            n=args.ensemble, seed=seed)
        for note in notes:
            log.info(note)
        times = output_times(args.start, args.end, args.points, args.times)
        task = cls(times=times, parameters=parameters, n=n, **values)
        task.sources = sources
        return task

    @classmethod
    def between(cls, start: float = 0.0, end: float | None = None, points: int | None = None,
                times=None, **fields) -> "TimeCourse":
        """A TimeCourse with output times from `times` or start/end/points."""
        return cls(times=output_times(start, end, points, times), **fields)
