"""The OpenAI Agents SDK's hosted MCP tool, as its documentation shows it: an agent whose ``HostedMCPTool`` names a
remote MCP server the Responses API lists and calls. Run unchanged against toolwire (``OPENAI_BASE_URL``,
``OPENAI_API_KEY``); ``MCP_URL`` is the server, ``MCP_APPROVAL`` ``never`` or ``always`` (approved by the callback).
"""

import asyncio
import os

from agents import Agent, HostedMCPTool, MCPToolApprovalFunctionResult, MCPToolApprovalRequest, Runner


def approve(request: MCPToolApprovalRequest) -> MCPToolApprovalFunctionResult:
    print(f"approval asked for {request.data.name}")
    return {"approve": True}


async def main() -> None:
    approval = os.environ["MCP_APPROVAL"]
    agent = Agent(name="Assistant", model=os.environ.get("MODEL", "gpt-4.1"), tools=[HostedMCPTool(
        tool_config={"type": "mcp", "server_label": "calc", "server_url": os.environ["MCP_URL"],
                     "require_approval": approval},
        on_approval_request=approve if approval == "always" else None)])
    result = await Runner.run(agent, "What is 2 + 3? Use the calculator.")
    for item in result.new_items:
        print("item", item.type)
    print("final:", result.final_output)


if __name__ == "__main__":
    asyncio.run(main())
