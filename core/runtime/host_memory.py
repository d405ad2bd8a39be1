"""Host memory available now: what a backend checks before it allocates a large
host array (a CME state space, a DBN's counts on the CPU path)."""

from __future__ import annotations

import os


def available_memory() -> int:
    """Host memory available now, in bytes: Linux's MemAvailable (free memory plus
    the page cache it can drop), else os.sysconf's free pages."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
