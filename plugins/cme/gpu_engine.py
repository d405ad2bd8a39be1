"""The GPU engine of the CME solvers (solvers.py): the Engine and Level operations with
the kernels of kernels/formats.cu, on the same matrix and hierarchy structure as the
CPU engine (cpu_engine.py), so that both run one algorithm and tests compare them.

    engine = GpuEngine("dia+sell", space.sources, space.targets, prop)  # prop: host or device
    p = engine.vector(p0); p = engine.jacobi(p, 100, 1.0); engine.residual(p)

- The matrix: O in the chosen format (formats.py), its values gathered on the device
  from the propensities (R, n) by one kernel; d from the propensities and `targets`
  (or given); ||A||_inf by the residual kernel on p = 1 with absolute values.
- Vectors are DeviceVectors: device buffers from a per-engine pool, handed back when
  the vector is dropped. No operation overwrites its input (jacobi ping-pongs through
  a scratch vector into a fresh one), except normalise, which scales p in place as
  the contract says, so a V-cycle may hold p, pc and qc at once.
- Everything runs in order on one stream; an operation that returns host numbers
  (residual, normalise, dot, host) waits for it, the rest does not (the profiler
  reads the launches' times at those waits). Jacobi used to wait at its end too: in
  a V-cycle that was a synchronisation per smoothing call, part of the 8 ms of host
  time per cycle measured at 10^7 states (docs/benchmarks.md).
- Levels (multilevel aggregation): aggregation.Hierarchy of level 0's CSR structure;
  level 0 smooths with the engine's own format and coarsens from a CSR copy of its
  values (the engine's values when the format is CSR); levels below are CSR. The
  coarsest level's matrix comes back to the host for the dense solve (`dense()`).
- Memory: `bytes_needed` estimates what a solve needs on the device, and the engine
  refuses (OptionError naming the size and the free memory) before allocating.

PyCUDA is imported only through sbmlgpu.runtime, on first use.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from sbmlgpu.codegen.templates import render
from sbmlgpu.errors import DeviceError, OptionError
from sbmlgpu.runtime.base import Buffer

from . import formats as F
from .cpu_engine import FLOOR

BLOCK = F.BLOCK_ROWS  # threads per block: SELL sorts rows within blocks of this size
REDUCE_BLOCKS = 1024  # the reductions' fixed grid (a fixed grid gives the same bits)
CSR_LANES = 4  # lanes per row of the CSR Jacobi sweep (aggregation levels: ~10 entries a row)
TINY = 1e-300  # as cpu_engine.TINY: 1 / max(||A||_inf, TINY)
DEFAULT_AGGREGATE, DEFAULT_COARSEST = 4, 512  # as aggregation.py's defaults


def kernel_source(fmt: F.Format, model_id: str = "") -> str:
    """kernels/formats.cu rendered for this matrix (the CSR kernels always included)."""
    dia = fmt.part("dia")
    sell = fmt.part("sell")
    return render("sbmlgpu.plugins.cme", "formats.cu", format=fmt.name,
                  offsets=list(dia.offsets) if dia is not None else [],
                  permuted=bool(sell is not None and sell.permuted), block=BLOCK,
                  csr_lanes=CSR_LANES, floor=repr(FLOOR),
                  model_id=model_id or "(unnamed)")


def tag(name: str) -> str:
    """A format's name as the kernels spell it (dia+sell -> dia_sell)."""
    return name.replace("+", "_")


# ---------------------------------------------------------------------------------------
# memory


def bytes_needed(format_name: str, n: int, n_reactions: int, nnz: int, solver: str = "auto",
                 *, format_bytes: int | None = None, stored: int | None = None,
                 prop_on_device: bool = False, idr_shadow: int = 4) -> int:
    """Device bytes a solve needs at its peak (an estimate that errs high):
    - the propensities (R, n) (unless already on the device), d, ||A||'s ones vector;
    - the format (`format_bytes` when known; else CSR's 12 nnz + 8 (n + 1), or for the
      ELL kinds 12 bytes per slot of R slots per row) and its gathers (8 B per stored
      slot, freed after the fill);
    - Jacobi: three vectors (p, the sweep's scratch and its result);
    - aggregation: a CSR copy of level 0 unless the
      format is CSR (12 nnz + 8 (n + 1)); per level the aggregation indices (perm,
      diag_perm, seg_ptr: 8 B each per entry), the coarse CSR (20 B per entry) and six
      vectors; levels shrink geometrically, counted as 4/3 of level 0;
    - idr (solver "idr" or "auto"): 3 s + 8 vectors more (shadow space, G and U; the
      zeros they start from, x, r, v, t, the check's copy, the best iterate and the
      best that was a distribution; the
      start vector and a sweep's two are among Jacobi's three), s = `idr_shadow`.
    """
    if format_name not in F.FORMATS:
        raise OptionError("format", f"{format_name!r} is not one of {', '.join(F.FORMATS)}")
    n, R, nnz = int(n), int(n_reactions), int(nnz)
    csr_bytes = 12 * nnz + 8 * (n + 1)
    if stored is None:
        stored = nnz if format_name == "csr" else max(nnz, R * n)
    if format_bytes is None:
        format_bytes = csr_bytes if format_name == "csr" else 12 * stored + 8 * n
    total = (0 if prop_on_device else 8 * R * n) + 8 * n + 8 * n + format_bytes + 8 * stored
    total += 3 * 8 * n
    if solver == "aggregation":
        if format_name != "csr":
            total += csr_bytes
        total += (4 * (8 + 8 + 8 + 20) * nnz + 4 * 6 * 8 * n) // 3
    if solver in ("idr", "auto"):
        total += (3 * int(idr_shadow) + 8) * 8 * n
    return int(total)


def check_fits(needed: int, free: int, what: str, device: Any = None) -> None:
    """OptionError (option "bound": the bounds set the size) when `needed` > `free`."""
    if needed > free:
        where = f" on {device}" if device is not None else ""
        raise OptionError("bound", f"{what} needs about {needed / 2**30:.2f} GiB{where}, "
                          f"but {free / 2**30:.2f} GiB are free: lower the --bound values "
                          "(fewer states), or use a GPU with more memory")


# ---------------------------------------------------------------------------------------
# vectors


class DeviceVector:
    """n doubles on the device; the buffer goes back to its pool when this is dropped."""

    __slots__ = ("buffer", "n", "__weakref__")

    def __init__(self, buffer: Buffer, n: int, pool: "VectorPool"):
        self.buffer, self.n = buffer, n
        weakref.finalize(self, pool.release, buffer, n)

    def __repr__(self) -> str:
        return f"DeviceVector(n={self.n})"


class VectorPool:
    """Buffers of n doubles kept for reuse (all work is on one stream, in order, so a
    buffer handed back may be reused at once by work enqueued after)."""

    def __init__(self, device):
        self.device = device
        self._free: dict[int, list[Buffer]] = {}
        self._all: list[Buffer] = []

    def take(self, n: int) -> DeviceVector:
        stock = self._free.get(n)
        buffer = stock.pop() if stock else None
        if buffer is None:
            buffer = self.device.alloc(8 * max(n, 1))
            self._all.append(buffer)
        return DeviceVector(buffer, n, self)

    def release(self, buffer: Buffer, n: int) -> None:
        if self._all:  # not after close()
            self._free.setdefault(n, []).append(buffer)

    def close(self) -> None:
        for buffer in self._all:
            buffer.free()
        self._all, self._free = [], {}


# ---------------------------------------------------------------------------------------
# the engine


class GpuEngine:
    """Engine (solvers.py) over the generator of `sources`/`targets` (statespace.py) and
    the propensities `prop` (R, n): a host array, or a device Buffer of R*n doubles
    (reaction-major, as the propensity kernel writes them; kept, not freed, by the
    engine). `diag`: d on the host, or None to compute it on the device from `targets`.
    """

    name = "gpu"

    def __init__(self, format_name: str, sources: np.ndarray, targets: np.ndarray | None,
                 prop: Any, diag: np.ndarray | None = None, *, device=None,
                 dia_fill: float = F.DEFAULT_DIA_FILL, sort_rows: bool | None = None,
                 aggregate: int = DEFAULT_AGGREGATE, coarsest: int = DEFAULT_COARSEST,
                 solver: str = "auto", model_id: str = "", profiler=None,
                 idr_shadow: int = 4):
        self.device = device if device is not None else _first_device()
        self.format = F.build(format_name, sources, dia_fill=dia_fill, sort_rows=sort_rows)
        fmt = self.format
        self.n, self.n_reactions = fmt.n, fmt.n_reactions
        self.aggregate, self.coarsest = aggregate, coarsest
        self.profiler = profiler
        self._sources = sources  # for level 0's CSR copy, built only if levels() is asked
        own_prop = not isinstance(prop, Buffer)
        if diag is None and targets is None:
            raise OptionError("targets", "needed to compute the diagonal (or give diag)")
        check_fits(bytes_needed(fmt.name, self.n, self.n_reactions, fmt.nnz, solver,
                                format_bytes=fmt.memory_bytes, stored=fmt.stored,
                                prop_on_device=not own_prop, idr_shadow=idr_shadow),
                   self.device.free_memory(),
                   f"the CME generator of {self.n} states ({fmt.name}, solver {solver})",
                   self.device)
        self._buffers: list[Buffer] = []  # freed by close()
        self.pool = VectorPool(self.device)
        self.source = kernel_source(fmt, model_id)
        self.module = self.device.compile(self.source, options=("-O3",),
                                          name=f"cme_{tag(fmt.name)}")
        self.stream = self.device.stream()
        if own_prop:
            prop = np.ascontiguousarray(prop, dtype=np.float64)
            if prop.shape != (self.n_reactions, self.n):
                raise OptionError("prop", f"expected ({self.n_reactions}, {self.n}) "
                                  f"propensities, got {prop.shape}")
            prop = self._put(prop)
        elif prop.nbytes < 8 * self.n_reactions * self.n:
            raise OptionError("prop", f"a device buffer of {prop.nbytes} bytes cannot hold "
                              f"({self.n_reactions}, {self.n}) propensities")
        self.prop = prop
        self.args = self._format_args(fmt, prop)
        self.diag = self._diagonal(diag, targets)
        self._partials = self._alloc(8 * 4 * REDUCE_BLOCKS)
        self._result = self._alloc(8 * 4)
        self.norm_inf = self._norm_inf()
        self.inv_norm = 1.0 / max(self.norm_inf, TINY)
        self._levels: list[GpuLevel] | None = None

    # -- set-up ------------------------------------------------------------------------
    def _put(self, array: np.ndarray) -> Buffer:
        buffer = self.device.to_device(np.ascontiguousarray(array))
        self._buffers.append(buffer)
        return buffer

    def _alloc(self, nbytes: int) -> Buffer:
        buffer = self.device.alloc(int(nbytes))
        self._buffers.append(buffer)
        return buffer

    def _filled(self, gather: np.ndarray, prop: Buffer) -> Buffer:
        """A value array filled on the device from prop through `gather`."""
        values = self._alloc(8 * max(len(gather), 1))
        if len(gather):
            g = self.device.to_device(np.ascontiguousarray(gather, dtype=np.int64))
            try:
                self.launch("cme_fill", min(len(gather), REDUCE_BLOCKS * BLOCK),
                            [g, np.int64(len(gather)), prop, values])
                self.stream.synchronize()
            finally:
                g.free()
        return values

    def _format_args(self, fmt: F.Format, prop: Buffer) -> list:
        """The format's kernel arguments, in formats.cu's format_params order."""
        values = {k: self._filled(g, prop) for k, g in fmt.gathers.items()}
        a = fmt.arrays
        if fmt.name == "csr":
            return [self._put(a["csr_ptr"]), self._put(a["csr_col"]), values["csr_val"]]
        ell = [np.int32(fmt.part("ell").width), self._put(a["ell_col"]), values["ell_val"]] \
            if fmt.part("ell") is not None else []
        if fmt.name == "ell":
            return ell
        if fmt.name == "dia+ell":
            return [values["dia_val"], *ell]
        sell = [self._put(a["sell_ptr"]), self._put(a["sell_col"]), values["sell_val"]]
        if fmt.part("sell").permuted:
            sell.append(self._put(a["sell_perm"]))
        return [values["dia_val"], *sell]

    def _diagonal(self, diag, targets) -> Buffer:
        if diag is not None:
            diag = np.asarray(diag, dtype=np.float64)
            if diag.shape != (self.n,):
                raise OptionError("diag", f"expected ({self.n},), got {diag.shape}")
            return self._put(diag)
        targets = np.ascontiguousarray(targets, dtype=np.int32)
        if targets.shape != (self.n_reactions, self.n):
            raise OptionError("targets", f"expected ({self.n_reactions}, {self.n}), got "
                              f"{targets.shape}")
        d = self._alloc(8 * max(self.n, 1))
        t = self.device.to_device(targets)
        try:
            self.launch("cme_diagonal", self.n, [t, self.prop, np.int32(self.n_reactions),
                                                  np.int32(self.n), d])
            self.stream.synchronize()
        finally:
            t.free()
        return d

    def _norm_inf(self) -> float:
        ones = self.vector(np.ones(self.n))
        return self._reduce(f"cme_residual_{tag(self.format.name)}",
                            [*self.args, ones.buffer, self.diag, np.int32(self.n), np.int32(1)],
                            self.n, 0xD)[0]

    # -- launches ----------------------------------------------------------------------
    def launch(self, name: str, threads: int, args: list, grid: int | None = None, **record):
        """`name` on ceil(threads / BLOCK) blocks of BLOCK (or `grid` blocks), on the
        engine's stream; recorded by the profiler (keywords: bytes, flops) if any."""
        kernel = self.module.function(name)
        blocks = grid if grid is not None else max(1, -(-int(threads) // BLOCK))
        pending = kernel.launch_async((blocks,), (BLOCK,), args, stream=self.stream)
        if self.profiler is not None:
            self.profiler.record_pending(kernel, pending, self.device, **record)
        return pending

    def _reduce(self, name: str, args: list, n: int, max_mask: int) -> np.ndarray:
        """A partials kernel on a fixed grid, then cme_reduce: the 4 results."""
        grid = max(1, min(REDUCE_BLOCKS, -(-n // BLOCK)))
        self.launch(name, n, [*args, self._partials], grid=grid)
        self.launch("cme_reduce", BLOCK, [self._partials, np.int32(grid), np.int32(max_mask),
                                          self._result], grid=1)
        out = np.empty(4)
        self.stream.download(self._result, out)
        self.stream.synchronize()
        return out

    def sweeps(self, kernel: str, args: list, diag: Buffer, p: DeviceVector, sweeps: int,
               omega: float, record: dict) -> DeviceVector:
        """`sweeps` Jacobi sweeps from p into a fresh vector (p untouched)."""
        n = p.n
        if sweeps <= 0:
            out = self.pool.take(n)
            self.stream.synchronize()
            self.device.upload(out.buffer, self.host(p))
            return out
        out, scratch = self.pool.take(n), self.pool.take(n)
        source = p
        threads = n * CSR_LANES if kernel == "cme_jacobi_csr_lanes" else n
        for s in range(sweeps):
            # the last sweep lands in `out`: alternate so that it does
            target = out if (sweeps - s) % 2 == 1 else scratch
            self.launch(kernel, threads, [*args, source.buffer, diag, np.int32(n),
                                    np.float64(omega), np.float64(self.inv_norm),
                                    target.buffer], **record)
            source = target
        return out

    # -- Engine ------------------------------------------------------------------------
    def vector(self, host: np.ndarray) -> DeviceVector:
        host = np.ascontiguousarray(host, dtype=np.float64)
        v = self.pool.take(len(host))
        self.stream.synchronize()  # the buffer may come back from work still queued
        self.device.upload(v.buffer, host)
        return v

    def host(self, v: DeviceVector) -> np.ndarray:
        out = np.empty(v.n)
        self.stream.download(v.buffer, out)
        self.stream.synchronize()
        return out

    def jacobi(self, p: DeviceVector, sweeps: int, omega: float = 1.0) -> DeviceVector:
        fmt = self.format
        return self.sweeps(f"cme_jacobi_{tag(fmt.name)}", self.args, self.diag, p, sweeps,
                           omega, {"bytes": fmt.bytes_per_sweep, "flops": fmt.flops_per_sweep})

    def normalise(self, p: DeviceVector) -> float:
        total = self._reduce("cme_sum", [p.buffer, np.int64(p.n)], p.n, 0)[0]
        self.launch("cme_divide", p.n, [p.buffer, np.int64(p.n), self._result])
        return float(total)

    def dot(self, x: DeviceVector, y: DeviceVector) -> float:
        return float(self._reduce("cme_dot", [x.buffer, y.buffer, np.int64(x.n)], x.n, 0)[0])

    def dots(self, pairs) -> list[float]:
        """x . y for each (x, y) of `pairs`: four to a pass (cme_dots4), one
        synchronisation per four."""
        pairs = list(pairs)
        out: list[float] = []
        for k in range(0, len(pairs), 4):
            chunk = pairs[k:k + 4]
            padded = chunk + [chunk[0]] * (4 - len(chunk))  # not read: m says so
            n = chunk[0][0].n
            buffers = [v.buffer for pair in padded for v in pair]
            r = self._reduce("cme_dots4", [*buffers, np.int32(len(chunk)), np.int64(n)], n, 0)
            out.extend(float(v) for v in r[:len(chunk)])
        return out

    def combine(self, coefficients, vectors, clip: bool = True) -> DeviceVector:
        """sum_j c_j v_j into a fresh vector, eight vectors to a pass (cme_combine8);
        with clip, where that is not positive, FLOOR times the last vector's value
        instead (cme_combine8 says why)."""
        vectors, coefficients = list(vectors), [float(c) for c in coefficients]
        n = vectors[0].n
        out = self.pool.take(n)
        grid = max(1, min(REDUCE_BLOCKS, -(-n // BLOCK)))
        k = 0
        while k < len(vectors):
            # the first pass takes eight vectors, each later one the sum so far + seven
            take = 8 if k == 0 else 7
            vs = ([] if k == 0 else [out]) + vectors[k:k + take]
            cs = ([] if k == 0 else [1.0]) + coefficients[k:k + take]
            k += take
            last = k >= len(vectors)
            m = len(vs)
            vs, cs = vs + [vs[0]] * (8 - m), cs + [0.0] * (8 - m)
            self.launch("cme_combine8", n, [*(v.buffer for v in vs), *map(np.float64, cs),
                                            np.int32(m), np.int64(n), np.int32(clip and last),
                                            out.buffer], grid=grid)
        return out

    def residual(self, p: DeviceVector) -> tuple[float, float, float, float]:
        r = self._reduce(f"cme_residual_{tag(self.format.name)}",
                         [*self.args, p.buffer, self.diag, np.int32(self.n), np.int32(0)],
                         self.n, 0xD)
        return float(r[0]), float(r[1]), float(r[2]), float(r[3])

    def levels(self) -> list["GpuLevel"]:
        if self._levels is None:
            self._levels = self._build_levels()
        return self._levels

    def close(self) -> None:
        """Free the device memory now (the engine is unusable afterwards)."""
        try:
            self.stream.synchronize()
        finally:
            for buffer in self._buffers:
                buffer.free()
            self._buffers = []
            self.pool.close()
            self._levels = None

    # -- the hierarchy -------------------------------------------------------------------
    def _build_levels(self) -> list["GpuLevel"]:
        from .aggregation import Hierarchy  # the lead's host structure (solvers.py's)

        if self.format.name == "csr":
            csr, csr_args = self.format, self.args
        else:
            csr = F.build("csr", self._sources)
            csr_args = self._format_args(csr, self.prop)
        ptr, col = csr.arrays["csr_ptr"], csr.arrays["csr_col"]
        hierarchy = Hierarchy.build(ptr, col, self.n, self.aggregate, self.coarsest)
        levels = [GpuLevel(self, hierarchy.levels[0], csr_args, self.diag, top=True)]
        for structure in hierarchy.levels[1:]:
            args = [self._put(np.asarray(structure.indptr, np.int64)),
                    self._put(np.asarray(structure.indices, np.int32)),
                    self._alloc(8 * max(structure.nnz, 1))]
            level = GpuLevel(self, structure, args, self._alloc(8 * max(structure.n, 1)))
            levels[-1].next = level
            levels.append(level)
        return levels


class GpuLevel:
    """Level k of the hierarchy on the device: CSR (ptr, col, val) and d, plus the
    aggregation arrays that make level k+1 from it (none on the coarsest level)."""

    def __init__(self, engine: GpuEngine, structure, csr_args: list, diag: Buffer,
                 top: bool = False):
        self.engine, self.structure = engine, structure
        self.n = structure.n
        self.csr_args, self.diag = csr_args, diag
        self.top = top
        self.next: GpuLevel | None = None
        s = structure
        if s.aggregate is not None:
            put = engine._put
            self.perm, self.seg_ptr = put(np.asarray(s.perm, np.int64)), \
                put(np.asarray(s.seg_ptr, np.int64))
            self.diag_perm, self.diag_ptr = put(np.asarray(s.diag_perm, np.int64)), \
                put(np.asarray(s.diag_ptr, np.int64))
            self.coarse_column = put(np.asarray(s.coarse_column, np.int32))

    def smooth(self, p: DeviceVector, sweeps: int, omega: float) -> DeviceVector:
        if self.top:  # level 0 is the engine's own matrix, in its faster format
            return self.engine.jacobi(p, sweeps, omega)
        nnz = self.structure.nnz
        record = {"bytes": 24 * self.n + 8 * (self.n + 1) + 20 * nnz,
                  "flops": 2 * nnz + 2 * self.n}
        return self.engine.sweeps("cme_jacobi_csr_lanes", self.csr_args, self.diag, p, sweeps,
                                  omega, record)

    def coarsen(self, p: DeviceVector) -> DeviceVector:
        """Sets level k+1's values and diagonal from p; returns pc (aggregate sums)."""
        s, nxt, e = self.structure, self.next, self.engine
        if nxt is None:
            raise DeviceError("coarsen() on the coarsest level")
        _ptr, col, val = self.csr_args
        pc = e.pool.take(s.n_coarse)
        e.launch("cme_level_restrict", s.n_coarse,
                 [p.buffer, self.diag, val, col, self.diag_ptr, self.diag_perm,
                  np.int32(self.n), np.int32(s.aggregate), np.int32(s.n_coarse),
                  pc.buffer, nxt.diag])
        slots = len(s.seg_ptr) - 1
        e.launch("cme_level_coarse_values", slots,
                 [self.seg_ptr, self.perm, val, col, p.buffer, self.coarse_column, pc.buffer,
                  np.int64(slots), nxt.csr_args[2]])
        return pc

    def prolong(self, p: DeviceVector, qc: DeviceVector, pc: DeviceVector) -> DeviceVector:
        e = self.engine
        out = e.pool.take(self.n)
        e.launch("cme_level_prolong", self.n,
                 [p.buffer, qc.buffer, pc.buffer, np.int32(self.n),
                  np.int32(self.structure.aggregate), out.buffer])
        return out

    def vector_like(self, host: np.ndarray) -> DeviceVector:
        return self.engine.vector(host)

    def dense(self) -> np.ndarray:
        """A of this level (n x n) on the host, for the coarsest level's direct solve."""
        e, s = self.engine, self.structure
        values = np.empty(s.nnz)
        d = np.empty(self.n)
        e.stream.download(self.csr_args[2], values)
        e.stream.download(self.diag, d)
        e.stream.synchronize()
        a = np.zeros((self.n, self.n))
        rows = np.repeat(np.arange(self.n), np.diff(s.indptr))
        np.add.at(a, (rows, np.asarray(s.indices)), values)
        a[np.diag_indices(self.n)] += d
        return a


def _first_device():
    from sbmlgpu import runtime

    devices = runtime.get_devices()
    if not devices:
        raise DeviceError(f"the CME GPU engine needs a GPU: {runtime.no_gpu_reason()}")
    return devices[0]
