"""Retries on speculation in the host's second pass (plugins/ode/host_pass.py, Retry):
once every first attempt (bdf) has been taken, a thread that would idle runs the
retry (rodas4) of the member whose first attempt has run longest; the retry is the
member's result where the attempt fails, and is stopped and dropped where the
attempt finishes the member. The results are the rule's, whatever ran on speculation.

The schedule is checked with scripted kernels (each member's time, status and values
given, the order of events recorded), the stop request with the real host build of a
kernel (HostKernel.run's `stop`), and the whole with the fake GPU of
test_ode_passes_host.py on more threads than members (test_ode_later_method.py's
model and groups).
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import sbmlgpu
from sbmlgpu.plugins.ode import host_pass
from sbmlgpu.results import Status

from .ode_helpers import needs_compiler
from .test_ode_limits import STIFF, TIMES

OK, UNDERFLOW, STOPPED = int(Status.ok), int(Status.step_size_underflow), int(Status.time_limit)


class ScriptedKernel:
    """A host build stand-in: member m takes script[m] = (seconds, status), writes
    values of `mark` + m, and stops early (STOPPED) where its stop request is set;
    every call is logged as (event, kernel name, member, time)."""

    dtype = np.float64

    def __init__(self, name: str, script: dict, mark: float, log: list, lock):
        self.name, self.script, self.mark, self.log, self.lock = name, script, mark, log, lock

    def run(self, table, times, n_outputs, settings, members, first_member, stop=None):
        member = int(members[0])
        seconds, status = self.script[member]
        self._note("start", member)
        ends = time.perf_counter() + seconds
        while time.perf_counter() < ends:
            if stop is not None and stop[0]:
                self._note("stopped", member)
                return (np.full((len(times), n_outputs, 1), np.nan),
                        np.array([STOPPED], np.int8), np.array([1], np.int32))
            time.sleep(0.002)
        self._note("end", member)
        return (np.full((len(times), n_outputs, 1), self.mark + member),
                np.array([status], np.int8), np.array([100 + member], np.int32))

    def _note(self, event: str, member: int) -> None:
        with self.lock:
            self.log.append((event, self.name, member, time.perf_counter()))


class Settings:
    def as_dict(self) -> dict:
        return {}


def scripted_pass(first: dict, again: dict, cores: int):
    """A host pass over members 0..len(first)-1 whose first attempts follow `first`
    and retries `again`; (result, log)."""
    log, lock = [], threading.Lock()
    kernels = {"first": ScriptedKernel("first", first, 0.0, log, lock),
               "again": ScriptedKernel("again", again, 1000.0, log, lock)}
    table = np.zeros((1, len(first)))
    hosts = [host_pass.HostSecondPass(name, table, np.array([0.0, 1.0]), 2, Settings(),
                                      cores=cores) for name in ("first", "again")]
    for host in hosts:
        host._load = (lambda h: lambda: kernels[h.source])(host)
        host.start_build()
        host.kernel()  # built: retries may start at once
    retry = host_pass.Retry(hosts[1], (OK, STOPPED))
    done = []
    result = hosts[0].run(np.arange(len(first)), done=done.append, retry=retry)
    assert sum(done) == len(first)  # each member counted once, when its result is known
    return result, log


def when(log, event: str, kernel: str, member: int) -> float:
    times = [t for e, k, m, t in log if (e, k, m) == (event, kernel, member)]
    assert len(times) == 1, (event, kernel, member, log)
    return times[0]


def test_a_failing_attempts_retry_starts_beside_it_and_is_its_result():
    # member 0 fails after 0.3 s; a thread with nothing left to take starts its retry
    result, log = scripted_pass({0: (0.3, UNDERFLOW), 1: (0.0, OK)},
                                {0: (0.1, OK), 1: (0.0, OK)}, cores=4)
    assert when(log, "start", "again", 0) < when(log, "end", "first", 0)
    assert result.status.tolist() == [OK, OK] and result.retried.tolist() == [True, False]
    assert (result.data[0] == 1000.0).all() and (result.data[1] == 1.0).all()
    assert result.steps.tolist() == [100, 101]
    assert result.speculated == (1, 1)


def test_a_retry_whose_attempt_finishes_the_member_is_stopped_and_dropped():
    # member 0's bdf finishes it after 0.2 s; its retry on speculation would take 30 s
    result, log = scripted_pass({0: (0.2, OK), 1: (0.0, OK)},
                                {0: (30.0, OK), 1: (0.0, OK)}, cores=4)
    assert when(log, "start", "again", 0) < when(log, "end", "first", 0)
    assert when(log, "stopped", "again", 0) >= when(log, "end", "first", 0)
    assert result.status.tolist() == [OK, OK] and not result.retried.any()
    assert (result.data[0] == 0.0).all() and result.steps.tolist() == [100, 101]
    assert result.speculated == (1, 0)


def test_a_retry_that_ends_first_waits_for_its_attempts_verdict():
    # the retry ends before the attempt: kept, and used only once the attempt fails
    result, log = scripted_pass({0: (0.3, UNDERFLOW)}, {0: (0.05, OK)}, cores=2)
    assert when(log, "end", "again", 0) < when(log, "end", "first", 0)
    assert result.status.tolist() == [OK] and result.retried.tolist() == [True]
    assert (result.data[0] == 1000.0).all() and result.speculated == (1, 1)


def test_a_retry_after_the_attempt_without_a_spare_thread_runs_as_before():
    # one core: no thread ever idles beside the attempt, the retry follows it
    result, log = scripted_pass({0: (0.05, UNDERFLOW), 1: (0.05, OK)},
                                {0: (0.01, OK), 1: (0.0, OK)}, cores=1)
    assert when(log, "start", "again", 0) > when(log, "end", "first", 0)
    assert result.status.tolist() == [OK, OK] and result.retried.tolist() == [True, False]
    assert result.speculated == (0, 0)


def test_the_retry_keeps_the_rules_status_where_both_fail():
    result, _ = scripted_pass({0: (0.2, UNDERFLOW)}, {0: (0.05, UNDERFLOW)}, cores=2)
    assert result.status.tolist() == [UNDERFLOW] and result.retried.tolist() == [True]
    assert (result.data[0] == 1000.0).all()


# -- the stop request of a real host build ---------------------------------------------------
@pytest.fixture(scope="module")
def model():
    needs_compiler()
    return sbmlgpu.load(STIFF)


def test_a_stop_request_ends_a_host_builds_member_and_an_unset_one_changes_nothing(model):
    from sbmlgpu.ode.model import KernelModel
    from sbmlgpu.plugins.ode.native import host_kernel
    from sbmlgpu.plugins.ode.program import kernel_source
    from sbmlgpu.views import ode_system

    kernel = host_kernel(kernel_source(KernelModel(ode_system(model), ("k",), ("x",)),
                                       "dopri5"))
    table = np.array([[1e4]])  # a stiff member: thousands of dopri5 steps
    settings = {"rtol": 1e-8, "atol": 1e-12, "h0": 0.0, "max_step": 0.0, "dt": 0.0,
                "max_steps": 10**6, "seed": 5, "n": 1}
    plain = kernel.run(table, TIMES, 1, settings, np.array([0], np.uint64), 0)
    unset = kernel.run(table, TIMES, 1, settings, np.array([0], np.uint64), 0,
                       stop=np.zeros(1, np.int32))
    stopped = kernel.run(table, TIMES, 1, settings, np.array([0], np.uint64), 0,
                         stop=np.ones(1, np.int32))
    assert plain[1][0] == OK and plain[2][0] > 1000
    assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(plain, unset))
    assert stopped[1][0] == STOPPED and stopped[2][0] < 8
    # the request is the call's: the thread's next call runs unstopped
    again = kernel.run(table, TIMES, 1, settings, np.array([0], np.uint64), 0)
    assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(plain, again))
    with pytest.raises(ValueError, match="one member"):
        kernel.run(np.array([[1.0, 2.0]]), TIMES, 1, {**settings, "n": 2}, None, 0,
                   stop=np.zeros(1, np.int32))


# -- a GPU run on more host threads than members --------------------------------------------
def test_on_a_gpu_retries_on_speculation_leave_every_member_as_the_rule_has_it(
        model, monkeypatch):
    """The fake GPU's run of test_ode_later_method.py with 16 host threads (most of them
    idle at the pass's end, so that retries run on speculation): each member equals a
    one-pass run of the method that finished it, bit for bit, as without speculation."""
    from .test_ode_later_method import K, PASS_STEPS, UNLIMITED, simulate, step_limit
    from .test_ode_passes_host import fake_gpu

    rodas4, r = simulate(model, "rodas4", max_steps=UNLIMITED)
    bdf, b = simulate(model, "bdf", max_steps=UNLIMITED)
    limit, (first, by_bdf, by_fallback, stopped) = step_limit(r, b)
    monkeypatch.setattr(host_pass.HostSecondPass, "takes", lambda host, m, tail=False: 0 < m)
    monkeypatch.setattr(host_pass, "host_cores", lambda: 16)
    result, program = fake_gpu(model, K, method="auto", pass_steps=PASS_STEPS,
                               max_steps=limit)
    meta = result.metadata
    assert meta["second_pass_method"] == "bdf" and meta["second_pass_where"] == "host"
    fallback = [s for s in meta["later_passes"] if s.get("overlaps") == "bdf"]
    assert len(fallback) == 1 and fallback[0]["where"] == "host"
    speculation = fallback[0]["on_speculation"]
    assert speculation["begun"] >= 1 and 0 <= speculation["used"] <= speculation["begun"]
    status = np.asarray(result.status)
    assert (status[first | by_bdf | by_fallback] == OK).all()
    assert (status[stopped] == int(Status.max_steps)).all()
    for members, one in ((first, rodas4), (by_bdf, bdf), (by_fallback, rodas4)):
        assert np.array_equal(result.data[members], one.data[members])
    assert np.array_equal(program.last_steps[by_bdf], b[by_bdf])
    assert np.array_equal(program.last_steps[by_fallback], r[by_fallback])


def _failing_retry_pass(first: dict, cores: int):
    """scripted_pass where the retries' build failed: (result, log, kernel() calls)."""
    log, lock = [], threading.Lock()
    kernel = ScriptedKernel("first", first, 0.0, log, lock)
    table = np.zeros((1, len(first)))
    hosts = [host_pass.HostSecondPass(name, table, np.array([0.0, 1.0]), 2, Settings(),
                                      cores=cores) for name in ("first", "again")]
    hosts[0]._load = lambda: kernel

    def no_compiler():
        raise OSError("no C++ compiler")

    hosts[1]._load = no_compiler
    for host in hosts:
        host.start_build()
        host.kernel()
    calls, kernel_of = [0], hosts[1].kernel

    def counted():
        calls[0] += 1
        return kernel_of()

    hosts[1].kernel = counted
    done = []
    result = hosts[0].run(np.arange(len(first)), done=done.append,
                          retry=host_pass.Retry(hosts[1], (OK, STOPPED)))
    assert sum(done) == len(first)
    return result, log, calls[0]


def test_a_failed_retry_build_runs_nothing_on_speculation():
    # a thread beside a 0.3 s attempt must not pick it again and again (it did: 17,662
    # speculations begun in 0.5 s, each finding the build failed)
    result, _, calls = _failing_retry_pass({0: (0.3, UNDERFLOW)}, cores=2)
    assert result.speculated == (0, 0) and calls <= 1
    assert result.status.tolist() == [UNDERFLOW] and not result.retried.any()
    assert (result.data[0] == 0.0).all()  # the attempt's values: no retry replaced them


def test_a_retry_that_ends_well_before_a_finishing_attempt_is_not_used():
    result, _ = scripted_pass({0: (0.3, OK)}, {0: (0.05, OK)}, cores=2)
    assert result.status.tolist() == [OK] and not result.retried.any()
    assert (result.data[0] == 0.0).all() and result.speculated == (1, 0)


def test_an_error_in_an_attempt_ends_the_pass_and_stops_its_speculation():
    log, lock = [], threading.Lock()

    class Failing(ScriptedKernel):
        def run(self, table, times, n_outputs, settings, members, first_member, stop=None):
            if int(members[0]) == 1:
                time.sleep(0.05)
                raise RuntimeError("member 1's call failed")
            return super().run(table, times, n_outputs, settings, members, first_member, stop)

    kernels = {"first": Failing("first", {0: (0.3, OK), 1: (0.0, OK)}, 0.0, log, lock),
               "again": ScriptedKernel("again", {0: (30.0, OK), 1: (30.0, OK)}, 1000.0,
                                       log, lock)}
    hosts = [host_pass.HostSecondPass(name, np.zeros((1, 2)), np.array([0.0, 1.0]), 2,
                                      Settings(), cores=4) for name in ("first", "again")]
    for host in hosts:
        host._load = (lambda h: lambda: kernels[h.source])(host)
        host.start_build()
        host.kernel()
    started = time.perf_counter()
    with pytest.raises(RuntimeError, match="member 1"):
        hosts[0].run(np.arange(2), retry=host_pass.Retry(hosts[1], (OK, STOPPED)))
    assert time.perf_counter() - started < 5  # no 30 s retry ran to its end
