"""The op table of templates/interval.cuh: every function of the interval header,
applied to rows of arguments, built for the host (runtime.host) or the GPU.

Tests use it to compare the header with exact arithmetic (fractions, python-flint),
with the CPU's own directed rounding (`oracle`) and, on the GPU machine, the device
with the host:

    rows = arguments(a, b)                       # (n, 4): a, b, c, d; x = [a, b], y = [c, d]
    out = run_host("sbmlgpu_add_rd", rows)       # (n, 2)
    out = run_host("iv_mul", arguments(x_lo, x_hi, y_lo, y_hi))

Each op's result row is (lo, hi) for an interval, (value, 0) for a number or a
predicate (1 / 0), and (value, inexact) for a directed scalar op, inexact = 1 where
the host emulation took its fallback (the result is then only an enclosure, not the
exact directed rounding; interval.cuh says where).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from .templates import render

#: Flags of the host build: the interval code must not be contracted into FMAs
#: (it calls fma where it means one).
HOST_FLAGS = ("-ffp-contract=off",)
#: The oracle also runs code in other rounding modes: the compiler must not assume
#: round-to-nearest.
ORACLE_FLAGS = (*HOST_FLAGS, "-frounding-math")


@dataclass(frozen=True)
class OpEntry:
    """One function of the header. `call` is a C expression in a, b, c (doubles) and
    x, y (ival); scalar ops also name their error-sign function (`inexact`), the
    rounding mode and the plain C expression the oracle evaluates in that mode."""

    index: int
    name: str
    kind: str  # "interval", "scalar", "number" or "predicate"
    call: str
    inexact: str = ""
    mode: str = ""
    oracle: str = ""


_SCALAR = [  # name, arguments, error sign, plain expression
    ("add", "a, b", "sbmlgpu_err_add(a, b)", "a + b"),
    ("sub", "a, b", "sbmlgpu_err_add(a, -b)", "a - b"),
    ("mul", "a, b", "sbmlgpu_err_mul(a, b)", "a * b"),
    ("div", "a, b", "sbmlgpu_err_div(a, b)", "a / b"),
    ("sqrt", "a", "sbmlgpu_err_sqrt(a)", "sqrt(a)"),
    ("fma", "a, b, c", "sbmlgpu_err_fma(a, b, c)", "fma(a, b, c)"),
]
_INTERVAL = [
    "iv_add(x, y)", "iv_sub(x, y)", "iv_mul(x, y)", "iv_div(x, y)", "iv_neg(x)", "iv_sqr(x)",
    "iv_powi(x, (int)c)", "iv_pow(x, y)", "iv_exp(x)", "iv_log(x)", "iv_sqrt(x)", "iv_sin(x)",
    "iv_cos(x)", "iv_tan(x)", "iv_atan(x)", "iv_tanh(x)", "iv_abs(x)", "iv_min(x, y)",
    "iv_max(x, y)", "iv_hull(x, y)", "iv_intersect(x, y)", "iv_scale(x, c)", "iv_point(a)",
    "iv_make(a, b)", "iv_entire()", "iv_empty()", "sbmlgpu_iv_pi()",
]
_NUMBER = ["iv_mid(x)", "iv_rad(x)", "iv_width(x)", "sbmlgpu_next_up(a)",
           "sbmlgpu_next_down(a)"]
_PREDICATE = ["iv_contains(x, c)", "iv_subset(x, y)", "iv_disjoint(x, y)", "iv_is_finite(x)",
              "iv_is_empty(x)"]


def _table() -> tuple[OpEntry, ...]:
    entries: list[tuple] = []
    for name, args, err, plain in _SCALAR:
        for direction, mode in (("rd", "FE_DOWNWARD"), ("ru", "FE_UPWARD")):
            fn = f"sbmlgpu_{name}_{direction}"
            entries.append((fn, "scalar", f"{fn}({args})", err, mode, plain))
    for kind, calls in (("interval", _INTERVAL), ("number", _NUMBER), ("predicate", _PREDICATE)):
        entries += [(call.split("(")[0], kind, call) for call in calls]
    return tuple(OpEntry(i, *entry) for i, entry in enumerate(entries))


OPS = _table()
OP_INDEX = {op.name: op.index for op in OPS}


def source(*, after_common: bool = False, oracle: bool = False) -> str:
    """The op table's CUDA/C++ text (interval.cuh included standalone, or after
    common.cuh); `oracle` adds the host-only fesetround reference."""
    return render("sbmlgpu.codegen", "interval_selftest.cu", ops=OPS, after_common=after_common,
                  oracle=oracle, precision="double")


def host_library(text: str | None = None, *, oracle: bool = False) -> ctypes.CDLL:
    """The op table built for the host (cached); `text` replaces the rendered source
    (tests build deliberately broken variants to see their checks fail)."""
    from ..runtime import host  # runtime imports codegen: import it only when building

    flags = ORACLE_FLAGS if oracle else HOST_FLAGS
    library = host.load(text if text is not None else source(oracle=oracle),
                         "interval_selftest.cu", flags, openmp=False)
    array = ctypes.POINTER(ctypes.c_double)
    library.sbmlgpu_iv_optable_host.argtypes = [ctypes.c_int, ctypes.c_longlong, array, array]
    library.sbmlgpu_iv_optable_host.restype = None
    if oracle:
        library.sbmlgpu_iv_oracle_host.argtypes = [ctypes.c_int, ctypes.c_longlong, array, array]
        library.sbmlgpu_iv_oracle_host.restype = ctypes.c_int
    return library


def arguments(a, b=0.0, c=0.0, d=0.0) -> np.ndarray:
    """Rows (a, b, c, d) as one C-contiguous (n, 4) float64 array (broadcast)."""
    columns = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (a, b, c, d)))
    return np.ascontiguousarray(np.stack([np.ravel(col) for col in columns], axis=1))


def _call(function, name: str, rows: np.ndarray, oracle: bool = False) -> np.ndarray:
    if name not in OP_INDEX:
        raise KeyError(f"no op {name!r} in the interval op table")
    rows = np.ascontiguousarray(rows, dtype=np.float64).reshape(-1, 4)
    out = np.zeros((len(rows), 2))
    pointer = ctypes.POINTER(ctypes.c_double)
    result = function(OP_INDEX[name], len(rows), rows.ctypes.data_as(pointer),
                      out.ctypes.data_as(pointer))
    if oracle and result == 0:
        raise KeyError(f"the oracle has no {name!r} (scalar ops only)")
    return out


def run_host(name: str, rows: np.ndarray, library: ctypes.CDLL | None = None) -> np.ndarray:
    """Op `name` on every row, on the host: an (n, 2) array."""
    return _call((library or host_library()).sbmlgpu_iv_optable_host, name, rows)


def run_oracle(name: str, rows: np.ndarray) -> np.ndarray:
    """Scalar op `name` (e.g. 'sbmlgpu_mul_rd') computed by the CPU in that rounding
    mode: column 0 (column 1 is 0)."""
    return _call(host_library(oracle=True).sbmlgpu_iv_oracle_host, name, rows, oracle=True)


def run_device(device, name: str, rows: np.ndarray, block: int = 128) -> np.ndarray:
    """Op `name` on every row on `device` (a runtime Device): an (n, 2) array."""
    if name not in OP_INDEX:
        raise KeyError(f"no op {name!r} in the interval op table")
    rows = np.ascontiguousarray(rows, dtype=np.float64).reshape(-1, 4)
    kernel = device.compile(source(), name="interval_selftest").function("sbmlgpu_iv_optable")
    d_in, d_out = device.to_device(rows), device.alloc(rows.shape[0] * 2 * 8)
    try:
        kernel.launch(((len(rows) + block - 1) // block,), (block,),
                      [np.int32(OP_INDEX[name]), np.int32(len(rows)), d_in, d_out])
        return device.from_device(d_out, (len(rows), 2), np.float64)
    finally:
        d_in.free()
        d_out.free()
