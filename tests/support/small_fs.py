"""A small file system the tests can fill: a ``tmpfs`` of a few MiB mounted for one test (root or
``CAP_SYS_ADMIN``; elsewhere the test is skipped with the reason), and a filler that leaves an
exact amount of it free."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_fs(where: Path, size_bytes: int) -> Iterator[Path]:
    """Mount a ``tmpfs`` of ``size_bytes`` at ``where`` (created) for the block; unmount it after.

    Skips the calling test (``pytest.skip``, with the reason) where no ``tmpfs`` can be mounted:
    not root, no ``mount``, or a container that forbids it.
    """
    where.mkdir(parents=True, exist_ok=True)
    mount = shutil.which("mount")
    if mount is None:
        pytest.skip("a small file system is needed and there is no `mount` command here")
    r = subprocess.run([mount, "-t", "tmpfs", "-o", f"size={size_bytes},mode=0700", "tmpfs", str(where)],
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        pytest.skip(f"a small file system is needed and `mount -t tmpfs` is refused here: {(r.stderr or r.stdout).strip()[:200]}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=30)


def free_bytes(where: Path) -> int:
    """Bytes free for this user on the file system of ``where``."""
    st = os.statvfs(where)
    return st.f_bavail * st.f_frsize


def fill_leaving(where: Path, leave_bytes: int, name: str = "filler") -> Path:
    """Allocate a file in ``where`` that leaves ``leave_bytes`` free (about: to a page); its path.

    Raises:
        ValueError: when less than ``leave_bytes`` is free already.
    """
    take = free_bytes(where) - leave_bytes
    if take < 0:
        raise ValueError(f"only {free_bytes(where)} bytes free, fewer than the {leave_bytes} to leave")
    path = where / name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        os.posix_fallocate(fd, 0, max(take, 1))
    finally:
        os.close(fd)
    return path
