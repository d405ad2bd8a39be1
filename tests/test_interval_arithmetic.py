"""templates/interval.cuh on the host (its op table, codegen/interval_selftest.py).

- the directed scalar ops equal the exact directed rounding (fractions.Fraction) on
  10^5 random operands of every magnitude, outside the fallback ranges the library
  reports (there: enclosure), and equal the CPU's own fesetround results bit for bit;
- the interval ops enclose the true range (exact fractions for +, -, *, /; python-flint
  arb balls at 200 bits at the endpoints and critical points for the elementary
  functions) and are tight: the directed-rounded hull for +, -, *, /, within the
  widening's ulps for the elementary functions;
- the checks can fail: round-to-nearest bounds, and a header whose round-down forgets
  to step, are caught by them;
- NaN / inf cases; the header compiles with nvcc -arch=sm_90 (and into PTX with the
  directed instructions), standalone and after common.cuh.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
from fractions import Fraction

import numpy as np
import pytest

from sbmlgpu.codegen import interval_selftest as ops
from sbmlgpu.codegen.compile_check import nvcc_available, nvcc_compile, nvcc_path
from sbmlgpu.codegen.names import RESERVED_PREFIXES
from sbmlgpu.codegen.templates import template_folder

try:
    import flint
except ImportError:  # the GPU machine may lack it: only the arb checks need it
    flint = None
arb = flint.arb if flint is not None else None
needs_flint = pytest.mark.skipif(flint is None, reason="python-flint is not installed "
                                 "(pip install -e '.[test]')")

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                               reason="no host C++ compiler")
needs_nvcc = pytest.mark.skipif(not nvcc_available(), reason="nvcc not installed")
pytestmark = needs_gxx

INF, DBL_MAX = math.inf, 1.7976931348623157e308
N_SCALAR = 100_000
HEADER = (template_folder("sbmlgpu.codegen") / "interval.cuh").read_text()
#: The widening of each elementary function in "ulps" (interval.cuh's SBMLGPU_ULPS_*).
ULPS = {name.lower(): float(value) for name, value in
        re.findall(r"#define SBMLGPU_ULPS_(\w+)\s+([0-9.]+)", HEADER)}


@pytest.fixture(scope="module", autouse=True)
def arb_precision():
    if flint is None:
        yield
        return
    saved = flint.ctx.prec
    flint.ctx.prec = 200
    yield
    flint.ctx.prec = saved


# -- samples ------------------------------------------------------------------------

def random_doubles(rng: np.random.Generator, n: int) -> np.ndarray:
    """Finite doubles of every kind: random bit patterns (all exponents), moderate
    magnitudes, subnormals, near DBL_MAX, small integers and exact powers of two."""
    k = n // 6
    bits = rng.integers(0, 0x7FF0_0000_0000_0000, size=k, dtype=np.int64).view(np.float64)
    moderate = rng.uniform(-1, 1, k) * 2.0 ** rng.integers(-40, 40, k)
    subnormal = rng.integers(1, 1 << 52, size=k, dtype=np.int64).view(np.float64)
    huge = DBL_MAX * rng.uniform(0.25, 1.0, k)
    integers = rng.integers(-64, 65, k).astype(np.float64)
    powers = 2.0 ** rng.integers(-1074, 1024, n - 5 * k).astype(np.float64)
    out = np.concatenate([bits, moderate, subnormal, huge, integers, powers])
    out *= rng.choice([-1.0, 1.0], out.size)
    return rng.permutation(out)


def operands(op: str, rng: np.random.Generator, n: int = N_SCALAR) -> np.ndarray:
    """(n, 4) rows for a scalar op, a quarter of them near cancellation."""
    a, b, c = random_doubles(rng, n), random_doubles(rng, n), random_doubles(rng, n)
    near = rng.random(n) < 0.25
    wobble = 1.0 + rng.uniform(-1e-15, 1e-15, n)
    if op in ("add", "sub"):
        b = np.where(near, (-a if op == "add" else a) * wobble, b)
    elif op == "fma":
        with np.errstate(over="ignore"):
            c = np.where(near & np.isfinite(a * b), -(a * b) * wobble, c)
    elif op == "div":
        b = np.where(near & (b != 0), b, rng.uniform(0.5, 4, n))
        with np.errstate(over="ignore"):
            multiple = b * rng.integers(-9, 10, n)  # exact quotients
        a = np.where((rng.random(n) < 0.1) & np.isfinite(multiple), multiple, a)
    elif op == "sqrt":
        a = np.abs(a)
    return ops.arguments(a, b, c)


def exact(op: str, a: float, b: float, c: float) -> Fraction:
    A, B, C = Fraction(a), Fraction(b), Fraction(c)
    return {"add": lambda: A + B, "sub": lambda: A - B, "mul": lambda: A * B,
            "div": lambda: A / B, "fma": lambda: A * B + C}[op]()


def directed(q: Fraction) -> tuple[float, float]:
    """The exact round-down and round-up of the rational q (IEEE double)."""
    try:
        f = float(q)  # correctly rounded
    except OverflowError:
        f = INF if q > 0 else -INF
    if math.isinf(f):
        return (DBL_MAX, INF) if q > 0 else (-INF, -DBL_MAX)
    F = Fraction(f)
    if F == q:
        return f, f
    return (f, math.nextafter(f, INF)) if F < q else (math.nextafter(f, -INF), f)


def sqrt_directed(a: float) -> tuple[float, float]:
    """sqrt rounded down and up, exactly: s = RN(sqrt a) is within an ulp, and the
    sign of a - s^2 (exact in fractions) says on which side the true root lies."""
    s = math.sqrt(a)
    d = Fraction(a) - Fraction(s) ** 2
    if d == 0:
        return s, s
    return (s, math.nextafter(s, INF)) if d > 0 else (math.nextafter(s, -INF), s)


def violations(op: str, rows: np.ndarray, lo: np.ndarray, hi: np.ndarray,
               inexact: np.ndarray) -> list[str]:
    """Rows where [lo, hi] is not the exact directed rounding (where `inexact`: not
    an enclosure of the exact value)."""
    bad = []
    for (a, b, c, _), l, h, fallback in zip(rows, lo, hi, inexact):
        if op == "div" and b == 0:
            continue
        if op == "sqrt":
            rd, ru = sqrt_directed(a)
            value = None
        else:
            value = exact(op, a, b, c)
            rd, ru = directed(value)
        if fallback:
            ok = l <= rd and h >= ru
        else:
            ok = l == rd and h == ru
        if not ok:
            bad.append(f"{op}({a!r}, {b!r}, {c!r}): [{l!r}, {h!r}], exact [{rd!r}, {ru!r}]"
                       f"{' (fallback)' if fallback else ''}")
    return bad


def may_fall_back(op: str, rows: np.ndarray) -> np.ndarray:
    """Where interval.cuh documents that the host emulation may fall back: products
    below 2^-900 (or, in fma, beyond 2^1020), quotients of a below 2^-900, square
    roots of a below 2^-960; never for sums."""
    a, b, c = (np.abs(rows[:, i]) for i in range(3))
    with np.errstate(over="ignore", under="ignore"):
        product = a * b
    return {"add": np.zeros(len(rows), bool), "sub": np.zeros(len(rows), bool),
            "mul": product < 2.0 ** -900, "div": a < 2.0 ** -900, "sqrt": a < 2.0 ** -960,
            "fma": (product < 2.0 ** -900) | (product >= 2.0 ** 1020) | (c >= 2.0 ** 1020)}[op]


SCALAR_OPS = ["add", "sub", "mul", "div", "sqrt", "fma"]
ARITY = {"add": 2, "sub": 2, "mul": 2, "div": 2, "sqrt": 1, "fma": 3}


# -- directed scalar ops ------------------------------------------------------------------

@pytest.mark.parametrize("op", SCALAR_OPS)
def test_directed_ops_are_the_exact_directed_rounding(op):
    rows = operands(op, np.random.default_rng(SCALAR_OPS.index(op)))
    down = ops.run_host(f"sbmlgpu_{op}_rd", rows)
    up = ops.run_host(f"sbmlgpu_{op}_ru", rows)
    inexact = (down[:, 1] != 0) | (up[:, 1] != 0)
    bad = violations(op, rows, down[:, 0], up[:, 0], inexact)
    assert not bad, f"{len(bad)} of {len(rows)}:\n" + "\n".join(bad[:20])
    # the fallback is taken only in the documented ranges, never for moderate operands
    assert not (inexact & ~may_fall_back(op, rows)).any()
    used = np.abs(rows[:, :ARITY[op]])
    moderate = np.all((used > 2.0 ** -400) & (used < 2.0 ** 400) | (used == 0), axis=1)
    assert moderate.sum() > len(rows) // 10 and not inexact[moderate].any()


@pytest.mark.parametrize("op", SCALAR_OPS)
def test_directed_ops_equal_the_cpus_own_directed_rounding_bit_for_bit(op):
    """fesetround on the CPU rounds as the GPU's _rd/_ru intrinsics (IEEE 754),
    signs of zero included."""
    rows = operands(op, np.random.default_rng(100 + SCALAR_OPS.index(op)), 200_000)
    for direction in ("rd", "ru"):
        ours = ops.run_host(f"sbmlgpu_{op}_{direction}", rows)
        cpu = ops.run_oracle(f"sbmlgpu_{op}_{direction}", rows)[:, 0]
        exact_rows = ours[:, 1] == 0
        same = (ours[:, 0].view(np.uint64) == cpu.view(np.uint64)) \
            | (np.isnan(ours[:, 0]) & np.isnan(cpu))
        differ = np.flatnonzero(exact_rows & ~same)
        assert differ.size == 0, [(tuple(rows[i, :3]), ours[i, 0], cpu[i]) for i in differ[:10]]
        # where the emulation fell back, it is still on the safe side
        fell_back = ~exact_rows & ~np.isnan(cpu)
        outward = cpu[fell_back] >= ours[fell_back, 0] if direction == "rd" \
            else cpu[fell_back] <= ours[fell_back, 0]
        assert outward.all()


def test_round_to_nearest_bounds_are_caught_by_the_same_check():
    """The check above can fail: plain round-to-nearest as both bounds misses the
    exact value of most inexact sums and products."""
    rng = np.random.default_rng(7)
    for op, fn in (("add", np.add), ("mul", np.multiply)):
        rows = operands(op, rng, 2000)
        with np.errstate(over="ignore", under="ignore"):
            nearest = fn(rows[:, 0], rows[:, 1])
        bad = violations(op, rows, nearest, nearest, np.zeros(len(rows), bool))
        assert len(bad) > len(rows) // 4


def test_a_header_that_forgets_to_step_down_is_caught():
    """Break the host's round-down (never step to the lower neighbour): the exact
    check must report it."""
    step = "return (err < 0 || err == SBMLGPU_INEXACT) ? sbmlgpu_next_down(r) : r;"
    text = ops.source()
    assert step in text
    library = ops.host_library(text.replace(step, "return r;"))
    rows = operands("mul", np.random.default_rng(8), 2000)
    down = ops.run_host("sbmlgpu_mul_rd", rows, library)
    up = ops.run_host("sbmlgpu_mul_ru", rows, library)
    assert len(violations("mul", rows, down[:, 0], up[:, 0], np.zeros(len(rows), bool))) > 100


def test_the_inline_neighbours_are_nextafter():
    """sbmlgpu_next_up / _down (bit patterns, in place of libm's nextafter call) at
    zeros of both signs, subnormals, the largest doubles, infinities, NaN and random
    values of every magnitude."""
    tiny = 5e-324
    special = [0.0, -0.0, tiny, -tiny, 2 * tiny, -2 * tiny, 2.2250738585072014e-308,
               -2.2250738585072014e-308, 1.0, -1.0, 1.7976931348623157e308,
               -1.7976931348623157e308, INF, -INF, float("nan")]
    rng = np.random.default_rng(11)
    values = np.concatenate([special, rng.choice([-1, 1], 3000) *
                             10.0 ** rng.uniform(-323, 308, 3000)])
    rows = ops.arguments(values, values)
    up = ops.run_host("sbmlgpu_next_up", rows)[:, 0]
    down = ops.run_host("sbmlgpu_next_down", rows)[:, 0]
    for v, u, d in zip(values, up, down):
        want_u, want_d = math.nextafter(v, INF), math.nextafter(v, -INF)
        if math.isnan(v):
            assert math.isnan(u) and math.isnan(d)
            continue
        assert (u, math.copysign(1, u)) == (want_u, math.copysign(1, want_u)), (v, u, want_u)
        assert (d, math.copysign(1, d)) == (want_d, math.copysign(1, want_d)), (v, d, want_d)


@needs_flint
def test_unwidened_elementary_functions_are_caught():
    """Without the ulp widening, exp of point intervals misses the true value: the
    arb check sees it."""
    text = ops.source().replace("#define SBMLGPU_ULPS_EXP  2.0", "#define SBMLGPU_ULPS_EXP  0.0")
    assert text != ops.source()
    points = np.random.default_rng(9).uniform(-20, 20, 300)
    out = ops.run_host("iv_exp", ops.arguments(points, points), ops.host_library(text))
    missed = [p for (l, h), p in zip(out, points) if not encloses(l, h, arb(p).exp())]
    assert len(missed) > 100


def test_overflow_gives_dbl_max_never_an_infinite_wrong_side():
    rows = ops.arguments([DBL_MAX, -DBL_MAX, 1e300], [DBL_MAX, -DBL_MAX, 1e10], 0.0)
    assert ops.run_host("sbmlgpu_add_rd", rows[:1])[0, 0] == DBL_MAX
    assert ops.run_host("sbmlgpu_add_ru", rows[1:2])[0, 0] == -DBL_MAX
    assert ops.run_host("sbmlgpu_mul_rd", rows[2:])[0, 0] == DBL_MAX
    assert ops.run_host("sbmlgpu_mul_ru", rows[2:])[0, 0] == INF
    assert ops.run_host("sbmlgpu_div_rd", ops.arguments(1e300, 1e-10))[0, 0] == DBL_MAX
    assert ops.run_host("sbmlgpu_fma_rd", ops.arguments(1e300, 1e10, 1.0))[0, 0] == DBL_MAX
    assert ops.run_host("sbmlgpu_div_ru", ops.arguments(-1e300, 1e-10))[0, 0] == -DBL_MAX


# -- interval ops: samples and references -------------------------------------------------

def random_intervals(rng: np.random.Generator, n: int, scale: float = 5.0):
    """[lo, hi] pairs: positive, negative, holding 0, points, wide, tiny, narrow."""
    kind = rng.integers(0, 7, n)
    m = 10.0 ** rng.uniform(-scale, scale, n)
    w = 10.0 ** rng.uniform(-16, 1, n)
    lo, hi = m, m * (1 + w)
    lo, hi = np.where(kind == 1, -hi, lo), np.where(kind == 1, -lo, hi)           # negative
    lo = np.where(kind == 2, -10.0 ** rng.uniform(-scale, scale, n), lo)          # holds 0
    hi = np.where(kind == 3, lo, hi)                                              # a point
    lo, hi = np.where(kind == 4, -hi * 1e3, lo), np.where(kind == 4, hi * 1e3, hi)  # wide
    tiny = 10.0 ** rng.uniform(-320, -290, n)
    lo, hi = np.where(kind == 5, tiny, lo), np.where(kind == 5, tiny * 3, hi)     # tiny
    return lo, hi


def fractions_range(op: str, xl, xh, yl, yh) -> tuple[Fraction, Fraction]:
    """The exact range of x op y over the boxes (endpoints decide for + - * /)."""
    X, Y = (Fraction(xl), Fraction(xh)), (Fraction(yl), Fraction(yh))
    f = {"iv_add": lambda p, q: p + q, "iv_sub": lambda p, q: p - q,
         "iv_mul": lambda p, q: p * q, "iv_div": lambda p, q: p / q}[op]
    values = [f(p, q) for p in X for q in Y]
    return min(values), max(values)


def tiny_or_huge(*values) -> bool:
    """Where the host emulation may step one ulp further out (interval.cuh): tiny
    products, quotients of tiny numerators, huge products."""
    return any(v != 0 and not (Fraction(2) ** -900 <= abs(Fraction(v)) < Fraction(2) ** 1020)
               for v in values)


@pytest.mark.parametrize("op", ["iv_add", "iv_sub", "iv_mul", "iv_div"])
def test_basic_interval_ops_are_the_directed_hull(op):
    rng = np.random.default_rng(["iv_add", "iv_sub", "iv_mul", "iv_div"].index(op) + 20)
    xl, xh = random_intervals(rng, 4000)
    yl, yh = random_intervals(rng, 4000)
    if op == "iv_div":
        keep = (yl > 0) | (yh < 0)
        xl, xh, yl, yh = xl[keep], xh[keep], yl[keep], yh[keep]
    out = ops.run_host(op, ops.arguments(xl, xh, yl, yh))
    bad = []
    for i, (lo, hi) in enumerate(out):
        low, high = fractions_range(op, xl[i], xh[i], yl[i], yh[i])
        want_lo, want_hi = directed(low)[0], directed(high)[1]
        fallback = tiny_or_huge(xl[i], xh[i]) if op == "iv_div" else False
        lo_ok = lo == want_lo or ((fallback or tiny_or_huge(low))
                                  and lo == math.nextafter(want_lo, -INF))
        hi_ok = hi == want_hi or ((fallback or tiny_or_huge(high))
                                  and hi == math.nextafter(want_hi, INF))
        if not (lo_ok and hi_ok):
            bad.append(f"{op}([{xl[i]!r}, {xh[i]!r}], [{yl[i]!r}, {yh[i]!r}]) = [{lo!r}, {hi!r}],"
                       f" directed hull [{want_lo!r}, {want_hi!r}]")
    assert len(out) > 2000 and not bad, "\n".join(bad[:20])


def arb_of(v: float):
    return arb(v)


def encloses(lo: float, hi: float, ball, cap=None) -> bool:
    """[lo, hi] certainly holds the true value in the arb ball. `cap` bounds the true
    value (|sin|, |cos|, |tanh| <= 1), where the ball may reach past it: cos(1e-300)
    is 1 +- 1e-63 in arb, the value itself is below 1."""
    lower, upper = ball.lower(), ball.upper()
    if cap is not None:
        cap = arb(cap)
        lower = -cap if lower < -cap else lower
        upper = cap if upper > cap else upper
    lower_ok = lo == -INF or (math.isfinite(lo) and arb(lo) <= lower)
    upper_ok = hi == INF or (math.isfinite(hi) and upper <= arb(hi))
    return bool(lower_ok and upper_ok)


def ulps_from(ours: float, true: float) -> float:
    """|ours - true| in ulps of the true value (at least the least subnormal)."""
    if ours == true or (math.isinf(true) and ours == math.copysign(DBL_MAX, true)):
        return 0.0  # (DBL_MAX is the best finite bound of a value beyond it)
    if math.isinf(ours) or math.isinf(true):
        return INF
    return abs(ours - true) / math.ulp(true) if true != 0 else abs(ours) / math.ulp(0.0)


def trig_critical_values(name: str, lo: float, hi: float) -> list:
    """Extreme values of sin / cos inside [lo, hi], from arb's pi."""
    pi = arb.pi()
    shift = arb(0.5) if name == "iv_sin" else arb(0)
    first = math.ceil(float(arb(lo) / pi - shift)) - 1
    last = math.floor(float(arb(hi) / pi - shift)) + 1
    if last - first > 6:  # several periods: both extremes
        return [arb(1), arb(-1)]
    values = []
    for m in range(first, last + 1):
        point = (arb(m) + shift) * pi
        if arb(lo) <= point and point <= arb(hi):
            values.append(arb(1 if m % 2 == 0 else -1))
    return values


ELEMENTARY = {  # name: (arb function, ulps key, interval sampler)
    "iv_exp": (lambda v: v.exp(), "exp", lambda rng, n: random_intervals(rng, n, 2.8)),
    "iv_log": (lambda v: v.log(), "log",
               lambda rng, n: tuple(np.abs(b) for b in random_intervals(rng, n, 200))),
    "iv_sin": (lambda v: v.sin(), "trig", lambda rng, n: random_intervals(rng, n, 3)),
    "iv_cos": (lambda v: v.cos(), "trig", lambda rng, n: random_intervals(rng, n, 3)),
    "iv_tan": (lambda v: v.tan(), "trig", lambda rng, n: random_intervals(rng, n, 3)),
    "iv_atan": (lambda v: v.atan(), "atan", lambda rng, n: random_intervals(rng, n, 20)),
    "iv_tanh": (lambda v: v.tanh(), "tanh", lambda rng, n: random_intervals(rng, n, 2)),
}


CAPS = {"iv_sin": 1, "iv_cos": 1, "iv_tanh": 1}


def true_values(name: str, lo: float, hi: float) -> list | None:
    """arb balls whose hull holds f([lo, hi]); None where f is unbounded there."""
    f = ELEMENTARY[name][0]
    values = [f(arb(lo)), f(arb(hi))]
    if name in ("iv_sin", "iv_cos"):
        values += trig_critical_values(name, lo, hi)
    if name == "iv_tan":
        pi = arb.pi()
        if math.floor(float(arb(hi) / pi - arb(0.5))) >= math.ceil(float(arb(lo) / pi - arb(0.5))):
            return None  # a pole inside
    return values


def elementary_samples(name: str, rng: np.random.Generator, n: int):
    lo, hi = ELEMENTARY[name][2](rng, n)
    if name == "iv_log":
        lo, hi = np.minimum(lo, hi), np.maximum(lo, hi)
        lo = np.where(lo == 0, 1e-300, lo)
    return lo, hi


def elementary_violations(name: str, out: np.ndarray, lo, hi) -> list[str]:
    """Rows where `out` misses a true value (arb) of f on [lo, hi], or is further than
    allowed from the true range: the library error (k - 1 ulps), the widening (at most
    2k ulps of the value) and one rounding."""
    allowed = 3 * ULPS[ELEMENTARY[name][1]] + 1
    bad = []
    for (l, h), a, b in zip(out, lo, hi):
        values = true_values(name, a, b)
        if values is None:
            if not (l == -INF and h == INF):
                bad.append(f"{name}([{a!r}, {b!r}]) holds a pole but gave [{l!r}, {h!r}]")
            continue
        bad += [f"{name}([{a!r}, {b!r}]) = [{l!r}, {h!r}] misses {v}" for v in values
                if not encloses(l, h, v, CAPS.get(name))]
        true_lo = min(float(v.mid()) for v in values)
        true_hi = max(float(v.mid()) for v in values)
        if ulps_from(l, true_lo) > allowed or ulps_from(h, true_hi) > allowed:
            bad.append(f"{name}([{a!r}, {b!r}]) = [{l!r}, {h!r}] not tight: "
                       f"[{true_lo!r}, {true_hi!r}] ({allowed:g} ulps allowed)")
    return bad


@pytest.mark.parametrize("name", list(ELEMENTARY))
@needs_flint
def test_elementary_functions_enclose_arb_and_are_tight(name):
    lo, hi = elementary_samples(name, np.random.default_rng(list(ELEMENTARY).index(name) + 40),
                                1500)
    out = ops.run_host(name, ops.arguments(lo, hi))
    bad = elementary_violations(name, out, lo, hi)
    assert not bad, f"{len(bad)} of {len(out)}:\n" + "\n".join(bad[:20])


@needs_flint
def test_elementary_functions_enclose_at_extreme_arguments():
    """Overflow, underflow and huge trig arguments: still enclosures."""
    cases = {
        "iv_exp": [(700.0, 709.7), (709.0, 710.0), (-745.0, -700.0), (-1e300, -1e299)],
        "iv_log": [(5e-324, 1e-310), (1e300, DBL_MAX)],
        "iv_sin": [(1e22, 1e22), (1e300, 1e300), (2.0 ** 50, 2.0 ** 50 + 4)],
        "iv_cos": [(1e22, 1e22), (-1e300, -1e300), (1e15, 1e15 + 1)],
        "iv_atan": [(-DBL_MAX, DBL_MAX), (1e300, 1e301)],
        "iv_tanh": [(-1e300, 1e300), (19.0, 20.0)],
    }
    for name, intervals in cases.items():
        for a, b in intervals:
            l, h = ops.run_host(name, ops.arguments(a, b))[0]
            assert l <= h and not math.isnan(l) and not math.isnan(h)
            for v in true_values(name, a, b):
                assert encloses(l, h, v, CAPS.get(name)), (name, a, b, l, h, v)
    l, h = ops.run_host("iv_exp", ops.arguments(709.0, 710.0))[0]
    assert l < INF and h == INF


@needs_flint
def test_pi_bounds_enclose_pi():
    l, h = ops.run_host("sbmlgpu_iv_pi", ops.arguments(0.0))[0]
    assert encloses(l, h, arb.pi()) and h == math.nextafter(l, INF)


def powers_reference(lo: float, hi: float, n: int) -> list:
    points = [arb(lo), arb(hi)] + ([arb(0)] if lo < 0 < hi else [])
    return [p ** n for p in points]


@needs_flint
def test_integer_powers_enclose_and_are_tight():
    rng = np.random.default_rng(50)
    lo, hi = random_intervals(rng, 1500, 3)
    n = rng.integers(-7, 10, lo.size)
    out = ops.run_host("iv_powi", ops.arguments(lo, hi, n.astype(float)))
    for (l, h), a, b, k in zip(out, lo, hi, n):
        if k < 0 and a <= 0 <= b:
            assert (l, h) == (-INF, INF)
            continue
        values = powers_reference(a, b, int(k))
        assert all(encloses(l, h, v) for v in values), (a, b, k, l, h)
        true_lo, true_hi = min(float(v.mid()) for v in values), max(float(v.mid()) for v in values)
        # one rounding per product of the binary powering (and the reciprocal)
        allowed = 4 * (abs(int(k)).bit_length() + 2)
        assert ulps_from(l, true_lo) <= allowed and ulps_from(h, true_hi) <= allowed, (a, b, k, l, h)


@needs_flint
def test_real_powers_enclose_x_to_the_y():
    rng = np.random.default_rng(51)
    xl = 10.0 ** rng.uniform(-3, 3, 1000)
    xh = xl * (1 + 10.0 ** rng.uniform(-12, 0, 1000))
    yl = rng.uniform(-4, 4, 1000)
    yh = yl + 10.0 ** rng.uniform(-12, 0, 1000)
    out = ops.run_host("iv_pow", ops.arguments(xl, xh, yl, yh))
    for (l, h), a, b, c, d in zip(out, xl, xh, yl, yh):
        corners = [arb(p) ** arb(q) for p in (a, b) for q in (c, d)]  # y log x is bilinear
        assert all(encloses(l, h, v) for v in corners), (a, b, c, d, l, h)
        true_lo = min(float(v.mid()) for v in corners)
        true_hi = max(float(v.mid()) for v in corners)
        assert true_lo - l <= 1e-12 * abs(true_lo) and h - true_hi <= 1e-12 * abs(true_hi)


# -- NaN, inf and the remaining functions ---------------------------------------------------

def run1(name, a=0.0, b=0.0, c=0.0, d=0.0):
    return tuple(ops.run_host(name, ops.arguments(a, b, c, d))[0])


def test_nan_never_escapes_and_infinities_follow_the_conventions():
    nan = math.nan
    assert run1("iv_sub", INF, INF, INF, INF) == (-INF, INF)      # inf - inf
    assert run1("iv_add", -INF, -INF, INF, INF) == (-INF, INF)
    assert run1("iv_mul", 0.0, 0.0, -INF, INF) == (0.0, 0.0)      # 0 * anything = 0
    assert run1("iv_mul", 0.0, 1.0, 1.0, INF) == (0.0, INF)
    assert run1("iv_mul", -1.0, 1.0, 0.0, INF) == (-INF, INF)
    assert run1("iv_div", 1.0, 2.0, 0.0, 0.0) == (-INF, INF)      # division by [0, 0]
    assert run1("iv_div", 1.0, 2.0, -1.0, 1.0) == (-INF, INF)
    assert run1("iv_div", 1.0, 2.0, 0.0, 1.0) == (-INF, INF)
    assert run1("iv_div", 1.0, INF, 1.0, INF) == (0.0, INF)        # inf / inf
    assert run1("iv_make", nan, 1.0) == (-INF, 1.0)
    assert run1("iv_make", 1.0, nan) == (1.0, INF)
    assert run1("iv_point", nan) == (-INF, INF)
    assert run1("iv_scale", 1.0, 2.0, nan) == (-INF, INF)
    log_lo, log_hi = run1("iv_log", -1.0, 2.0)                    # the part x > 0
    assert log_lo == -INF and math.log(2) <= log_hi < math.log(2) * (1 + 1e-15)
    assert run1("iv_log", -2.0, -1.0) == (-INF, INF)
    assert run1("iv_log", 0.0, 0.0) == (-INF, INF)
    assert run1("iv_sqrt", -1.0, 4.0) == (0.0, 2.0)
    assert run1("iv_sqrt", -4.0, -1.0) == (-INF, INF)
    assert run1("iv_exp", -INF, 0.0)[0] == 0.0
    assert run1("iv_tan", 1.0, 2.0) == (-INF, INF)                 # pi/2 inside
    assert run1("iv_sin", -INF, INF) == (-1.0, 1.0)
    assert run1("iv_cos", 0.0, INF) == (-1.0, 1.0)
    assert run1("iv_tan", 0.0, INF) == (-INF, INF)
    # every op on rows with infinite and NaN bounds: no NaN comes out of an interval op
    special = [-INF, -1.0, -0.0, 0.0, 1.0, INF, nan]
    grid = np.array(np.meshgrid(special, special, special, special)).reshape(4, -1).T
    for op in ops.OPS:
        if op.kind == "interval":
            out = ops.run_host(op.name, grid)
            assert not np.isnan(out).any(), (op.name, grid[np.isnan(out).any(axis=1)][:3])


def test_pow_and_powi_special_cases():
    assert run1("iv_pow", -2.0, 3.0, 2.0, 2.0) == (0.0, 9.0)       # point integer: powi
    assert run1("iv_pow", -2.0, 3.0, 0.5, 0.5) == (-INF, INF)      # x <= 0, real y
    lo, hi = run1("iv_pow", 0.0, 4.0, 0.5, 0.5)                    # 0^y = 0 for y > 0
    assert lo == 0.0 and 2.0 <= hi < 2.0 * (1 + 1e-14)
    assert run1("iv_pow", 2.0, 3.0, 0.0, 0.0) == (1.0, 1.0)
    assert run1("iv_powi", -2.0, 3.0, -1.0) == (-INF, INF)
    assert run1("iv_powi", 2.0, 4.0, -2.0) == (1 / 16, 1 / 4)
    assert run1("iv_powi", -3.0, 2.0, 3.0) == (-27.0, 8.0)
    assert run1("iv_powi", -3.0, 2.0, 2.0) == (0.0, 9.0)
    assert run1("iv_sqr", -3.0, 2.0) == (0.0, 9.0)                 # tight, unlike x * x
    assert run1("iv_mul", -3.0, 2.0, -3.0, 2.0) == (-6.0, 9.0)


def test_lattice_operations_and_predicates():
    assert run1("iv_abs", -3.0, 2.0) == (0.0, 3.0) and run1("iv_abs", -3.0, -2.0) == (2.0, 3.0)
    assert run1("iv_neg", -3.0, 2.0) == (-2.0, 3.0)
    assert run1("iv_min", 1.0, 5.0, 2.0, 3.0) == (1.0, 3.0)
    assert run1("iv_max", 1.0, 5.0, 2.0, 3.0) == (2.0, 5.0)
    assert run1("iv_hull", 1.0, 2.0, 4.0, 5.0) == (1.0, 5.0)
    assert run1("iv_intersect", 1.0, 3.0, 2.0, 5.0) == (2.0, 3.0)
    empty = run1("iv_intersect", 1.0, 2.0, 4.0, 5.0)
    assert empty == (INF, -INF) == run1("iv_empty")
    assert run1("iv_is_empty", *empty)[0] == 1 and run1("iv_is_empty", 1.0, 2.0)[0] == 0
    assert run1("iv_hull", *empty, 4.0, 5.0) == (4.0, 5.0)         # empty is neutral
    assert run1("iv_entire") == (-INF, INF)
    assert run1("iv_scale", 1.0, 2.0, -3.0) == (-6.0, -3.0)
    assert run1("iv_scale", -INF, 2.0, 0.0) == (0.0, 0.0)
    rng = np.random.default_rng(60)
    xl, xh = random_intervals(rng, 3000)
    yl, yh = random_intervals(rng, 3000)
    v = rng.uniform(-10, 10, 3000)
    rows = ops.arguments(xl, xh, v)
    assert np.array_equal(ops.run_host("iv_contains", rows)[:, 0], (xl <= v) & (v <= xh))
    rows = ops.arguments(xl, xh, yl, yh)
    assert np.array_equal(ops.run_host("iv_subset", rows)[:, 0], (yl <= xl) & (xh <= yh))
    assert np.array_equal(ops.run_host("iv_disjoint", rows)[:, 0], (xh < yl) | (yh < xl))
    assert run1("iv_is_finite", 1.0, 2.0)[0] == 1 and run1("iv_is_finite", 1.0, INF)[0] == 0


def test_midpoint_radius_and_width_enclose():
    rng = np.random.default_rng(61)
    lo, hi = random_intervals(rng, 3000, 300)
    lo = np.concatenate([lo, [-DBL_MAX, 5e-324, -5e-324, DBL_MAX / 2, 1.0]])
    hi = np.concatenate([hi, [DBL_MAX, 5e-324, 1e-323, DBL_MAX, 1.0]])
    rows = ops.arguments(lo, hi)
    mid, rad, width = (ops.run_host(n, rows)[:, 0] for n in ("iv_mid", "iv_rad", "iv_width"))
    assert np.all(np.isfinite(mid)) and np.all((lo <= mid) & (mid <= hi))
    for l, h, m, r, w in zip(lo, hi, mid, rad, width):
        L, H, M = Fraction(l), Fraction(h), Fraction(m)
        assert math.isinf(r) or (M - Fraction(r) <= L and H <= M + Fraction(r)), (l, h, m, r)
        assert math.isinf(w) or Fraction(w) >= H - L, (l, h, w)
    assert rad[-5] == DBL_MAX and width[-5] == INF  # [-DBL_MAX, DBL_MAX]
    assert run1("iv_mid", -INF, INF)[0] == 0.0
    assert run1("iv_mid", -INF, 3.0)[0] == -DBL_MAX and run1("iv_mid", 3.0, INF)[0] == DBL_MAX


# -- the text itself ----------------------------------------------------------------------

def test_header_leaves_our_prefixes_to_model_names():
    text = re.sub(r"/\*.*?\*/", "", HEADER, flags=re.S)
    identifiers = set(re.findall(r"\b[A-Za-z_][A-Za-z0-9_]*\b", text))
    assert not [i for i in identifiers if i.startswith(RESERVED_PREFIXES)]
    assert "{{" not in HEADER and "{%" not in HEADER


def test_header_builds_after_common_cuh_on_the_host():
    from sbmlgpu.runtime import host

    library = host.load(ops.source(after_common=True), "interval_after_common.cu",
                        ops.HOST_FLAGS, openmp=False)
    library.sbmlgpu_iv_optable_host.argtypes = ops.host_library().sbmlgpu_iv_optable_host.argtypes
    rows = ops.arguments(1.0, 2.0, 3.0, 4.0)
    assert np.array_equal(ops.run_host("iv_mul", rows, library), [[3.0, 8.0]])


@needs_nvcc
@pytest.mark.parametrize("after_common", [False, True])
def test_op_table_compiles_for_sm_90(after_common):
    cubin = nvcc_compile(ops.source(after_common=after_common), arch="sm_90",
                         name="interval_selftest")
    assert cubin[:4] == b"\x7fELF" and b"sbmlgpu_iv_optable" in cubin


@needs_nvcc
def test_device_code_uses_the_directed_instructions(tmp_path):
    """nvcc's PTX for the op table has the rounding-mode instructions of every op."""
    src = tmp_path / "interval_selftest.cu"
    src.write_text(ops.source())
    done = subprocess.run([nvcc_path(), "-ptx", "-arch=sm_90", "-o", str(tmp_path / "t.ptx"),
                           str(src)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    ptx = (tmp_path / "t.ptx").read_text()
    for instruction in ("add.rm.f64", "add.rp.f64", "sub.rm.f64", "sub.rp.f64", "mul.rm.f64",
                        "mul.rp.f64", "div.rm.f64", "div.rp.f64", "sqrt.rm.f64", "sqrt.rp.f64",
                        "fma.rm.f64", "fma.rp.f64"):
        assert instruction in ptx, instruction
