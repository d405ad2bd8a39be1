"""The profiler without a GPU: records from fake kernels, the summary arithmetic,
observers, spans, and the JSON and Chrome trace files read back."""

from __future__ import annotations

import json
import threading

import pytest

from sbmlgpu.errors import OptionError
from sbmlgpu.profile import LaunchRecord, Profiler, normalize_precision
from sbmlgpu.runtime.base import KernelAttributes, LaunchTiming

from .fakes import PROPERTIES, FakeDevice, FakeKernel

ATTRIBUTES = KernelAttributes(registers=40, shared_bytes=1024, local_bytes=16,
                              max_threads_per_block=1024)


def kernel(name):
    return FakeKernel(name, attributes=ATTRIBUTES)


def record(kernel="rhs", device=0, ms=1.0, flops=0.0, bytes=0.0, precision="double",
           start_s=0.0, **meta):
    return LaunchRecord(kernel, device, f"GPU{device}", (10, 1, 1), (128, 1, 1), 32, 0, 0, 0,
                        ms, flops, bytes, precision, start_s, meta)


def test_record_launch_takes_everything_from_the_runtime_objects():
    profiler = Profiler()
    timing = LaunchTiming(ms=2.5, grid=(40, 1, 1), block=(256, 1, 1), dynamic_shared_bytes=512)
    start = profiler.clock()
    r = profiler.record_launch(kernel("ode_step"), timing, FakeDevice(3), flops=1e9,
                               bytes=2e9, precision="float32", start_s=start, batch=7)
    assert (r.kernel, r.device_index, r.device_name) == ("ode_step", 3, "Fake H200")
    assert (r.grid, r.block, r.registers) == ((40, 1, 1), (256, 1, 1), 40)
    assert (r.static_shared_bytes, r.dynamic_shared_bytes, r.shared_bytes) == (1024, 512, 1536)
    assert (r.local_bytes, r.ms, r.precision, r.start_s) == (16, 2.5, "single", start)
    assert r.threads == 40 * 256 and r.meta == {"batch": 7}
    flat = profiler.record_launch(kernel("k"), LaunchTiming(1.0, 7, [32, 2]), FakeDevice(3))
    assert (flat.grid, flat.block) == ((7, 1, 1), (32, 2, 1))
    peaks = profiler.peaks[3]  # taken from the device's properties on first sight
    assert peaks.flops["double"] == PROPERTIES.peak_flops("double")
    assert peaks.flops["single"] == PROPERTIES.peak_flops("single")
    assert peaks.bandwidth == PROPERTIES.peak_bandwidth() and peaks.source == "properties"


def test_default_start_is_the_end_of_the_launch_minus_its_duration():
    profiler = Profiler()
    before = profiler.clock()
    r = profiler.record_launch(kernel("k"), LaunchTiming(0.0, (1, 1, 1), (1, 1, 1)),
                               FakeDevice(0))
    assert before <= r.start_s <= profiler.clock()


def test_summary_numbers_for_known_records():
    profiler = Profiler()
    profiler.set_peaks(0, flops={"double": 1e12, "single": 4e12}, bandwidth=2e12)
    profiler.set_peaks(1, flops={"double": 2e12, "single": 8e12}, bandwidth=1e12)
    profiler.record(record("rhs", 0, ms=2.0, flops=1e9, bytes=3e9))
    profiler.record(record("rhs", 1, ms=4.0, flops=1e9, bytes=3e9))
    profiler.record(record("reduce", 0, ms=1.0, flops=5e8, bytes=1e9, precision="single"))
    rows = {row.kernel: row for row in profiler.summary()}
    rhs = rows["rhs"]
    assert (rhs.launches, rhs.total_ms, rhs.mean_ms) == (2, 6.0, 3.0)
    assert rhs.gflops == pytest.approx(2e9 / 6e-3 / 1e9)
    assert rhs.gbytes_per_s == pytest.approx(6e9 / 6e-3 / 1e9)
    # work done over what the two devices could have done at peak in the same time
    assert rhs.flops_fraction == pytest.approx(2e9 / (2e-3 * 1e12 + 4e-3 * 2e12))
    assert rhs.bandwidth_fraction == pytest.approx(6e9 / (2e-3 * 2e12 + 4e-3 * 1e12))
    assert rhs.devices == (0, 1) and rhs.precisions == ("double",)
    reduce = rows["reduce"]  # single precision is compared with the single peak
    assert reduce.flops_fraction == pytest.approx(5e8 / (1e-3 * 4e12))
    table = profiler.summary_table()
    assert "rhs" in table and "reduce" in table and f"{100 * rhs.flops_fraction:.1f}" in table


def test_measured_peaks_override_only_what_is_given():
    profiler = Profiler()
    profiler.register_device(FakeDevice(0))
    peaks = profiler.set_peaks(0, bandwidth=4.0e12)
    assert peaks.bandwidth == 4.0e12 and peaks.source == "properties+measured"
    assert peaks.flops["double"] == PROPERTIES.peak_flops("double")
    with pytest.raises(OptionError, match="bandwidth"):
        profiler.set_peaks(5, flops={"double": 1.0, "single": 2.0})


def test_unknown_peaks_and_zero_time_give_no_fraction():
    profiler = Profiler()
    profiler.record(record("k", 9, ms=0.0, flops=1.0))
    row = profiler.summary()[0]
    assert row.gflops is None and row.flops_fraction is None and row.bandwidth_fraction is None
    assert "-" in profiler.summary_table()


def test_bad_records_are_option_errors():
    with pytest.raises(OptionError, match="precision"):
        normalize_precision("half")
    assert normalize_precision("FP64") == "double"
    with pytest.raises(OptionError, match="ms"):
        record(ms=float("nan"))
    with pytest.raises(OptionError, match="grid"):
        LaunchRecord("k", 0, "", (0, 1, 1), (1, 1, 1), 0, 0, 0, 0, 1.0, 0, 0, "double")


def test_observers_see_every_record_in_order_from_any_thread():
    seen, late = [], []
    lock = threading.Lock()

    def observe(r):
        with lock:
            seen.append(r)

    profiler = Profiler(observers=[observe])
    profiler.record(record("first"))
    profiler.add_observer(late.append)

    def many(device):
        for i in range(100):
            profiler.record(record(f"k{device}", device, start_s=i))

    threads = [threading.Thread(target=many, args=(d,)) for d in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(profiler.records) == len(seen) == 401 and len(late) == 400
    assert seen[0].kernel == "first"
    for d in range(4):  # each thread's records arrive in its order
        assert [r.start_s for r in seen if r.kernel == f"k{d}"] == list(range(100))
    profiler.remove_observer(observe)
    profiler.record(record("after"))
    assert len(seen) == 401 and late[-1].kernel == "after"
    with pytest.raises(OptionError, match="callable"):
        profiler.add_observer("not a function")


def test_spans_are_recorded_even_when_the_block_fails():
    profiler = Profiler()
    with profiler.span("compile", backend="ode"):
        pass
    with pytest.raises(ZeroDivisionError):
        with profiler.span("transfer", category="memcpy", device=FakeDevice(1)):
            1 / 0
    compile_span, transfer = profiler.spans
    assert compile_span.name == "compile" and compile_span.device_index is None
    assert compile_span.meta == {"backend": "ode"} and compile_span.seconds >= 0
    assert transfer.device_index == 1 and transfer.category == "memcpy"
    with pytest.raises(OptionError, match="ends"):
        profiler.add_span("x", 2.0, 1.0)


def filled_profiler() -> Profiler:
    profiler = Profiler()
    with profiler.span("compile"):
        pass
    device = FakeDevice(0)
    for i in range(3):
        profiler.record_launch(kernel("rhs"), LaunchTiming(1.5 + i, (8, 1, 1), (64, 1, 1)),
                               device, flops=1e6, bytes=4e6, start_s=0.01 * i)
    profiler.record(record("ssa", 1, ms=0.25, flops=10, bytes=20, start_s=0.5))
    profiler.add_span("batch", 0.0, 0.2, category="schedule", device=1, start=0, stop=64)
    return profiler


def test_json_round_trip_keeps_records_spans_peaks_and_summary(tmp_path):
    profiler = filled_profiler()
    path = tmp_path / "profile.json"
    profiler.to_json(path)
    data = json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(f"non-JSON {c}"))
    assert data["format"] == "sbmlgpu-profile" and len(data["launches"]) == 4
    assert data["launches"][0]["grid"] == [8, 1, 1] and data["launches"][2]["ms"] == 3.5
    assert [s["name"] for s in data["spans"]] == ["compile", "batch"]
    assert data["summary"][0]["kernel"] == "rhs" and data["summary"][0]["launches"] == 3
    assert data["summary"][1]["flops_fraction"] is None  # device 1 has no peaks
    loaded = Profiler.from_json(path)
    assert loaded.records == profiler.records and loaded.spans == profiler.spans
    assert loaded.summary() == profiler.summary()
    assert loaded.peaks[0].bandwidth == PROPERTIES.peak_bandwidth()
    (tmp_path / "other.json").write_text("{}")
    with pytest.raises(OptionError, match="not an sbmlgpu profile"):
        Profiler.from_json(tmp_path / "other.json")


def test_chrome_trace_has_one_track_per_device_and_valid_complete_events(tmp_path):
    profiler = filled_profiler()
    path = tmp_path / "trace.json"
    profiler.to_chrome_trace(path)
    trace = json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(f"non-JSON {c}"))
    events = trace["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    for e in complete:
        assert {"name", "cat", "ph", "ts", "dur", "pid", "tid", "args"} <= e.keys()
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
        assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0
    kernels = [e for e in complete if e["cat"] == "kernel"]
    assert [e["dur"] for e in kernels if e["name"] == "rhs"] == [1500.0, 2500.0, 3500.0]
    assert [e["ts"] for e in kernels if e["name"] == "rhs"] == pytest.approx([0, 1e4, 2e4])
    assert {e["pid"] for e in kernels if e["name"] == "rhs"} == {1}
    assert {e["pid"] for e in kernels if e["name"] == "ssa"} == {2}
    assert kernels[0]["args"]["registers"] == 40 and kernels[0]["args"]["grid"] == [8, 1, 1]
    compile_event = next(e for e in complete if e["name"] == "compile")
    batch = next(e for e in complete if e["name"] == "batch")
    assert compile_event["pid"] == 0 and (batch["pid"], batch["tid"]) == (2, 1)
    assert batch["dur"] == pytest.approx(2e5) and batch["args"]["stop"] == 64
    names = {e["pid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {0: "host", 1: "GPU 0: Fake H200", 2: "GPU 1: GPU1"}


def test_precision_names_of_the_printer_are_accepted():
    from sbmlgpu.profile import normalize_precision
    assert normalize_precision("float") == "single"
    assert normalize_precision("double") == "double"


def test_span_seconds_sums_spans_by_name_longest_first():
    profiler = Profiler()
    profiler.add_span("batch", 0.0, 0.5)
    profiler.add_span("pilot", 0.5, 0.6)
    profiler.add_span("batch", 0.6, 0.9)
    totals = profiler.span_seconds()
    assert list(totals) == ["batch", "pilot"]
    assert totals["batch"] == pytest.approx(0.8) and totals["pilot"] == pytest.approx(0.1)
    assert Profiler().span_seconds() == {}
