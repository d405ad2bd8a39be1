"""Running `python -m sbmlgpu.schedule` under mpirun for the MPI tests, and the reason
to skip them when mpi4py or an mpirun is missing (decided once, at collection)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path


def _find_mpirun() -> str | None:
    """The mpirun beside this Python first (the `mpich` wheel of the `test` extra puts
    it in the venv's bin/, matching the venv's mpi4py), else one on PATH."""
    beside = Path(sys.executable).parent / "mpirun"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("mpirun")


MPIRUN = _find_mpirun()


def _mpi_missing() -> str | None:
    try:
        import mpi4py  # noqa: F401  (only the package: MPI itself starts in the children)
    except ImportError as exc:
        return f"mpi4py is not importable ({exc})"
    if MPIRUN is None:
        return "no mpirun beside this Python or on PATH"
    # the MPI library behind mpi4py may still be missing; try it away from this process
    probe = subprocess.run([sys.executable, "-c", "from mpi4py import MPI"],
                           capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        return f"mpi4py.MPI does not load: {probe.stderr.strip().splitlines()[-1:]}"
    return None


MPI_MISSING = _mpi_missing()


def mpirun(ranks: int, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    # Open MPI refuses root and more ranks than cores unless told; MPICH ignores these
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    command = [MPIRUN, "-n", str(ranks), sys.executable, "-m", "sbmlgpu.schedule", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)


def report(done: subprocess.CompletedProcess) -> dict:
    """Rank 0's JSON line; the run must have succeeded and printed exactly one."""
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0 and len(lines) == 1, done.stdout + done.stderr
    return json.loads(lines[0])
