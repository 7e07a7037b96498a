"""What the pipeline knows of the HTTP request: handed to it by the endpoint, never read from Flask."""

from __future__ import annotations

import socket
from dataclasses import dataclass

from ..observability.record import RequestRecord
from ..pool import PoolRequest
from ..settings import Settings
from ..upstream_settings import DEFAULT_UPSTREAM
from ..upstreams.base import Upstream


@dataclass(frozen=True, slots=True)
class RequestContext:
    """One request's service and the request headers that steer its generation.

    The HTTP layer builds it (:func:`app.http.request.request_context`); tests and benchmarks build
    their own.

    Fields:
        settings: the settings as the back end sees them (:func:`~app.routing.upstream_settings`).
        upstream: the back end to call (the one the request's model is routed to).
        upstream_name: that back end's name (``default``, or its key in ``upstreams``).
        record: the request's observability record (its id goes to the back end; the generation
            reports to it); ``None`` outside a served request.
        keepalive: send keep-alive comments while the back end is silent (unless ``X-No-Keepalive: 1``).
        marker_requested: marker mode for this request (``X-Toolwire-Marker: 1``).
        client_socket: the client's connection (gunicorn's socket), so that a stream's writes can be
            bounded in time; ``None`` when the server does not expose it.
        fallbacks: the same request on the back ends tried in turn when this one refuses the connection or
            answers 5xx before its first byte (the model's ``fallback``).
        pool: the model's pool, when a pool serves it: the generation opens on the member it chooses
            (``settings`` and ``upstream`` are its first member's until then).
    """

    settings: Settings
    upstream: Upstream
    upstream_name: str = DEFAULT_UPSTREAM
    record: RequestRecord | None = None
    keepalive: bool = True
    marker_requested: bool = False
    client_socket: socket.socket | None = None
    fallbacks: tuple[RequestContext, ...] = ()
    pool: PoolRequest | None = None

    @property
    def request_id(self) -> str | None:
        """The request's id (sent to the back end as ``X-Request-Id``), if it is recorded."""
        return self.record.request_id if self.record is not None else None

    @property
    def model_label(self) -> str:
        """The metrics label of the request's model (``other`` when not configured or not recorded)."""
        return self.record.model_label if self.record is not None else "other"
