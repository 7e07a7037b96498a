"""Real Gemini CLI (npm ``@google/gemini-cli``, pinned, installed by the test setup) headless against
toolwire's ``/v1beta`` under gunicorn/gevent, in front of a text-only model (prompt mode) and of a back end
that has tools (native mode).

The scripted upstream plays the model's text replies turn by turn: a shell command through Gemini CLI's
``run_shell_command``, a file written with ``write_file``, the file read back with ``read_file``, and a final
answer. The test checks the files on disk, the answer Gemini CLI reports, that its tools were taught to the
model, and that every tool result reached the model in the transcript.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pytest

from support.agents import GEMINI_CLI, gemini_cli_env, npm_tool, run_agent
from support.native_upstream import native_frames
from support.scripted_upstream import Script, ScriptedUpstream, tool_call_text

pytestmark = pytest.mark.e2e

KEY = "sk-gemini-cli"
MODEL = "gemini-2.5-flash"
FINAL = "Done: the shell printed toolwire-ok and notes.txt reads 'written by write_file'."
PROMPT = "Run echo, write notes.txt, read it back, and tell me what both said."


@pytest.fixture(autouse=True)
def e2e_time_limit() -> Iterator[None]:
    """Gemini CLI takes longer than the e2e suite's 20 s limit; its run has its own timeout instead."""
    yield


def gemini_turns(project: Path, mode: str) -> list[Script]:
    """The model's four replies: the shell, write_file, read_file (each a call in toolwire's taught format, or
    the back end's own call in native mode), then the answer."""
    notes = str(project / "notes.txt")
    calls = [("run_shell_command", {"command": "echo toolwire-ok | tee shell.txt", "description": "Print a marker"}),
             ("write_file", {"file_path": notes, "content": "written by write_file\n"}),
             ("read_file", {"file_path": notes})]
    if mode == "native":
        turns = [Script(tool_calls=native_frames([call], chunk=9), finish_reason="tool_calls") for call in calls]
    else:
        turns = [Script(text=tool_call_text(*call), chunks=7) for call in calls]
    return [*turns, Script(text=FINAL, chunks=7)]


@pytest.mark.parametrize("mode", ["prompt", "native"])
def test_gemini_cli_runs_a_command_writes_and_reads_a_file_and_answers(
        project: Path, upstream: ScriptedUpstream, toolwire_factory, mode: str) -> None:
    gemini = npm_tool(*GEMINI_CLI)  # install before the clock starts
    server = toolwire_factory(TOOLWIRE_API_KEYS=KEY, TOOLWIRE_MAX_OUTPUT_TOKENS="8192", TOOLWIRE_TOOL_MODE=mode)
    upstream.enqueue(*gemini_turns(project, mode))
    command = [str(gemini), "-p", PROMPT, "--yolo", "--output-format", "json", "-m", MODEL]
    result = run_agent(command, project, gemini_cli_env(project.parent / "home", server.url, KEY, MODEL))
    requests = [e.body for e in upstream.chat_requests]
    debug = f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}\n{server.log()[-4000:]}\n" + \
        json.dumps([r.get("messages", [])[-1:] for r in requests])[-3000:]
    assert result.returncode == 0, debug
    assert (project / "shell.txt").read_text() == "toolwire-ok\n", debug
    assert (project / "notes.txt").read_text() == "written by write_file\n", debug
    answer = json.loads(result.stdout[result.stdout.index("{"):])
    assert answer["response"].strip() == FINAL, debug

    assert len(requests) == 4 and upstream.pending == 0, debug
    offered = json.dumps(requests[0]["tools"]) if mode == "native" else requests[0]["messages"][0]["content"]
    for tool in ("run_shell_command", "write_file", "read_file"):
        assert tool in offered  # Gemini CLI's functions: the back end's tools, or taught in the prompt
    last = json.dumps(requests[3]["messages"])
    assert "toolwire-ok" in last and "written by write_file" in last
