"""The OpenAI Agents SDK's conversations-session example, as its documentation shows it: an agent whose memory
is an ``OpenAIConversationsSession`` (the Conversations API) answers two turns, the second one needing the first.
Run unchanged against toolwire: the client reads ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` from the environment.
"""

import asyncio

from agents import Agent, OpenAIConversationsSession, Runner


async def main() -> None:
    agent = Agent(name="Assistant", instructions="Reply very concisely.")
    session = OpenAIConversationsSession()

    result = await Runner.run(agent, "What city is the Golden Gate Bridge in?", session=session)
    print(result.final_output)

    result = await Runner.run(agent, "What state is it in?", session=session)
    print(result.final_output)

    items = await session.get_items()
    print(f"{len(items)} items in the session")


if __name__ == "__main__":
    asyncio.run(main())
