"""Native mode in front of llama-cpp-python's ``chatml-function-calling`` (issue 38): that server answers a
streamed request with tools by 200 and an empty body, which toolwire always sends (it asks every back end for a
stream); native mode answered 502 ``upstream_empty_stream``. Now such a back end is asked again in prompt mode
(and stays so for the fallback window), and every answer completes."""

from __future__ import annotations

from typing import Callable, Iterator

import pytest

from support.endpoints import CHAT, RESPONSES, Endpoint, send
from support.llama_server import LlamaServer
from support.real_model import WEATHER
from support.server import ToolwireServer

pytestmark = pytest.mark.e2e

TEST_TIME_LIMIT = 180.0
QUESTIONS = ("What's the weather in Paris?", "Tell me about cats.")


@pytest.fixture(scope="module")
def function_calling() -> Iterator[LlamaServer]:
    with LlamaServer("smollm2", chat_format="chatml-function-calling") as server:
        yield server


@pytest.mark.parametrize("endpoint", [CHAT, RESPONSES], ids=["chat", "responses"])
@pytest.mark.parametrize("stream", [False, True])
def test_native_mode_answers_in_front_of_chatml_function_calling(
        function_calling: LlamaServer, toolwire_factory: Callable[..., ToolwireServer], endpoint: Endpoint,
        stream: bool) -> None:
    toolwire = toolwire_factory(TOOLWIRE_UPSTREAM_URL=function_calling.v1_url, TOOLWIRE_TOOL_MODE="native",
                                TOOLWIRE_UPSTREAM_READ_TIMEOUT="100")
    for question in QUESTIONS:
        body = endpoint.body(question, [WEATHER], stream=stream)
        body.update(model="smollm2", temperature=0)
        outcome = send(toolwire.v1_url, endpoint, body, within=120)
        assert outcome.kind == "completed", (question, outcome.error, outcome.body[-600:])
