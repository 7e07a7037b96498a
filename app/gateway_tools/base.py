"""What a gateway tool is to the pipeline: a name the model is taught, a schema, and a ``run``.

A surface that offers gateway tools builds a :class:`GatewayToolset` for the request and hands it to the
pipeline (``Generation.gateway``); :class:`~app.pipeline.gateway_loop.GatewayLoop` runs the calls the model makes
of them and tells the surface's encoder with the events below, which it turns into its own items (Responses:
``mcp_call``; Messages: ``server_tool_use`` and its result block).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Mapping

from statemachine import ToolSpec

from ..gateway_settings import GatewaySettings

#: Appended to a result cut at the toolset's ``max_result_chars``.
CLIPPED = "\n[… the rest of the result was cut: it passed the gateway's size limit]"


@dataclass(frozen=True, slots=True)
class ToolRun:
    """What one run of a gateway tool gave.

    Fields:
        output: the text given back to the model (also on an error: what the model is told went wrong).
        error: why the run failed (``None``: it succeeded).
        payload: what the surface's encoder needs for its own items (MCP content, search results…).
    """

    output: str
    error: str | None = None
    payload: Any = None


class GatewayTool:
    """One tool toolwire runs. Subclasses implement :meth:`run`.

    Args:
        name: the name the model is taught and calls (kept apart from the client's tool names, e.g. prefixed by
            an MCP server's label).
        description: what the model is told the tool does.
        parameters: the JSON schema of its arguments.
        needs_approval: ask the client before each call (MCP ``require_approval``): the loop ends the response
            with :class:`GatewayApprovalRequested` instead of running it.
        origin: what the surface needs to say where the tool came from (an MCP server's label and the tool's
            own name…).
        kind: what runs it, for metrics and the access log (``mcp``, ``web_search``…; never a client's word).
    """

    __slots__ = ("name", "description", "parameters", "needs_approval", "origin", "kind")

    def __init__(self, name: str, description: str, parameters: Mapping[str, Any], *,
                 needs_approval: bool = False, origin: Any = None, kind: str = "gateway"):
        self.kind = kind
        self.name = name
        self.description = description
        self.parameters = parameters
        self.needs_approval = needs_approval
        self.origin = origin

    def spec(self) -> ToolSpec:
        """The tool as the model is offered it."""
        return ToolSpec(self.name, self.description, self.parameters)

    def close(self) -> None:
        """Let what the tool holds for its request go (a connection); the response is over. Idempotent."""

    def run(self, arguments: dict[str, Any], deadline: float) -> ToolRun:
        """Run one call with ``arguments`` (a JSON object), done by ``deadline`` (a ``time.monotonic()`` time; the
        loop abandons a run past it). A failure the model should hear about is a :class:`ToolRun` with
        ``error``; an exception is one too (the loop catches it)."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class GatewayToolset:
    """The gateway tools of one request and the limits of one response.

    Fields:
        tools: the tools by the name the model is taught.
        max_calls: calls run per response (each generation's calls counted together); past it a call is not
            run and the model is told so, and the next generation is offered no gateway tool.
        max_result_chars: most characters of a result the model gets (the rest cut, :data:`CLIPPED`).
        timeout_seconds: most seconds one call may take (and never past the request's own time limit).
    """

    tools: Mapping[str, GatewayTool]
    max_calls: int = 8
    max_result_chars: int = 20_000
    timeout_seconds: float = 30.0

    @classmethod
    def limited(cls, tools: list[GatewayTool], settings: GatewaySettings) -> GatewayToolset:
        """``tools`` under the operator's limits (``gateway_*``)."""
        return cls({tool.name: tool for tool in tools}, max_calls=settings.gateway_max_calls,
                   max_result_chars=settings.gateway_max_result_chars,
                   timeout_seconds=settings.gateway_timeout_seconds)

    def close(self) -> None:
        """Close every tool (:meth:`GatewayTool.close`): the response is over."""
        for tool in self.tools.values():
            tool.close()

    def specs(self) -> list[ToolSpec]:
        """The tools as the model is offered them."""
        return [tool.spec() for tool in self.tools.values()]

    def deadline(self, request_deadline: float | None) -> float:
        """The ``time.monotonic()`` time a call started now must end by."""
        own = time.monotonic() + self.timeout_seconds
        return own if request_deadline is None else min(own, request_deadline)

    def clipped(self, run: ToolRun) -> ToolRun:
        """``run`` with its output cut to :attr:`max_result_chars`."""
        if len(run.output) <= self.max_result_chars:
            return run
        return ToolRun(run.output[:self.max_result_chars] + CLIPPED, run.error, run.payload)


@dataclass(frozen=True, slots=True)
class GatewayCallStarted:
    """The model called a gateway tool; the gateway runs it now (the call was never sent to the client).

    Fields:
        call_id: the call's id (``call_…``, as the core gave it).
        tool: the tool called.
        arguments: the call's arguments, JSON text as the model wrote them (canonical).
    """

    call_id: str
    tool: GatewayTool
    arguments: str


@dataclass(frozen=True, slots=True)
class GatewayCallFinished:
    """A gateway tool's call ran (or failed, or was refused by a limit): ``run`` is what the model was given.

    Fields:
        call_id: the call's id, as in its :class:`GatewayCallStarted`.
        tool: the tool called.
        arguments: the call's arguments (JSON text).
        run: what it gave (``run.error`` set on a failure).
        seconds: how long it ran.
    """

    call_id: str
    tool: GatewayTool
    arguments: str
    run: ToolRun
    seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class GatewayApprovalRequested:
    """The model called a gateway tool that needs the client's approval: it was not run, and the response ends
    (the client answers on its next request; Responses: ``mcp_approval_request`` / ``mcp_approval_response``).

    Fields:
        call_id: the call's id.
        tool: the tool called.
        arguments: the call's arguments (JSON text).
    """

    call_id: str
    tool: GatewayTool
    arguments: str


#: What the loop yields beside the core's events, for the surface's encoder.
GatewayEvent = GatewayCallStarted | GatewayCallFinished | GatewayApprovalRequested
