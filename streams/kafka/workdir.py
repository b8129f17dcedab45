"""A private data directory per running worker (RocksDB allows one process per store)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

_held: list[IO[str]] = []  # lock files kept open for the life of the process


def claim_worker_dir(base: Path, app_id: str, slots: int = 64) -> Path:
    """Claim ``base/<app_id>/worker-<i>`` for this process: the first slot no live process holds.

    Each worker of one app gets its own RocksDB directory, and a restarted worker takes a free
    slot back (its state there is reused and caught up from the changelog topic). The claim is
    an ``flock`` on ``.lock`` in the slot, released by the OS when the process exits, even on
    kill -9.

    Raises:
        RuntimeError: when all ``slots`` are held by running processes.
        OSError: when the directory cannot be created.
    """
    for i in range(slots):
        d = base / app_id / f"worker-{i}"
        d.mkdir(parents=True, exist_ok=True)
        f = open(d / ".lock", "a+")  # noqa: SIM115 - kept open while the process runs
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            continue
        f.seek(0)
        f.truncate()
        f.write(str(os.getpid()))
        f.flush()
        _held.append(f)
        return d
    raise RuntimeError(f"all {slots} worker slots under {base / app_id} are in use")
