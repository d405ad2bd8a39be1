"""sbmlgpu.schedule.ensemble: the runner every ensemble backend uses, with a fake engine
whose members' time courses are known in closed form (so every placement, order and
statistic can be checked against numpy), and fake MPI ranks."""

from __future__ import annotations

import os
import pickle
from types import SimpleNamespace

import numpy as np
import pytest

from sbmlgpu.ensemble_summary import (OVER_OK_MEMBERS, OVER_REACHED_SAMPLES, EnsembleStats,
                                      pilot_mean)
from sbmlgpu.schedule import Batch, Scheduler, bundle, pilot_indices
from sbmlgpu.schedule.ensemble import (BatchMemory, EnsembleJob, MemberResults, Pilot,
                                       run_ensemble)
from sbmlgpu.schedule.spill import Spill

TIMES = np.linspace(0.0, 2.0, 5)
OUTPUTS = 3


def expected(members) -> np.ndarray:
    """Member i's time course (times, outputs): (i + 1) * t + o + sin(i), NaN after
    t = 1 for the failed members (i % 13 == 5), as a failed solver leaves them."""
    members = np.asarray(members)
    data = ((members[:, None, None] + 1.0) * TIMES[None, :, None]
            + np.arange(OUTPUTS)[None, None, :] + np.sin(members)[:, None, None])
    failed = failed_members(members)
    data[failed[:, None] & (TIMES[None, :] > 1.0)] = np.nan
    return data


def failed_members(members) -> np.ndarray:
    return np.asarray(members) % 13 == 5


def steps_of(members) -> np.ndarray:
    return (10 + (np.asarray(members) * 7919) % 101).astype(np.int32)


class FakeEngine:
    """Runs a batch in closed form; with `reduce`, a summary batch is reduced "on the
    device" into shifted sums (as ssa's kernel) instead of returning time courses."""

    def __init__(self, reduce: bool = False):
        self.reduce = reduce
        self.calls: list[dict] = []

    def __call__(self, device, batch) -> MemberResults:
        members = batch.members if batch.members is not None else \
            np.arange(batch.start, batch.stop)
        self.calls.append({"device": device, "pilot": batch.pilot, "members": members.copy(),
                           "rows": batch.rows is not None, "start": batch.start})
        data = expected(members)
        status = np.where(failed_members(members), 1, 0).astype(np.int8)
        extras = {"steps": steps_of(members)}
        if batch.summary is not None and self.reduce:
            target = batch.summary
            values = data.reshape(len(members), -1)
            finite = np.isfinite(values)
            d = np.where(finite, values - target.shift, 0.0)
            hist = EnsembleStats.of_values(values, target.grid).hist
            stats = EnsembleStats.of_shifted_sums(target.shift, d.sum(axis=0),
                                                  (d * d).sum(axis=0), finite.sum(axis=0),
                                                  hist, target.grid)
            return MemberResults(status, None, stats, extras, 1.0)
        if batch.rows is not None:
            batch.rows[...] = data
            data = batch.rows
        return MemberResults(status, data, None, extras, 1.0)


def memory(time_courses: bool, bundled: bool) -> BatchMemory:
    return BatchMemory(100.0, 0.0, 32 if bundled else 1)


def job(engine, n=500, **kw) -> EnsembleJob:
    return EnsembleJob(n, (len(TIMES), OUTPUTS), engine, memory, progress=False, **kw)


def scheduler(batch=37):
    return Scheduler(devices=[], max_batch_items=batch, progress=False)


def test_time_courses_statuses_and_extras_come_back_in_member_order():
    engine = FakeEngine()
    sched = scheduler()
    out = run_ensemble(job(engine), sched)
    members = np.arange(500)
    assert out.root and len(sched.last_batches) >= 13
    assert np.array_equal(out.data, expected(members), equal_nan=True)
    assert np.array_equal(out.status, np.where(failed_members(members), 1, 0))
    assert np.array_equal(out.extras["steps"], steps_of(members))
    # consecutive members are handed their rows of the result to write in place
    assert all(call["rows"] for call in engine.calls)
    assert out.spill_path is None and isinstance(out.data, np.ndarray) \
        and not isinstance(out.data, np.memmap)


def test_the_pilot_runs_first_and_the_bundled_order_is_restored():
    engine = FakeEngine()
    n = 700
    pilot = Pilot.sample(pilot_indices(n, 64, seed=1))
    seen = {}

    def order(results, members):
        seen["pilot"] = (members.copy(), results.extras["steps"].copy())
        return bundle(steps_of(np.arange(n)).astype(float))  # a perfect predictor

    sched = scheduler(batch=100)
    out = run_ensemble(job(engine, n, pilot=pilot, order=order), sched)
    first = engine.calls[0]
    assert first["pilot"] and np.array_equal(first["members"], pilot.members)
    assert np.array_equal(seen["pilot"][1], steps_of(pilot.members))
    # the rest ran in the bundled order (most steps first), batches on warp boundaries
    launched = np.concatenate([c["members"] for c in sorted(engine.calls[1:],
                                                            key=lambda c: c["start"])])
    assert np.array_equal(launched, out.permutation.order)
    assert np.all(np.diff(steps_of(launched)) <= 0)
    assert all(r.start % 32 == 0 for r in sched.last_batches)
    assert not any(c["rows"] for c in engine.calls[1:])  # scattered by member instead
    members = np.arange(n)
    assert np.array_equal(out.data, expected(members), equal_nan=True)
    assert np.array_equal(out.status, np.where(failed_members(members), 1, 0))
    assert np.array_equal(out.extras["steps"], steps_of(members))


def test_a_pilot_in_the_ensemble_is_kept_and_not_run_again():
    engine = FakeEngine()
    out = run_ensemble(job(engine, 300, pilot=Pilot.first(40)), scheduler())
    ran = np.concatenate([c["members"] for c in engine.calls[1:]])
    assert np.array_equal(np.sort(ran), np.arange(40, 300))
    assert np.array_equal(out.data, expected(np.arange(300)), equal_nan=True)
    assert np.array_equal(out.extras["steps"], steps_of(np.arange(300)))


@pytest.mark.parametrize("keep", [False, True])
def test_above_the_limit_the_time_courses_go_to_a_file(tmp_path, keep):
    engine = FakeEngine()
    spill = Spill(limit_bytes=1000, directory=str(tmp_path), keep=keep, prefix="test-")
    out = run_ensemble(job(engine, spill=spill), scheduler())
    assert isinstance(out.data, np.memmap) and out.spill_path.startswith(str(tmp_path))
    assert np.array_equal(np.asarray(out.data), expected(np.arange(500)), equal_nan=True)
    assert all(call["rows"] for call in engine.calls)  # rows of the mapped file itself
    if keep:  # the caller asked for the file: it stays, a valid .npy
        assert out.spill_kept and os.path.exists(out.spill_path)
        assert np.array_equal(np.load(out.spill_path), np.asarray(out.data), equal_nan=True)
    else:  # unlinked at once: nothing is left behind
        assert not out.spill_kept and os.listdir(tmp_path) == []
        assert "unlinked" in out.spill_note
    small = run_ensemble(job(FakeEngine(), 2, spill=Spill(limit_bytes=1000,
                                                          directory=str(tmp_path / "no"))),
                         scheduler())
    assert small.spill_path is None and not isinstance(small.data, np.memmap)


@pytest.mark.parametrize("reduce", [False, True])
def test_the_summary_equals_numpy_over_the_same_members(reduce):
    """Over ok members (ode's rules), folded on the host; over reached samples (ssa's
    rules) reduced "on the device" into shifted sums: either way numpy's statistics.
    Quantiles: 32 bins are wider than the members' spacing, so that either rule is
    within two bin widths of numpy's wherever numpy's lies inside the binned range."""
    n = 900
    members = np.arange(n)
    data = expected(members)
    ok = ~failed_members(members)
    rules = OVER_REACHED_SAMPLES if reduce else OVER_OK_MEMBERS
    pilot = Pilot.first(100) if reduce else Pilot.sample(pilot_indices(n, 100, 0))
    sched = scheduler(batch=128)
    out = run_ensemble(job(FakeEngine(reduce), n, pilot=pilot, summary=rules, bins=32),
                       sched)
    assert out.data is None and len(sched.last_batches) >= 6
    s = out.summary
    assert (s.n_used, s.n_excluded) == (int(ok.sum()), int((~ok).sum()))
    used = data[ok] if rules is OVER_OK_MEMBERS else data
    with np.errstate(invalid="ignore"):
        mean = np.nanmean(used, axis=0)
        sd = np.nanstd(used, axis=0, ddof=1)
    np.testing.assert_allclose(s.mean, mean, rtol=1e-12)
    np.testing.assert_allclose(s.sd, sd, rtol=1e-9, atol=1e-12)
    exact = np.nanquantile(used, s.quantiles, axis=0)
    width = out.target.grid.width.reshape(len(TIMES), OUTPUTS)
    inside = (exact >= out.target.grid.lo.reshape(width.shape)) & \
        (exact <= out.target.grid.hi.reshape(width.shape))
    assert np.all(np.abs(s.quantile_values - exact)[inside] <= 2 * np.broadcast_to(
        width, exact.shape)[inside] + 1e-9)
    assert np.array_equal(out.target.shift, pilot_mean(rules.values(
        expected(pilot.members), np.where(failed_members(pilot.members), 1, 0))))


class FakeComm:
    """bcast as rank 0 sends (remembered) and as another rank receives it."""

    def __init__(self, received=None):
        self.sent, self.received = None, received

    def bcast(self, value, root=0):
        if self.received is None:
            self.sent = value
            return value
        return self.received


class RankScheduler:
    """`map_batches` as one of `size` MPI ranks sees it: rank 0 gets every batch's
    result back (through pickle, as they travel), another rank None."""

    def __init__(self, rank: int, comm: FakeComm, size: int = 2, batch: int = 64):
        self.rank, self.size, self.is_root = rank, size, rank == 0
        self.world = SimpleNamespace(comm=comm)
        self.local_devices = ()
        self.batch = batch

    def map_batches(self, work, n, bytes_per_item, *, fixed_bytes=0, align=1,
                    combine="batches", progress=None, desc="", max_items=None):
        batch = self.batch if max_items is None else min(self.batch, max_items)
        step = -(-batch // align) * align
        starts = range(0, n, step)
        mine = [(a, min(a + step, n)) for k, a in enumerate(starts)
                if self.is_root or k % self.size == self.rank]
        pieces = [(Batch(a, b), work(None, a, b)) for a, b in mine]
        return pickle.loads(pickle.dumps(pieces)) if self.is_root else None


def test_mpi_root_places_the_batches_that_travelled_and_other_ranks_get_nothing():
    n = 400
    pilot = Pilot.sample(pilot_indices(n, 32, 5))

    def order(results, members):
        return bundle(steps_of(np.arange(n)).astype(float))

    root_comm = FakeComm()
    root_engine = FakeEngine()
    root = run_ensemble(job(root_engine, n, pilot=pilot, order=order),
                        RankScheduler(0, root_comm))
    assert root.root and not any(c["rows"] for c in root_engine.calls)  # data travels
    assert np.array_equal(root.data, expected(np.arange(n)), equal_nan=True)
    assert np.array_equal(root.extras["steps"], steps_of(np.arange(n)))

    other_engine = FakeEngine()
    other = run_ensemble(job(other_engine, n, pilot=pilot, order=order),
                         RankScheduler(1, FakeComm(received=root_comm.sent)))
    assert not other.root
    assert other.data.shape == (0, len(TIMES), OUTPUTS) and other.status.shape == (0,)
    assert not any(c["pilot"] for c in other_engine.calls)  # rank 0 ran the pilot
    # it ran its batches in the order rank 0 chose
    assert np.array_equal(other.permutation.order, root.permutation.order)
    for call in other_engine.calls:
        start = call["start"]
        assert np.array_equal(call["members"], root.permutation.order[start:start + len(
            call["members"])])


def test_mpi_summary_merges_the_partials_of_every_rank():
    n = 300
    members = np.arange(n)
    comm = FakeComm()
    out = run_ensemble(job(FakeEngine(True), n, pilot=Pilot.first(50),
                           summary=OVER_REACHED_SAMPLES, bins=64),
                       RankScheduler(0, comm, batch=40))
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(out.summary.mean, np.nanmean(expected(members), axis=0),
                                   rtol=1e-12)
    assert comm.sent[1] is out.target  # the grid and shift every rank bins with


@pytest.mark.parametrize("backend", ["ode", "ssa"])
def test_backends_on_an_mpi_rank_other_than_0_return_an_empty_result(backend):
    from sbmlgpu.tasks import TimeCourse

    if backend == "ode":
        from sbmlgpu.plugins.ode.backend import OdeBackend
        from sbmlgpu.plugins.ode.options import OdeOptions

        from .ode_helpers import load

        program = OdeBackend().compile(load("seir_epidemic"),
                                       OdeOptions(cpu_engine="numpy").validate(), None)
        request = TimeCourse(times=np.linspace(0, 10, 4),
                             parameters={"beta": np.linspace(0.1, 1, 50)}, progress=False)
        outputs = 4
    else:
        from sbmlgpu.plugins.ssa.backend import SsaBackend
        from sbmlgpu.plugins.ssa.options import SsaOptions

        from .test_ssa_model import small_dimerisation

        program = SsaBackend().compile(small_dimerisation(), SsaOptions(cpu_engine="numpy"),
                                       None)
        request = TimeCourse(times=np.linspace(0, 1, 4), n=50, seed=1, progress=False)
        outputs = 3
    result = program.run(request, RankScheduler(1, FakeComm(received=(None, None))), None)
    assert result.data.shape == (0, 4, outputs) and result.n_members == 0
