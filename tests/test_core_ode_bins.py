"""The binning output sink (sbmlgpu.ode.sinks.BinSink, templates/sink_bins.cuh): the
kernel built as host C++ (the host build the integrator tests use) writes bin
indices; the same run with the trajectory sink gives the values, and numpy's own
binning of those values (numpy.digitize over numpy.linspace edges) must give the
same indices: values on edges, below and above the range, NaN, and the output
times of a member that failed."""

from __future__ import annotations

import ctypes
import shutil
import subprocess

import numpy as np
import pytest

import sbmlgpu
from sbmlgpu.codegen.compile_check import nvcc_available, nvcc_compile
from sbmlgpu.codegen.templates import render
from sbmlgpu.errors import OptionError
from sbmlgpu.ode.codegen import generate
from sbmlgpu.ode.model import KernelModel
from sbmlgpu.ode.sinks import BinSink
from sbmlgpu.plugins.ode.program import KERNEL, kernel_source
from sbmlgpu.results import Status
from sbmlgpu.views import ode_system

from .ode_helpers import load, needs_compiler

_MATH = '<math xmlns="http://www.w3.org/1998/Math/MathML">{}</math>'


def clock_model():
    """x' = 1 and y' = -1 from 0 (rk4 with unit steps: exactly t and -t), and
    w = sqrt(3 - x) (NaN once x > 3)."""
    rules = (f'<rateRule variable="x">{_MATH.format("<cn>1</cn>")}</rateRule>'
             f'<rateRule variable="y">{_MATH.format("<cn>-1</cn>")}</rateRule>'
             '<assignmentRule variable="w">' + _MATH.format(
                 "<apply><root/><apply><minus/><cn>3</cn><ci>x</ci></apply></apply>")
             + "</assignmentRule>")
    return sbmlgpu.load(
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<sbml xmlns="http://www.sbml.org/sbml/level3/version2/core" level="3" version="2">'
        '<model id="clock"><listOfParameters>'
        '<parameter id="x" value="0" constant="false"/>'
        '<parameter id="y" value="0" constant="false"/>'
        '<parameter id="w" constant="false"/>'
        f'</listOfParameters><listOfRules>{rules}</listOfRules></model></sbml>')


def numpy_bins(values: np.ndarray, ranges: np.ndarray, bins: int, invalid: int) -> np.ndarray:
    """numpy's binning of values (members, times, outputs): K equal bins between
    numpy.linspace edges, below/above clamped to the end bins, NaN -> invalid."""
    out = np.empty(values.shape, dtype=np.int64)
    for j, (lo, hi) in enumerate(ranges):
        edges = np.linspace(lo, hi, bins + 1)
        column = values[..., j].astype(np.float64)
        out[..., j] = np.digitize(column, edges[1:-1])
        out[..., j][np.isnan(column)] = invalid
    return out


def _host_library(source):
    """The host build (-DSBMLGPU_HOST_ENTRY) of a generated kernel, loaded."""
    from sbmlgpu.plugins.ode.native import FLAGS
    from sbmlgpu.runtime import host

    return host.load(source.text, source.name, FLAGS)


def _settings(dt: float, max_steps: int):
    return dict(rtol=1e-8, atol=1e-10, h0=0.0, max_step=0.0, dt=dt, max_steps=max_steps,
                seed=1)


def _ptr(array):
    return array.ctypes.data_as(ctypes.c_void_p) if array is not None and array.size else None


def run_bins(model: KernelModel, method: str, precision: str, table: np.ndarray,
             times: np.ndarray, sink: BinSink, ranges: np.ndarray, dt=1.0, max_steps=10**6):
    """(bins (members, times, outputs), status) from the host build of the kernel
    with the binning sink."""
    source = generate(model, method, precision, template=KERNEL, sink=sink, prefix="ode_bins")
    assert source.kernel == f"sbmlgpu_ode_bins_{method}"
    library = _host_library(source)
    real = np.float64 if precision == "double" else np.float32
    c_real = ctypes.c_double if precision == "double" else ctypes.c_float
    assert library.sbmlgpu_ode_bins_host_real_size() == np.dtype(real).itemsize
    f = library.sbmlgpu_ode_bins_host
    pointer = ctypes.c_void_p
    f.argtypes = [ctypes.c_longlong, pointer, pointer, ctypes.c_int, pointer, pointer, pointer,
                  pointer, c_real, c_real, c_real, c_real, c_real, ctypes.c_longlong,
                  ctypes.c_ulonglong, pointer, ctypes.c_ulonglong,
                  # the ode kernel's limits (templates/limits.cuh): none
                  ctypes.c_longlong, ctypes.c_longlong, ctypes.c_longlong]
    n = table.shape[1]
    table = np.ascontiguousarray(table, dtype=real)
    times = np.ascontiguousarray(times, dtype=real)
    checked = sink.ranges(ranges, model.outputs)
    out = np.full((n, len(times), len(model.outputs)), 123, dtype=sink.dtype)
    status = np.empty(n, np.int8)
    steps = np.empty(n, np.int32)
    s = _settings(dt, max_steps)
    assert f(n, _ptr(table), _ptr(times), len(times), _ptr(out), _ptr(checked), _ptr(status),
             _ptr(steps), s["rtol"], s["atol"], s["h0"], s["max_step"], s["dt"], s["max_steps"],
             s["seed"], None, 0, 0, 0, -1) == 0
    return out, status


def run_values(model: KernelModel, method: str, precision: str, table: np.ndarray,
               times: np.ndarray, dt=1.0, max_steps=10**6):
    """(values (members, times, outputs), status) of the same run, trajectory sink."""
    from sbmlgpu.plugins.ode.native import host_kernel

    kernel = host_kernel(kernel_source(model, method, precision))
    settings = {**_settings(dt, max_steps), "n": table.shape[1]}
    out, status, _ = kernel.run(table, times, len(model.outputs), settings)
    return np.moveaxis(out, -1, 0), status


@pytest.fixture(scope="module")
def compiler():
    needs_compiler()


@pytest.mark.parametrize("precision", ["double", "float"])
def test_edges_out_of_range_and_nan_are_binned_as_numpy_does(compiler, precision):
    model = KernelModel(ode_system(clock_model()), (), ("x", "y", "w"))
    times = np.arange(11.0)
    table = np.zeros((0, 1))
    # x = 0..10 over [0, 8): every integer is an edge; 8 = high and above clamp to
    # bin 7. y = 0..-10 over [-5, 3): -5 is the lowest edge, below it bin 0.
    # w = sqrt(3), sqrt(2), 1, 0 then NaN, over [0, 2) (1 is an edge).
    ranges = np.array([[0.0, 8.0], [-5.0, 3.0], [0.0, 2.0]])
    sink = BinSink(8)
    values, status = run_values(model, "rk4", precision, table, times)
    assert np.array_equal(values[0, :, 0], times) and np.array_equal(values[0, :, 1], -times)
    assert np.isnan(values[0, 4:, 2]).all() and values[0, 3, 2] == 0.0
    got, bin_status = run_bins(model, "rk4", precision, table, times, sink, ranges)
    assert got.dtype == np.uint8 and np.array_equal(status, bin_status)
    assert np.array_equal(got[0, :, 0], [0, 1, 2, 3, 4, 5, 6, 7, 7, 7, 7])
    assert np.array_equal(got[0, :, 1], [5, 4, 3, 2, 1, 0, 0, 0, 0, 0, 0])
    # 8 bins over [0, 2): sqrt(3) -> 6, sqrt(2) -> 5, 1 -> 4 (an edge), 0 -> 0, NaN
    assert np.array_equal(got[0, :4, 2], [6, 5, 4, 0])
    assert (got[0, 4:, 2] == sink.invalid).all() and sink.invalid == 255
    assert np.array_equal(got, numpy_bins(values, ranges, sink.bins, sink.invalid))


def test_a_failed_member_leaves_invalid_indices(compiler):
    model = KernelModel(ode_system(clock_model()), (), ("x", "y"))
    times = np.arange(11.0)
    table = np.zeros((0, 1))
    ranges = np.array([[0.0, 8.0], [-5.0, 3.0]])
    values, status = run_values(model, "rk4", "double", table, times, max_steps=4)
    got, bin_status = run_bins(model, "rk4", "double", table, times, BinSink(8), ranges,
                               max_steps=4)
    assert status[0] == bin_status[0] == Status.max_steps
    assert np.isnan(values[0, 5:]).all()
    assert (got[0, 5:] == 255).all() and np.array_equal(got[0, :5, 0], [0, 1, 2, 3, 4])
    assert np.array_equal(got, numpy_bins(values, ranges, 8, 255))


@pytest.mark.parametrize("method,precision,bins", [("dopri5", "double", 16),
                                                    ("rodas4", "double", 300),
                                                    ("dopri5", "float", 1000)])
def test_ensemble_bins_match_numpy_binning_of_the_trajectories(compiler, method, precision,
                                                               bins):
    net = load("lotka_volterra")
    rng = np.random.default_rng(7)
    n = 64
    table = np.vstack([rng.uniform(0.5, 1.5, n), rng.uniform(0.005, 0.02, n)])
    model = KernelModel(ode_system(net), ("p1", "p2"), ("x1", "x2"))
    times = np.linspace(0.0, 15.0, 31)
    values, status = run_values(model, method, precision, table, times)
    assert (status == Status.ok).all()
    # ranges that cut through the values: a part of them falls below and above
    ranges = np.array([np.quantile(values[..., j], [0.1, 0.9]) for j in range(2)])
    sink = BinSink(bins)
    got, bin_status = run_bins(model, method, precision, table, times, sink, ranges)
    assert got.dtype == (np.uint8 if bins <= 255 else np.uint16)
    assert np.array_equal(status, bin_status)
    expected = numpy_bins(values, ranges, bins, sink.invalid)
    assert np.array_equal(got, expected)
    assert (expected == 0).any() and (expected == bins - 1).any()  # clamped both ways
    assert len(np.unique(expected)) > min(bins, 64) // 4
    # a constant output sitting on an edge: the initial value of x1 is 50 at t0 for
    # every member, shift the range so that 50 is the edge of bin 3
    step = 0.25
    on_edge = np.array([[50.0 - 3 * step, 50.0 - 3 * step + bins * step], ranges[1]])
    assert np.linspace(*on_edge[0], bins + 1)[3] == 50.0
    got, _ = run_bins(model, method, precision, table, times, sink, on_edge)
    assert (got[:, 0, 0] == 3).all()
    assert np.array_equal(got, numpy_bins(values, on_edge, bins, sink.invalid))


_BIN_MAIN = r"""
#include <stdio.h>
#include <stdlib.h>
int main(void)
{
    /* stdin: count, lo, hi (doubles), then count doubles; stdout: count ints */
    double head[3];
    if (fread(head, sizeof(double), 3, stdin) != 3) return 1;
    const long n = (long)head[0];
    double* v = (double*)malloc(sizeof(double) * (n ? n : 1));
    if (fread(v, sizeof(double), n, stdin) != (size_t)n) return 1;
    for (long i = 0; i < n; ++i) {
        const int b = (int)ode_bin((real_t)v[i], head[1], head[2]);
        fwrite(&b, sizeof(int), 1, stdout);
    }
    return 0;
}
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++")
@pytest.mark.parametrize("lo,hi,bins", [(0.1, 0.7, 6), (-1e-3, 3.3e5, 1000), (1e-300, 1e-299, 7),
                                        (-2.5, -0.5, 255), (0.0, 1.0, 65535)])
def test_ode_bin_places_edges_and_their_neighbours_as_numpy(tmp_path, lo, hi, bins):
    """ode_bin on its own, over the values where placing goes wrong if anywhere: every
    edge of numpy.linspace and the doubles next to it, the range's ends, infinities,
    NaN and random values."""
    sink = BinSink(bins)
    edges = np.linspace(lo, hi, bins + 1)
    rng = np.random.default_rng(bins)
    values = np.concatenate([edges, np.nextafter(edges, -np.inf), np.nextafter(edges, np.inf),
                             rng.uniform(lo - (hi - lo), hi + (hi - lo), 2000),
                             [np.inf, -np.inf, np.nan, lo, hi, 0.0, -0.0]])
    source = (render("sbmlgpu.codegen", "common.cuh", precision="double")
              + "#define ODE_NOUT_REAL 1\n"
              + render("sbmlgpu.ode", "sink_bins.cuh", sink=sink, unroll_outputs="")
              + _BIN_MAIN)
    (tmp_path / "bins.cpp").write_text(source)
    build = subprocess.run(["g++", "-O2", "-std=c++14", "-o", str(tmp_path / "bins"),
                            str(tmp_path / "bins.cpp"), "-lm"], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[:3000]
    stdin = np.concatenate([[len(values), lo, hi], values]).astype(np.float64).tobytes()
    done = subprocess.run([str(tmp_path / "bins")], input=stdin, capture_output=True, check=True)
    got = np.frombuffer(done.stdout, dtype=np.int32)
    expected = numpy_bins(values[None, :, None], np.array([[lo, hi]]), bins, sink.invalid)
    assert np.array_equal(got, expected[0, :, 0])
    assert (got[:bins] == np.arange(bins)).all()  # each lower edge is in its own bin


def test_bin_sink_checks_its_bins_and_ranges():
    assert BinSink(255).dtype == np.uint8 and BinSink(255).invalid == 255
    assert BinSink(256).dtype == np.uint16 and BinSink(256).invalid == 65535
    assert BinSink(256).c_type == "unsigned short" and BinSink(2).c_type == "unsigned char"
    for bad in (0, -3, 65536, 2.5, True):
        with pytest.raises(OptionError, match="bins"):
            BinSink(bad)
    sink = BinSink(10)
    assert sink.nbytes(100, 5, 3) == 1500 and BinSink(300).nbytes(100, 5, 3) == 3000
    ok = sink.ranges([[0, 1], [-1, 1]], ("a", "b"))
    assert ok.dtype == np.float64 and ok.flags.c_contiguous
    with pytest.raises(OptionError, match="'b'"):
        sink.ranges([[0, 1], [1, 1]], ("a", "b"))
    with pytest.raises(OptionError, match="'a'"):
        sink.ranges([[0, np.inf], [0, 1]], ("a", "b"))
    with pytest.raises(OptionError, match="one \\(low, high\\) pair per output"):
        sink.ranges([[0, 1]], ("a", "b"))


@pytest.mark.skipif(not nvcc_available(), reason="nvcc not found")
@pytest.mark.parametrize("precision,bins", [("double", 64), ("float", 4096)])
def test_bin_sink_kernel_compiles_for_sm90(precision, bins):
    net = load("seir_epidemic")
    model = KernelModel(ode_system(net), ("beta",), ("S", "I"))
    source = generate(model, "dopri5", precision, template=KERNEL, sink=BinSink(bins),
                      prefix="ode_bins")
    assert "__dadd_rn(__dmul_rn(" in source.text
    assert nvcc_compile(source.text, "sm_90", name=source.name)
