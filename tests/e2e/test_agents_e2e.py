"""Real coding agents against toolwire: Codex CLI over /v1/responses, OpenCode over /v1/chat/completions.

Each agent is the pinned npm release (installed once into a cache outside the
repo, see ``support.agents``) with its default configuration plus one custom
model provider pointing at toolwire and the offline switches. toolwire runs
under gunicorn/gevent in front of the scripted upstream, which plays the
model's text replies step by step: a shell command, a file edit (for Codex:
``apply_patch`` as a freeform ``custom`` tool call), reading the file back,
and a final answer. The tests check the files on disk, the final text, and
what toolwire told the model about the agent's tools. Each agent runs twice: with a chunked back end, and
with one that ends every body by closing the connection (HTTP/1.0).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from support.agents import AGENT_TIME_LIMIT, agent_env, codex_cli, codex_home, opencode_run, run_agent
from support.scripted_upstream import Script, ScriptedUpstream, tool_call_text

FINAL_TEXT = "All done: shell.txt and notes.txt are in place."
PATCH = """*** Begin Patch
*** Add File: notes.txt
+written by apply_patch
+second line
*** End Patch"""
pytestmark = pytest.mark.time_limit(AGENT_TIME_LIMIT)  # each agent run has its own subprocess timeout too

#: The back end's body framing: chunked, and ended by the close as Python's http.server sends it (issue 24).
BACK_END_FRAMINGS = ["chunked", "HTTP/1.0"]


def codex_exec(home: Path, project: Path, *model: str) -> subprocess.CompletedProcess[str]:
    command = [str(codex_cli()), "exec", "--skip-git-repo-check", "--ephemeral", "--json", *model,
               # Codex's own sandbox, writable in the project only (exec's default is read-only)
               "--sandbox", "workspace-write", "Create the two files, then check notes.txt."]
    return run_agent(command, project, agent_env(home, CODEX_HOME=str(home / ".codex")))


def manifest_names(request: dict) -> set[str]:
    """The tool names toolwire's system prompt offered the model."""
    manifest = request["messages"][0]["content"].split("## Manifest\n")[1].split("\n## How to call")[0]
    return {line.removeprefix("### ") for line in manifest.splitlines() if line.startswith("### ")}


@pytest.mark.parametrize("framing", BACK_END_FRAMINGS)
def test_codex_exec_runs_a_command_edits_with_apply_patch_and_reads_back(
        workdir: Path, upstream: ScriptedUpstream, toolwire_factory, framing: str) -> None:
    codex_cli()  # install before the clock starts
    upstream.framing = framing
    server = toolwire_factory()
    home, project = codex_home(workdir, server.v1_url)
    upstream.enqueue(
        Script(text="First the shell.\n" + tool_call_text("exec_command", {"cmd": "echo toolwire-ok > shell.txt"})),
        Script(text=f'<custom_tool_call name="apply_patch">\n{PATCH}\n</custom_tool_call>', chunks=7),
        Script(text=tool_call_text("exec_command", {"cmd": "cat notes.txt"})),
        Script(text=FINAL_TEXT),
    )
    result = codex_exec(home, project, "-m", "gpt-5.5")
    requests = [e.body for e in upstream.chat_requests]
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}\n{server.log()[-3000:]}"
    assert (project / "shell.txt").read_text() == "toolwire-ok\n"
    assert (project / "notes.txt").read_text() == "written by apply_patch\nsecond line\n"
    events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    messages = [e["item"]["text"] for e in events
                if e.get("type") == "item.completed" and e["item"].get("type") == "agent_message"]
    assert messages[-1] == FINAL_TEXT
    assert len(requests) == 4
    system = requests[0]["messages"][0]["content"]
    # Codex's client tool_search and its freeform apply_patch are offered; its hosted web_search is not.
    offered = manifest_names(requests[0])
    assert {"exec_command", "apply_patch", "tool_search"} <= offered and "web_search" not in offered
    # apply_patch is taught as a custom tool, with its lark grammar.
    assert "### apply_patch\n" in system and "Input: text in the lark grammar below" in system
    assert "begin_patch" in system
    # The patch went back to the model as the custom call it wrote, and the file content came back as a result.
    last = "\n".join(m["content"] for m in requests[3]["messages"])
    assert f'<custom_tool_call name="apply_patch">\n{PATCH}\n</custom_tool_call>' in last
    assert "written by apply_patch" in last.split(PATCH)[-1]


def test_codex_with_its_fallback_model_metadata_gets_its_namespace_tools(
        workdir: Path, upstream: ScriptedUpstream, toolwire_factory) -> None:
    """A model name Codex does not know: it sends the multi-agent namespace and web_search (issue's first 400)."""
    codex_cli()
    home, project = codex_home(workdir, toolwire_factory().v1_url)
    upstream.enqueue(Script(text=tool_call_text("exec_command", {"cmd": "echo toolwire-ok > shell.txt"})),
                     Script(text=FINAL_TEXT))
    result = codex_exec(home, project, "-m", "scripted-model")
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    assert (project / "shell.txt").read_text() == "toolwire-ok\n"
    offered = manifest_names(upstream.chat_requests[0].body)
    assert {"exec_command", "multi_agent_v1__spawn_agent", "multi_agent_v1__wait_agent"} <= offered
    assert "web_search" not in offered


@pytest.mark.parametrize("framing", BACK_END_FRAMINGS)
def test_opencode_runs_a_command_writes_edits_and_reads_a_file_over_chat_completions(
        workdir: Path, upstream: ScriptedUpstream, toolwire_factory, framing: str) -> None:
    upstream.framing = framing
    server = toolwire_factory()
    project = workdir / "project"
    notes = project / "notes.txt"
    upstream.enqueue(
        Script(text=tool_call_text("bash", {"command": "echo toolwire-ok > shell.txt", "description": "Write it"})),
        Script(text=tool_call_text("write", {"filePath": str(notes), "content": "written by write\n"}), chunks=5),
        Script(text=tool_call_text("edit", {"filePath": str(notes), "oldString": "written by write",
                                            "newString": "edited by edit"})),
        Script(text=tool_call_text("read", {"filePath": str(notes)})),
        Script(text=FINAL_TEXT, chunks=4),
    )
    result = opencode_run(workdir, server.v1_url, "Create the two files, then check notes.txt.")
    requests = [e.body for e in upstream.chat_requests]
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}\n{server.log()[-3000:]}"
    assert (project / "shell.txt").read_text() == "toolwire-ok\n"
    assert notes.read_text() == "edited by edit\n"
    events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    used = [e["part"]["tool"] for e in events if e.get("type") == "tool_use"]
    assert used == ["bash", "write", "edit", "read"]
    assert all(e["part"]["state"]["status"] == "completed" for e in events if e.get("type") == "tool_use")
    assert [e["part"]["text"] for e in events if e.get("type") == "text"][-1] == FINAL_TEXT
    assert len(requests) == 5
    assert {"bash", "edit", "read", "write"} <= manifest_names(requests[0])
    assert "edited by edit" in requests[4]["messages"][-1]["content"]
