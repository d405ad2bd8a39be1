"""run_queue on fake devices (no GPU): work that creates work (bisection, as branch
and bound does), termination while other devices hold items, ids and deterministic
order, progress over a growing total, errors, out-of-memory halving and limits."""

from __future__ import annotations

import random
import re
import threading
import time

import pytest

from sbmlgpu.codegen.compile_check import nvcc_available, nvcc_compile
from sbmlgpu.errors import DeviceError, OptionError, SimulationError
from sbmlgpu.profile import Profiler
from sbmlgpu.runtime.base import OutOfDeviceMemory
from sbmlgpu.schedule import GrowingQueue, Scheduler
from sbmlgpu.schedule.growing import WAIT

from .fakes import FakeDevice, Terminal, active_device

EPS = 1 / 16


def bisect(device, intervals):
    """Split every interval wider than EPS in two; the result is its width."""
    assert active_device() is device, "work ran without its device active"
    widths = [hi - lo for lo, hi in intervals]
    children = [[(lo, (lo + hi) / 2), ((lo + hi) / 2, hi)] if hi - lo > EPS else []
                for lo, hi in intervals]
    return widths, children


def shaky(work, seed):
    """`work`, sleeping a little at random, so that devices interleave differently."""
    rng = random.Random(seed)
    lock = threading.Lock()

    def run(device, items):
        with lock:
            pause = rng.uniform(0, 0.003)
        time.sleep(pause)
        return work(device, items)
    return run


def tree_ids(root: tuple, depth: int) -> list[tuple]:
    """Ids of a full binary tree below `root`, depth-first (each id before its children)."""
    ids = [root]
    if depth:
        for k in range(2):
            ids += tree_ids(root + (k,), depth - 1)
    return ids


# --- the contract ------------------------------------------------------------------------

def test_every_created_item_is_worked_on_once_with_its_result():
    scheduler = Scheduler([FakeDevice(0)], max_batch_items=5, progress=False)
    done = scheduler.run_queue(bisect, [(0.0, 1.0), (2.0, 2.5)], ordered=True)
    # [0, 1] splits down to width 1/16 (depth 4), [2, 2.5] to 1/16 (depth 3)
    assert [d.id for d in done] == tree_ids((0,), 4) + tree_ids((1,), 3)
    for d in done:
        lo, hi = d.item
        assert d.result == hi - lo  # each result comes with the item that produced it
    by_id = {d.id: d.item for d in done}
    assert by_id[(0, 1)] == (0.5, 1.0) and by_id[(1, 0, 1)] == (2.125, 2.25)
    assert sum(r.items for r in scheduler.last_queue_batches) == len(done) == 31 + 15
    assert sum(r.new_items for r in scheduler.last_queue_batches) == len(done) - 2
    assert max(r.items for r in scheduler.last_queue_batches) <= 5


@pytest.mark.parametrize("seed", [1, 2])
def test_ordered_results_are_the_same_for_any_number_of_devices(seed):
    runs = []
    for devices in ([FakeDevice(0)], [FakeDevice(i) for i in range(3)]):
        scheduler = Scheduler(devices, max_batch_items=3, progress=False)
        done = scheduler.run_queue(shaky(bisect, seed), [(0.0, 1.0)], ordered=True)
        runs.append([(d.id, d.item, d.result) for d in done])
    assert runs[0] == runs[1] and len(runs[0]) == 31


def test_idle_devices_wait_for_items_others_create_and_then_share_them():
    devices = [FakeDevice(i) for i in range(3)]
    scheduler = Scheduler(devices, max_batch_items=4, progress=False)
    done = scheduler.run_queue(shaky(bisect, 3), [(0.0, 4.0)])  # one item to start
    assert len(done) == 127
    used = {r.device_index for r in scheduler.last_queue_batches}
    assert used == {0, 1, 2}, "devices that found the queue empty at first must not quit"
    # each device thread activated its own device
    assert all(len(d.activating_threads) == 1 for d in devices)


def test_fifo_goes_breadth_first_and_lifo_depth_first():
    scheduler = Scheduler([FakeDevice(0)], max_batch_items=1, progress=False)
    fifo = [d.id for d in scheduler.run_queue(bisect, [(0.0, 0.25)])]
    assert fifo == [(0,), (0, 0), (0, 1), (0, 0, 0), (0, 0, 1), (0, 1, 0), (0, 1, 1)]
    lifo = [d.id for d in scheduler.run_queue(bisect, [(0.0, 0.25)], order="lifo")]
    assert lifo == [(0,), (0, 1), (0, 1, 1), (0, 1, 0), (0, 0), (0, 0, 1), (0, 0, 0)]


def test_items_that_create_nothing_and_an_empty_start():
    scheduler = Scheduler(progress=False)  # the host path
    seen = []

    def work(device, items):
        seen.append(device)
        return [x * x for x in items], None

    done = scheduler.run_queue(work, range(10))
    assert sorted(d.result for d in done) == [x * x for x in range(10)]
    assert set(seen) == {None} and scheduler.last_queue_batches[0].device_name == "host"
    assert scheduler.run_queue(work, []) == [] and scheduler.last_queue_batches == []


def test_batches_are_sized_by_device_memory():
    scheduler = Scheduler([FakeDevice(0, free=10_000)], safety=0.5, progress=False)
    scheduler.run_queue(bisect, [(0.0, 1.0)] * 8, bytes_per_item=400, fixed_bytes=1000)
    sizes = [r.items for r in scheduler.last_queue_batches]
    assert max(sizes) == (5000 - 1000) // 400 and sum(sizes) == 8 * 31


def test_batches_become_spans_on_their_device_track():
    profiler = Profiler()
    scheduler = Scheduler([FakeDevice(0)], max_batch_items=8, progress=False, profiler=profiler)
    scheduler.run_queue(bisect, [(0.0, 1.0)])
    spans = [s for s in profiler.spans if s.name == "batch"]
    assert len(spans) == len(scheduler.last_queue_batches)
    assert sum(s.meta["items"] for s in spans) == 31 and spans[0].meta["first"] == "(0,)"


# --- progress ----------------------------------------------------------------------------

def test_progress_counts_items_done_against_a_growing_total_and_shows_the_queue(monkeypatch):
    import sbmlgpu.schedule.scheduler as scheduler_module

    terminal, bars = Terminal(), []

    class Recorded(scheduler_module.Progress):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **{**kwargs, "file": terminal})
            bars.append(self)

    monkeypatch.setattr(scheduler_module, "Progress", Recorded)
    scheduler = Scheduler([FakeDevice(0)], max_batch_items=4, progress_delay=0)
    scheduler.run_queue(bisect, [(0.0, 1.0)])
    (bar,) = bars
    assert bar.done == bar.total == 31  # the total grew from 1 as items were created
    assert re.search(r"31(\.0)?/31(\.0)? .*0 queued", terminal.getvalue())


# --- errors ------------------------------------------------------------------------------

def test_a_failure_on_one_device_stops_the_others_and_keeps_its_type():
    calls = []

    def work(device, items):
        calls.append(device.index)
        if device.index == 1:
            raise SimulationError("interval enclosure blew up")
        time.sleep(0.002)
        return bisect(device, items)

    scheduler = Scheduler([FakeDevice(0), FakeDevice(1, name="bad GPU")], max_batch_items=2,
                          progress=False)
    with pytest.raises(SimulationError, match=r"device 1 \(bad GPU\): interval enclosure") as info:
        scheduler.run_queue(work, [(0.0, 1.0), (1.0, 2.0), (2.0, 3.0), (3.0, 4.0)])
    assert info.value.device_index == 1
    assert calls.count(1) == 1  # it failed once, and nothing ran for long after


def test_a_bug_in_work_while_another_device_waits_does_not_hang():
    started = threading.Event()

    def work(device, items):
        if device.index == 0:
            started.set()
            time.sleep(0.01)
            raise KeyError("missing")
        return bisect(device, items)

    scheduler = Scheduler([FakeDevice(0), FakeDevice(1)], max_batch_items=1, progress=False)
    with pytest.raises(KeyError) as info:
        scheduler.run_queue(work, [(0.0, 1.0)])  # device 1 waits on an empty queue
    assert info.value.device_index == 0 and started.is_set()


def test_out_of_memory_halves_the_batch_and_loses_no_item():
    sizes = []

    def work(device, items):
        sizes.append(len(items))
        if len(items) > 3:
            raise OutOfDeviceMemory(f"cuMemAlloc failed for {len(items)} boxes")
        return bisect(device, items)

    scheduler = Scheduler([FakeDevice(0)], max_batch_items=16, progress=False)
    done = scheduler.run_queue(work, [(0.0, 1.0)] * 16, ordered=True)
    assert len(done) == 16 * 31 and sizes[:3] == [16, 8, 4]
    assert scheduler.last_queue_batches[0].out_of_memory_sizes == (16, 8, 4)
    assert max(r.items for r in scheduler.last_queue_batches) <= 3


def test_out_of_memory_below_the_minimum_says_what_was_tried():
    def work(device, items):
        raise OutOfDeviceMemory("no memory at all")

    scheduler = Scheduler([FakeDevice(0, name="Tiny GPU")], min_batch_items=2,
                          max_batch_items=8, progress=False)
    with pytest.raises(DeviceError, match=r"running a batch of 2 queued items: tried batch "
                                          r"sizes 8, 4, 2 and min-batch-items is 2"):
        scheduler.run_queue(work, range(8))


def test_a_queue_that_never_stops_growing_hits_its_limit():
    def forever(device, items):
        return items, [[x, x] for x in items]

    scheduler = Scheduler([FakeDevice(0), FakeDevice(1)], progress=False)
    with pytest.raises(SimulationError, match="grew past its limit of 1000 items"):
        scheduler.run_queue(forever, [0], limit=1000)


def test_wrong_returns_from_work_are_named():
    scheduler = Scheduler([FakeDevice(0)], progress=False)
    with pytest.raises(ValueError, match="2 results for a batch of 3"):
        scheduler.run_queue(lambda d, items: ([1, 2], None), range(3))
    with pytest.raises(ValueError, match="new items for 1 items of a batch of 3"):
        scheduler.run_queue(lambda d, items: (items, [[]]), range(3))
    with pytest.raises(ValueError, match="return the pair"):
        scheduler.run_queue(lambda d, items: items, range(3))
    with pytest.raises(ValueError, match="one result per item"):
        scheduler.run_queue(lambda d, items: (None, None), range(3))


def test_bad_queue_options_name_the_option(monkeypatch):
    scheduler = Scheduler([FakeDevice(0)], progress=False)
    with pytest.raises(OptionError, match="order"):
        scheduler.run_queue(bisect, [(0.0, 1.0)], order="random")
    with pytest.raises(OptionError, match="limit"):
        scheduler.run_queue(bisect, [(0.0, 1.0)], limit=0)
    with pytest.raises(OptionError, match="bytes-per-item"):
        scheduler.run_queue(bisect, [(0.0, 1.0)], bytes_per_item=-1)
    with pytest.raises(OptionError, match="budget-items"):
        scheduler.run_queue(bisect, [(0.0, 1.0)], budget_items=0)
    for seconds in (0, -1.0, float("nan"), "10"):
        with pytest.raises(OptionError, match="budget-seconds"):
            scheduler.run_queue(bisect, [(0.0, 1.0)], budget_seconds=seconds)


# --- budgets -----------------------------------------------------------------------------

def bfs_ids(root: tuple, depth: int) -> list[tuple]:
    """Ids of a full binary tree below `root`, breadth-first (the fifo order)."""
    return sorted(tree_ids(root, depth), key=lambda item_id: (len(item_id), item_id))


def assert_nothing_lost(done, left, span):
    """Every finished item's children finished or are left, and the finished items
    that split no further with the left ones tile `span` (bisect's tree frontier)."""
    finished_ids = {d.id for d in done}
    left_ids = {item_id for item_id, _ in left}
    assert not finished_ids & left_ids
    for d in done:
        lo, hi = d.item
        if hi - lo > EPS:
            assert {d.id + (0,), d.id + (1,)} <= finished_ids | left_ids, d.id
    pieces = sorted([d.item for d in done if d.item[1] - d.item[0] <= EPS]
                    + [item for _, item in left])
    assert pieces[0][0] == span[0] and pieces[-1][1] == span[1]
    assert all(a[1] == b[0] for a, b in zip(pieces, pieces[1:])), "a gap or an overlap"


def test_an_item_budget_takes_that_many_and_leaves_the_rest_queued():
    scheduler = Scheduler([FakeDevice(0)], max_batch_items=4, progress=False)
    done = scheduler.run_queue(bisect, [(0.0, 1.0)], budget_items=10, ordered=True)
    # one device, fifo: the first 10 items breadth first, in batches cut to the budget
    bfs = bfs_ids((0,), 4)
    assert [d.id for d in done] == sorted(bfs[:10])
    assert [r.items for r in scheduler.last_queue_batches] == [1, 2, 4, 3]
    # left: the 5 items of the 4th level not taken, and the children of the 3 taken
    left = scheduler.last_queue_left
    assert [item_id for item_id, _ in left] == sorted(
        bfs[10:15] + [parent + (k,) for parent in bfs[7:10] for k in (0, 1)])
    assert dict(left)[(0, 1, 1, 1)] == (0.875, 1.0)
    assert scheduler.last_queue_stopped == "the budget of 10 items was taken"
    assert_nothing_lost(done, left, (0.0, 1.0))


def test_what_a_budget_left_can_be_run_on_to_the_end():
    scheduler = Scheduler([FakeDevice(0)], max_batch_items=3, progress=False)
    first = scheduler.run_queue(bisect, [(0.0, 1.0)], budget_items=7)
    left = scheduler.last_queue_left
    rest = scheduler.run_queue(bisect, [item for _, item in left])
    assert scheduler.last_queue_left == [] and scheduler.last_queue_stopped is None
    widths = sorted([d.result for d in first] + [d.result for d in rest])
    full = scheduler.run_queue(bisect, [(0.0, 1.0)])
    assert widths == sorted(d.result for d in full) and len(widths) == 31


def test_an_item_budget_on_several_devices_finishes_what_they_hold():
    devices = [FakeDevice(i) for i in range(3)]
    scheduler = Scheduler(devices, max_batch_items=4, progress=False)
    done = scheduler.run_queue(shaky(bisect, 4), [(0.0, 4.0)], budget_items=50)
    assert len(done) == 50 and sum(r.items for r in scheduler.last_queue_batches) == 50
    assert len(scheduler.last_queue_left) > 0
    assert_nothing_lost(done, scheduler.last_queue_left, (0.0, 4.0))


def test_a_time_budget_stops_handing_out_items_but_lets_running_ones_finish():
    def slow_bisect(device, items):
        time.sleep(0.02)
        return bisect(device, items)

    scheduler = Scheduler([FakeDevice(0), FakeDevice(1)], max_batch_items=2, progress=False)
    started = time.monotonic()
    done = scheduler.run_queue(slow_bisect, [(0.0, 4.0)], budget_seconds=0.1, ordered=True)
    assert time.monotonic() - started < 1.0
    assert 0 < len(done) < 127 and scheduler.last_queue_left
    assert scheduler.last_queue_stopped == "the budget of 0.1 seconds ran out"
    left_ids = [item_id for item_id, _ in scheduler.last_queue_left]
    assert left_ids == sorted(left_ids)  # `ordered` sorts what is left too
    assert_nothing_lost(done, scheduler.last_queue_left, (0.0, 4.0))


def test_a_budget_the_run_does_not_reach_changes_nothing():
    scheduler = Scheduler([FakeDevice(0)], max_batch_items=4, progress=False)
    plain = scheduler.run_queue(bisect, [(0.0, 1.0)], ordered=True)
    assert scheduler.last_queue_left == [] and scheduler.last_queue_stopped is None
    for budget in ({"budget_items": 31}, {"budget_items": 1000}, {"budget_seconds": 60}):
        done = scheduler.run_queue(bisect, [(0.0, 1.0)], ordered=True, **budget)
        assert done == plain, budget
        assert scheduler.last_queue_left == [] and scheduler.last_queue_stopped is None


def test_lifo_leaves_its_queue_in_the_order_it_would_take_it():
    scheduler = Scheduler([FakeDevice(0)], max_batch_items=1, progress=False)
    done = scheduler.run_queue(bisect, [(0.0, 0.25)], order="lifo", budget_items=3)
    assert [d.id for d in done] == [(0,), (0, 1), (0, 1, 1)]
    assert [item_id for item_id, _ in scheduler.last_queue_left] == [(0, 1, 0), (0, 0)]


def test_growing_queue_budget_cuts_a_batch_and_take_can_answer_wait():
    queue = GrowingQueue(range(10), workers=1, budget_items=4)
    assert [item for _, item in queue.take(3)] == [0, 1, 2]
    assert [item for _, item in queue.take(3)] == [3]  # only one left in the budget
    assert queue.take(3) is None and queue.stopped_by == "the budget of 4 items was taken"
    assert [item for _, item in queue.left()] == list(range(4, 10))
    waiting = GrowingQueue(["a"])
    waiting.take(1)
    assert waiting.take(1, wait=False) == WAIT  # empty, but "a" may create more
    waiting.finish(1, [])
    assert waiting.take(1, wait=False) is None


def test_growing_queue_take_waits_only_while_items_are_held():
    queue = GrowingQueue(["a"], workers=2)
    assert queue.take(10) == [((0,), "a")] and queue.in_flight == 1
    got = []
    waiter = threading.Thread(target=lambda: got.append(queue.take(10)))
    waiter.start()
    time.sleep(0.05)
    assert waiter.is_alive(), "take returned while another worker held an item"
    queue.finish(1, [((0, 0), "b"), ((0, 1), "c")])
    waiter.join(2)
    # two workers share a queue of two: each take gets one
    assert got == [[((0, 0), "b")]] and queue.queued == 1
    assert queue.take(10) == [((0, 1), "c")]
    queue.finish(2, [])
    assert queue.take(10) is None and queue.done == 3
    closed = GrowingQueue(["x"])
    closed.close()
    assert closed.take(1) is None


@pytest.mark.skipif(not nvcc_available(), reason="nvcc not installed")
def test_the_gpu_tests_kernel_compiles():
    from .test_schedule_gpu import WIDTHS_SOURCE

    assert b"sbmlgpu_widths" in nvcc_compile(WIDTHS_SOURCE, arch="sm_90", name="widths")


# --- the static split (balance="static") --------------------------------------------------

def test_a_static_split_gives_each_device_its_share_and_the_same_results():
    """Three start items over two devices: device 0 works the first two and all they
    create, device 1 the third; ordered results equal the dynamic run's."""
    starts = [(0.0, 1.0), (2.0, 3.0), (4.0, 5.0)]
    roots: dict = {}
    lock = threading.Lock()

    def watched(device, items):
        with lock:
            for lo, _ in items:
                roots.setdefault(int(lo // 2), set()).add(device.index)
        return bisect(device, items)

    devices = [FakeDevice(0), FakeDevice(1)]
    static = Scheduler(devices, max_batch_items=3, progress=False).run_queue(
        shaky(watched, 4), starts, ordered=True, balance="static")
    dynamic = Scheduler(devices, max_batch_items=3, progress=False).run_queue(
        shaky(bisect, 4), starts, ordered=True)
    assert [(d.id, d.item, d.result) for d in static] == \
        [(d.id, d.item, d.result) for d in dynamic]
    assert roots == {0: {0}, 1: {0}, 2: {1}}
    # more devices than start items: the devices without a share do nothing
    scheduler = Scheduler([FakeDevice(i) for i in range(4)], progress=False)
    done = scheduler.run_queue(bisect, [(0.0, 0.25)], balance="static")
    assert len(done) == 7 and {r.device_index for r in scheduler.last_queue_batches} == {0}


def test_a_static_item_budget_is_split_over_the_shares_and_can_be_run_on():
    devices = [FakeDevice(0), FakeDevice(1)]
    scheduler = Scheduler(devices, max_batch_items=2, progress=False)
    done = scheduler.run_queue(bisect, [(0.0, 1.0), (2.0, 3.0)], budget_items=10,
                               balance="static")
    assert len(done) == 10 and scheduler.last_queue_stopped.startswith("the budget of 10")
    left = scheduler.last_queue_left
    rest = scheduler.run_queue(bisect, [item for _, item in left])
    assert len(done) + len(rest) == 62  # two trees of 31: nothing lost or repeated


def test_a_failure_in_one_share_stops_the_others():
    started = threading.Event()

    def fails_on_device_1(device, items):
        if device.index == 1:
            started.wait(5)
            raise SimulationError("share 1 went wrong")
        started.set()
        time.sleep(0.01)
        return bisect(device, items)

    devices = [FakeDevice(0), FakeDevice(1)]
    scheduler = Scheduler(devices, max_batch_items=1, progress=False)
    with pytest.raises(SimulationError, match="share 1 went wrong"):
        scheduler.run_queue(fails_on_device_1, [(0.0, 64.0), (100.0, 101.0)],
                            balance="static")
    # device 0's tree has 2047 items; it stopped long before
    assert sum(r.items for r in scheduler.last_queue_batches) < 500
    with pytest.raises(OptionError, match="balance"):
        scheduler.run_queue(bisect, [(0.0, 1.0)], balance="round-robin")


def test_a_static_budget_smaller_than_the_shares_is_not_overspent():
    """The budget goes to the shares that hold start items, and adds up to itself."""
    from sbmlgpu.schedule.growing import budget_share

    for budget, items, parts in ((1, 2, 2), (3, 4, 4), (2, 8, 4), (10, 1, 2), (7, 5, 3)):
        given = [budget_share(budget, k, parts, items) for k in range(parts)]
        assert sum(given) == budget and all(g >= 0 for g in given), (budget, items, given)
        assert all(g == 0 for g in given[min(parts, items):])
    devices = [FakeDevice(i) for i in range(4)]
    for budget, starts in ((1, 2), (3, 4), (10, 1)):
        scheduler = Scheduler(devices, max_batch_items=1, progress=False)
        done = scheduler.run_queue(bisect, [(2.0 * i, 2.0 * i + 1) for i in range(starts)],
                                   budget_items=budget, balance="static")
        assert len(done) == budget
        assert scheduler.last_queue_stopped == f"the budget of {budget} items was taken"
