"""The state space of the chemical master equation: the states reachable from the
initial state under per-species copy-number bounds, found by compiled code.

    space = enumerate_states(model, bounds={"X": 80}, initial={}, max_states=None)
    space.states   # (S, n) int32, column 0 the initial state, depth-first order
    space.targets  # (R, n) int32: the state reaction r takes state j to (-1: none)
    space.sources  # (R, n) int32: the state reaction r brings to state i (-1: none)
    space.boundary # (n,) bool: a reaction with propensity > 0 leaves the bounds here

The search runs in generated host C++ (kernels/statespace.cpp, which includes the
model's propensity function), built with sbmlgpu.runtime.host and called through
ctypes on numpy buffers: one compiled depth-first search, no Python per state.
Depth-first order puts a reversible pair's states next to each other, so the
matrix's bands {-1, 0, +1} fill up (Maggioni et al. 2013). A reaction whose target
lies past a bound is dropped (finite state projection, as ACME): it is neither an
edge nor in the diagonal, and its state is a *boundary* state; the probability on
boundary states is the truncation-error indicator.

Memory is checked before it is spent: the search stops when it reaches
`max_states`, or as many states as the memory available holds, with an
OptionError that states the count reached, the bytes needed and the memory there
is. Indices are int32, so 2**31 - 1 states at most. With `progress`, a search
that lasts shows the states found so far against the most the memory allows (bounds
far too large enumerated for minutes without a word before the OptionError).
"""

from __future__ import annotations

import ctypes
import math
import threading
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from sbmlgpu.codegen.templates import render
from sbmlgpu.errors import OptionError, SimulationError
from sbmlgpu.runtime import host
from sbmlgpu.runtime.host_memory import available_memory

from .conservation import check_given, resolve_bounds
from .model import PACKAGE, CmeModel

#: seconds before the enumeration's progress shows (schedule.progress's default) and
#: between two looks at its count
PROGRESS_DELAY = None
PROGRESS_POLL_S = 0.25
#: The most states an int32 index can name.
MOST_STATES = 2**31 - 1
#: Lookup of a state: "direct" index over the box prod(bound + 1), "hash" table, or
#: "auto" (direct when the box has at most MOST_STATES cells and its index takes at
#: most half the memory available).
LOOKUPS = ("auto", "direct", "hash")

# statespace.cpp's status codes (info[0]) and where the offending state starts in info
_OK, _TOO_MANY, _NEGATIVE_COUNT, _NEGATIVE_PROPENSITY, _NOT_FINITE, _NO_MEMORY, _STOPPED = range(7)
_INFO_STATE = 4


@dataclass(frozen=True, eq=False)
class StateSpace:
    species: tuple[str, ...]  # SBML ids of the S state columns
    reaction_ids: tuple[str, ...]  # R reactions, model order
    states: np.ndarray  # (S, n) int32; column 0 is the initial state; DFS order
    sources: np.ndarray  # (R, n) int32: j with targets[r, j] == i, else -1
    targets: np.ndarray  # (R, n) int32: where reaction r takes state j, else -1
    boundary: np.ndarray  # (n,) bool
    bounds: dict[str, int] = field(default_factory=dict)
    bound_origin: dict[str, str] = field(default_factory=dict)  # "--bound" or the law

    @property
    def n(self) -> int:
        return int(self.states.shape[1])


class PropensityError(SimulationError):
    """A kinetic law that cannot be a propensity of the jump process: positive where
    firing would make a count negative, negative, or not finite. Names the reaction
    and the state (copy numbers)."""

    def __init__(self, reaction: str, state: dict[str, int], problem: str):
        self.reaction, self.state, self.problem = reaction, dict(state), problem
        at = ", ".join(f"{k}={v}" for k, v in self.state.items()) or "the only state"
        super().__init__(f"reaction {reaction}: {problem} at {at}; the kinetic law must be "
                         f"a propensity (>= 0, finite, and 0 where the reaction cannot fire)")


def bytes_per_state(n_species: int, n_reactions: int) -> int:
    """Peak host bytes per state: the search's blocks (counts, targets, boundary
    flag), its hash table (at most 4 slots of 4 bytes per state) and stack (8), and
    the numpy sources, which the copy fills at once. The copy frees each block as it
    fills numpy's states and targets, so those two are not counted twice."""
    return (4 * n_species + 4 * n_reactions + 1) + 16 + 8 + 4 * n_reactions


def _gib(n_bytes: float) -> str:
    return f"{n_bytes / 2**30:.2f} GiB"


# -- the compiled search ----------------------------------------------------------------
def source(model: CmeModel) -> str:
    """The host C++ of the enumerator and the propensity loop for `model`."""
    return render(PACKAGE, "statespace.cpp", function=model.propensity_function())


def _library(model: CmeModel) -> ctypes.CDLL:
    text = source(model)
    library = host.load(text, model.source_name("statespace", text, ".cpp"))
    i32, i64 = ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_int64)
    library.cme_enumerate.restype = ctypes.c_void_p
    library.cme_enumerate.argtypes = [i32, i32, i32, ctypes.c_int64, ctypes.c_int32, i64]
    library.cme_copy.restype = None
    library.cme_copy.argtypes = [ctypes.c_void_p, i32, i32, i32,
                                 ctypes.POINTER(ctypes.c_uint8)]
    library.cme_free.restype = None
    library.cme_free.argtypes = [ctypes.c_void_p]
    library.cme_propensities_host.restype = None
    library.cme_propensities_host.argtypes = [i32, ctypes.c_int64,
                                              ctypes.POINTER(ctypes.c_double), ctypes.c_int32]
    return library


def _ptr(array: np.ndarray, ctype):
    return array.ctypes.data_as(ctypes.POINTER(ctype))


def enumerate_states(model: CmeModel, bounds: Mapping[str, int],
                     initial: Mapping[str, float] | None = None,
                     max_states: int | None = None, *, lookup: str = "auto",
                     progress: bool = False) -> StateSpace:
    """The StateSpace reachable from the model's initial state (with `initial`
    overrides) under `bounds` (with conservation laws for the species it omits).
    `max_states`: refuse more (None: as many as memory holds). OptionError for bad
    bounds or initial values and for a space too large; PropensityError for a law
    that is no propensity. `progress`: show the count while the search runs."""
    if lookup not in LOOKUPS:
        raise ValueError(f"lookup must be one of {LOOKUPS}, not {lookup!r}")
    if max_states is not None and (isinstance(max_states, bool) or int(max_states) != max_states
                                   or max_states < 1):
        raise OptionError("max-states", f"{max_states!r}: a whole number >= 1")
    species = model.species
    fixed = [s.id for s in model.network.species if s.id not in set(species)]
    given = check_given(species, fixed, dict(bounds or {}))
    x0 = model.initial_state(initial)
    bound, origin = resolve_bounds(species, model.stoichiometry, x0, given)
    bound_array = np.array([bound[s] for s in species], dtype=np.int32)

    box = math.prod(int(b) + 1 for b in bound_array)  # exact: a Python int
    available = available_memory()
    direct = lookup == "direct" or (lookup == "auto" and box <= MOST_STATES
                                    and 4 * box <= available // 2)
    if direct and box > MOST_STATES:
        raise ValueError(f"a direct index over {box} cells does not fit int32 indices")
    per_state = bytes_per_state(model.n_species, model.n_reactions)
    table = 4 * box if direct else 0
    by_memory = max(1, (available - table) // per_state)
    limit = min(MOST_STATES, by_memory, int(max_states) if max_states else MOST_STATES)

    library = _library(model)
    delta = np.ascontiguousarray(model.stoichiometry, dtype=np.int32)
    x0_array = np.ascontiguousarray(x0, dtype=np.int32)
    # the last entry is the stop request (_enumerate_showing_progress on Ctrl-C)
    info = np.zeros(_INFO_STATE + model.n_species + 1, dtype=np.int64)
    args = (_ptr(x0_array, ctypes.c_int32), _ptr(bound_array, ctypes.c_int32),
            _ptr(delta, ctypes.c_int32), limit, int(direct), _ptr(info, ctypes.c_int64))
    handle = (_enumerate_showing_progress(library, args, info, min(box, limit)) if progress
              else library.cme_enumerate(*args))
    if not handle:
        _raise(model, info, limit, max_states, box, per_state, table, available)
    try:
        n = int(info[1])
        states = np.empty((model.n_species, n), dtype=np.int32)
        sources = np.empty((model.n_reactions, n), dtype=np.int32)
        targets = np.empty((model.n_reactions, n), dtype=np.int32)
        boundary = np.empty(n, dtype=np.uint8)
        library.cme_copy(handle, _ptr(states, ctypes.c_int32), _ptr(sources, ctypes.c_int32),
                         _ptr(targets, ctypes.c_int32), _ptr(boundary, ctypes.c_uint8))
    finally:
        library.cme_free(handle)
    return StateSpace(species=species, reaction_ids=model.reaction_ids, states=states,
                      sources=sources, targets=targets, boundary=boundary.view(bool),
                      bounds=dict(bound), bound_origin=dict(origin))


def _enumerate_showing_progress(library, args, info: np.ndarray, most: int):
    """cme_enumerate in a thread (ctypes lets go of the GIL) while this one shows
    info[1], the count the search writes every 65,536 states, against `most`. An
    interrupt here (Ctrl-C) sets the stop request in info's last entry and waits for
    the search to free what it holds, so that a Python session keeps no lost space."""
    from sbmlgpu.schedule.progress import Progress

    done = {}

    def search():
        try:
            done["handle"] = library.cme_enumerate(*args)
        except BaseException as error:  # noqa: BLE001 - raised again in the caller
            done["error"] = error

    worker = threading.Thread(target=search, daemon=True, name="sbmlgpu-cme-enumerate")
    options = {} if PROGRESS_DELAY is None else {"delay": PROGRESS_DELAY}
    with Progress(most, desc="possible states enumerated", **options) as bar:
        worker.start()
        try:
            while worker.is_alive():
                worker.join(PROGRESS_POLL_S)
                found = int(info[1])
                if found > bar.done:
                    bar.advance(found - bar.done)
        except BaseException:
            info[-1] = 1
            while worker.is_alive():  # a second Ctrl-C here would leave it running
                try:
                    worker.join()
                except KeyboardInterrupt:
                    continue
            if done.get("handle"):  # it had just finished
                library.cme_free(done["handle"])
            raise
    if "error" in done:
        raise done["error"]
    return done.get("handle")


def _raise(model: CmeModel, info: np.ndarray, limit: int, max_states: int | None, box: int,
           per_state: int, table: int, available: int):
    status, found = int(info[0]), int(info[1])
    state = dict(zip(model.species, (int(v) for v in info[_INFO_STATE:])))
    reaction = model.reaction_ids[int(info[2])] if model.n_reactions else ""
    if status == _NEGATIVE_COUNT:
        raise PropensityError(reaction, state, "the propensity is > 0 where firing would "
                                               "make a count negative")
    if status == _NEGATIVE_PROPENSITY:
        raise PropensityError(reaction, state, "the propensity is negative")
    if status == _NOT_FINITE:
        raise PropensityError(reaction, state, "the propensity is not a finite number")
    needed = f"at least {_gib(table + (found + 1) * per_state)} " \
             f"({per_state} bytes per state" + (f" and {_gib(table)} of index" if table else "") \
             + f"; the bounds allow up to {box:,} states: {_gib(table + box * per_state)})"
    if status == _TOO_MANY and max_states and limit == int(max_states):
        raise OptionError("max-states", f"the state space has more than {max_states:,} "
                                        f"states (the enumeration reached {found:,}); it needs "
                                        f"{needed}, memory available: {_gib(available)}. Raise "
                                        f"--max-states or lower the bounds")
    if status == _TOO_MANY and limit == MOST_STATES:
        raise OptionError("bound", f"the state space has more than {MOST_STATES:,} states "
                                   f"(int32 indices): lower the bounds")
    if status in (_TOO_MANY, _NO_MEMORY):
        raise OptionError("bound", f"the state space does not fit in memory: the enumeration "
                                   f"reached {found:,} states; it needs {needed}, memory "
                                   f"available: {_gib(available)}. Lower the bounds")
    raise SimulationError(f"the state-space enumeration failed with status {status}")


def propensities_host(model: CmeModel, space: StateSpace) -> np.ndarray:
    """(R, n) float64: every reaction's propensity at every state, from the host build
    of the same function the GPU kernel runs (OpenMP where it may run threads)."""
    states = np.ascontiguousarray(space.states, dtype=np.int32)
    prop = np.empty((model.n_reactions, space.n), dtype=np.float64)
    _library(model).cme_propensities_host(_ptr(states, ctypes.c_int32), space.n,
                                          _ptr(prop, ctypes.c_double),
                                          int(host.may_run_parallel()))
    return prop
