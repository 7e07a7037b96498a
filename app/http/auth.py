"""Client API keys on every route of the API Blueprint, where each surface's clients put them
(:attr:`~app.surface.Surface.keys`: a Bearer token, a header of the API's own), compared in constant time.

Keys come from ``TOOLWIRE_API_KEYS`` (comma or newline separated) and/or the
file ``TOOLWIRE_API_KEYS_FILE`` (one per line, ``#`` comments). Only their
SHA-256 digests are kept. With no keys configured the API is open (a warning
is logged once when the app is set up). These keys are the clients'; the key
toolwire sends upstream (``TOOLWIRE_UPSTREAM_API_KEY``) is a different one and
client keys are never forwarded. The debug view takes the same keys, also as an
HTTP Basic password so that a browser can open its page.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable, Sequence

from flask import request

from .errors import ApiError
from ..ids import owner_digest
from ..settings import SettingsError
from ..surface import BEARER, KeySource, Surface
from .state import KeyRing, current_state, set_client_owner

log = logging.getLogger("toolwire.http.auth")



def load_keyring(settings: Any) -> KeyRing:
    """The :class:`KeyRing` the settings describe (``api_keys`` and ``api_keys_file``).

    Raises:
        SettingsError: the key file cannot be read or holds no key (a typo must
            not leave the API open), a key is not printable ASCII (it could never
            match), or metrics need a key and there is none.
    """
    keys: list[str] = []
    if settings.api_keys is not None:
        raw = settings.api_keys.get_secret_value()
        keys += _sendable([k.strip() for line in raw.splitlines() for k in line.split(",")], "TOOLWIRE_API_KEYS")
    if settings.api_keys_file is not None:
        try:
            text = settings.api_keys_file.read_text(encoding="utf-8")
        except OSError as exc:
            raise SettingsError(f"TOOLWIRE_API_KEYS_FILE {str(settings.api_keys_file)!r}: {exc.strerror}") from None
        from_file = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
        if not from_file:
            raise SettingsError(f"TOOLWIRE_API_KEYS_FILE {str(settings.api_keys_file)!r} holds no key")
        keys += _sendable(from_file, f"TOOLWIRE_API_KEYS_FILE {str(settings.api_keys_file)!r}")
    ring = KeyRing(keys)
    if not ring and settings.metrics_require_key:
        raise SettingsError("TOOLWIRE_METRICS_REQUIRE_KEY is on but no client keys are configured")
    if not ring:
        log.warning("no client API keys configured (TOOLWIRE_API_KEYS / TOOLWIRE_API_KEYS_FILE): "
                    "the API is open to anyone who can reach it")
    return ring


def _sendable(keys: list[str], source: str) -> list[str]:
    """``keys``, after refusing one no client can send: an HTTP header carries printable ASCII only (a
    non-ASCII key arrives re-encoded, as other characters, and would never match)."""
    for n, key in enumerate(keys, 1):
        if key and not (key.isascii() and key.isprintable()):
            raise SettingsError(f"{source}: key {n} holds a character that is not printable ASCII; an "
                             "'Authorization' header cannot carry it, so no client could use the key")
    return keys


def basic_password() -> str | None:
    """The password of this request's ``Authorization: Basic`` header, if any (the user name is ignored)."""
    auth = request.authorization
    if auth is None or auth.type != "basic":
        return None
    return auth.password or None


def key_sources(surfaces: Iterable[Surface]) -> tuple[KeySource, ...]:
    """Every place the ``surfaces``' clients put their key, each once, in the surfaces' order: where the
    routes they share (``/models``, ``/metrics``) take one."""
    return tuple(dict.fromkeys(source for surface in surfaces for source in surface.keys))


def authorize_request(sources: Sequence[KeySource]) -> None:
    """Refuse the current request unless it carries an accepted key in one of ``sources`` (the first found is
    the one checked; no keys configured = open); the accepted key's owner digest is recorded
    (:func:`~app.http.state.client_owner`): it scopes stored responses.

    Raises:
        ApiError: 401 ``invalid_api_key`` with ``WWW-Authenticate: Bearer``.
    """
    _authorize(sources, "Bearer")


def authorize_debug() -> None:
    """The ``/debug`` guard: the API key, as a Bearer token or as the password of HTTP Basic auth.

    A browser opening the debug page cannot add a Bearer header; the Basic
    challenge makes it ask for the key once (any user name) and send it with
    the page's own requests.

    Raises:
        ApiError: 401 ``invalid_api_key`` with a Basic challenge.
    """
    _authorize(_DEBUG_KEYS, 'Basic realm="toolwire debug", charset="UTF-8"')


#: Where the debug page takes the key: a Bearer token, or (a browser's) the password of HTTP Basic auth.
_DEBUG_KEYS = (BEARER, KeySource(basic_password, "the password of HTTP Basic auth"))


def _authorize(sources: Sequence[KeySource], challenge: str) -> None:
    ring = current_state().api_keys
    if not ring:
        return  # an open API: no header is read
    token = next((key for key in (source.read() for source in sources) if key), None)
    if token is None:
        hints = " (or ".join(source.hint for source in sources) + ")" * (len(sources) - 1)
        raise _unauthorized(f"You didn't provide an API key. Send it as {hints}.", challenge)
    if not ring.accepts(token):
        raise _unauthorized("Incorrect API key provided.", challenge)
    set_client_owner(owner_digest(token))


def _unauthorized(message: str, challenge: str) -> ApiError:
    return ApiError(401, message, code="invalid_api_key", headers={"WWW-Authenticate": challenge})


def authorize_api_request(method: str, sources: Sequence[KeySource]) -> None:
    """Every route of the API Blueprint needs a key in one of ``sources``, except CORS preflights (``OPTIONS``):
    the API Blueprint's hook calls this with the request's ``method`` and its surface's key sources."""
    if method != "OPTIONS":
        authorize_request(sources)


def metrics_guard() -> None:
    """The ``/metrics`` guard: a key is needed only when ``TOOLWIRE_METRICS_REQUIRE_KEY`` is on, where any of
    the mount's surfaces takes one."""
    state = current_state()
    if state.settings.metrics_require_key:
        authorize_request(state.key_sources)
