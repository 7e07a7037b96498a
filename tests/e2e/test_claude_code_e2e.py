"""Real Claude Code (npm ``@anthropic-ai/claude-code``, pinned, installed by the test setup) headless against
toolwire's ``/v1/messages`` under gunicorn/gevent, in front of a text-only model in prompt mode, and in front
of the real Codex app-server (whose scripted model also writes only text).

The scripted upstream plays the model's text replies turn by turn: a shell command through Claude Code's
``Bash`` tool, a file written with ``Write``, the file read back with ``Read``, and a final answer. The test
checks the files on disk, the answer Claude Code reports, what toolwire told the model about Claude Code's
tools, and that every tool result reached the model in the transcript.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pytest

from support.agents import CLAUDE_CODE, claude_code_env, npm_tool, run_agent
from support.codex_binary import ensure_codex
from support.responses_model import ModelScript, ResponsesModelServer
from support.scripted_upstream import Script, ScriptedUpstream, tool_call_text
from support.server import ToolwireServer

pytestmark = pytest.mark.e2e

KEY = "sk-claude-code"
FINAL = "Done: the shell printed toolwire-ok and notes.txt reads 'written by Write'."
PROMPT = "Run echo, write notes.txt, read it back, and tell me what both said."


@pytest.fixture(autouse=True)
def e2e_time_limit() -> Iterator[None]:
    """Claude Code takes longer than the e2e suite's 20 s limit; its run has its own timeout instead."""
    yield


def claude_turns(project: Path) -> list[str]:
    """The model's four replies: Bash (after some reasoning: a thinking block, as Claude Code runs with
    ``--verbose``), Write, Read (each a call in toolwire's taught format), then the answer."""
    notes = str(project / "notes.txt")
    return [
        "<think>The shell first, then the file.</think>I'll start with the shell.\n" + tool_call_text(
            "Bash", {"command": "echo toolwire-ok | tee shell.txt", "description": "Print and save a marker"}),
        tool_call_text("Write", {"file_path": notes, "content": "written by Write\n"}),
        tool_call_text("Read", {"file_path": notes}),
        FINAL,
    ]


def run_claude(project: Path, server: ToolwireServer) -> None:
    """``claude -p`` in ``project``; then the work on disk, the answer it reports and its four requests
    (each a stream: it falls back to plain requests when a stream is not what it expects) are checked."""
    claude = npm_tool(*CLAUDE_CODE)
    offset = len(server.log())
    command = [str(claude), "-p", PROMPT, "--output-format", "stream-json", "--verbose",
               "--dangerously-skip-permissions"]
    result = run_agent(command, project, claude_code_env(project.parent / "home", server.url, KEY))
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}\n{server.log()[-3000:]}"
    events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert (project / "shell.txt").read_text() == "toolwire-ok\n"
    assert (project / "notes.txt").read_text() == "written by Write\n"
    [outcome] = [e for e in events if e.get("type") == "result"]
    assert outcome["is_error"] is False and outcome["result"] == FINAL
    blocks = [block for e in events if e.get("type") == "assistant" for block in e["message"]["content"]]
    assert [block["name"] for block in blocks if block["type"] == "tool_use"] == ["Bash", "Write", "Read"]
    assert [block["thinking"] for block in blocks if block["type"] == "thinking"] == ["The shell first, then the file."]
    access = [json.loads(line) for line in server.log()[offset:].splitlines() if '"toolwire.access"' in line]
    assert [(a["route"], a["stream"], a["status"]) for a in access] == [("/v1/messages", True, 200)] * 4


def test_claude_code_runs_a_command_writes_and_reads_a_file_and_answers(
        project: Path, upstream: ScriptedUpstream, toolwire_factory) -> None:
    npm_tool(*CLAUDE_CODE)  # install before the clock starts
    server = toolwire_factory(TOOLWIRE_API_KEYS=KEY, TOOLWIRE_MAX_OUTPUT_TOKENS="8192",
                              TOOLWIRE_MODEL_MAP=json.dumps({"claude-opus-5-5": "scripted-model"}))
    upstream.enqueue(*(Script(text=text, chunks=7) for text in claude_turns(project)))
    run_claude(project, server)

    requests = [e.body for e in upstream.chat_requests]
    assert len(requests) == 4 and upstream.pending == 0
    assert {r["model"] for r in requests} == {"scripted-model"}  # claude-opus-5-5 through TOOLWIRE_MODEL_MAP
    assert {r["max_tokens"] for r in requests} == {8192}  # Claude Code's 128000, clamped
    system = requests[0]["messages"][0]["content"]
    for tool in ("Bash", "Read", "Write", "Edit"):
        assert f"\n### {tool}\n" in system  # Claude Code's tools, in the manifest
    assert "Primary working directory" in system  # its mid-conversation system turn, moved to the front
    assert "The shell first" not in json.dumps(requests[1:])  # its thinking block came back: not shown again
    last = "\n".join(m["content"] for m in requests[3]["messages"][1:])
    assert "toolwire-ok" in last.split("Tool result for Bash")[1]
    assert "written by Write" in last.split("Tool result for Read")[1]


def test_claude_code_drives_the_codex_app_server_as_its_back_end(
        project: Path, toolwire_factory, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Claude Code → toolwire → the real ``codex app-server`` → a scripted Responses-API model: Codex's model,
    which only writes text, does Claude Code's work through toolwire's parsed calls."""
    codex, why = ensure_codex()
    if codex is None:
        pytest.skip(f"SKIPPED LOUDLY: {why} for the Codex back end (CI has npm and runs it)")
    npm_tool(*CLAUDE_CODE)
    with ResponsesModelServer() as model:
        server = toolwire_factory(
            TOOLWIRE_UPSTREAM_KIND="codex", TOOLWIRE_CODEX_COMMAND=str(codex),
            TOOLWIRE_CODEX_HOME=str(tmp_path_factory.mktemp("user-codex-home")),
            TOOLWIRE_CODEX_WORK_DIR=str(tmp_path_factory.mktemp("codex-work")),
            TOOLWIRE_CODEX_PROVIDER_URL=model.v1_url, TOOLWIRE_CODEX_PROVIDER_API_KEY="provider-key",
            TOOLWIRE_DEFAULT_UPSTREAM_MODEL="scripted-model", TOOLWIRE_API_KEYS=KEY)
        model.enqueue(*(ModelScript(text=text, chunk_chars=6) for text in claude_turns(project)))
        run_claude(project, server)
        assert len(model.exchanges) == 4
        developer, *turns = model.exchanges[3].input_texts()
        assert "Bash" in developer[1] and "Primary working directory" in developer[1]
        history = "\n".join(text for _, text in turns)
        assert "toolwire-ok" in history.split("Tool result for Bash")[1]
        assert "written by Write" in history.split("Tool result for Read")[1]
