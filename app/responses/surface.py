"""OpenAI's Responses API as a surface: ``POST /responses``, ``GET`` and ``DELETE /responses/{id}``, and a 404
``not_supported`` for any other ``/responses/…`` path. Its routes get the response store as the client's key
sees it."""

from __future__ import annotations

from ..surface import BEARER, Generate, Surface, View, header_key
from .views import delete_response, get_response, plan_response, unsupported_subpath

RESPONSES = Surface("responses", routes=(
    Generate("/responses", "create_response", plan_response, store=True),
    View("/responses/<response_id>", "get_response", get_response, ("GET",), store=True),
    View("/responses/<response_id>", "delete_response", delete_response, ("DELETE",), store=True),
    View("/responses/<path:subpath>", "unsupported_subpath", unsupported_subpath,
         ("GET", "POST", "PUT", "PATCH", "DELETE"), refusal=True),
), keys=(BEARER, header_key("x-api-key")))  # both, as Chat's
