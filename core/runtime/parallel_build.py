"""A large kernel compiled by nvcc as several translation units at once, then linked.

nvcc compiles one file on one core, and a large model's kernel is one file: Chen_MSB2009's
rodas4 kernel (500 states, 685 KiB) took 33 s of nvcc on the 16-core GPU host, most of
it in the model's functions (right-hand side, sparse Jacobian, initial values, outputs)
rather than in the integrator. Those functions are called, not inlined, in large
models (templates/prelude.cuh: ODE_MODEL_FN), so they can live in translation units of
their own: the kernel generator marks them in the source (templates/model.cuh)

    /* sbmlgpu:unit model_rhs */
    ODE_MODEL_FN void model_rhs(...)
    { ... }
    /* sbmlgpu:end */

and `split(source)` makes one unit per marked function (the source before it, with the
earlier marked functions reduced to their declarations, then the function) and a main
unit (the whole source, every marked function reduced to its declaration). Each unit is
compiled as relocatable device code (`nvcc -cubin -rdc=true`), all at once on up to
`jobs()` cores (with one, the source is compiled whole: builds_in_units), and
`nvcc -dlink -cubin` links them into one cubin that loads as the
unsplit one does (module_from_buffer). The host build (g++) reads the same file whole:
the markers are comments.

What changes in the machine code: the called functions were separate functions before
too (noinline), but now the register allocator sees each unit alone (ptxas -v of
Chen_MSB2009 rodas4: kernel 254 registers and 117 KB stack instead of 32 registers,
134 KB stack and 28 KB of spills), and model_x0 and model_outputs are called rather than
inlined (once per member and once per output time). The source's arithmetic is the
same; whether nvcc contracts the same multiply-adds in both builds (bit-identical
results) is not known: tests/test_ode_compile_units_gpu.py checks on a GPU that both
builds agree to 1e-8 relative and with the host build.

`SBMLGPU_NVCC_UNITS=0` compiles such a source whole (as before), e.g. to compare both
builds' kernels on a GPU. When a split build fails (a unit that does not compile alone,
a link error), the source is compiled whole as before and the reason is logged:
splitting is an optimisation. `BUILD` names this scheme; the cubin cache puts it in the
key of sources built in units.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from ..codegen import compile_check
from ..errors import DeviceError

log = logging.getLogger("sbmlgpu.runtime")

#: what the cubin of a split source is built by (part of its cache key)
BUILD = "units: nvcc -cubin -rdc=true each, nvcc -dlink -cubin (v2: register cap by warps)"
#: environment variable capping the parallel nvcc processes (default: the usable cores)
JOBS_ENV = "SBMLGPU_NVCC_JOBS"
#: environment variable that, set to 0, compiles marked sources whole (to compare the
#: kernels of both builds on a GPU; the cubin cache keys them apart)
UNITS_ENV = "SBMLGPU_NVCC_UNITS"
_UNIT = re.compile(r"^/\* sbmlgpu:unit (?P<name>\w+) \*/\n(?P<body>.*?)^/\* sbmlgpu:end \*/\n",
                   re.S | re.M)


@dataclass(frozen=True)
class Unit:
    name: str  # the marked function's name, or "main"
    text: str


def builds_in_units(source: str) -> bool:
    """Whether `source` is built in units: it marks functions as units of their own
    (split()), $SBMLGPU_NVCC_UNITS is not 0, and more than one nvcc may run at once
    (on one core the whole file costs less: each unit reads the source before its
    function, ~1.5x the CPU of one compile for a 124-state model)."""
    return (os.environ.get(UNITS_ENV, "").strip() != "0" and jobs() > 1
            and _UNIT.search(source) is not None)


def split(source: str) -> list[Unit] | None:
    """The translation units of `source` (main first), or None when it marks none."""
    marks = list(_UNIT.finditer(source))
    if not marks:
        return None
    declarations = [_declaration(m) for m in marks]

    def declared(upto: int) -> str:
        """source[:end of mark `upto`'s start] with earlier marked bodies declared."""
        out, at = [], 0
        for m, decl in zip(marks[:upto], declarations):
            out += [source[at:m.start()], decl]
            at = m.end()
        return "".join(out) + source[at:marks[upto].start() if upto < len(marks) else None]

    units = [Unit("main", declared(len(marks)))]
    for k, m in enumerate(marks):
        units.append(Unit(m.group("name"), declared(k) + m.group(0)))
    return units


def _declaration(mark: re.Match) -> str:
    """The marked function's declaration: its text up to the body's brace, then `;`."""
    body = mark.group("body")
    brace = body.find("\n{")
    if brace < 0:
        raise ValueError(f"marked unit {mark.group('name')} has no function body")
    return f"/* {mark.group('name')}: compiled in a unit of its own */\n{body[:brace]};\n"


def jobs() -> int:
    """nvcc processes at once: $SBMLGPU_NVCC_JOBS, else the cores this process may use."""
    env = os.environ.get(JOBS_ENV, "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


@dataclass
class BuildReport:
    """How a split build went: per unit (name, seconds of its nvcc), the link's seconds,
    the wall time of the whole, and why it fell back to one unit (None: it did not)."""

    units: list[tuple[str, float]] = field(default_factory=list)
    link_s: float = 0.0
    wall_s: float = 0.0
    jobs: int = 1
    fell_back: str | None = None
    #: nvcc or nvlink refused a unit or the link (it will again): not a transient failure
    refused: bool = False


def compile_units(units: Sequence[Unit], arch: str, options: Sequence[str] = (),
                  name: str = "kernel", max_jobs: int | None = None,
                  report: BuildReport | None = None) -> bytes:
    """The linked cubin of `units` for `arch`: each compiled as relocatable device
    code on up to `max_jobs` (default jobs()) nvcc processes, then linked. Raises
    compile_check.CompileError naming the unit nvcc rejected."""
    nvcc = compile_check.nvcc_path()
    if nvcc is None:
        raise DeviceError("nvcc not found (looked in PATH, $CUDA_HOME/bin, /usr/local/cuda/bin)")
    report = report if report is not None else BuildReport()
    report.jobs = max(1, min(max_jobs or jobs(), len(units)))
    options = [*options, *_register_cap(units)]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="sbmlgpu-nvcc-units-") as scratch:
        folder = Path(scratch)
        stem = _safe(Path(name).stem)

        def build(index_unit):
            index, unit = index_unit
            src = folder / f"{stem}.{index:02d}_{unit.name}.cu"
            src.write_text(unit.text, encoding="utf-8")
            out = src.with_suffix(".cubin")
            t0 = time.perf_counter()
            _run([nvcc, "-cubin", "-rdc=true", f"-arch={arch}", *map(str, options),
                  "-o", str(out), str(src)], folder, f"{name} ({unit.name})", arch, unit.text)
            return out, (unit.name, time.perf_counter() - t0)

        with ThreadPoolExecutor(max_workers=report.jobs,
                                thread_name_prefix="sbmlgpu-nvcc") as pool:
            built = list(pool.map(build, enumerate(units)))
        report.units = [timing for _, timing in built]
        linked = folder / f"{stem}.cubin"
        t0 = time.perf_counter()
        _run([nvcc, "-dlink", "-cubin", f"-arch={arch}", "-o", str(linked),
              *(str(path) for path, _ in built)], folder, f"{name} (link)", arch, "")
        report.link_s = time.perf_counter() - t0
        cubin = linked.read_bytes()
    report.wall_s = time.perf_counter() - started
    return cubin


_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\(\s*(\d+)\s*(?:,\s*(\d+))?")
#: registers of one SM (every architecture sbmlgpu builds for)
REGISTERS_PER_BLOCK = 65536
#: the warps an SM holds are counted in groups of 4, and each thread's registers in 8s
WARP_GRANULE, REGISTER_GRANULE = 4, 8


def _register_cap(units) -> list[str]:
    """-maxrregcount for the units of a kernel whose __launch_bounds__ (threads, and
    blocks per SM) allow fewer than 255 registers a thread: a unit compiled apart does
    not see them, so its functions could use more registers than the kernel may
    ("too many resources requested for launch", or nvlink refusing an entry "with max
    regcount of 80" that calls a function of 254: the heterogeneous DBN kernel at 224
    threads x 3 blocks). The cap is what ptxas gives the entry itself: the registers of
    an SM over the warps it must hold (the blocks' warps together, rounded up to a
    multiple of 4), in multiples of 8 (checked against ptxas -v for bounds from (32, 16)
    to (288, 3), review of 26a7552); nothing where 255 fit (one block of 256 or fewer
    threads), so those builds are unchanged."""
    caps = []
    for unit in units:
        for threads, blocks in _LAUNCH_BOUNDS.findall(unit.text):
            warps = -(-int(threads) // 32) * int(blocks or 1)
            warps = -(-warps // WARP_GRANULE) * WARP_GRANULE
            caps.append(REGISTERS_PER_BLOCK // (warps * 32) // REGISTER_GRANULE
                        * REGISTER_GRANULE)
    if not caps or min(caps) >= 255:
        return []
    return [f"-maxrregcount={min(caps)}"]


def compile_source(source: str, arch: str, options: Sequence[str] = (),
                   name: str = "kernel", max_jobs: int | None = None,
                   report: BuildReport | None = None) -> bytes:
    """The cubin of `source`: split into units and built in parallel where it marks
    units (split()), else, or when that fails, compiled whole (compile_check)."""
    units = split(source) if builds_in_units(source) else None
    if units is not None:
        try:
            return compile_units(units, arch, options, name, max_jobs, report)
        except (compile_check.CompileError, OSError, ValueError,
                subprocess.SubprocessError) as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            log.warning("%s: the parallel build failed (%s); compiling it whole", name, reason)
            if report is not None:
                report.fell_back = reason
                report.refused = isinstance(exc, Refused)
    return compile_check.nvcc_compile(source, arch=arch, options=tuple(options), name=name)


class Refused(compile_check.CompileError):
    """nvcc or nvlink exited with an error and said why: it will again (not a timeout,
    nor a process killed by a signal)."""


def _run(command: list[str], cwd: Path, what: str, arch: str, text: str) -> None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, cwd=cwd,
                              timeout=compile_check.NVCC_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise compile_check.CompileError(
            what, arch, f"nvcc ran longer than {compile_check.NVCC_TIMEOUT_S} s", text) from None
    if done.returncode != 0:
        log_text = (done.stdout + done.stderr).replace(str(cwd) + os.sep, "")
        error = Refused if done.returncode > 0 and log_text.strip() else \
            compile_check.CompileError
        raise error(what, arch, log_text or f"nvcc exited with {done.returncode}", text)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "kernel"
