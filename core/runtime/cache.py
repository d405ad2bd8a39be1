"""The on-disk cubin cache: compile each (source, options, nvcc, arch) once.

key = sha256 of the source, the options, nvcc's `--version` text and the arch (and,
for a source built as several units, parallel_build.BUILD).
Files live in $SBMLGPU_CACHE_DIR, else ~/.cache/sbmlgpu, as `cubin/<key>.cubin`,
written atomically (a temporary file in the same folder, then os.replace), so
concurrent processes (MPI ranks, one per GPU) can share a cache.

A hit runs no process at all: nvcc's version text is itself cached, keyed by
nvcc's resolved path, size and modification time, so a new toolkit in the same
place still changes every key.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Callable, Sequence

from ..codegen import compile_check
from . import parallel_build

log = logging.getLogger("sbmlgpu.runtime")
_ELF_MAGIC = b"\x7fELF"


def default_directory() -> Path:
    env = os.environ.get("SBMLGPU_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "sbmlgpu"


class CompileCache:
    """`compile(source, arch, options)` -> cubin bytes, through the disk cache."""

    def __init__(self, directory: str | os.PathLike | None = None,
                 compiler: Callable[..., bytes] | None = None):
        self.directory = Path(directory) if directory is not None else default_directory()
        self._compiler = compiler
        self.hits = 0
        self.misses = 0

    # -- keys --------------------------------------------------------------------
    def compiler_version(self) -> str:
        """nvcc's `--version` text, from the small on-disk note when nvcc is unchanged."""
        nvcc = compile_check.nvcc_path()
        if nvcc is None:
            return compile_check.nvcc_version()  # raises the typed "nvcc not found"
        real = os.path.realpath(nvcc)
        st = os.stat(real)
        stamp = hashlib.sha256(f"{real}\0{st.st_size}\0{st.st_mtime_ns}".encode()).hexdigest()
        note = self.directory / "nvcc-version" / f"{stamp[:32]}.txt"
        try:
            return note.read_text(encoding="utf-8")
        except OSError:
            pass
        version = compile_check.nvcc_version()
        self._write(note, version.encode("utf-8"))
        return version

    def key(self, source: str, arch: str, options: Sequence[str] = (),
            whole: bool = False) -> str:
        """`whole`: the key of the source compiled whole, even where it is built in
        units (where a units build fell back to a whole compile)."""
        fields = {"source": source, "options": [str(o) for o in options],
                  "nvcc": self.compiler_version(), "arch": arch}
        if not whole and parallel_build.builds_in_units(source):
            # built in units and linked: another binary than one whole compile's
            fields["build"] = parallel_build.BUILD
        payload = json.dumps(fields, sort_keys=True)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def path(self, key: str) -> Path:
        return self.directory / "cubin" / f"{key}.cubin"

    @staticmethod
    def _refused(path: Path) -> Path:
        """The marker of a source whose units build nvcc refused: it holds the build
        scheme (parallel_build.BUILD) that was refused."""
        return path.with_suffix(".units-refused")

    def _was_refused(self, path: Path) -> bool:
        """A marker written under this build scheme (a fixed scheme tries units again;
        the key of a units build holds the scheme too, so this guards a stale marker)."""
        try:
            return self._refused(path).read_text(encoding="utf-8") == parallel_build.BUILD
        except OSError:
            return False

    # -- compiling ----------------------------------------------------------------
    def compile(self, source: str, arch: str, options: Sequence[str] = (),
                name: str = "kernel") -> bytes:
        """The cubin of `source` for `arch`; nvcc runs only on a miss. A failed
        compilation raises CompileError and caches nothing."""
        path = self.path(self.key(source, arch, options))
        refused = self._was_refused(path)
        if refused:  # its units build was refused (by this build scheme): the whole one
            path = self.path(self.key(source, arch, options, whole=True))
        try:
            cubin = path.read_bytes()
            if cubin.startswith(_ELF_MAGIC):
                self.hits += 1
                return cubin
            log.warning("ignoring a damaged cache entry %s", path)
        except OSError:
            pass
        self.misses += 1
        if self._compiler is not None:
            cubin = self._compiler(source, arch=arch, options=tuple(options), name=name)
        elif refused:  # straight to the whole compile, not the refused units again
            cubin = compile_check.nvcc_compile(source, arch=arch, options=tuple(options),
                                               name=name)
        else:  # the default splits a source that marks units and builds them in parallel
            report = parallel_build.BuildReport()
            cubin = parallel_build.compile_source(source, arch=arch, options=tuple(options),
                                                  name=name, report=report)
            if report.fell_back:  # compiled whole: kept as such, never under the units'
                # key (a transient failure would stick; the next run tries units again),
                # unless nvcc refused the units (it would again: a marker sends the next
                # runs to the whole build instead of compiling twice every time)
                if report.refused:
                    self._write(self._refused(path), parallel_build.BUILD.encode("utf-8"))
                path = self.path(self.key(source, arch, options, whole=True))
        self._write(path, cubin)
        return cubin

    def _write(self, path: Path, data: bytes) -> None:
        """Atomic write; a cache that cannot be written only costs recompilation."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as e:
            log.warning("compile cache %s is not writable (%s); not caching", path.parent, e)


_default: dict[Path, CompileCache] = {}


def default_cache() -> CompileCache:
    """The process-wide cache for the current $SBMLGPU_CACHE_DIR."""
    directory = default_directory()
    if directory not in _default:
        _default[directory] = CompileCache(directory)
    return _default[directory]
