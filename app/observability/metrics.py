"""Prometheus metrics (house style 8.5) and their exposition.

Under gunicorn, ``app/gunicorn.conf.py`` exports ``PROMETHEUS_MULTIPROC_DIR`` before
the workers start, so every worker writes its values there and :func:`exposition`
aggregates all of them. Without it (tests, an embedding host) the process's
default registry is served.

Everything is updated once per request or per choice (see :mod:`app.observability.record`),
never per token.
"""

from __future__ import annotations

import os
import re
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client import multiprocess

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
# The metrics below write into a named multiprocess directory as soon as they are made, in every process that
# imports the app (`toolwire serve` before it runs gunicorn, the settings check gunicorn's master runs before
# it makes the directory): a directory not made yet was a traceback at start.
if os.environ.get(MULTIPROC_ENV):
    os.makedirs(os.environ[MULTIPROC_ENV], exist_ok=True)

# LLM requests run from milliseconds (errors) to minutes (long generations).
_DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
_TTFT_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

REQUESTS = Counter("toolwire_requests_total", "API requests answered", ["route", "status"])
REQUEST_OUTCOMES = Counter("toolwire_request_outcomes_total",
                           "API requests by how their response ended: completed, client_gone, or the error code "
                           "(of an error response, a stream's error frame or response.failed)", ["route", "outcome"])
REQUEST_DURATION = Histogram("toolwire_request_duration_seconds",
                             "From the request's arrival to its body's end (streams included)", ["route"],
                             buckets=_DURATION_BUCKETS)
TIME_TO_FIRST_TOKEN = Histogram("toolwire_time_to_first_token_seconds",
                                "From the request's arrival to the first parsed output", ["model"],
                                buckets=_TTFT_BUCKETS)
STREAMS_IN_FLIGHT = Gauge("toolwire_streams_in_flight", "SSE responses being sent", multiprocess_mode="livesum")
TOOL_CALLS = Counter("toolwire_tool_calls_total",
                     "Tool calls by outcome: emitted (sent complete and valid), repaired (a repair made to "
                     "an emitted call), rejected (a block not sent as a call), failed (a sent call that "
                     "ended invalid or cut, or a fail policy)", ["model", "outcome"])
FSM_TRANSITIONS = Counter("toolwire_fsm_transitions_total", "Per-choice state machine transitions",
                          ["source", "dest"])
CLIENT_DISCONNECTS = Counter("toolwire_client_disconnects_total", "Streams the client left before their end")
DROPPED_TOOLS = Counter("toolwire_dropped_tools_total",
                        "Request tools not offered to the model (hosted tools it cannot run), by type", ["type"])
STORE_WRITE_FAILURES = Counter("toolwire_store_write_failures_total",
                               "Responses answered with store: true that the response store failed to keep")
TOKEN_COUNT_ESTIMATES = Counter("toolwire_token_count_estimates_total",
                                "Token counts (count_tokens, input_tokens) answered with the estimate because the "
                                "back end's tokenizer could not be used, by reason", ["reason"])
UPSTREAM_REQUESTS = Counter("toolwire_upstream_requests_total",
                            "Generations by the back end they were routed to and how their response ended "
                            "(as toolwire_request_outcomes_total)", ["upstream", "outcome"])
UPSTREAM_ERRORS = Counter("toolwire_upstream_errors_total", "Upstream failures by kind", ["kind"])
TOOL_MODE_FALLBACKS = Counter("toolwire_tool_mode_fallbacks_total",
                              "Requests auto tool mode retried in prompt mode after the back end refused tools",
                              ["model"])
POOL_ROUTED = Counter("toolwire_pool_routed_total",
                      "Generations a pool member took, by member and why: affinity (its conversation's member), "
                      "overflow (that member was past its load bound or unavailable), retry (the one before "
                      "failed before its first byte)", ["upstream", "reason"])
POOL_FAILURES = Counter("toolwire_pool_failures_total",
                        "Pool members' failures before their first byte (each then cools down), by member and "
                        "kind", ["upstream", "kind"])

GATEWAY_REQUESTS = Counter("toolwire_gateway_requests_total",
                           "Requests the gateway made for the tools it runs itself (docs/gateway-tools.md), by what "
                           "runs them (mcp, web_search…), the request (call, list_tools…) and outcome (ok, error, "
                           "timeout, limit, refused)", ["kind", "request", "outcome"])
GATEWAY_SECONDS = Histogram("toolwire_gateway_request_seconds", "How long the gateway's requests for its own tools took",
                            ["kind", "request"], buckets=_DURATION_BUCKETS)
REASKS = Counter("toolwire_reasks_total",
                 "Answers asked for again because a call failed its check (invalid_call) or a forced tool_choice "
                 "got none (forced_choice_unmet)", ["model", "reason"])

#: An error code fit for a label; any other (an upstream's own, passed through) counts as ``other_error``.
_OUTCOME_LABEL = re.compile(r"[a-z][a-z0-9_]{0,47}")

#: Children :func:`child` keeps; past it the cache starts over (routes of unrouted paths are unbounded).
CHILD_CACHE_SIZE = 1024
_children: dict[tuple[Any, tuple[str, ...]], Any] = {}


def child(metric: Any, *labels: str) -> Any:
    """``metric.labels(*labels)``, cached: label sets repeat, and ``labels()`` validates and locks every call."""
    key = (metric, labels)
    found = _children.get(key)
    if found is None:
        if len(_children) >= CHILD_CACHE_SIZE:
            _children.clear()
        found = _children[key] = metric.labels(*labels)
    return found


def outcome_label(outcome: str) -> str:
    """``outcome`` as a bounded label value."""
    return outcome if _OUTCOME_LABEL.fullmatch(outcome) else "other_error"


def exposition() -> tuple[bytes, str]:
    """The metrics text and its content type: all workers' values in multiprocess mode."""
    if os.environ.get(MULTIPROC_ENV):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    else:
        registry = REGISTRY
    return generate_latest(registry), CONTENT_TYPE_LATEST
