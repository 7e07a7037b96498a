"""Shared store test data (owners, items, responses) and a way to make files unwritable, even for root."""

from __future__ import annotations

import contextlib
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
