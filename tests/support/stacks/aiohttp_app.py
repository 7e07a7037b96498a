"""The conformance plans served by aiohttp's web server.

``python aiohttp_app.py PLANS PORT``: an SSE answer is a ``StreamResponse`` written piece by piece
(chunked, keep-alive), a JSON one a ``Response`` (``Content-Length``).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from support.backend_model import load_plans, unknown_model  # noqa: E402

PLANS = load_plans(sys.argv[1])


async def completions(request: web.Request) -> web.StreamResponse:
    """The plan the request's model names."""
    model = (await request.json()).get("model")
    entry = PLANS.get(model)
    if entry is None:
        return web.Response(body=unknown_model(model), status=404, content_type="application/json")
    if entry["headers"]["Content-Type"] == "application/json":
        return web.Response(body=b"".join(entry["writes"]), status=entry["status"], headers=entry["headers"])
    response = web.StreamResponse(status=entry["status"], headers=entry["headers"])
    await response.prepare(request)
    for number, data in enumerate(entry["writes"]):
        if number and entry["pause"]:
            await asyncio.sleep(entry["pause"])
        await response.write(data)
    await response.write_eof()
    return response


if __name__ == "__main__":
    app = web.Application()
    app.router.add_post("/v1/chat/completions", completions)
    web.run_app(app, host="127.0.0.1", port=int(sys.argv[2]), print=None, access_log=None)
