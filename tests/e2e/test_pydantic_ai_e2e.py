"""pydantic-ai's agent loop against toolwire under gunicorn: it calls a Python tool, gets the result back to the
model, and returns the model's final answer, over Chat Completions and the Responses API, with a back end that
frames its bodies in chunks and one that ends them by closing the connection (issue 24: every agent failed
there, although HTTP allows it).
"""

from __future__ import annotations

import pytest
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.openai import OpenAIProvider

from support.scripted_upstream import Script, ScriptedUpstream, tool_call_text

pytestmark = pytest.mark.e2e

FINAL = "It is 18 C and sunny in Paris."


@pytest.mark.parametrize("framing", ["chunked", "HTTP/1.0"])
@pytest.mark.parametrize("model_class", [OpenAIChatModel, OpenAIResponsesModel], ids=["chat", "responses"])
def test_the_agent_runs_its_tool_and_answers(upstream: ScriptedUpstream, toolwire_server, framing: str,
                                             model_class: type) -> None:
    upstream.framing = framing
    upstream.enqueue(Script(text="Let me look.\n" + tool_call_text("get_weather", {"city": "Paris"}), chunks=6),
                     Script(text=FINAL, chunks=5))
    model = model_class("scripted-model", provider=OpenAIProvider(base_url=toolwire_server.v1_url, api_key="unused"))
    agent = Agent(model)
    asked: list[str] = []

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The current weather in a city."""
        asked.append(city)
        return "18 C, sunny"

    result = agent.run_sync("What is the weather in Paris?")
    assert asked == ["Paris"]
    assert result.output == FINAL
    # The tool's result went back to the model as the transcript of the next request.
    second = "\n".join(str(m.get("content")) for m in upstream.chat_requests[1].body["messages"])
    assert "18 C, sunny" in second
