"""Codex CLI with its built-in ``openai`` provider pointed at toolwire compacts a long session (issue 40): Codex
0.169's remote compaction (``remote_compaction_v2``) is a streamed ``POST /v1/responses`` whose input ends with
a ``compaction_trigger`` item and whose output must be one ``compaction`` item; toolwire summarises the session
there, and the session goes on with the summary in place of its turns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.responses.compaction import SUMMARY_HEADING
from support.agents import AGENT_TIME_LIMIT, CODEX_OFFLINE, agent_env, codex_cli, run_agent
from support.scripted_upstream import Script, ScriptedUpstream, tool_call_text

pytestmark = pytest.mark.time_limit(AGENT_TIME_LIMIT)

SUMMARY = "The user asked for one.txt; echo wrote step-one into it. Next: say it is done."
FINAL_TEXT = "Done after the compaction."
#: What the back end reports of the first answer: past the session's auto-compaction limit.
LONG_SESSION = {"prompt_tokens": 60000, "completion_tokens": 100, "total_tokens": 60100}


def openai_provider_config(base_url: str) -> str:
    """Codex's built-in ``openai`` provider (no provider of its own) with toolwire as its base URL, a low
    auto-compaction limit, and the offline switches."""
    return f"""\
openai_base_url = "{base_url}"
model_auto_compact_token_limit = 20000
{CODEX_OFFLINE}"""


def test_codex_compacts_a_long_session_through_toolwire_and_goes_on(workdir: Path, upstream: ScriptedUpstream,
                                                                     toolwire_factory) -> None:
    codex_cli()  # installed before the clock starts
    server = toolwire_factory()
    home, project = workdir / "home", workdir / "project"
    (home / ".codex").mkdir(parents=True)
    project.mkdir()
    (home / ".codex" / "config.toml").write_text(openai_provider_config(server.v1_url))
    upstream.enqueue(
        Script(text=tool_call_text("exec_command", {"cmd": "echo step-one > one.txt"}), usage=LONG_SESSION),
        Script(text=SUMMARY),
        Script(text=FINAL_TEXT),
    )
    command = [str(codex_cli()), "exec", "--skip-git-repo-check", "--ephemeral", "--json", "-m", "gpt-5.5",
               "--sandbox", "workspace-write", "Write one.txt, then say you are done."]
    result = run_agent(command, project, agent_env(home, CODEX_HOME=str(home / ".codex"), OPENAI_API_KEY="sk-test"))
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}\n{server.log()[-3000:]}"
    assert (project / "one.txt").read_text() == "step-one\n"
    events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    messages = [e["item"]["text"] for e in events
                if e.get("type") == "item.completed" and e["item"].get("type") == "agent_message"]
    assert messages[-1] == FINAL_TEXT
    requests = [e.body for e in upstream.chat_requests]
    assert len(requests) == 3
    summarising = requests[1]["messages"]
    assert "Write a summary of the conversation" in summarising[-1]["content"]
    assert "echo step-one > one.txt" in json.dumps(summarising)  # the session's call shown to summarise
    # the session goes on from the summary (the compaction item Codex carried back), not from the turns
    after = json.dumps(requests[2]["messages"])
    assert SUMMARY_HEADING in after and SUMMARY in after
