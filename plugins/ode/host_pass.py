"""The second pass on the host's cores, beside the GPU (issue 13: no stalled ensembles).

The members the first pass leaves past --pass-steps are few and slow: Elowitz_Nature2000's
slowest of 1,000 PEtab-sampled members needs 434,057 rodas4 steps, ~30 us a step on one
H100 thread (13.8 s for its second pass of 16 members) and ~1 us a step on one core of a
2-core CI machine (0.42 s), through the CPU path's native build of the very same kernel
text (native.py). A GPU gains by running many members at once, not by running one fast:
a pass over a few members leaves it all but idle, while each host core runs one of them
tens of times faster.

`takes(m)`, the rule: the host takes the second pass when m <= HOST_MEMBERS_PER_CORE x
cores. The GPU runs the m members at once, in the time of the slowest, ~r T (T: that
member's time on a core, r the ratio of a GPU thread's step to a core's, ~30 for
Elowitz); the host, one member per core at a time, in about (m / cores) T for members
of alike length, and faster still for the common heavy tail (Elowitz's 16 members past
--pass-steps: mean 0.23 of the longest). So the host is faster while m / cores < r;
HOST_MEMBERS_PER_CORE = 16 leaves a factor of ~2 for alike members and models where r
is smaller. Where they are more, the device first runs them in a middle pass of a
bounded step budget (passes._later_passes) and the rule is asked again for the long
tail that remains (`takes(m, tail=True)`), with TAIL_FACTOR x as many members per core:
each of those needs more than MIDDLE_PASS_FACTOR x --pass-steps steps and they are the
heavy tail (mean ~0.23 of the longest), so the host stays faster while m / cores < r /
0.23, and 4 x 16 keeps a factor of ~2 (Elowitz_Nature2000, 10^5 members on an H200: the
tail of 328 members, 20.5 a core, took 47 s on the device under the plain rule).
Where the host's pass runs the later method (bdf under --method auto, the device's
passes rodas4: `later_method`), LATER_FACTOR x as many: bdf takes 1.5-30x fewer steps
than rodas4 on such members (Elowitz 1.5, Okuonghae 12.5, Liu 32, the slowest of 1,000
on 2 cores), so r grows by that ratio (Okuonghae_ChaosSolitonsFractals2020, 10^5
members on an H200: its 1,272 members past --pass-steps, 80 a core, took 2.36 s all on
the host against 3.16 s of a device middle pass and 0.96 s of its tail on the host).

The host build (g++; here 0.35 s for Elowitz's rodas4 kernel, 1.6 s for
SalazarCavazos_MBoC2020's 75 states; cached on disk per kernel text) runs in a thread
that starts as soon as slow members are likely (`start_build`): when a launch, the
pilot first, returns members past --pass-steps (passes.MemberClock), and at the start
of an ensemble of EARLY_BUILD_MIN_MEMBERS or more that has no pilot to tell (its first
pass is then one launch or a few: waiting for it would add the build to the run).
Members run one per ctypes call (GIL released) on a pool of one thread per core: the
pool takes the next member as one finishes, as OpenMP's dynamic schedule does, and
each member's wall time is measured (the metadata's slowest member's seconds). A build
that fails leaves the pass to the GPU (`run` returns None), and the program's later runs
too, without building it again (FailedBuilds). In a run reduced per member
(TimeCourse.reduce: the PEtab objective on the GPU), the reduction's `on_host` scores
the members here (its host build made in the same thread as the kernel's), so their
time courses never go to the device (Borghans_BiophysChem1997, 10^5 sets on an H200:
its one member past --pass-steps took 235,624 rodas4 steps on one GPU thread, 2.5 s of
the 2.8 s call, when the objective's slow members stayed on the GPU).

Results equal the GPU's second pass up to the rounding of the host compiler (the CPU
and GPU builds of one kernel text: the tolerance tests/test_ode_gpu.py uses); a member's
integration depends only on its parameters and member number, so also its random
stream is the GPU's.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable

import numpy as np

from sbmlgpu.errors import DeviceError
from sbmlgpu.ode.engines import LaunchConfig
from sbmlgpu.ode.kernel_source import KernelSource
from sbmlgpu.ode.sinks import LAUNCH_ORDER
from sbmlgpu.runtime.host import host_cores

log = logging.getLogger("sbmlgpu.ode")

#: the host takes a second pass of at most this many members per core (module doc)
HOST_MEMBERS_PER_CORE = 16
#: x as many of the long tail a middle pass leaves (`takes(m, tail=True)`)
TAIL_FACTOR = 4
#: x as many where the host's pass runs the later method, bdf (`later_method`)
LATER_FACTOR = 8
#: an ensemble without a pilot starts the host build with its first pass from this size
EARLY_BUILD_MIN_MEMBERS = 64


class FailedBuilds:
    """Host builds that failed, by kernel name, for the runs of one program: a later
    run's host pass neither pays g++ for them again nor warns again (the GPU runs its
    pass, as the first time). Build errors only (DeviceError, OSError); an error in
    generating the code is not kept, as on the CPU path (specialised.LaterKernel)."""

    def __init__(self):
        self._errors: dict[str, Exception] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> Exception | None:
        with self._lock:
            return self._errors.get(name)

    def add(self, name: str, error: Exception) -> None:
        with self._lock:
            self._errors.setdefault(name, error)


@dataclass
class HostPassResult:
    """The second pass's members on the host, in the order they were given."""

    status: np.ndarray  # (m,) int8
    steps: np.ndarray  # (m,) int32
    data: np.ndarray  # (m, times, outputs)
    seconds: np.ndarray  # (m,) each member's wall time (its retry's included)
    threads: int
    #: (m,) bool: the members run again with `Retry.host`'s kernel (None: no retry)
    retried: np.ndarray | None = None
    #: the retries' wall time, from the first one's start to the last one's end
    retry_span: float = 0.0
    #: a run reduced per member (HostSecondPass.reduce): {name: (m,)}, and `data` is
    #: then (m, times, 0), as the device's batches return theirs
    reduced: dict = field(default_factory=dict)
    #: retries run on speculation (Retry): (begun, used as the member's result)
    speculated: tuple[int, int] = (0, 0)


@dataclass
class _Speculation:
    """A retry run on speculation (Retry): its stop request and time course, its
    (status, steps, start, end) once it ended unstopped, and whether the member's first
    attempt has ended needing it."""

    stop: np.ndarray  # int32 (1,): HostKernel.run's stop request
    data: np.ndarray  # (times, outputs)
    result: tuple | None = None
    wanted: bool = False


@dataclass(frozen=True)
class Retry:
    """A member whose status is not in `final` runs again, in the same thread, with
    `host`'s kernel (under --method auto: bdf's failures with rodas4, passes.py), as
    soon as its first attempt ends: the retries of hard members overlap the other
    members' first attempts instead of waiting for the slowest of them (Elowitz_Nature2000,
    10^4 members on an H200: 107 members with bdf 2.29 s, then 34 of them with rodas4
    3.64 s, where one member's retry alone took 3.66 s).

    Retries on speculation: once every first attempt has been taken, a thread that
    would idle runs the retry of the member whose first attempt has run longest, beside
    it. Where that attempt then fails, the retry has started early (the member costs
    the longer of the two runs, not their sum); where it finishes the member, the retry
    is stopped (HostKernel.run's `stop`) and dropped. Each member's result is still the
    rule's (bdf's where bdf finishes it, else rodas4's), bit for bit: only the time of
    the pass changes (Crauste_CellSystems2017, 10^5 sets on an H200: its host pass,
    0.15 s, waited for one member whose bdf attempt gives up after 75,844 steps and whose
    rodas4 retry takes 77,971; on the development machine 0.063 s and 0.072 s alone)."""

    host: "HostSecondPass"
    final: tuple[int, ...]


class HostSecondPass:
    """The host build of a GPU run's kernel and the second pass on it."""

    def __init__(self, source: KernelSource | Callable[[], KernelSource],
                 table: np.ndarray, times: np.ndarray,
                 n_outputs: int, config: LaunchConfig, cores: int | None = None,
                 reduce=None, later_method: bool = False,
                 failed: FailedBuilds | None = None):
        self.source = source
        self.table = table  # (varied, n) of the kernel's dtype
        self.times = times
        self.n_outputs = n_outputs
        self.config = config  # the full budget (the second pass's)
        self.cores = cores or host_cores()
        #: the run's per-member reduction (TimeCourse.reduce, e.g. the PEtab objective),
        #: which scores this pass's members on the host (its `on_host`), else None
        self.reduce = reduce
        #: whether this pass runs the later method (bdf) where the device runs the
        #: first (rodas4): the rule then takes LATER_FACTOR x as many members
        self.later_method = later_method
        #: the program's failed host builds (None: each run tries its own)
        self.failed = failed
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._kernel = None
        self._error: Exception | None = None
        self._warned = False

    def takes(self, members: int, tail: bool = False) -> bool:
        """Whether the host runs a second pass of `members` (module doc: the rule);
        `tail`: the members a middle pass left."""
        factor = max(LATER_FACTOR if self.later_method else 1, TAIL_FACTOR if tail else 1)
        return 0 < members <= HOST_MEMBERS_PER_CORE * factor * self.cores

    # -- the build, in the background ------------------------------------------------------
    def start_build(self) -> None:
        """Build the host library in a thread (once; later calls do nothing)."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._build, daemon=True,
                                                name="sbmlgpu-ode-host-pass-build")
                self._thread.start()

    @property
    def build_started(self) -> bool:
        return self._thread is not None

    @property
    def built(self) -> bool:
        """Whether the build has ended (well or not): kernel() will not wait."""
        return self._thread is not None and not self._thread.is_alive()

    @property
    def loaded(self) -> bool:
        """Whether the build has ended well: kernel() returns it at once."""
        return self.built and self._kernel is not None

    def _build(self) -> None:
        try:
            kernel = self._load()
            # the reduction's host build too, before any member needs it (optional: else
            # on_host builds it when first called)
            build_host = getattr(self.reduce, "build_host", None)
            if build_host is not None:
                build_host("double" if kernel.dtype == np.float64 else "float")
            self._kernel = kernel
        except Exception as exc:  # noqa: BLE001 - the GPU runs the pass instead
            self._error = exc

    def _load(self):
        from .native import host_kernel

        # a LaterKernel's source is generated here, in the build's thread
        source = self.source() if callable(self.source) else self.source
        known = self.failed.get(source.name) if self.failed is not None else None
        if known is not None:  # an earlier run's build of this text failed (warned then)
            self._warned = True
            raise known
        try:
            return host_kernel(source)
        except (DeviceError, OSError) as exc:
            if self.failed is not None:
                self.failed.add(source.name, exc)
            raise

    def kernel(self):
        """The loaded host build (waiting for it), or None where it failed."""
        self.start_build()
        self._thread.join()
        with self._lock:  # said once (a Retry asks once per member)
            if self._error is not None and not self._warned:
                self._warned = True
                log.warning("a host build for the second pass failed (%s): the GPU "
                            "runs it", self._error)
        return self._kernel

    # -- the pass ------------------------------------------------------------------------
    def run(self, members: np.ndarray, done=None,
            retry: Retry | None = None) -> HostPassResult | None:
        """`members` (ids) integrated with the full budget on host threads, each
        taking the next member as it finishes one; `done(k)` is called as k more
        members finish. `retry`: a member that ends with another status than
        `retry.final` runs again with `retry.host`'s kernel, at once where that build
        is done, else when it is (its thread goes on with the next member meanwhile,
        rather than wait for g++); not where that build failed (the caller then has
        the member). With a retry, a thread that finds nothing left to take runs the
        retry of the member whose first attempt has run longest on speculation (the
        class doc). None when this pass's build failed."""
        kernel = self.kernel()
        if kernel is None:
            return None
        m = len(members)
        status = np.empty(m, np.int8)
        steps = np.empty(m, np.int32)
        data = np.empty((m, len(self.times), self.n_outputs), kernel.dtype)
        seconds = np.empty(m)  # a member's own: its first attempt, then its retry
        retried = np.zeros(m, bool) if retry is not None else None
        span = [np.inf, -np.inf]  # the retries' first start, last end
        lock = threading.Lock()
        first = iter(range(m))  # the members' first attempts, in order
        waiting: list[int] = []  # retries waiting for retry.host's build
        ran_out = [False]  # every first attempt taken
        began = np.full(m, np.inf)  # each first attempt's start (running: not ended)
        ended = np.full(m, np.nan)  # ... and end
        guesses: dict[int, _Speculation] = {}  # retries run on speculation, by position
        speculated = [0, 0]  # retries run on speculation: begun, used
        errors: list[BaseException] = []  # a worker's exception ends the pass (raised)

        def next_task() -> tuple[str, int] | None:
            """(what, position): what is "first", "retry" or "guess" (a retry on
            speculation); None when nothing is left to take."""
            with lock:
                if waiting and (ran_out[0] or retry.host.built):
                    return "retry", waiting.pop(0)
                position = next(first, None)
                if position is not None:
                    began[position] = time.perf_counter()
                    return "first", position
                ran_out[0] = True
                if waiting:
                    return "retry", waiting.pop(0)
                # no speculation without a loaded retry build (one that failed would
                # be chosen again and again for the same attempt) or after an error
                if retry is None or not retry.host.loaded or errors:
                    return None
                # the first attempt running longest (likeliest to be a hard member)
                running = [p for p in np.flatnonzero(np.isfinite(began) & np.isnan(ended))
                           if int(p) not in guesses]
                if not running:
                    return None
                position = int(min(running, key=lambda p: began[p]))
                guesses[position] = _Speculation(np.zeros(1, np.int32),
                                                 np.empty_like(data[position]))
                speculated[0] += 1
                return "guess", position

        def finish(position: int) -> None:
            if done is not None:
                done(1)

        def attempt(position: int) -> None:
            s, k = self._member(kernel, int(members[position]), data[position])
            now = time.perf_counter()
            with lock:
                ended[position] = now
                seconds[position] = now - began[position]
                status[position], steps[position] = s, k  # a retry may replace them
                guess = guesses.get(position)
                if retry is None or s in retry.final:
                    if guess is not None:
                        guess.stop[0] = 1  # not needed: bdf finished the member
                elif guess is not None:
                    # the retry runs already: its thread delivers it, or has
                    guess.wanted = True
                    if guess.result is not None:
                        deliver(position, guess)
                    return
                elif not retry.host.built:
                    waiting.append(position)
                    return
            if retry is None or s in retry.final:
                finish(position)
                return
            again(position)

        def deliver(position: int, guess: "_Speculation") -> None:
            """A retry run on speculation is the member's result (under the lock)."""
            s, k, start, end = guess.result
            data[position] = guess.data
            status[position], steps[position] = s, k
            seconds[position] = max(end, ended[position]) - began[position]
            retried[position] = True
            span[:] = min(span[0], start), max(span[1], end)
            speculated[1] += 1
            finish(position)

        def guess_retry(position: int) -> None:
            guess = guesses[position]
            kernel_again = retry.host.kernel()  # built (next_task): no wait
            if kernel_again is None:
                with lock:  # no retry on the host: the first attempt's end decides
                    del guesses[position]
                    if not guess.wanted:
                        return
                finish(position)  # (as `again` where the build failed)
                return
            start = time.perf_counter()
            s, k = retry.host._member(kernel_again, int(members[position]), guess.data,
                                      stop=guess.stop)
            end = time.perf_counter()
            with lock:
                if guess.stop[0]:
                    return  # bdf finished the member: this run was stopped, not used
                guess.result = (s, k, start, end)
                if guess.wanted:
                    deliver(position, guess)

        def again(position: int) -> None:
            kernel_again = retry.host.kernel()  # waits only where nothing else is left
            if kernel_again is not None:
                begun = time.perf_counter()
                s, k = retry.host._member(kernel_again, int(members[position]),
                                          data[position])
                end = time.perf_counter()
                with lock:
                    seconds[position] += end - begun
                    status[position], steps[position] = s, k
                    retried[position] = True
                    span[:] = min(span[0], begun), max(span[1], end)
            if done is not None:
                done(1)

        tasks = {"first": attempt, "retry": again, "guess": guess_retry}

        def worker() -> None:
            try:
                while not errors:
                    task = next_task()
                    if task is None:
                        return
                    tasks[task[0]](task[1])
            except BaseException as exc:  # noqa: BLE001 - the run's, raised below
                with lock:  # the retries run on speculation end too, and none begins
                    errors.append(exc)
                    for guess in guesses.values():
                        guess.stop[0] = 1

        # with retries, up to twice the members: a thread per member's first attempt
        # and one for its retry on speculation
        threads = min(self.cores, m * (2 if retry is not None else 1))
        workers = [threading.Thread(target=worker, daemon=True,
                                    name=f"sbmlgpu-ode-host-pass-{i}") for i in range(threads)]
        for thread in workers:
            thread.start()
        for thread in workers:
            thread.join()
        if errors:
            raise errors[0]  # a member's exception is the run's
        reduced = {}
        if self.reduce is not None:  # after the retries: their time courses and statuses
            reduced = self.reduce.on_host(data, status, members)
            data = data[:, :, :0]
        return HostPassResult(status, steps, data, seconds, threads, retried,
                              max(span[1] - span[0], 0.0), reduced,
                              speculated=tuple(speculated))

    @cached_property
    def _settings(self) -> dict:
        """A member's call's settings: the full budget, one member (_member)."""
        return {**self.config.as_dict(), "n": 1}

    def _member(self, kernel, member: int, into: np.ndarray,
                stop: np.ndarray | None = None) -> tuple[int, int]:
        """One member with the full budget on `kernel` (this pass's host build), its
        time course written `into` (times, outputs); its (status, steps). `stop`:
        HostKernel.run's stop request."""
        out, s, k = kernel.run(self.table[:, member:member + 1], self.times,
                               self.n_outputs, self._settings,
                               np.array([member], np.uint64), LAUNCH_ORDER, stop=stop)
        into[...] = out[:, :, 0]
        return int(s[0]), int(k[0])


def for_run(source: KernelSource | Callable[[], KernelSource], table: np.ndarray,
            times: np.ndarray, n_outputs: int, config: LaunchConfig, budget,
            on_device: bool, scheduler,
            pilot: bool, reduce=None, later_method: bool = False,
            failed: FailedBuilds | None = None) -> HostSecondPass | None:
    """The host's second pass for a run, or None where the device keeps it: no GPU
    (the CPU path is the host already), one pass, several MPI ranks (the pass runs on
    every rank), no C++ compiler. Without a pilot to predict slow members (the first
    pass is then one launch or a few), its build starts now; otherwise when a launch
    returns members past --pass-steps (passes.MemberClock), as for runs of fewer than
    EARLY_BUILD_MIN_MEMBERS (a single run, a test-suite case: a build for each would
    double the CPU work of a suite run on the GPU machine). `reduce`: the run's
    per-member reduction (TimeCourse.reduce); the device keeps the pass where it
    cannot score members on the host (no `on_host`). `later_method`: the pass runs the
    later method (HostSecondPass.later_method). `failed`: the program's FailedBuilds."""
    if reduce is not None and not callable(getattr(reduce, "on_host", None)):
        return None
    if not on_device or not budget.two_passes or getattr(scheduler, "size", 1) > 1:
        return None
    from .native import host_compiler

    if host_compiler() is None:
        return None
    host = HostSecondPass(source, table, times, n_outputs, config, reduce=reduce,
                          later_method=later_method, failed=failed)
    if not pilot and table.shape[1] >= EARLY_BUILD_MIN_MEMBERS:
        host.start_build()
    return host
