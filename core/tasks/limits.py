"""How large a time course may be: refused before anything is allocated or compiled.

A run of 10^8 output times or 10^9 members used to run for minutes and end in a
MemoryError, or write gigabytes of CSV; the user gets an OptionError instead that
says what the result would need and the limit. Full time courses are kept in host
memory or spilled to a memory-mapped file (core/schedule/spill.py), so the limit on
them is the larger of the machine's memory and the free space of the temporary
folder; summaries keep a few rows per output time whatever the ensemble size.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import TYPE_CHECKING

from ..errors import OptionError
from ..outputs import default_outputs

if TYPE_CHECKING:  # pragma: no cover
    from ..ir import Network
    from .time_course import TimeCourse

#: output times per member: far beyond any plot or table (and 10^8 of them took
#: minutes before failing); --times picks the ones that matter
MAX_OUTPUT_TIMES = 10_000_000
#: rows a --summary keeps per output time and output (mean, sd, 5 quantiles, n, ...)
SUMMARY_ROWS = 10
BYTES = 8  # float64


def _gigabytes(n: float) -> str:
    return f"{n / 1e9:.3g} GB"


def physical_memory() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return 0


def result_limit_bytes() -> int:
    """The largest result a run may produce: memory or spill space, whichever is larger."""
    try:
        disk = shutil.disk_usage(tempfile.gettempdir()).free
    except OSError:  # pragma: no cover - no temporary folder
        disk = 0
    return max(physical_memory(), disk)


def output_count(task: "TimeCourse", network: "Network") -> int:
    if task.outputs is not None:
        return len(task.outputs)
    return len(default_outputs(network))


def check_result_size(task: "TimeCourse", network: "Network",
                      limit: int | None = None) -> int:
    """The bytes the result will take; an OptionError naming the need and the limit
    when there are too many output times or the result cannot fit."""
    times, members = len(task.times), int(task.n)
    columns = output_count(task, network) + 1  # + time
    rows = SUMMARY_ROWS if task.summary else members
    need = times * columns * rows * BYTES
    if times > MAX_OUTPUT_TIMES:
        raise OptionError("points", f"{times:,} output times would need "
                                    f"{_gigabytes(need)} for the result; the limit is "
                                    f"{MAX_OUTPUT_TIMES:,} output times (pick the times "
                                    f"that matter with --times)")
    if limit is None:
        # the free space of the temporary folder (a statfs) only where memory is short:
        # every run checks, and the limit is the larger of the two
        memory = physical_memory()
        limit = memory if need <= memory else result_limit_bytes()
    if need > limit:
        option = "points" if members == 1 else "ensemble"
        raise OptionError(option, f"{members:,} member(s) x {times:,} output times x "
                                  f"{columns} columns would need {_gigabytes(need)} for the "
                                  f"result; the limit is {_gigabytes(limit)} (this machine's "
                                  f"memory or the free space of the temporary folder, "
                                  f"whichever is larger): use --summary, fewer members, "
                                  f"output times or --outputs")
    return need
