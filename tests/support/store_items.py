"""Shared store test data (owners, items, responses), a way to make files unwritable even for root, and a
small filesystem to fill."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess

import pytest

ALICE = "a" * 64
BOB = "b" * 64
USER = {"type": "message", "role": "user", "content": "hi"}


def response(response_id, *items, previous=None):
    return {"id": response_id, "object": "response", "status": "completed", "previous_response_id": previous,
            "output": list(items)}


def message(item_id, text):
    return {"id": item_id, "type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]}


@contextlib.contextmanager
def unwritable(*paths):
    """Make files unwritable even for root (``chattr +i``), or by mode for another user; skip if neither works."""
    if os.geteuid() == 0:
        if shutil.which("chattr") is None:
            pytest.skip("UNWRITABLE-FILE TEST SKIPPED: running as root without chattr")
        done = []
        try:
            for path in paths:
                if subprocess.run(["chattr", "+i", path], capture_output=True).returncode != 0:
                    pytest.skip(f"UNWRITABLE-FILE TEST SKIPPED: chattr +i {path} refused (filesystem?)")
                done.append(path)
            yield
        finally:
            for path in done:
                subprocess.run(["chattr", "-i", path], check=True)
    else:
        modes = {path: os.stat(path).st_mode for path in paths}
        try:
            for path in paths:
                os.chmod(path, 0o444)
            yield
        finally:
            for path, mode in modes.items():
                os.chmod(path, mode)


@contextlib.contextmanager
def tiny_filesystem(path, size):
    """A tmpfs of ``size`` mounted at ``path`` (root only: the suite runs as root here and in CI)."""
    if os.geteuid() != 0:
        pytest.skip("FULL-DISK TEST SKIPPED: mounting a tmpfs needs root")
    os.makedirs(path)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


def fill(directory):
    """Take every byte left on ``directory``'s filesystem (again after a first call); return the filler's path."""
    filler = os.path.join(directory, "filler")
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)  # a second call takes what was freed since
    try:
        for chunk in (1 << 16, 1 << 12, 1):
            try:
                while True:
                    os.write(fd, b"\0" * chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    return filler
