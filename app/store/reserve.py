"""A reserve file of disk space beside the SQLite store, given back when the disk is full.

On a full disk SQLite cannot even delete: a DELETE appends pages to the WAL
first. The store keeps a few MiB allocated in ``<database>-reserve``; when a
deletion (a client's DELETE, the purge of expired responses) fails for lack of
space, the reserve is truncated and the deletion tried again. The reserve is
allocated again once the disk has room for it.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger("toolwire.responses.store")


class Reserve:
    """The reserve file ``path`` of ``size`` bytes (0: no reserve)."""

    def __init__(self, path: str, size: int):
        self.path = path
        self.size = size

    def ensure(self) -> bool:
        """Allocate the reserve when it is missing or short; whether it is in place now."""
        if not self.size:
            return True
        try:
            if os.stat(self.path).st_size >= self.size:
                return True
        except FileNotFoundError:
            pass
        except OSError:
            return False
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600)
        except OSError:
            return False
        try:
            os.posix_fallocate(fd, 0, self.size)
        except OSError as exc:  # still no room: allocate nothing rather than part
            os.ftruncate(fd, 0)
            log.debug("response store reserve %s not allocated: %s", self.path, exc)
            return False
        finally:
            os.close(fd)
        return True

    def release(self) -> bool:
        """Give the reserve's space back to the filesystem; whether there was any to give."""
        try:
            if os.stat(self.path).st_size == 0:
                return False
            os.truncate(self.path, 0)
        except OSError:
            return False
        log.warning("response store: the disk is full; the reserve %s was released so deletions can proceed",
                    self.path)
        return True
