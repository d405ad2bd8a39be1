"""The persistent SIVIA kernel on a real GPU (`pytest -m gpu` on the GPU machine;
skipped elsewhere).

The final boxes do not depend on the order in which boxes are checked (a box's
verdict and its halves are functions of the box alone), so without eager create the
persistent kernel's paving equals the multi-kernel one as a SET of boxes, with the
same counts and Taylor steps, however the warps interleave, whatever the queue's
capacity, and with eager fetch on or off. Eager create bisects boxes before their
verdict, so its paving is finer: every box it keeps is still a node of the same
bisection tree, nested with the multi paving's boxes, and nothing is lost.
"""

from __future__ import annotations

import numpy as np
import pytest

from sbmlgpu.plugins.interval.sivia import Search
from sbmlgpu.plugins.interval.verdicts import UNDECIDED

from .test_interval_persistent import COUNTED, LV, SEIR, lv_rows, rows_of, run_estimation

pytestmark = pytest.mark.gpu

LV_UNKNOWN = {"p2": (-1.0, 1.0), "p4": (-1.0, 1.0)}
LV_EPSILON = 1e-3
SEIR_UNKNOWN = {"p2": (0.0, 0.3), "p3": (0.2, 0.6)}
SEIR_EPSILON = 2e-3


@pytest.fixture(scope="module")
def lv_data():
    return lv_rows(count=35, end=0.7, error=1.5)


@pytest.fixture(scope="module")
def seir_data():
    import sbmlgpu

    solution = sbmlgpu.run(SEIR, times=list(np.linspace(0.0, 1.0, 21)), progress=False)
    x1 = solution.data[0, :, solution.ids.index("x1")]
    return [(t, "x1", v - 5, v + 5) for t, v in zip(solution.times, x1)]


@pytest.fixture(scope="module")
def lv_multi(gpu_device, lv_data):
    paving = run_estimation(gpu_device, lv_data, LV_UNKNOWN, LV_EPSILON, kernel="multi")
    assert paving.metadata["kernel"] == "multi" and paving.statistics["complete"]
    assert paving.statistics["boxes_evaluated"] > 1000  # enough boxes to race over
    return paving


def assert_same_paving(paving, reference):
    assert paving.statistics["complete"]
    assert np.array_equal(rows_of(paving), rows_of(reference))
    for key in COUNTED:
        assert paving.statistics[key] == reference.statistics[key], key
    assert paving.statistics["volume_rejected_proved"] == pytest.approx(
        reference.statistics["volume_rejected_proved"], rel=1e-12)


@pytest.mark.parametrize("options", [
    dict(),                                   # eager fetch, default threshold and budget
    dict(eager_fetch=False),                  # a warp fetches only when all lanes idle
    dict(fetch_idle=1, step_budget=1),        # fetch at every idle lane, every step
    dict(fetch_idle=31, step_budget=64, block_size=256),
])
def test_lv_persistent_equals_multi(gpu_device, lv_data, lv_multi, options):
    paving = run_estimation(gpu_device, lv_data, LV_UNKNOWN, LV_EPSILON, kernel="persistent",
                            eager_create=False, **options)
    assert paving.metadata["kernel"] == "persistent"
    assert "queue full" not in paving.metadata["launches_ended_by"]  # the default queue holds it
    assert_same_paving(paving, lv_multi)


def test_seir_persistent_equals_multi(gpu_device, seir_data):
    multi = run_estimation(gpu_device, seir_data, SEIR_UNKNOWN, SEIR_EPSILON, kernel="multi")
    assert multi.statistics["boxes_evaluated"] > 100
    for options in (dict(), dict(eager_fetch=False)):
        paving = run_estimation(gpu_device, seir_data, SEIR_UNKNOWN, SEIR_EPSILON,
                                eager_create=False, **options)
        assert paving.metadata["kernel"] == "persistent"  # the default on a GPU
        assert_same_paving(paving, multi)


def test_tiny_queue_relaunches_and_gives_the_same_paving(gpu_device, lv_data, lv_multi):
    paving = run_estimation(gpu_device, lv_data, LV_UNKNOWN, LV_EPSILON, eager_create=False,
                            queue_capacity=64)
    assert paving.statistics["launches"] > 10
    assert paving.metadata["launches_ended_by"].get("queue full", 0) > 0
    assert_same_paving(paving, lv_multi)


def test_time_slices_put_boxes_in_progress_back(gpu_device, lv_data, lv_multi):
    """Launches of 10 ms (longer where no box finishes in one): the boxes lanes hold
    when a slice ends go back to the host unfinished and start again; the steps of
    finished boxes are counted once."""
    paving = run_estimation(gpu_device, lv_data, LV_UNKNOWN, LV_EPSILON, eager_create=False,
                            launch_seconds=0.01)
    assert paving.metadata["launches_ended_by"].get("time slice", 0) > 1
    assert_same_paving(paving, lv_multi)


def test_max_boxes_stops_with_nothing_lost(gpu_device, lv_data, lv_multi):
    limit = lv_multi.statistics["boxes_evaluated"] // 3
    paving = run_estimation(gpu_device, lv_data, LV_UNKNOWN, LV_EPSILON, max_boxes=limit)
    s = paving.statistics
    assert not s["complete"] and s["stopped_by"].startswith("max-boxes")
    assert s["boxes_evaluated"] <= limit and s["boxes_left_in_queue"] > 0
    kept = float(np.prod(paving.upper - paving.lower, axis=1).sum())
    assert kept + s["volume_rejected_proved"] == pytest.approx(4.0, rel=1e-12)


def _tree_node(box_lo, box_hi, search_lo, search_hi, epsilon) -> bool:
    """Whether (box_lo, box_hi) is reached from the search box by sivia.py's bisections."""
    lo, hi = search_lo.copy(), search_hi.copy()
    while True:
        if np.array_equal(lo, box_lo) and np.array_equal(hi, box_hi):
            return True
        search = Search(search_lo, search_hi, epsilon)
        search.take(1)
        search.give(lo[None], hi[None], np.array([UNDECIDED]))
        if not search.queued:
            return False
        halves_lo, halves_hi = search.take(2)
        inside = [np.all(halves_lo[k] <= box_lo) and np.all(box_hi <= halves_hi[k])
                  for k in range(2)]
        if not any(inside):
            return False
        k = inside.index(True)
        lo, hi = halves_lo[k], halves_hi[k]


def test_eager_create_keeps_the_bisection_tree(gpu_device, lv_data, lv_multi):
    paving = run_estimation(gpu_device, lv_data, LV_UNKNOWN, LV_EPSILON, eager_create=True,
                            presplit=0)
    s = paving.statistics
    assert s["complete"] and s["boxes_split_eagerly"] > 0  # the first box alone splits
    kept = float(np.prod(paving.upper - paving.lower, axis=1).sum())
    assert kept + s["volume_rejected_proved"] == pytest.approx(4.0, rel=1e-12)
    search_lo, search_hi = np.array([-1.0, -1.0]), np.array([1.0, 1.0])
    rng = np.random.default_rng(3)
    sample = rng.choice(len(paving.verdict), size=min(300, len(paving.verdict)), replace=False)
    for k in sample:
        assert _tree_node(paving.lower[k], paving.upper[k], search_lo, search_hi, LV_EPSILON)
    # nested with the multi paving (presplit or not, every box is a node of the same
    # tree): two kept boxes overlap only if one holds the other
    mlo, mhi = lv_multi.lower, lv_multi.upper
    for k in sample:
        lo, hi = paving.lower[k], paving.upper[k]
        overlap = np.all((mlo < hi) & (lo < mhi), axis=1)
        holds = np.all((mlo <= lo) & (hi <= mhi), axis=1) | np.all((lo <= mlo) & (mhi <= hi), axis=1)
        assert np.all(holds[overlap])
    # with it off again, the multi paving exactly
    off = run_estimation(gpu_device, lv_data, LV_UNKNOWN, LV_EPSILON, eager_create=False)
    assert_same_paving(off, lv_multi)
