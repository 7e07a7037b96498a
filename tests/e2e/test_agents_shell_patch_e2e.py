"""OpenAI's Agents SDK for JavaScript (``@openai/agents``, pinned) runs its own ``shellTool()`` and
``applyPatchTool()`` through toolwire's Responses API under gunicorn (issue 40): before, toolwire dropped both
as hosted tools and the run ended without running anything.

The scripted text model asks for a shell command, then a file created with a V4A diff, then answers; the
script's shell and editor record what the SDK asked them to do, and the model's later requests must carry
their results.
"""

from __future__ import annotations

import json
import subprocess
from typing import Callable

import pytest

from support.agents import npm_library
from support.scripted_upstream import Script, ScriptedUpstream, tool_call_text
from support.server import ToolwireServer

pytestmark = pytest.mark.e2e

AGENTS_SDK = (("@openai/agents", "0.20.0"),)
DIFF = "+print('hello from the patch')\n"
FINAL = "Ran the listing and created hello.py."
#: An agent with the SDK's shell and apply-patch tools, whose shell and editor only record what they are given.
SCRIPT = """
import { Agent, run, shellTool, applyPatchTool, setTracingDisabled } from '@openai/agents';
import { setDefaultOpenAIClient, setOpenAIAPI } from '@openai/agents-openai';
import OpenAI from 'openai';

const [baseURL, model] = process.argv.slice(2);
setTracingDisabled(true);
setDefaultOpenAIClient(new OpenAI({ baseURL, apiKey: 'test', maxRetries: 0 }));
setOpenAIAPI('responses');
const ran = [], edits = [];
const shell = { async run(action) {
  ran.push(action.commands);
  return { output: [{ stdout: 'hello.py\\nREADME.md\\n', stderr: '', outcome: { type: 'exit', exitCode: 0 } }] };
} };
const editor = {
  async createFile(op) { edits.push(op); return { status: 'completed', output: 'created ' + op.path }; },
  async updateFile(op) { edits.push(op); return { status: 'completed' }; },
  async deleteFile(op) { edits.push(op); return { status: 'completed' }; },
};
const agent = new Agent({ name: 'coder', model, instructions: 'You edit files.',
  tools: [shellTool({ shell }), applyPatchTool({ editor })] });
const result = await run(agent, 'List the files, then create hello.py.', { maxTurns: 5 });
console.log(JSON.stringify({ ran, edits, final: result.finalOutput }));
"""


def test_the_agents_sdk_runs_a_command_and_applies_a_patch(upstream: ScriptedUpstream,
                                                           toolwire_server: ToolwireServer) -> None:
    library = npm_library(*AGENTS_SDK)
    script = library / "shell_patch_probe.mjs"
    script.write_text(SCRIPT)
    upstream.enqueue(
        Script(text=tool_call_text("shell", {"commands": ["ls"]}), chunks=5),
        Script(text=tool_call_text("apply_patch", {"type": "create_file", "path": "hello.py", "diff": DIFF})),
        Script(text=FINAL, chunks=4))
    done = subprocess.run(["node", str(script), toolwire_server.v1_url, "scripted-model"], capture_output=True,
                          text=True, timeout=90)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["ran"] == [["ls"]]
    assert result["edits"] == [{"type": "create_file", "path": "hello.py", "diff": DIFF}]
    assert result["final"] == FINAL
    requests = upstream.chat_requests
    assert len(requests) == 3
    offered = requests[0].body["messages"][0]["content"]
    assert "shell" in offered and "apply_patch" in offered
    assert "hello.py\\nREADME.md" in json.dumps(requests[1].body["messages"])  # the command's output
    assert "created hello.py" in json.dumps(requests[2].body["messages"])  # the editor's answer


@pytest.fixture
def toolwire_server(toolwire_factory: Callable[..., ToolwireServer]) -> ToolwireServer:
    return toolwire_factory()
