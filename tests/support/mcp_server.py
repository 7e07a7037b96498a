"""A real MCP server for the gateway-tools tests: the ``mcp`` SDK's ``MCPServer`` (FastMCP of mcp 1.x) with a few
tools, run as its own process on 127.0.0.1 over streamable HTTP or HTTP+SSE (``python -m support.mcp_server
--transport streamable-http --port N``), and :func:`mcp_server`, a context manager that starts it on a free port
and says its URL once it answers.

Tools: ``add(a, b)``, ``echo(text)``, ``whoami()`` (the request's ``X-Team`` header: headers reach the server),
``fail(reason)`` (the tool's own error), ``sleep(seconds)`` (a hung tool), ``secret()`` (read-only annotated).
"""

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations


def build() -> MCPServer:
    server = MCPServer("toolwire-test")

    @server.tool(description="Add two numbers.")
    def add(a: float, b: float) -> str:
        return f"{a + b:g}"

    @server.tool(description="Say the text back.")
    def echo(text: str) -> str:
        return f"echo: {text}"

    @server.tool(description="Fail with the reason given.")
    def fail(reason: str) -> str:
        raise ValueError(reason)

    @server.tool(description="Wait the given seconds, then answer.")
    async def sleep(seconds: float) -> str:
        await anyio.sleep(seconds)
        return "awake"

    @server.tool(description="The secret of the day.", annotations=ToolAnnotations(readOnlyHint=True))
    def secret() -> str:
        return "the secret is 42"

    @server.tool(description="Which team is asking (the X-Team header).")
    def whoami(ctx: Context) -> str:
        request = ctx.request_context.request
        headers = getattr(request, "headers", None) or {}
        return f"team {headers.get('x-team', 'none')}"

    return server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def mcp_server(transport: str = "streamable-http") -> Iterator[str]:
    """The test server started in its own process; its URL (``…/mcp`` or ``…/sse``) once it accepts."""
    port = free_port()
    root = Path(__file__).resolve().parents[1]
    process = subprocess.Popen([sys.executable, "-m", "support.mcp_server", "--transport", transport, "--port",
                                str(port)], cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the test MCP server did not start") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/" + ("sse" if transport == "sse" else "mcp")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--transport", default="streamable-http")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    build().run(args.transport, host="127.0.0.1", port=args.port)
