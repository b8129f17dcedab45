"""A byte copy of a DuckDB file by the process that holds it, without dropping DuckDB's lock.

DuckDB locks its file with a POSIX ``fcntl`` lock, and POSIX drops every such lock a process holds
on a file as soon as that process closes *any* descriptor of it. Opening the file to copy it and
closing it again would therefore let another process open the projection while this one writes
it. :class:`HeldFileCopy` opens its own descriptor once and closes it only when told to, after
DuckDB has closed the file.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

_CHUNK = 8 << 20  # bytes per copy_file_range / pread call


class HeldFileCopy:
    """Copies of one file's bytes, read through one descriptor kept open until :meth:`close`.

    Args:
        path: the file (a DuckDB database this process holds open).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._fd: int | None = None

    def copy_to(self, dst: str | Path) -> int:
        """Write the file's current bytes into ``dst`` (created or truncated, mode 0644); returns the bytes copied.

        Uses the kernel's ``copy_file_range`` (Linux) where it works, else ``pread`` / ``write``.
        The caller makes sure nothing writes the file meanwhile (for DuckDB: right after a
        ``CHECKPOINT``, with no other writer).

        Raises:
            OSError: when the file cannot be read or ``dst`` written (e.g. ``ENOSPC``); ``dst`` is
                then removed.
        """
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDONLY)
        src = self._fd
        size = os.fstat(src).st_size
        out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        done = 0
        try:
            fast = hasattr(os, "copy_file_range")
            while done < size:
                n = 0
                if fast:
                    try:
                        n = os.copy_file_range(src, out, min(_CHUNK, size - done), done, done)
                    except OSError as e:
                        if e.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                            raise
                        fast = False
                        continue
                else:
                    chunk = os.pread(src, min(_CHUNK, size - done), done)
                    n = os.pwrite(out, chunk, done) if chunk else 0
                if n == 0:
                    break  # the file shrank meanwhile: what is there is copied
                done += n
        except OSError:
            os.close(out)
            Path(dst).unlink(missing_ok=True)
            raise
        os.close(out)
        return done

    def close(self) -> None:
        """Close the descriptor (call it only after DuckDB has closed the file). Raises nothing."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
