"""CPU time and peak memory of another process, read from Linux ``/proc`` (for the benchmarks)."""

from __future__ import annotations

import os
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds process ``pid`` has used so far (``/proc/<pid>/stat`` fields 14 and 15).

    Raises:
        OSError: when the process is gone.
    """
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_peak_rss_mib(pid: int) -> float:
    """Peak resident set size of process ``pid`` so far (``VmHWM`` of ``/proc/<pid>/status``), MiB.

    Raises:
        OSError: when the process is gone.
    """
    status = Path(f"/proc/{pid}/status").read_text()
    return next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM")) / 1024
