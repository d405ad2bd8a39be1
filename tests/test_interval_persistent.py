"""The persistent SIVIA kernel without a GPU (plugins/interval/persistent.py,
kernels/persistent.cu, the kernel choice in program.py).

- Both kernels compile with nvcc -arch=sm_90, and the persistent one as host C++.
- The device's bisection rule (iv_bisection, built for the host) is sivia.py's, bit
  for bit.
- The host loop (upload, relaunch, drain of the output, the spill and the queue) on a
  fake device whose iv_persistent is an emulator of the kernel's contract in numpy
  (verdicts from the host build of interval.cu; no eager create: the emulator runs
  whole boxes). What the emulator cannot check -- the warp code, atomics, the memory
  ordering -- test_interval_persistent_gpu.py checks on the GPU machine.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import sbmlgpu
from sbmlgpu.codegen.compile_check import nvcc_available, nvcc_compile
from sbmlgpu.errors import OptionError
from sbmlgpu.plugins.interval import persistent as P
from sbmlgpu.plugins.interval.engines import HOST_FLAGS, Data, HostEngine, Limits
from sbmlgpu.plugins.interval.kernels import interval_source, persistent_source
from sbmlgpu.plugins.interval.model import IntervalModel
from sbmlgpu.plugins.interval.options import IntervalOptions
from sbmlgpu.plugins.interval.program import IntervalProgram
from sbmlgpu.plugins.interval.sivia import Search
from sbmlgpu.plugins.interval.verdicts import FAILED, UNDECIDED
from sbmlgpu.runtime import host
from sbmlgpu.runtime.base import KernelAttributes
from sbmlgpu.tasks import Estimation
from sbmlgpu.views.ode import ode_system

from .fakes import FakeDevice, FakeKernel, FakeModule, properties

LV = "sbml_models/lotka_volterra.xml"
SEIR = "sbml_models/seir_linear.xml"
needs_host = pytest.mark.skipif(host.find_compiler() is None, reason="no C++ compiler")


def _model(path, unknown, initial=(), measured=("x1",)):
    return IntervalModel.of(ode_system(sbmlgpu.load(path)), unknown, initial, measured)


def lv_rows(count=12, end=0.35, error=1.5):
    """Bounded-error data on x1 from a scipy solution of LV at the file's values."""
    from scipy.integrate import solve_ivp

    def rhs(t, x, p1=1.0, p2=0.01, p3=1.0, p4=0.02):
        return [p1 * x[0] - p2 * x[0] * x[1], p4 * x[0] * x[1] - p3 * x[1]]

    times = np.linspace(end / count, end, count)
    sol = solve_ivp(rhs, (0, end), [50, 50], t_eval=times, rtol=1e-12, atol=1e-12)
    return [(t, "x1", v - error, v + error) for t, v in zip(times, sol.y[0])]


# -- the sources -------------------------------------------------------------------------

@pytest.mark.skipif(not nvcc_available(), reason="nvcc not found")
@pytest.mark.parametrize("path, unknown, initial", [(LV, ("p2", "p4"), ()),
                                                    (SEIR, ("p2", "p3"), ("x1",))])
def test_both_kernels_compile_for_sm_90(path, unknown, initial):
    model = _model(path, unknown, initial)
    for source in (persistent_source(model, 6), interval_source(model, 6)):
        cubin = nvcc_compile(source.text, "sm_90", options=("--fmad=false",), name=source.name)
        assert cubin.startswith(b"\x7fELF"), source.name
    text = persistent_source(model, 6).text
    assert 'extern "C" __global__ void iv_persistent(' in text
    assert f"#define IV_NU {len(unknown)}" in text and "x1" in text  # names its ids


def test_the_model_part_is_shared_and_interval_cu_keeps_its_entry_points():
    model = _model(LV, ("p2", "p4"))
    multi, persistent = interval_source(model, 6), persistent_source(model, 6)
    cut = multi.text.index("#define IV_CHECK_ARGUMENTS")
    assert persistent.text.startswith(multi.text[:cut])  # the same model.cuh text
    assert multi.kernel == "iv_check" and multi.host_entry == "iv_check_host"
    assert persistent.kernel == "iv_persistent" and persistent.name.startswith("persistent_")
    assert multi.name.startswith("interval_") and multi.name != persistent.name


def _bisection_library(model):
    text = persistent_source(model, 6).text + """
extern "C" int iv_bisection_host(const double *lo, const double *hi, const double *scale,
                                 double epsilon, double *middle)
{ return iv_bisection(lo, hi, scale, epsilon, middle); }
"""
    library = host.load(text, "persistent_bisection_test", HOST_FLAGS, openmp=False)
    entry = library.iv_bisection_host
    p = ctypes.c_void_p
    entry.argtypes = [p, p, p, ctypes.c_double, p]
    entry.restype = ctypes.c_int
    return entry


@needs_host
def test_device_bisection_is_sivias_bit_for_bit():
    """The same halves as Search.give for random boxes (some edges below epsilon, ties,
    boxes too narrow to cut), so that the persistent paving can equal the multi one."""
    entry = _bisection_library(_model(SEIR, ("p2", "p3", "p4")))
    rng = np.random.default_rng(11)
    search_lo, search_hi = np.array([0.0, -1.0, 10.0]), np.array([1.0, 1.0, 10.5])
    epsilon = 1e-3
    boxes = []
    for _ in range(400):
        lo = search_lo + rng.random(3) * (search_hi - search_lo)
        width = (search_hi - search_lo) * rng.choice([1e-5, 1e-4, 0.01, 0.5], 3)
        boxes.append((lo, np.minimum(lo + width, search_hi)))
    boxes.append((np.array([0.0, 0.0, 10.0]), np.array([0.5, 1.0, 10.25])))  # a tie
    tiny = np.nextafter(0.25, 1)
    boxes.append((np.array([0.25, 0.0, 10.0]), np.array([tiny, 0.0, 10.0])))  # no double between
    boxes.append((np.array([0.25, 0.0, 10.0]), np.array([tiny + 1.0, 0.0, 10.0])))
    scale = search_hi - search_lo
    cut_by_device = 0
    for lo, hi in boxes:
        search = Search(search_lo, search_hi, epsilon)
        search.take(1)
        search.give(lo[None], hi[None], np.array([UNDECIDED]))
        middle = ctypes.c_double(np.nan)
        axis = entry(lo.ctypes.data, hi.ctypes.data, scale.ctypes.data, epsilon,
                     ctypes.byref(middle))
        if axis < 0:
            assert search.queued == 0 and search.counts["undetermined"] == 1
            continue
        cut_by_device += 1
        halves_lo, halves_hi = search.take(2)
        left_hi, right_lo = hi.copy(), lo.copy()
        left_hi[axis] = right_lo[axis] = middle.value
        assert np.array_equal(halves_lo, [lo, right_lo]) and np.array_equal(halves_hi, [left_hi, hi])
    assert 0 < cut_by_device < len(boxes)


# -- the host loop on an emulated kernel -----------------------------------------------

class PersistentEmulator(FakeKernel):
    """iv_persistent's contract, one round of every lane at a time: boxes from the
    queue's slots [head, tail) (tickets against box_limit), verdicts from the host
    build of interval.cu, kept rows to the output, halves to the queue (all or none),
    and what does not fit to the spill rows with the stop code the kernel sets."""

    #: a box's time: a launch with a shorter time slice finishes none and stops
    box_ns = 1_000_000

    def __init__(self, checker: HostEngine, nk: int, nq: int, log):
        super().__init__("iv_persistent", log=log,
                         attributes=KernelAttributes(73, 0, 5120, 1024))
        self.checker, self.nk, self.nq = checker, nk, nq
        self.arguments = []

    def run(self, grid, block, args, shared_bytes) -> None:
        (queue_lo, queue_hi, ready, capacity, ctl_buf, volume_buf, out_lo, out_hi, out_code,
         out_capacity, spill_lo, spill_hi, spill_code, fixed_lo, fixed_hi, scale_buf,
         epsilon, point, n_times, times, first, output, lower, upper, wide, max_step,
         tolerance, max_halvings, max_steps, span, step_rule, box_limit, budget, fetch_idle,
         eager_create, slice_ns) = args
        assert isinstance(capacity, np.uint64) and isinstance(box_limit, np.uint64)
        assert isinstance(n_times, np.int32) and isinstance(budget, np.int64)
        self.arguments.append(dict(capacity=int(capacity), box_limit=int(box_limit),
                                   budget=int(budget), fetch_idle=int(fetch_idle),
                                   eager_create=int(eager_create), slice_ns=int(slice_ns)))
        nk, nf = self.nk, self.nq - self.nk
        capacity, out_capacity = int(capacity), int(out_capacity)
        ctl = ctl_buf.view(np.uint64, P.CTL_WORDS)
        qlo = queue_lo.view(np.float64, capacity * nk).reshape(capacity, nk)
        qhi = queue_hi.view(np.float64, capacity * nk).reshape(capacity, nk)
        flags = ready.view(np.int32, capacity)
        n_times = int(n_times)
        first_ = first.view(np.int32, n_times + 1)
        m = int(first_[-1])
        data = Data(times.view(np.float64, n_times).copy(), first_.copy(),
                    output.view(np.int32, m).copy(), lower.view(np.float64, m).copy(),
                    upper.view(np.float64, m).copy())
        limits = Limits(float(epsilon), float(wide), float(max_step), float(tolerance),
                        int(max_halvings), int(max_steps), int(span), int(step_rule))
        scale = scale_buf.view(np.float64, nk)
        c = point.view(np.float64, point.nbytes // 8)
        flo, fhi = fixed_lo.view(np.float64, nf), fixed_hi.view(np.float64, nf)
        lanes = grid[0] * block[0]
        counts = dict.fromkeys(P.COUNTERS, 0)
        steps = volume = enclosures = 0.0
        spilled = []

        def spill(lo, hi, code):
            spilled.append((lo, hi, code))

        def stop(reason):
            if not ctl[P.CTL_STOP]:
                ctl[P.CTL_STOP] = reason

        if 0 < int(slice_ns) < self.box_ns:  # the slice ends before any box does
            stop(4)
        out_of_tickets = False
        while ctl[P.CTL_HEAD] < ctl[P.CTL_TAIL] and not ctl[P.CTL_STOP] \
                and not out_of_tickets and ctl[P.CTL_STARTED] < box_limit:
            head, tail = int(ctl[P.CTL_HEAD]), int(ctl[P.CTL_TAIL])
            got = min(lanes, tail - head)
            assert flags[head:head + got].all(), "a slot read before it was written"
            ctl[P.CTL_HEAD] = head + got
            ticket = int(ctl[P.CTL_STARTED])
            ctl[P.CTL_STARTED] = ticket + got
            allowed = max(0, min(got, int(box_limit) - ticket))
            lo, hi = qlo[head:head + got].copy(), qhi[head:head + got].copy()
            for k in range(allowed, got):  # past the limit: no stop, the host's boxes
                spill(lo[k], hi[k], P.SPILL_QUEUED)
            out_of_tickets = allowed < got  # those begun are finished, then it ends
            lo, hi = lo[:allowed], hi[:allowed]
            checked = self.checker.check(np.hstack([lo, np.broadcast_to(flo, (allowed, nf))]),
                                         np.hstack([hi, np.broadcast_to(fhi, (allowed, nf))]),
                                         c, data, limits)
            # the kernel's own rule, as sivia.Search does it
            for k in range(allowed):
                v = int(checked.verdict[k])
                counts["evaluated"] += 1
                steps += int(checked.steps[k])
                enclosures += int(checked.enclosures[k])
                counts["failed"] += v == FAILED
                kept = None
                if v == 1:
                    counts["feasible"] += 1
                    kept = 0
                elif v == 0:
                    counts["rejected"] += 1
                    volume += float(np.prod(hi[k] - lo[k]))
                else:
                    one = Search(lo[k] - 1, hi[k] + 1, float(epsilon))
                    one.scale = scale
                    one.take(1)
                    one.give(lo[k][None], hi[k][None], np.array([v]))
                    if one.queued:
                        counts["bisected"] += 1
                        halves = one.take(2)
                        t = int(ctl[P.CTL_TAIL])
                        if t + 2 <= capacity:
                            qlo[t:t + 2], qhi[t:t + 2] = halves
                            flags[t:t + 2] = 1
                            ctl[P.CTL_TAIL] = t + 2
                        else:
                            stop(1)
                            for j in range(2):
                                spill(halves[0][j], halves[1][j], P.SPILL_QUEUED)
                    else:
                        counts["undetermined"] += 1
                        kept = 1
                if kept is not None:
                    row = int(ctl[P.CTL_KEPT])
                    if row < out_capacity:
                        out_lo.view(np.float64, out_capacity * nk).reshape(-1, nk)[row] = lo[k]
                        out_hi.view(np.float64, out_capacity * nk).reshape(-1, nk)[row] = hi[k]
                        out_code.view(np.int8, out_capacity)[row] = kept
                        ctl[P.CTL_KEPT] = row + 1
                    else:
                        stop(2)
                        spill(lo[k], hi[k], kept)
        rows = spill_code.nbytes
        assert len(spilled) <= rows, "more spill rows than the kernel has"
        for row, (lo, hi, code) in enumerate(spilled):
            spill_lo.view(np.float64, rows * nk).reshape(-1, nk)[row] = lo
            spill_hi.view(np.float64, rows * nk).reshape(-1, nk)[row] = hi
            spill_code.view(np.int8, rows)[row] = code
        ctl[P.CTL_SPILLED] = len(spilled)
        for k, name in enumerate(P.COUNTERS):
            ctl[P.CTL_COUNTERS + k] = counts[name]
        ctl[P.CTL_STEPS] = int(steps)
        ctl[P.CTL_ENCLOSURES] = int(enclosures)
        if not ctl[P.CTL_STOP]:  # what is left: the queue's unread slots, the spill
            ctl[P.CTL_ACTIVE] = int(ctl[P.CTL_TAIL] - ctl[P.CTL_HEAD]) + sum(
                code == P.SPILL_QUEUED for _, _, code in spilled)
        volume_buf.view(np.float64, 1)[0] = volume


def run_estimation(device, rows, unknown, epsilon, path=LV, initial=None, **options):
    task = Estimation(data=rows, unknown=unknown, epsilon=epsilon, initial=initial or {})
    task.progress = False
    task.validate()  # reads the measurements
    network = sbmlgpu.load(path)
    program = IntervalProgram(network, ode_system(network),
                              IntervalOptions(**options).validate(), device)
    return program.run(task)


def emulating_device(path, unknown, initial=(), sm_count=2):
    """A fake device whose persistent kernel is PersistentEmulator (grid: sm_count SMs)."""
    model = _model(path, unknown, initial)
    checker = HostEngine(interval_source(model, 6))

    def compile(device, source):
        assert 'extern "C" __global__ void iv_persistent(' in source
        device.emulator = PersistentEmulator(checker, len(unknown), len(unknown) + len(initial),
                                             device.launches)
        return FakeModule(["iv_persistent"], lambda name: device.emulator)

    return FakeDevice(properties=properties(sm_count=sm_count), compile=compile)


def rows_of(paving):
    """The paving as a sorted set of (verdict, lower..., upper...) rows."""
    table = np.column_stack([paving.verdict, paving.lower, paving.upper])
    return table[np.lexsort(table.T[::-1])]


#: the host and a GPU presplit differently by default: the same for both here
PRESPLIT = 2

COUNTED = ("boxes_evaluated", "boxes_feasible", "boxes_rejected", "boxes_bisected",
           "boxes_undetermined", "boxes_integration_failed", "taylor_steps",
           "data_enclosures")


@pytest.fixture(scope="module")
def lv_multi():
    # span 0, a GPU's default: the host's spans give the same boxes with fewer enclosures
    return run_estimation(None, lv_rows(), {"p2": (-1, 1), "p4": (-1, 1)}, 0.02,
                          presplit=PRESPLIT, span=0)


@needs_host
@pytest.mark.parametrize("capacity", [0, 16])
def test_host_loop_gives_the_multi_paving(lv_multi, capacity):
    """The same boxes, counts and steps as the host's multi loop; a queue of 16 boxes
    fills again and again, and nothing is lost between the launches."""
    device = emulating_device(LV, ("p2", "p4"))
    paving = run_estimation(device, lv_rows(), {"p2": (-1, 1), "p4": (-1, 1)}, 0.02,
                            eager_create=False, queue_capacity=capacity, block_size=32,
                            presplit=PRESPLIT)
    assert paving.metadata["kernel"] == "persistent"
    assert paving.metadata["engine"] == "gpu-persistent"
    assert np.array_equal(rows_of(paving), rows_of(lv_multi))
    for key in COUNTED:
        assert paving.statistics[key] == lv_multi.statistics[key], key
    assert paving.statistics["volume_rejected_proved"] == pytest.approx(
        lv_multi.statistics["volume_rejected_proved"], rel=1e-12)
    launches = paving.statistics["launches"]
    ended = paving.metadata["launches_ended_by"]
    if capacity:
        assert paving.metadata["queue_capacity"] == 16
        # launches end when the queue fills, or when the half of it given is done
        assert launches > 3 and ended.get("queue full", 0) > 0
    else:
        assert launches == 1 and ended == {}
    # 2 warps per SM by default (--warps-per-sm): 2 blocks of 32 on each of the 2 SMs
    assert paving.metadata["grid"] == 2 * P.resident_blocks(
        device.properties, device.emulator.attributes, 32, 2) == 4
    settings = device.emulator.arguments[0]
    # the defaults: no eager create, no eager fetch (a warp fetches when all 32 lanes idle)
    assert settings["eager_create"] == 0 and settings["fetch_idle"] == P.WARP
    assert settings["budget"] == 8 and settings["slice_ns"] == 5_000_000_000


@needs_host
@pytest.mark.parametrize("capacity", [64, 0])
def test_max_boxes_stops_with_nothing_lost(capacity):
    unknown = {"p2": (-1, 1), "p4": (-1, 1)}
    device = emulating_device(LV, ("p2", "p4"))
    paving = run_estimation(device, lv_rows(), unknown, 0.02, eager_create=False,
                            queue_capacity=capacity, block_size=32, max_boxes=150,
                            presplit=PRESPLIT)
    s = paving.statistics
    assert not s["complete"] and s["stopped_by"].startswith("max-boxes")
    assert s["boxes_evaluated"] == 150 and s["boxes_left_in_queue"] > 0
    if capacity:  # relaunches: each launch may begin what is left of the limit
        assert device.emulator.arguments[-1]["box_limit"] < 150
    else:  # one launch that begins 150 boxes, finishes them, and hands the rest back
        assert paving.metadata["launches_ended_by"] == {"box limit": 1}
    kept = float(np.prod(paving.upper - paving.lower, axis=1).sum())
    assert kept + s["volume_rejected_proved"] == pytest.approx(4.0, rel=1e-12)
    undetermined = paving.verdict == 1
    assert int(undetermined.sum()) == s["boxes_undetermined"]


@needs_host
def test_a_slice_too_short_for_any_box_grows():
    """Launches of 0.1 ms in which no box can finish: the host doubles the slice until
    boxes finish (else it would relaunch for ever), and the paving is complete."""
    device = emulating_device(LV, ("p2", "p4"))
    paving = run_estimation(device, lv_rows(), {"p2": (-1, 1), "p4": (-1, 1)}, 0.5,
                            eager_create=False, block_size=32, launch_seconds=1e-4,
                            presplit=PRESPLIT)
    slices = [a["slice_ns"] for a in device.emulator.arguments]
    assert slices[:5] == [100_000, 200_000, 400_000, 800_000, 1_600_000]
    assert paving.metadata["launches_ended_by"] == {"time slice": 4}
    assert paving.statistics["complete"] and paving.statistics["boxes_evaluated"] > 1


@needs_host
def test_fixed_initial_intervals_reach_the_kernel():
    """SEIR with x1(0) an interval: the emulator checks every box with it (its arguments
    are the kernel's) and the paving equals the multi loop's."""
    solution = sbmlgpu.run(SEIR, times=list(np.linspace(0.0, 1.0, 11)), progress=False)
    x1 = solution.data[0, :, solution.ids.index("x1")]
    rows = [(t, "x1", v - 5, v + 5) for t, v in zip(solution.times, x1)]
    unknown, initial = {"p2": (0.0, 0.3), "p3": (0.2, 0.6)}, {"x1": (699.0, 701.0)}
    multi = run_estimation(None, rows, unknown, 0.02, path=SEIR, initial=initial,
                           presplit=PRESPLIT)
    device = emulating_device(SEIR, ("p2", "p3"), ("x1",))
    persistent = run_estimation(device, rows, unknown, 0.02, path=SEIR, initial=initial,
                                eager_create=False, block_size=32, presplit=PRESPLIT)
    assert np.array_equal(rows_of(persistent), rows_of(multi))
    assert persistent.statistics["boxes_evaluated"] == multi.statistics["boxes_evaluated"] > 1


# -- options and the choice of loop --------------------------------------------------------

def test_options_choose_and_check_the_kernel():
    assert IntervalOptions().kernel == "persistent"
    with pytest.raises(OptionError, match="kernel"):
        IntervalOptions(kernel="single").validate()
    with pytest.raises(OptionError, match="fetch-idle"):
        IntervalOptions(fetch_idle=33).validate()
    network = sbmlgpu.load(LV)
    ode = ode_system(network)
    assert IntervalProgram(network, ode, IntervalOptions(kernel="persistent"), None).kernel \
        == "multi"  # the host always runs the multi loop
    device = FakeDevice()
    assert IntervalProgram(network, ode, IntervalOptions(), device).kernel == "persistent"
    assert IntervalProgram(network, ode, IntervalOptions(kernel="multi"), device).kernel \
        == "multi"
    settings = P.QueueSettings.of(IntervalOptions(eager_fetch=False, fetch_idle=4))
    assert settings.fetch_idle == P.WARP  # no eager fetch: only a warp with no box fetches


@needs_host
def test_block_size_must_be_whole_warps():
    device = emulating_device(LV, ("p2", "p4"))
    with pytest.raises(OptionError, match="block-size"):
        run_estimation(device, lv_rows(), {"p2": (-1, 1), "p4": (-1, 1)}, 0.5,
                       block_size=48, presplit=PRESPLIT)


def test_resident_blocks_follows_registers_and_threads():
    props = properties()  # 65536 registers and 2048 threads an SM
    regs = lambda r: KernelAttributes(r, 0, 0, 1024)  # noqa: E731
    # 73 registers: 2560 a warp (units of 256), 2 warps a block: 12 blocks of 64
    assert P.resident_blocks(props, regs(73), 64) == 12
    assert P.resident_blocks(props, regs(16), 64) == 32  # threads: 2048 / 64
    assert P.resident_blocks(props, regs(16), 32) == 32  # the hardware's 32 blocks
    assert P.resident_blocks(props, regs(255), 1024) == 1  # never none
