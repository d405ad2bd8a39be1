"""Host memory available now: what a backend checks before it allocates a large
host array (a CME state space, a DBN's counts on the CPU path)."""

from __future__ import annotations

import os
import sys


def available_memory() -> int:
    """Host memory available now, in bytes: Linux's MemAvailable (free memory plus
    the page cache it can drop), else os.sysconf's free pages (else sys.maxsize)."""
    try:  # one read and a search (small runs ask every time)
        with open("/proc/meminfo", "rb") as meminfo:
            text = meminfo.read()
        at = text.index(b"MemAvailable:")
        return int(text[at + 13:text.index(b"kB", at)]) * 1024
    except (OSError, ValueError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return sys.maxsize
