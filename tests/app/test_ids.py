"""toolwire's random ids (issue 30: ``uuid.uuid4().hex`` cost a request ~2 µs an id): the same format, unique,
never shared with a forked process."""

from __future__ import annotations

import os
import uuid

from app import ids
from app.ids import uuid4_hex
from app.upstreams.http import upstream_request_id


def test_ids_are_uuid4_hex_and_unique():
    made = [uuid4_hex() for _ in range(5 * ids.BATCH + 7)]  # across several refills
    assert len(set(made)) == len(made)
    for text in made:
        parsed = uuid.UUID(text)
        assert parsed.hex == text and parsed.version == 4 and parsed.variant == uuid.RFC_4122


def test_a_forked_process_makes_its_own_ids():
    uuid4_hex()  # the parent holds unused ids
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.write(write, uuid4_hex().encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    child = os.read(read, 64).decode()
    os.close(read)
    assert child != uuid4_hex() and uuid.UUID(child).version == 4
    assert len(ids._ready) >= 1  # the parent kept its own


def test_own_ids_go_upstream_dashed_as_uuid_writes_them():
    for text in [uuid4_hex() for _ in range(50)] + ["0" * 32, "f" * 32]:
        assert upstream_request_id(text) == str(uuid.UUID(text))
    assert upstream_request_id("A" * 32) == str(uuid.UUID("A" * 32))  # upper case: the UUID path
