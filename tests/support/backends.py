"""The real server stacks of the back-end conformance suite: installed when missing, started once, stopped.

:class:`Backends` starts every stack of :data:`STACKS` on its own loopback port, each a thin program
of ``tests/support/stacks/`` serving the plans of ``support.backend_model``: Python's ``http.server``
(HTTP/1.0, and HTTP/1.1 without a length), uvicorn + Starlette, aiohttp, Node's ``http``, Go's
``net/http``, and nginx in front of the uvicorn one with ``proxy_buffering`` on and off. What is not
a Python package comes from Debian (``golang-go``, ``nginx-light``, ``nodejs``; ``apt-get install``
when missing, see ``support.debian``); the Go program is built once into
``~/.cache/toolwire/conformance`` (``TOOLWIRE_CACHE`` overrides the root), nothing downloaded.
``python -m support.backends --install`` (run by ``make test``) installs and builds ahead of pytest.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from support.backend_model import write_plans
from support.debian import debian_binary
from support.server import _die_with_parent, _PRCTL, _stop, free_port, open_client_sockets  # type: ignore[attr-defined]

STACKS_DIR = Path(__file__).resolve().parent / "stacks"
CACHE_ROOT = Path(os.environ.get("TOOLWIRE_CACHE") or Path.home() / ".cache" / "toolwire") / "conformance"
START_TIMEOUT = 20.0
BUILD_TIMEOUT = 300


@dataclass(frozen=True)
class Stack:
    """One server stack.

    Fields:
        name: its id in test names and the docs table.
        keep_alive: whether it frames its bodies (``Content-Length`` or chunked) and keeps the connection,
            so toolwire's next request reuses it; a close-delimited stack closes every connection.
        behind: for a reverse proxy, the stack it forwards to.
    """

    name: str
    keep_alive: bool
    behind: str | None = None


STACKS = (
    Stack("http.server-1.0", keep_alive=False),
    Stack("http.server-1.1", keep_alive=False),
    Stack("uvicorn-starlette", keep_alive=True),
    Stack("aiohttp", keep_alive=True),
    Stack("node-http", keep_alive=True),
    Stack("go-net-http", keep_alive=True),
    Stack("nginx-buffering", keep_alive=True, behind="uvicorn-starlette"),
    Stack("nginx-no-buffering", keep_alive=True, behind="uvicorn-starlette"),
)


def binary(name: str, package: str) -> str:
    """The path of a Debian-packaged program, installed when missing; fails loudly where it cannot be had."""
    path, why = debian_binary(name, package)
    if path is None:
        raise RuntimeError(f"conformance suite: {why}")
    return path


def go_server() -> Path:
    """The Go stack's program, built from ``stacks/go_server.go`` by Debian's ``go`` once per source version."""
    source = STACKS_DIR / "go_server.go"
    built = CACHE_ROOT / f"go_server-{hashlib.sha256(source.read_bytes()).hexdigest()[:16]}"
    if built.exists():
        return built
    go = binary("go", "golang-go")
    CACHE_ROOT.mkdir(parents=True, exist_ok=True)
    partial = built.with_suffix(f".{os.getpid()}")
    env = {**os.environ, "GOCACHE": str(CACHE_ROOT / "go-build"), "GOPATH": str(CACHE_ROOT / "gopath"),
           "GOPROXY": "off", "GOFLAGS": ""}
    result = subprocess.run([go, "build", "-o", str(partial), str(source)], env=env, capture_output=True,
                            text=True, timeout=BUILD_TIMEOUT, stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        raise RuntimeError(f"go build of {source.name} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    partial.replace(built)  # parallel builds: the last rename wins, every one complete
    return built


def install() -> None:
    """Install and build what the stacks need (``make test`` runs this before pytest)."""
    binary("node", "nodejs")
    binary("nginx", "nginx-light")
    go_server()


_NGINX_CONF = """\
daemon off;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/nginx-error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {dir}/client_body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    server {{
        listen 127.0.0.1:{buffering};
        location / {{ proxy_pass http://127.0.0.1:{behind}; proxy_buffering on; }}
    }}
    server {{
        listen 127.0.0.1:{no_buffering};
        location / {{
            proxy_pass http://127.0.0.1:{behind};
            proxy_buffering off;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }}
    }}
}}
"""


class Backends:
    """Every stack of :data:`STACKS` running on 127.0.0.1 (a context manager; :meth:`v1_url` per stack)."""

    def __init__(self) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="toolwire-backends-")
        self.dir = Path(self._dir.name)
        self.ports = {stack.name: free_port() for stack in STACKS}
        self._processes: list[subprocess.Popen[bytes]] = []

    def v1_url(self, stack: str) -> str:
        """The OpenAI base URL of ``stack``."""
        return f"http://127.0.0.1:{self.ports[stack]}/v1"

    def connections_to(self, stack: str) -> int:
        """How many open connections some process on this machine holds to ``stack``."""
        return len(open_client_sockets(self.ports[stack]))

    def log(self) -> str:
        """Every stack's output so far."""
        return "\n".join(f"--- {path.name} ---\n{path.read_text(errors='replace')[-3000:]}"
                         for path in sorted(self.dir.glob("*.log")))

    def __enter__(self) -> "Backends":
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self) -> None:
        plans = str(write_plans(self.dir / "plans.json"))
        port = {name: str(number) for name, number in self.ports.items()}
        python = [sys.executable]
        self._run("http.server-1.0", [*python, str(STACKS_DIR / "python_http_server.py"), plans,
                                      port["http.server-1.0"], "HTTP/1.0"])
        self._run("http.server-1.1", [*python, str(STACKS_DIR / "python_http_server.py"), plans,
                                      port["http.server-1.1"], "HTTP/1.1"])
        self._run("uvicorn-starlette", [*python, str(STACKS_DIR / "starlette_app.py"), plans,
                                        port["uvicorn-starlette"]])
        self._run("aiohttp", [*python, str(STACKS_DIR / "aiohttp_app.py"), plans, port["aiohttp"]])
        self._run("node-http", [binary("node", "nodejs"), str(STACKS_DIR / "node_server.js"), plans,
                                port["node-http"]])
        self._run("go-net-http", [str(go_server()), plans, port["go-net-http"]])
        conf = self.dir / "nginx.conf"
        conf.write_text(_NGINX_CONF.format(dir=self.dir, behind=port["uvicorn-starlette"],
                                           buffering=port["nginx-buffering"],
                                           no_buffering=port["nginx-no-buffering"]))
        self._run("nginx", [binary("nginx", "nginx-light"), "-p", str(self.dir), "-c", str(conf),
                            "-e", str(self.dir / "nginx-error.log")])
        for stack in STACKS:
            self._wait_listening(stack.name)

    def _run(self, name: str, command: list[str]) -> None:
        with open(self.dir / f"{name}.log", "wb") as log:
            self._processes.append(subprocess.Popen(
                command, cwd=self.dir, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=_die_with_parent if _PRCTL is not None else None))

    def _wait_listening(self, name: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.ports[name]), 0.5):
                return
            if time.monotonic() > deadline or any(p.poll() is not None for p in self._processes):
                raise RuntimeError(f"the {name} stack did not start listening:\n{self.log()}")
            time.sleep(0.05)

    def close(self) -> None:
        """Stop every stack and delete the directory."""
        for process in self._processes:
            _stop(process)
        self._processes.clear()
        self._dir.cleanup()


if __name__ == "__main__":
    if "--install" in sys.argv:
        install()
        print(f"conformance stacks ready (cache {CACHE_ROOT})")
