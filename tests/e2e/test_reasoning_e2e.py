"""A thinking model's reasoning, end to end: real clients → gunicorn/gevent toolwire → scripted upstream.

The scripted model thinks in ``<think>…</think>`` before it calls a tool, and again before it answers. The
openai SDK's stream helpers, OpenCode (over the AI SDK's OpenAI-compatible provider) and Codex CLI (over the
Responses API) must each show that reasoning as reasoning, never in the answer's text, and still run the tool.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from support.agents import (
    AGENT_TIME_LIMIT,
    AI_SDK,
    agent_env,
    codex_cli,
    codex_home,
    npm_library,
    opencode_run,
    run_agent,
)
from support.scripted_upstream import Script, ScriptedUpstream, tool_call_text

pytestmark = pytest.mark.e2e
FINAL_TEXT = "All done: shell.txt and notes.txt are in place."

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city.",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                           "required": ["city"]}}}
FIRST_THOUGHT = "The user wants Paris; the weather tool answers that."
SECOND_THOUGHT = "The tool said 18 C, sunny."
CALL = tool_call_text("get_weather", {"city": "Paris"})


def thinking_turns(upstream: ScriptedUpstream) -> None:
    upstream.enqueue(Script(text=f"<think>{FIRST_THOUGHT}</think>Let me check.{CALL}", chunks=3),
                     Script(text=f"<think>{SECOND_THOUGHT}</think>It is sunny in Paris.", chunks=4))


def test_openai_chat_stream_helper_and_body_carry_reasoning_content(upstream, toolwire_server, make_openai_client):
    client = make_openai_client(toolwire_server)
    thinking_turns(upstream)
    messages = [{"role": "user", "content": "Weather in Paris?"}]
    with client.chat.completions.stream(model="m", messages=messages, tools=[WEATHER]) as stream:
        final = stream.get_final_completion()
    message = final.choices[0].message
    assert message.model_extra["reasoning_content"] == FIRST_THOUGHT
    assert message.content == "Let me check." and message.tool_calls[0].function.name == "get_weather"
    messages += [message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": message.tool_calls[0].id, "content": "18 C, sunny"}]
    answer = client.chat.completions.create(model="m", messages=messages, tools=[WEATHER]).choices[0].message
    assert (answer.model_extra["reasoning_content"], answer.content) == (SECOND_THOUGHT, "It is sunny in Paris.")
    # The follow-up gave the model back this turn's reasoning before the call it led to.
    shown = "\n".join(m["content"] for m in upstream.chat_requests[1].body["messages"])
    assert f"<think>{FIRST_THOUGHT}</think>" in shown


def test_openai_responses_stream_helper_gets_a_reasoning_item(upstream, toolwire_server, make_openai_client):
    client = make_openai_client(toolwire_server)
    thinking_turns(upstream)
    tools = [{"type": "function", **WEATHER["function"]}]
    with client.responses.stream(model="m", input="Weather in Paris?", tools=tools) as stream:
        kinds = [event.type for event in stream]
        response = stream.get_final_response()
    assert "response.reasoning_text.delta" in kinds
    assert [item.type for item in response.output] == ["reasoning", "message", "function_call"]
    assert response.output[0].content[0].text == FIRST_THOUGHT and response.output_text == "Let me check."
    call = response.output[-1]
    followup = client.responses.create(model="m", previous_response_id=response.id, tools=tools, input=[
        {"type": "function_call_output", "call_id": call.call_id, "output": "18 C, sunny"}])
    assert [item.type for item in followup.output] == ["reasoning", "message"]
    assert followup.output_text == "It is sunny in Paris."


@pytest.mark.time_limit(AGENT_TIME_LIMIT)
def test_opencode_shows_the_reasoning_and_runs_the_tool(workdir: Path, upstream: ScriptedUpstream,
                                                        toolwire_factory) -> None:
    server = toolwire_factory()
    upstream.enqueue(
        Script(text=f"<think>{FIRST_THOUGHT}</think>" + tool_call_text(
            "bash", {"command": "echo toolwire-ok > shell.txt", "description": "Write it"}), chunks=5),
        Script(text=f"<think>{SECOND_THOUGHT}</think>{FINAL_TEXT}", chunks=4),
    )
    result = opencode_run(workdir, server.v1_url, "Write shell.txt.", "--thinking")
    project = workdir / "project"
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}\n{server.log()[-3000:]}"
    assert (project / "shell.txt").read_text() == "toolwire-ok\n"
    events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    reasoning = [e["part"]["text"] for e in events if e.get("type") == "reasoning"]
    texts = [e["part"]["text"] for e in events if e.get("type") == "text"]
    assert reasoning == [FIRST_THOUGHT, SECOND_THOUGHT], result.stdout[-3000:]
    assert texts[-1] == FINAL_TEXT and not any("<think>" in text or FIRST_THOUGHT in text for text in texts)


@pytest.mark.time_limit(AGENT_TIME_LIMIT)
def test_codex_cli_shows_the_reasoning_and_completes_the_task(workdir: Path, upstream: ScriptedUpstream,
                                                              toolwire_factory) -> None:
    """Codex shows raw reasoning (``reasoning_text``) in its transcript with ``show_raw_agent_reasoning``."""
    codex = codex_cli()
    home, project = codex_home(workdir, toolwire_factory().v1_url)
    config = home / ".codex" / "config.toml"
    config.write_text("show_raw_agent_reasoning = true\n" + config.read_text())
    upstream.enqueue(
        Script(text=f"<think>{FIRST_THOUGHT}</think>" + tool_call_text("exec_command", {"cmd": "echo ok > shell.txt"}),
               chunks=6),
        Script(text=f"<think>{SECOND_THOUGHT}</think>{FINAL_TEXT}", chunks=4),
    )
    result = run_agent([str(codex), "exec", "--skip-git-repo-check", "--ephemeral", "-m", "gpt-5.5",
                        "--sandbox", "workspace-write", "Create shell.txt."],
                       project, agent_env(home, CODEX_HOME=str(home / ".codex")))
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    assert (project / "shell.txt").read_text() == "ok\n"
    assert result.stdout.strip() == FINAL_TEXT
    transcript = result.stderr  # Codex's human-readable transcript: reasoning, then the command, then the answer
    assert transcript.index(FIRST_THOUGHT) < transcript.index("echo ok > shell.txt") < transcript.index(SECOND_THOUGHT)
    assert "<think>" not in transcript
    # Codex sent the reasoning item back; toolwire gave it to the model within the turn.
    second = "\n".join(m["content"] for m in upstream.chat_requests[1].body["messages"])
    assert f"<think>{FIRST_THOUGHT}</think>" in second


AI_SDK_SCRIPT = """
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateText, jsonSchema, streamText, tool } from 'ai';

const provider = createOpenAICompatible({ name: 'toolwire', baseURL: process.argv[2], apiKey: 'unused' });
const request = {
  model: provider('m'), prompt: 'Weather in Paris?',
  tools: { get_weather: tool({ description: 'Current weather for a city.', inputSchema: jsonSchema(
    { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }) }) },
};
const summary = async (result) => ({ reasoning: await result.reasoningText, text: await result.text,
                                     calls: (await result.toolCalls).map((call) => [call.toolName, call.input]) });
const streamed = streamText(request);
const kinds = [];
for await (const part of streamed.fullStream) kinds.push(part.type);
console.log(JSON.stringify({ stream: { ...(await summary(streamed)), kinds }, body: await summary(await generateText(request)) }));
"""


@pytest.mark.parametrize("framing", ["chunked", "HTTP/1.0"])  # HTTP/1.0: a back end whose bodies end at the close
def test_the_ai_sdk_reads_reasoning_as_reasoning(tmp_path, upstream, toolwire_server, framing: str) -> None:
    library = npm_library(*AI_SDK)
    script = library / "reasoning_probe.mjs"
    script.write_text(AI_SDK_SCRIPT)
    upstream.framing = framing
    for _ in range(2):  # streamed, then not
        upstream.enqueue(Script(text=f"<think>{FIRST_THOUGHT}</think>Let me check.{CALL}", chunks=3))
    result = subprocess.run(["node", str(script), toolwire_server.v1_url], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-3000:]
    answers = json.loads(result.stdout)
    for answer in (answers["stream"], answers["body"]):
        assert answer["reasoning"] == FIRST_THOUGHT and answer["text"] == "Let me check."
        assert answer["calls"] == [["get_weather", {"city": "Paris"}]]
    kinds = answers["stream"]["kinds"]
    assert kinds.index("reasoning-delta") < kinds.index("text-delta") < kinds.index("tool-call")
