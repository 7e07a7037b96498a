"""The conformance plans served by uvicorn + Starlette (vLLM, llama-cpp-python, SGLang serve this way).

``python starlette_app.py PLANS PORT``: an SSE answer is a ``StreamingResponse`` (chunked, keep-alive),
a JSON one a plain ``Response`` (``Content-Length``).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import AsyncIterator

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from support.backend_model import load_plans, unknown_model  # noqa: E402

PLANS = load_plans(sys.argv[1])


async def completions(request: Request) -> Response:
    """The plan the request's model names."""
    model = (await request.json()).get("model")
    entry = PLANS.get(model)
    if entry is None:
        return Response(unknown_model(model), status_code=404, media_type="application/json")
    if entry["headers"]["Content-Type"] == "application/json":
        return Response(b"".join(entry["writes"]), status_code=entry["status"], headers=entry["headers"])

    async def body() -> AsyncIterator[bytes]:
        for number, data in enumerate(entry["writes"]):
            if number and entry["pause"]:
                await asyncio.sleep(entry["pause"])
            yield data

    return StreamingResponse(body(), status_code=entry["status"], headers=entry["headers"])


app = Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
