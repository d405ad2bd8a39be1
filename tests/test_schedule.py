"""The scheduler on fake devices (no GPU): batch arithmetic, OOM retry, multi-device
dispatch, result order, progress, bundling and the cost predictor."""

from __future__ import annotations

import io
import sys
import threading
import time
import weakref

import numpy as np
import pytest

from sbmlgpu.errors import DeviceError, OptionError, SimulationError
from sbmlgpu.profile import Profiler
from sbmlgpu.runtime.base import OutOfDeviceMemory
from sbmlgpu.schedule import (Batch, CostPredictor, Permutation, Progress, Scheduler, bundle,
                              combine_in_order, items_that_fit, lane_efficiency, refill_makespan,
                              pilot_indices, plan_batches, static_block)

from .fakes import FakeDevice, Terminal, active_device


def squares(device, start, stop):
    """A work function whose result tells which items it computed."""
    assert active_device() is device, "work ran without its device active"
    return np.arange(start, stop, dtype=float) ** 2


def expected_squares(n):
    return np.arange(n, dtype=float) ** 2


# --- batch arithmetic -------------------------------------------------------------------

def test_items_that_fit_uses_the_safety_fraction_and_the_fixed_part():
    assert items_that_fit(1000, 8, fixed_bytes=100, safety=0.9) == (900 - 100) // 8
    assert items_that_fit(1000, 8, fixed_bytes=950, safety=0.9) == 0
    assert items_that_fit(1000, 0, safety=0.5) == sys.maxsize
    with pytest.raises(OptionError, match="safety"):
        items_that_fit(1000, 8, safety=1.5)
    with pytest.raises(OptionError, match="bytes-per-item"):
        items_that_fit(1000, -1)


def test_plan_batches_tiles_the_items_with_aligned_batches_that_fit():
    free, per_item, fixed = 10_000, 24, 400
    fit = items_that_fit(free, per_item, fixed, 0.8)
    batches = plan_batches(1000, per_item, free_bytes=free, fixed_bytes=fixed, safety=0.8,
                           align=32)
    assert batches[0].start == 0 and batches[-1].stop == 1000
    assert all(a.stop == b.start for a, b in zip(batches, batches[1:]))
    assert all(b.size <= fit for b in batches)
    assert all(b.size % 32 == 0 and b.start % 32 == 0 for b in batches[:-1])
    assert batches[0].size == fit // 32 * 32  # as large as memory allows
    capped = plan_batches(1000, per_item, free_bytes=free, max_items=100)
    assert max(b.size for b in capped) == 100 and len(capped) == 10


def test_plan_batches_says_what_does_not_fit():
    with pytest.raises(DeviceError, match=r"1000 fixed \+ 50 per item"):
        plan_batches(10, 50, free_bytes=1000, fixed_bytes=1000)
    with pytest.raises(OptionError, match="max-batch-items"):
        plan_batches(10, 1, free_bytes=1000, max_items=2, min_items=4)
    assert plan_batches(0, 8, free_bytes=1000) == []


def test_map_batches_sizes_batches_from_the_devices_free_memory():
    device = FakeDevice(0, free=10_000)
    scheduler = Scheduler([device], safety=0.5, progress=False)
    result = scheduler.map_batches(squares, 1000, bytes_per_item=40, fixed_bytes=1000)
    np.testing.assert_array_equal(result, expected_squares(1000))
    fit = items_that_fit(10_000, 40, 1000, 0.5)
    sizes = [r.size for r in scheduler.last_batches]
    assert max(sizes) == fit and sum(sizes) == 1000
    assert scheduler.plan(1000, 40, fixed_bytes=1000)[0].size == fit


def test_several_workers_per_device_share_its_memory_and_the_items():
    """workers_per_device=2: two threads take batches for the one device, each sized
    from half of its free memory; the results come back in item order. The host and
    MPI ranks keep one worker."""
    device = FakeDevice(0, free=10_000)
    threads, together = set(), threading.Barrier(2, timeout=10)

    def work(device, start, stop):
        if not threads:
            together.wait()  # broken unless a second worker runs at the same time
        threads.add(threading.get_ident())
        return squares(device, start, stop)

    scheduler = Scheduler([device], safety=0.5, progress=False)
    result = scheduler.map_batches(work, 1000, bytes_per_item=40, fixed_bytes=1000,
                                   workers_per_device=2)
    np.testing.assert_array_equal(result, expected_squares(1000))
    assert len(threads) == 2
    sizes = [r.size for r in scheduler.last_batches]
    assert max(sizes) <= items_that_fit(10_000, 40, 1000, 0.25) and sum(sizes) == 1000
    with pytest.raises(OptionError, match="workers-per-device"):
        scheduler.map_batches(squares, 10, workers_per_device=0)
    # a launch's fixed bytes fit one worker's share of the memory, not two: one worker
    roomy = Scheduler([FakeDevice(0, free=10_000)], progress=False)
    threads.clear()
    result = roomy.map_batches(lambda d, a, b: threads.add(threading.get_ident())
                               or squares(d, a, b), 1000, bytes_per_item=40,
                               fixed_bytes=5000, workers_per_device=2)
    np.testing.assert_array_equal(result, expected_squares(1000))
    assert len(threads) == 1
    host = Scheduler(progress=False)
    seen = set()
    host.map_batches(lambda d, a, b: seen.add(threading.get_ident()) or np.arange(a, b),
                     100, workers_per_device=3)
    assert seen == {threading.get_ident()}  # the host: one worker, the calling thread
    # one batch for the one device (max_items): no second thread is started
    seen.clear()
    Scheduler([FakeDevice(0)], progress=False).map_batches(
        lambda d, a, b: seen.add(threading.get_ident()) or np.arange(a, b), 100,
        max_items=100, workers_per_device=2)
    assert seen == {threading.get_ident()}


def test_max_batch_items_caps_every_launch():
    scheduler = Scheduler([FakeDevice(0)], max_batch_items=64, progress=False)
    result = scheduler.map_batches(squares, 1000, bytes_per_item=8)
    np.testing.assert_array_equal(result, expected_squares(1000))
    assert {r.size for r in scheduler.last_batches[:-1]} == {64}


def test_no_devices_means_the_host_path():
    seen = []

    def work(device, start, stop):
        seen.append(device)
        return np.arange(start, stop)

    scheduler = Scheduler(max_batch_items=30, progress=False)
    np.testing.assert_array_equal(scheduler.map_batches(work, 100), np.arange(100))
    assert seen == [None] * 4 and scheduler.last_batches[0].device_name == "host"


# --- out of device memory ---------------------------------------------------------------

def oom_above(limit, calls):
    def work(device, start, stop):
        calls.append(stop - start)
        if stop - start > limit:
            raise OutOfDeviceMemory(f"cuMemAlloc failed for {stop - start} items")
        return squares(device, start, stop)
    return work


def test_out_of_memory_halves_the_batch_and_keeps_every_item_in_order():
    calls = []
    scheduler = Scheduler([FakeDevice(0)], progress=False)
    result = scheduler.map_batches(oom_above(100, calls), 1000, bytes_per_item=8)
    np.testing.assert_array_equal(result, expected_squares(1000))
    assert calls[:5] == [1000, 500, 250, 125, 62]  # halved until it fits
    assert scheduler.last_batches[0].out_of_memory_sizes == (1000, 500, 250, 125)
    assert all(r.size <= 100 for r in scheduler.last_batches)
    # the size that fitted is kept: no further failures after the first success
    assert all(size <= 100 for size in calls[5:])


def test_buffers_of_a_failed_try_are_freed_before_the_retry():
    class Buffer:  # stands for a device allocation freed when garbage-collected
        pass

    allocations = []

    def work(device, start, stop):
        buffer = Buffer()
        buffer.cycle = buffer  # only the cycle collector can free it
        allocations.append(weakref.ref(buffer))
        if stop - start > 10:
            raise OutOfDeviceMemory("too big")
        assert all(ref() is None for ref in allocations[:-1]), "a failed try's buffer lives"
        allocations.clear()  # (a successful try's buffer may live on: no retry waits on it)
        return squares(device, start, stop)

    scheduler = Scheduler([FakeDevice(0)], progress=False)
    np.testing.assert_array_equal(scheduler.map_batches(work, 40), expected_squares(40))


def test_out_of_memory_halving_respects_alignment():
    calls = []
    scheduler = Scheduler([FakeDevice(0)], progress=False)
    result = scheduler.map_batches(oom_above(100, calls), 1000, bytes_per_item=8, align=32)
    np.testing.assert_array_equal(result, expected_squares(1000))
    assert calls[:5] == [992, 480, 224, 96, 96]
    assert all(r.start % 32 == 0 for r in scheduler.last_batches)


def test_out_of_memory_below_the_minimum_is_a_device_error_saying_what_was_tried():
    scheduler = Scheduler([FakeDevice(0, name="Tiny GPU")], min_batch_items=16,
                          progress=False)
    with pytest.raises(DeviceError) as info:
        scheduler.map_batches(oom_above(10, []), 128, bytes_per_item=8)
    message = str(info.value)
    assert "tried batch sizes 128, 64, 32, 16" in message
    assert "min-batch-items is 16" in message and "Tiny GPU" in message
    assert isinstance(info.value.__cause__, OutOfDeviceMemory)
    assert info.value.device_index == 0


def test_nothing_fits_is_reported_before_launching():
    calls = []
    scheduler = Scheduler([FakeDevice(0, free=1000)], progress=False)
    with pytest.raises(DeviceError, match="not enough memory on device 0"):
        scheduler.map_batches(oom_above(10, calls), 100, bytes_per_item=8,
                              fixed_bytes=2000)
    assert calls == []


# --- several devices --------------------------------------------------------------------

def test_faster_device_takes_more_batches_and_results_stay_in_order():
    fast, slow = FakeDevice(0, name="fast"), FakeDevice(1, name="slow")
    per_batch = {0: 0.002, 1: 0.02}

    def work(device, start, stop):
        time.sleep(per_batch[device.index])
        return squares(device, start, stop)

    scheduler = Scheduler([fast, slow], batches_per_device=8, progress=False)
    result = scheduler.map_batches(work, 4000, bytes_per_item=8)
    np.testing.assert_array_equal(result, expected_squares(4000))
    table = scheduler.batches_by_device()
    assert len(scheduler.last_batches) == 16  # 4000 / (8 batches x 2 devices) = 250 each
    assert table[(0, 0)]["batches"] > 2 * table[(0, 1)]["batches"]
    assert table[(0, 0)]["items"] + table[(0, 1)]["items"] == 4000
    # each device was driven from its own thread, which activated it
    assert len(fast.activating_threads) == 1 and len(slow.activating_threads) == 1
    assert fast.activating_threads != slow.activating_threads


def test_each_device_sizes_its_own_batches():
    big, small = FakeDevice(0, free=1 << 30), FakeDevice(1, free=4000)

    def work(device, start, stop):
        time.sleep(0.005 if device is big else 0.0005)  # leave the small one work to do
        return squares(device, start, stop)

    scheduler = Scheduler([big, small], safety=1.0, progress=False)
    result = scheduler.map_batches(work, 2000, bytes_per_item=100)
    np.testing.assert_array_equal(result, expected_squares(2000))
    assert max(r.size for r in scheduler.last_batches if r.device_index == 1) <= 40
    assert max(r.size for r in scheduler.last_batches if r.device_index == 0) == 250


def test_a_failure_on_one_device_is_raised_with_its_index_and_type():
    def work(device, start, stop):
        if device.index == 1:
            raise SimulationError("integrator failed at t=3")
        time.sleep(0.001)
        return squares(device, start, stop)

    scheduler = Scheduler([FakeDevice(0), FakeDevice(1, name="bad GPU")], progress=False)
    with pytest.raises(SimulationError, match=r"device 1 \(bad GPU\): integrator failed") as info:
        scheduler.map_batches(work, 1000)
    assert info.value.device_index == 1


def test_a_bug_in_work_keeps_its_type_and_traceback():
    def work(device, start, stop):
        if device.index == 0:
            raise KeyError("missing")
        return squares(device, start, stop)

    scheduler = Scheduler([FakeDevice(0), FakeDevice(1)], progress=False)
    with pytest.raises(KeyError) as info:
        scheduler.map_batches(work, 100)
    assert info.value.device_index == 0 and info.traceback[-1].name == "work"


def test_batches_become_spans_on_their_device_track():
    profiler = Profiler()
    scheduler = Scheduler([FakeDevice(0), FakeDevice(1)], progress=False, profiler=profiler)
    scheduler.map_batches(squares, 800)
    spans = profiler.spans
    assert len(spans) == len(scheduler.last_batches) == 8
    assert {s.device_index for s in spans} <= {0, 1}
    assert sorted((s.meta["start"], s.meta["stop"]) for s in spans) == \
        [(r.start, r.stop) for r in scheduler.last_batches]


# --- combining results ------------------------------------------------------------------

def test_tuple_and_dict_results_are_stitched_field_by_field():
    def work(device, start, stop):
        index = np.arange(start, stop)
        return {"y": np.stack([index, -index], axis=1), "status": list(index % 3)}, index

    scheduler = Scheduler([FakeDevice(0)], max_batch_items=7, progress=False)
    (fields, index) = scheduler.map_batches(work, 50)
    np.testing.assert_array_equal(fields["y"][:, 1], -np.arange(50))
    assert fields["status"] == list(np.arange(50) % 3)
    np.testing.assert_array_equal(index, np.arange(50))


def test_a_result_with_the_wrong_length_is_refused():
    scheduler = Scheduler([FakeDevice(0)], max_batch_items=10, progress=False)
    with pytest.raises(ValueError, match="batch of 10 items has shape"):
        scheduler.map_batches(lambda d, a, b: np.zeros(3), 30)


def test_combine_options():
    pieces = [(Batch(3, 5), "b"), (Batch(0, 3), "a")]
    assert combine_in_order(pieces, 5) == ["a", "b"]
    assert [b.start for b, _ in combine_in_order(pieces, 5, "batches")] == [0, 3]
    assert combine_in_order(pieces, 5, lambda ps: "".join(r for _, r in ps)) == "ab"
    with pytest.raises(RuntimeError, match="does not start at 3"):
        combine_in_order([(Batch(0, 3), 1), (Batch(4, 5), 2)], 5)
    with pytest.raises(OptionError, match="combine"):
        Scheduler(progress=False).map_batches(squares, 3, combine="zip")
    assert Scheduler(progress=False).map_batches(squares, 0) is None


def test_bad_scheduler_options_name_the_option():
    with pytest.raises(OptionError, match="safety"):
        Scheduler(safety=0)
    with pytest.raises(OptionError, match="max-batch-items"):
        Scheduler(max_batch_items=4, min_batch_items=8)
    with pytest.raises(OptionError, match="mpi-mode"):
        Scheduler(mpi_mode="round-robin")
    with pytest.raises(OptionError, match="n-items"):
        Scheduler().map_batches(squares, 2.5)


def test_asking_for_mpi_without_mpi4py_is_an_option_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # makes the import fail
    with pytest.raises(OptionError, match="mpi4py"):
        Scheduler(mpi=True)
    Scheduler(mpi=False)  # not asked for: no import, no error


def test_static_blocks_split_evenly():
    blocks = [static_block(10, r, 3) for r in range(3)]
    assert blocks == [(0, 4), (4, 7), (7, 10)]


# --- progress ---------------------------------------------------------------------------

def test_progress_bar_appears_only_after_the_delay():
    quick = Terminal()
    with Progress(100, delay=60, file=quick) as bar:
        bar.advance(100)
    assert quick.getvalue() == ""
    slow = Terminal()
    with Progress(100, delay=0, file=slow) as bar:
        bar.advance(40)
        bar.advance(60)
    assert "100/100" in slow.getvalue()


def test_progress_is_lines_when_not_a_terminal_and_silent_when_disabled():
    pipe = io.StringIO()  # a log: lines, not a bar redrawn with carriage returns
    with Progress(10, delay=0, file=pipe) as bar:
        bar.advance(10)
    assert "sbmlgpu: progress: 10 of 10 items (100 %)" in pipe.getvalue() and bar.done == 10
    assert "\r" not in pipe.getvalue()
    off = Terminal()
    with Progress(10, delay=0, enabled=False, file=off) as bar:
        bar.advance(10)
    assert off.getvalue() == ""


def test_a_broken_progress_bar_never_breaks_a_run(monkeypatch):
    import tqdm

    def broken(*args, **kwargs):
        raise RuntimeError("no terminal here")

    monkeypatch.setattr(tqdm, "tqdm", broken)
    scheduler = Scheduler([FakeDevice(0)], max_batch_items=10, progress_delay=0)
    np.testing.assert_array_equal(scheduler.map_batches(squares, 35), expected_squares(35))


# --- bundling ---------------------------------------------------------------------------

def test_bundle_orders_by_cost_stably_and_restores_the_original_order():
    rng = np.random.default_rng(1)
    costs = rng.integers(1, 6, size=200).astype(float)  # many ties
    perm = bundle(costs)
    ordered = perm.apply(costs)
    assert np.all(np.diff(ordered) <= 0)
    for value in np.unique(costs):  # ties keep their original order
        assert np.all(np.diff(perm.order[ordered == value]) > 0)
    np.testing.assert_array_equal(perm.order[perm.inverse], np.arange(200))
    values = rng.normal(size=(200, 3))
    np.testing.assert_array_equal(perm.restore(perm.apply(values)), values)
    params = {"k1": rng.normal(size=200), "k2": rng.normal(size=200)}
    moved = perm.apply(params)
    np.testing.assert_array_equal(moved["k2"], params["k2"][perm.order])
    assert np.all(np.diff(bundle(costs, descending=False).apply(costs)) >= 0)
    np.testing.assert_array_equal(perm.bundle_of(), perm.inverse // 32)


def test_bundling_raises_lane_efficiency_for_spread_out_costs():
    rng = np.random.default_rng(2)
    costs = rng.lognormal(mean=0, sigma=1.5, size=4096)
    before = lane_efficiency(costs)
    after = lane_efficiency(costs, permutation=bundle(costs))
    assert before < 0.2 and after > 0.6 and after > 5 * before
    assert lane_efficiency(np.ones(100)) == 1.0


def _lanes_by_events(costs, lanes):
    """refill_makespan the slow way: time advances to the next lane that ends, which
    takes the next item (ties: the lowest lane), as a refill kernel's queue hands out."""
    ends = [0.0] * lanes
    for cost in costs:
        lane = min(range(lanes), key=lambda k: (ends[k], k))
        ends[lane] += cost
    return max(ends)


def test_refill_makespan_is_list_scheduling():
    # in order: 1, 1 on two lanes; the third item to the lane free at 1; 10 to the
    # other one (free at 1): 11; longest first: 10 on one lane, the rest on the other
    assert refill_makespan([1, 1, 1, 10], 2) == 11.0
    assert refill_makespan([1, 1, 1, 10], 2, bundle([1, 1, 1, 10])) == 10.0
    assert refill_makespan([3, 4, 5], 1) == 12.0  # one lane: the sum
    assert refill_makespan([3, 4, 5], 8) == 5.0  # a lane each: the largest
    assert refill_makespan([], 4) == 0.0
    rng = np.random.default_rng(5)
    for lanes in (1, 3, 17):
        costs = rng.lognormal(0, 1.5, 300)
        assert refill_makespan(costs, lanes) == pytest.approx(_lanes_by_events(costs, lanes))
    with pytest.raises(OptionError, match="negative"):
        refill_makespan([1.0, -1.0], 2)


def test_bad_permutations_and_costs_are_option_errors():
    with pytest.raises(OptionError, match="repeat"):
        Permutation([0, 0, 2])
    with pytest.raises(OptionError, match="indices must lie"):
        Permutation([0, 3])
    with pytest.raises(OptionError, match="finite"):
        bundle([1.0, np.nan])
    with pytest.raises(OptionError, match="axis 0 has 2"):
        Permutation([1, 0, 2]).apply(np.zeros(2))


def test_bundled_run_through_the_scheduler_gives_results_in_request_order():
    costs = np.random.default_rng(3).lognormal(size=300)
    perm = bundle(costs)
    params = perm.apply(np.arange(300.0))
    scheduler = Scheduler([FakeDevice(0), FakeDevice(1)], progress=False)
    result = scheduler.map_batches(lambda d, a, b: params[a:b] ** 2, 300, align=perm.group)
    np.testing.assert_array_equal(perm.restore(result), expected_squares(300))
    assert all(r.start % 32 == 0 for r in scheduler.last_batches)


# --- cost prediction --------------------------------------------------------------------

def test_predictor_recovers_an_exact_power_law_from_a_pilot():
    rng = np.random.default_rng(4)
    features = np.exp(rng.uniform(-3, 3, size=(2000, 2)))
    true_cost = 7.0 * features[:, 0] ** 1.5 * features[:, 1] ** -0.5
    pilot = pilot_indices(2000, 60, seed=5)
    predictor = CostPredictor().fit(features[pilot], true_cost[pilot])
    assert predictor.r_squared > 1 - 1e-10
    np.testing.assert_allclose(predictor.coefficients, [1.5, -0.5], rtol=1e-9)
    np.testing.assert_allclose(predictor.predict(features), true_cost, rtol=1e-8)
    assert predictor.n_fit == 60 and np.all(np.diff(pilot) > 0)


def test_predictor_reports_a_poor_fit_for_noise():
    rng = np.random.default_rng(6)
    features = np.exp(rng.normal(size=(300, 1)))
    noisy = np.exp(0.1 * np.log(features[:, 0]) + rng.normal(scale=2.0, size=300))
    predictor = CostPredictor().fit(features, noisy)
    assert 0 <= predictor.r_squared < 0.2
    assert np.isnan(CostPredictor().fit(features[:5], np.full(5, 3.0)).r_squared)


def test_predictor_refuses_bad_input():
    with pytest.raises(OptionError, match="positive"):
        CostPredictor().fit([[1.0], [-2.0]], [1.0, 2.0])
    with pytest.raises(OptionError, match="costs"):
        CostPredictor().fit([[1.0], [2.0]], [1.0, 0.0])
    with pytest.raises(OptionError, match="pilot"):
        CostPredictor().fit([[1.0, 2.0]], [1.0])
    with pytest.raises(OptionError, match="fit"):
        CostPredictor().predict([[1.0]])
    linear = CostPredictor(log_features=False).fit([[-1.0], [0.0], [1.0]], np.exp([1.0, 2, 3]))
    np.testing.assert_allclose(linear.coefficients, [1.0])
    with pytest.raises(OptionError, match="2 features"):
        CostPredictor().fit([[1.0], [2.0]], [1.0, 2.0]).predict([[1.0, 2.0]])


def test_on_each_device_runs_each_on_its_own_thread_and_names_a_failure():
    """dispatch.on_each_device: results in the devices' order, each call on a thread of
    its own with its device current; every call runs to its end, then the first
    failure in device order is raised, its device named."""
    from sbmlgpu.schedule.dispatch import Stopped, on_each_device

    devices = [FakeDevice(0), FakeDevice(1), FakeDevice(2)]
    seen = {}
    together = threading.Barrier(3, timeout=10)  # broken unless all three run at once

    def work(device, stop):
        together.wait()
        seen[device.index] = (threading.get_ident(), active_device())
        return device.index * 10

    assert on_each_device(devices, work) == [0, 10, 20]
    assert len({thread for thread, _ in seen.values()}) == 3
    assert threading.get_ident() not in {thread for thread, _ in seen.values()}
    assert all(active is devices[i] for i, (_, active) in seen.items())
    assert on_each_device([None], lambda d, stop: d is None) == [True]

    # a failure stops the others at their next check, all are joined, the first
    # failure in device order is raised (the other logged)
    stopped, alive = [], []

    def fails_on_odd(device, stop):
        if device.index % 2:
            raise SimulationError(f"went wrong {device.index}")
        while not stop.wait(0.01):  # a long share, checking between its launches
            pass
        stopped.append(device.index)
        raise Stopped()

    devices.append(FakeDevice(3))
    with pytest.raises(SimulationError, match=r"device 1 \(Fake H200\): went wrong 1"):
        on_each_device(devices, fails_on_odd)
    assert sorted(stopped) == [0, 2]
    assert not [t for t in threading.enumerate() if t.name.startswith("sbmlgpu-device")]
    # one device: the calling thread, its error as raised
    with pytest.raises(SimulationError, match=r"^went wrong 1$"):
        on_each_device(devices[1:2], fails_on_odd)
