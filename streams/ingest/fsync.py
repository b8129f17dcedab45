"""Making a directory entry durable: one helper shared by the ingest spool, serve's hook-event log
and the command hook's spool. Standard library ``os`` only (the command hook imports it at start)."""

from __future__ import annotations

import os
from pathlib import Path


def fsync_dir(d: Path) -> None:
    """fsync directory ``d`` so a file created, renamed or removed in it survives a crash.

    Raises:
        OSError: when ``d`` cannot be opened or synced.
    """
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
