"""Hostile clients, hostile back ends, unlucky operators (issue 17), against real gunicorn + gevent.

Each test reproduces one attack or accident and is bounded in time and load (two-core machines).
"""

from __future__ import annotations

import stat

import pytest

from support.server import run_toolwire

pytestmark = pytest.mark.e2e


def test_instances_do_not_share_gunicorns_per_user_control_socket(tmp_path):
    """Two toolwires run by one user must not fight over ``~/.gunicorn/gunicorn.ctl``: none is made
    unless the operator names a path of this instance's own."""
    home = tmp_path / "home"
    home.mkdir()
    with run_toolwire({"HOME": str(home)}), run_toolwire({"HOME": str(home)}):
        assert not (home / ".gunicorn").exists()
    own = tmp_path / "toolwire.ctl"
    with run_toolwire({"HOME": str(home), "TOOLWIRE_CONTROL_SOCKET": str(own)}):
        assert stat.S_ISSOCK(own.stat().st_mode)
    assert not (home / ".gunicorn").exists()
