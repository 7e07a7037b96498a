"""Settings toolwire cannot serve with stop it at start, under real gunicorn and ``toolwire serve``.

A server with no worker (``WEB_CONCURRENCY=0``) or workers that take no connection
(``TOOLWIRE_WORKER_CONNECTIONS=0``) used to start and hang every client; a config file whose path
had a typo was ignored (an open API on the demo back end). Each now ends the start with one line
that names the variable or the file to fix, never a worker's traceback.
"""

from __future__ import annotations

import sys

import httpx
import pytest

from support.server import (GUNICORN, PROJECT_ROOT, _environment, free_port, run_to_end,  # type: ignore[attr-defined]
                            run_toolwire)

pytestmark = pytest.mark.e2e

#: How long a refused start may take (a worker imports the app first when the app refuses).
EXIT_WITHIN = 12.0
LAUNCHERS = {"gunicorn": [str(GUNICORN), "-c", "gunicorn.conf.py", "wsgi:app"],
             "toolwire serve": [sys.executable, "-m", "app.cli", "serve"]}


def refused_start(settings: dict[str, str], launcher: list[str], *options: str) -> str:
    """Start ``launcher`` with ``settings``; it must exit with an error within :data:`EXIT_WITHIN` seconds.
    Its output."""
    done = run_to_end([*launcher, "--bind", f"127.0.0.1:{free_port()}", *options], cwd=PROJECT_ROOT,
                      env=_environment(settings), timeout=EXIT_WITHIN)
    assert done.returncode != 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def the_reason(output: str) -> str:
    """The one line that says why the start was refused (each worker that tried says the same); no traceback."""
    assert "Traceback" not in output, output
    lines = {line for line in output.splitlines() if line.startswith("toolwire cannot start: ")}
    assert len(lines) == 1, output
    return lines.pop()


@pytest.mark.parametrize("launcher", LAUNCHERS.values(), ids=LAUNCHERS.keys())
@pytest.mark.parametrize("variable", ["WEB_CONCURRENCY", "TOOLWIRE_WORKER_CONNECTIONS"])
def test_no_worker_or_no_connection_is_refused_at_start(launcher: list[str], variable: str) -> None:
    assert variable in the_reason(refused_start({variable: "0"}, launcher))  # no --workers: the variable alone


def test_no_worker_on_the_command_line_is_refused_at_start() -> None:
    reason = the_reason(refused_start({}, LAUNCHERS["gunicorn"], "--workers", "0"))
    assert "--workers" in reason


@pytest.mark.parametrize("launcher", LAUNCHERS.values(), ids=LAUNCHERS.keys())
def test_an_invalid_setting_is_one_line_naming_its_variable(launcher: list[str]) -> None:
    reason = the_reason(refused_start({"TOOLWIRE_MAX_BODY_BYTES": "0", "TOOLWIRE_HEARTBEAT_SECONDS": "soon"},
                                      launcher))
    assert "TOOLWIRE_MAX_BODY_BYTES: " in reason and "TOOLWIRE_HEARTBEAT_SECONDS: " in reason
    assert "max_body_bytes" not in reason


@pytest.mark.parametrize("launcher", LAUNCHERS.values(), ids=LAUNCHERS.keys())
def test_a_config_file_that_cannot_be_read_is_refused_naming_it(launcher: list[str], tmp_path) -> None:
    missing = tmp_path / "toolwrie.toml"  # a typo: the file is toolwire.toml
    reason = the_reason(refused_start({"TOOLWIRE_CONFIG_FILE": str(missing)}, launcher))
    assert f"TOOLWIRE_CONFIG_FILE '{missing}': No such file or directory" in reason


def test_a_config_file_that_is_not_toml_is_refused_naming_it(tmp_path) -> None:
    broken = tmp_path / "toolwire.toml"
    broken.write_text("upstream_url = http://unquoted\n")
    reason = the_reason(refused_start({"TOOLWIRE_CONFIG_FILE": str(broken)}, LAUNCHERS["gunicorn"]))
    assert f"TOOLWIRE_CONFIG_FILE '{broken}' is not TOML" in reason


@pytest.mark.parametrize("launcher", LAUNCHERS.values(), ids=LAUNCHERS.keys())
def test_a_metrics_directory_that_does_not_exist_yet_is_made(launcher: list[str], tmp_path) -> None:
    """The settings check imports the app, whose metrics write into ``PROMETHEUS_MULTIPROC_DIR``: it ran
    before the directory was made, and the start ended in a traceback (issue 43, item 11)."""
    directory = tmp_path / "metrics" / "toolwire"
    with run_toolwire({"PROMETHEUS_MULTIPROC_DIR": str(directory)},
                      launcher=launcher) as server:
        answer = httpx.post(f"{server.v1_url}/chat/completions", timeout=30,
                            json={"model": "toolwire-demo", "messages": [{"role": "user", "content": "Hi"}]})
        assert answer.status_code == 200
        assert "toolwire_requests_total" in httpx.get(f"{server.url}/metrics", timeout=30).text
        assert "Traceback" not in server.log()
    assert directory.is_dir()


@pytest.mark.parametrize("launcher", LAUNCHERS.values(), ids=LAUNCHERS.keys())
def test_a_back_end_of_no_registered_kind_is_refused_naming_it(launcher: list[str]) -> None:
    """The kinds are the registry's (``app/upstreams/kinds.py``), checked when a worker makes the back ends."""
    reason = the_reason(refused_start({"TOOLWIRE_UPSTREAMS": '{"x": {"kind": "olama", "url": "http://127.0.0.1:9/v1"}}'},
                                      launcher))
    assert "TOOLWIRE_UPSTREAMS (x): no back-end kind named 'olama'; registered: openai, codex, demo" in reason
