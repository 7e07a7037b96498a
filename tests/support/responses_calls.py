"""Requests to ``/v1/responses`` through a Flask test client, for the in-process tests."""

from __future__ import annotations

from .invariants import check_responses_stream


def post(client, **body):
    body.setdefault("model", "m")
    body.setdefault("input", "Weather in Paris?")
    return client.post("/v1/responses", json=body)


def stream(client, **body):
    """A streamed request, checked against the wire contract; returns the summary."""
    response = post(client, stream=True, **body)
    assert response.status_code == 200, response.data
    return check_responses_stream(response.data, status=200, content_type=response.headers["Content-Type"])
