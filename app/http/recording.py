"""The request record's HTTP side: the API Blueprint's hooks open each request's record and stamp its response.

The record itself (:mod:`app.observability.record`) knows nothing of Flask; here it gets the request's id,
method and route, and learns the response's status and when its body closes.
"""

from __future__ import annotations

import re

from flask import Request, Response

from ..ids import uuid4_hex
from ..observability import record as observe
from ..observability.debug import debug_store
from ..settings import Settings
from .state import client_owner

#: An incoming ``X-Request-Id`` is echoed when it matches this, else a fresh one is made.
REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def open_record(req: Request, settings: Settings) -> observe.RequestRecord:
    """Open the record of the request ``req`` (from the API Blueprint's ``before_request`` hook).

    Its id is the request's ``X-Request-Id`` when that is sane, else a new ``uuid4`` hex.
    """
    incoming = req.environ.get("HTTP_X_REQUEST_ID", "")  # the header, without EnvironHeaders' lookup
    request_id = incoming if REQUEST_ID.fullmatch(incoming) else uuid4_hex()
    rule = req.url_rule
    return observe.start(observe.RequestRecord(
        request_id, req.method, rule.rule if rule is not None else req.path,
        debug=debug_store(settings) if settings.debug else None))


def stamp_response(response: Response) -> Response:
    """Stamp the response and finish the record when its body closes (from the API Blueprint's
    ``after_request`` hook)."""
    record = observe.current()
    if record is None:
        return response
    response.headers["X-Request-Id"] = record.request_id
    record.status = response.status_code
    record.owner = client_owner()
    if not record.stream:
        record.first_frame_sent()
    response.call_on_close(record.finish)
    return response
