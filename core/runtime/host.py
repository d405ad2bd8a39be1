"""Host builds: generated kernel text compiled by the system C++ compiler, cached, loaded.

Every backend writes its kernels so that the same text also compiles as host C++
(`__host__ __device__` code, a C entry point for the host): its CPU path then runs
the GPU's own code, and CI, which has no GPU, executes and checks it. This module
is the one place that turns such text into a loaded library:

    library = load(text, "ssa_decay_direct_double_1a2b3c.cu", flags=("-ffp-contract=off",))
    library.my_entry.argtypes = [...]            # the backend's ctypes signatures

- the compiler: $CXX, else g++, c++ or clang++ from PATH (`find_compiler`); none
  is a DeviceError that says what to install or which CPU engine needs none;
- flags: BASE_FLAGS, then the backend's own (`flags`), then -fopenmp where the
  compiler can build and link OpenMP code (probed once), then the words of
  $SBMLGPU_EXTRA_CXXFLAGS, read at every build (e.g. "-mfma -ffp-contract=fast"
  rounds like nvcc, which contracts a*b + c into FMAs by default);
- the cache: `<default_directory()>/host/<key>.so` ($SBMLGPU_CACHE_DIR, else
  ~/.cache/sbmlgpu), key = sha256 of the source, every flag and the compiler's
  `--version` text; installed atomically (a temporary file in the same folder,
  then os.replace), so concurrent processes can share it;
- a time limit per compilation, and one typed error, HostCompileError, that names
  the source and quotes the lines the compiler complains about;
- loading through ctypes, memoised per process, compiler and flags (a plain and an
  FMA build of one source are different libraries and never mix).

`may_run_parallel()` is the OpenMP-after-fork guard: libgomp cannot start threads
in a child forked after its parent ran a parallel region (the child hangs), so a
host library called in such a child must run on the calling thread only.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import re
import shutil
import signal
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Sequence

from ..codegen.compile_check import _version_of
from ..errors import DeviceError
from .cache import default_directory
from .once import OncePerKey

log = logging.getLogger("sbmlgpu.runtime")

#: Flags of every host build: C++14 (what the kernels are written in), optimised,
#: a shared library that ctypes can load.
BASE_FLAGS = ("-std=c++14", "-O2", "-shared", "-fPIC")
#: Extra flags for every build, split on whitespace, read at every build.
EXTRA_FLAGS_ENV = "SBMLGPU_EXTRA_CXXFLAGS"
#: Seconds one compilation may take (a large model's unrolled kernel takes minutes).
COMPILE_TIMEOUT_S = 900
_COMPILERS = ("g++", "c++", "clang++")
_DIAGNOSTIC = re.compile(r"^[^\s:]+:(?P<line>\d+):(?:\d+:)? (?:fatal )?error", re.M)


class HostCompileError(DeviceError):
    """The host C++ compiler rejected a generated kernel (a bug in the backend that
    generated it: report it). `name` is the source's name, `log` the compiler's
    output; the message quotes the source lines it complains about."""

    def __init__(self, name: str, compiler: str, log: str, source: str):
        self.name, self.compiler, self.log = name, compiler, log
        text = f"{compiler} could not compile {name} as host C++:\n{log.strip()[:6000]}"
        quoted = _quoted_lines(log, source)
        super().__init__(text + ("\nsource lines:\n" + "\n".join(quoted) if quoted else ""))


def _quoted_lines(log: str, source: str, most: int = 10) -> list[str]:
    """The source lines that the compiler's error messages point at, each once."""
    lines = source.splitlines()
    cited = dict.fromkeys(int(m.group("line")) for m in _DIAGNOSTIC.finditer(log))
    return [f"  {n:5d} | {lines[n - 1]}" for n in cited if 1 <= n <= len(lines)][:most]


# -- the compiler and its flags -------------------------------------------------------
def host_cores() -> int:
    """The cores this process may run on (its CPU affinity; not a container's quota)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


_FOUND_COMPILERS: dict = {}


def find_compiler() -> str | None:
    """The C++ compiler: $CXX, else g++, c++ or clang++ from PATH; None if none."""
    return _compiler(os.environ.get("CXX"))


def compiler_environment() -> tuple:
    """($CXX, find_compiler(), extra_flags()): what chooses how a host kernel is built,
    with $CXX read once (every run asks, model_cache.build_environment; a variable that
    is not set costs os.environ a KeyError)."""
    cxx = os.environ.get("CXX")
    return cxx, _compiler(cxx), extra_flags()


def _compiler(cxx: str | None) -> str | None:
    """find_compiler for this $CXX, looked up once per ($CXX, $PATH)."""
    where = (cxx, os.environ.get("PATH"))
    if where not in _FOUND_COMPILERS:
        _FOUND_COMPILERS[where] = next(
            (found for name in (where[0], *_COMPILERS) if name
             for found in [shutil.which(name)] if found), None)
    return _FOUND_COMPILERS[where]


def require_compiler() -> str:
    """find_compiler(), or a DeviceError that says what to do."""
    compiler = find_compiler()
    if compiler is None:
        raise DeviceError("no C++ compiler found for the host build of a generated kernel "
                          "(looked for $CXX, g++, c++, clang++ on PATH): install one or set "
                          "$CXX, or choose a CPU engine that needs none (--cpu-engine numpy)")
    return compiler


def run_compiler(command: Sequence[str], timeout: float) -> subprocess.CompletedProcess:
    """Run a compiler with a time limit. The driver (g++) starts cc1plus and as as
    children: past the limit the whole process group is killed, not the driver alone,
    which would leave cc1plus compiling for nobody. Raises TimeoutExpired then."""
    with subprocess.Popen(list(command), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.communicate()
            raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@lru_cache(maxsize=8)
def openmp_flags(compiler: str) -> tuple[str, ...]:
    """('-fopenmp',) when `compiler` can build and link an OpenMP library, else ()."""
    with tempfile.TemporaryDirectory(prefix="sbmlgpu-omp-") as scratch:
        src = Path(scratch) / "omp.cpp"
        src.write_text('#include <omp.h>\nextern "C" int f(void){return omp_get_max_threads();}\n')
        try:
            done = run_compiler([compiler, "-fopenmp", "-shared", "-fPIC", str(src), "-o",
                                 str(Path(scratch) / "omp.so")], timeout=120)
        except (OSError, subprocess.TimeoutExpired):
            return ()
        return ("-fopenmp",) if done.returncode == 0 else ()


def extra_flags() -> tuple[str, ...]:
    """The words of $SBMLGPU_EXTRA_CXXFLAGS, read now."""
    return tuple(os.environ.get(EXTRA_FLAGS_ENV, "").split())


def build_flags(compiler: str, flags: Sequence[str] = (), openmp: bool = True) -> tuple[str, ...]:
    """Every flag of a build: BASE_FLAGS, the backend's, OpenMP, $SBMLGPU_EXTRA_CXXFLAGS."""
    return (*BASE_FLAGS, *flags, *(openmp_flags(compiler) if openmp else ()), *extra_flags())


# -- the cache ----------------------------------------------------------------------
def cache_directory() -> Path:
    """Where host libraries live: `host/` in the compile cache's folder."""
    return default_directory() / "host"


def cache_key(source: str, flags: Sequence[str], compiler: str) -> str:
    payload = "\0".join([source, _version_of(compiler), *flags])
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]


def build(source: str, name: str, flags: Sequence[str] = (), *, openmp: bool = True,
          compiler: str | None = None, timeout: float = COMPILE_TIMEOUT_S) -> Path:
    """The shared library of `source` (`name` says which kernel, in messages),
    compiled on a cache miss. Raises DeviceError without a compiler and
    HostCompileError when the compiler rejects the source or runs past `timeout`."""
    compiler = compiler or require_compiler()
    every_flag = build_flags(compiler, flags, openmp)
    library = cache_directory() / f"{cache_key(source, every_flag, compiler)}.so"
    if library.is_file():
        return library
    with tempfile.TemporaryDirectory(prefix="sbmlgpu-host-") as scratch:
        src = Path(scratch) / "kernel.cpp"
        src.write_text(source, encoding="utf-8")
        out = Path(scratch) / "kernel.so"
        command = [compiler, *every_flag, "-x", "c++", str(src), "-o", str(out)]
        try:
            done = run_compiler(command, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise HostCompileError(name, compiler, f"stopped after {timeout:g} s", source) from None
        if done.returncode != 0 or not out.is_file():
            output = (done.stdout + done.stderr).replace(str(src), name)
            raise HostCompileError(name, compiler, output or f"exit status {done.returncode}",
                                   source)
        _install(out, library)
    return library


def _install(built: Path, library: Path) -> None:
    """Copy `built` to `library` atomically (readers see the whole file or none)."""
    try:
        library.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=library.parent, prefix=".tmp-", suffix=".so")
        os.close(fd)
        try:
            shutil.copyfile(built, tmp)
            os.replace(tmp, library)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as e:
        raise DeviceError(f"cannot write the host library cache {library.parent} ({e}); set "
                          f"$SBMLGPU_CACHE_DIR to a writable folder") from None


# -- loading ------------------------------------------------------------------------
# one library per source, flags and compiler; a compile holds only its own key (a
# loaded library is returned at once while another one compiles)
_loaded: OncePerKey[ctypes.CDLL] = OncePerKey()


def load(source: str, name: str, flags: Sequence[str] = (), *,
         openmp: bool = True) -> ctypes.CDLL:
    """The loaded library of `source` (built through the cache on first use), one per
    process, compiler and set of flags ($SBMLGPU_EXTRA_CXXFLAGS included)."""
    compiler = require_compiler()
    key = (source, build_flags(compiler, flags, openmp), compiler)
    return _loaded.get(key, lambda: ctypes.CDLL(
        str(build(source, name, flags, openmp=openmp, compiler=compiler))))


# -- OpenMP and fork -------------------------------------------------------------------
# The first process that asked to run threads; a forked child inherits this list
# and so sees its parent's id, not its own.
_threads_started_in: list[int] = []


def may_run_parallel() -> bool:
    """False in a process forked after its parent (may have) started OpenMP threads:
    host libraries must then run on the calling thread only."""
    pid = os.getpid()
    if not _threads_started_in:
        _threads_started_in.append(pid)
    return _threads_started_in[0] == pid
