"""nvcc, run in a scratch folder: source text in, cubin bytes (or a typed error) out.

Needs no GPU: CI compiles every generated kernel with `-arch=sm_90` to prove it
is valid CUDA. The runtime's on-disk cache (runtime/cache.py) calls this on a miss.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Sequence

from ..errors import DeviceError

#: Seconds one nvcc run may take before it is stopped.
NVCC_TIMEOUT_S = 600
_ARCH = re.compile(r"sm_\d+[af]?")
_DIAGNOSTIC = re.compile(r"^(?P<file>[^\s(]+)\((?P<line>\d+)\): (?P<kind>error|warning)", re.M)


class CompileError(DeviceError):
    """nvcc rejected a kernel. `log` is nvcc's output; the message also quotes the
    source lines it complains about."""

    def __init__(self, name: str, arch: str, log: str, source: str):
        self.name, self.arch, self.log, self.source = name, arch, log, source
        lines = source.splitlines()
        quoted = []
        for m in _DIAGNOSTIC.finditer(log):
            n = int(m.group("line"))
            if 1 <= n <= len(lines) and len(quoted) < 10:
                quoted.append(f"  {n:5d} | {lines[n - 1]}")
        text = f"nvcc could not compile {name} for {arch}:\n{log.strip()[:8000]}"
        if quoted:
            text += "\nsource lines:\n" + "\n".join(quoted)
        super().__init__(text)


def nvcc_path() -> str | None:
    """nvcc from PATH, else from $CUDA_HOME or /usr/local/cuda; None if absent."""
    found = shutil.which("nvcc")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and os.access(os.path.join(root, "bin", "nvcc"), os.X_OK):
            return os.path.join(root, "bin", "nvcc")
    return None


def nvcc_available() -> bool:
    return nvcc_path() is not None


@lru_cache(maxsize=4)
def _version_of(path: str) -> str:
    done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise DeviceError(f"{path} --version failed: {done.stderr.strip()}")
    return done.stdout.strip()


def nvcc_version() -> str:
    """The full `nvcc --version` text (runs nvcc once per process)."""
    path = _require_nvcc()
    return _version_of(path)


def nvcc_compile(source: str, arch: str = "sm_90", options: Sequence[str] = (),
                 name: str = "kernel") -> bytes:
    """Compile CUDA `source` to a cubin for `arch` (e.g. 'sm_90'); raises CompileError
    with nvcc's messages when nvcc rejects it."""
    if not _ARCH.fullmatch(arch):
        raise DeviceError(f"not an nvcc real architecture: {arch!r} (expected e.g. 'sm_90')")
    options = [str(o) for o in options]
    nvcc = _require_nvcc()
    with tempfile.TemporaryDirectory(prefix="sbmlgpu-nvcc-") as scratch:
        src = Path(scratch) / f"{_safe(name)}.cu"
        out = src.with_suffix(".cubin")
        src.write_text(source, encoding="utf-8")
        command = [nvcc, "-cubin", f"-arch={arch}", *options, "-o", str(out), str(src)]
        try:
            done = subprocess.run(command, capture_output=True, text=True,
                                  timeout=NVCC_TIMEOUT_S, cwd=scratch)
        except subprocess.TimeoutExpired:
            raise CompileError(name, arch, f"nvcc ran longer than {NVCC_TIMEOUT_S} s",
                               source) from None
        log = (done.stdout + done.stderr).replace(str(src), src.name)
        if done.returncode != 0 or not out.is_file():
            raise CompileError(name, arch, log or f"nvcc exited with {done.returncode}", source)
        return out.read_bytes()


def _require_nvcc() -> str:
    path = nvcc_path()
    if path is None:
        raise DeviceError("nvcc not found (looked in PATH, $CUDA_HOME/bin, /usr/local/cuda/bin)")
    return path


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "kernel"
