"""The response store's URL: the one the settings name, and which store it opens (``sqlite:///…``,
``redis://…``, ``rediss://…``)."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ..settings import ENV_PREFIX, SettingsError

if TYPE_CHECKING:
    from ..settings import Settings

#: The URL schemes of the response stores (``TOOLWIRE_RESPONSE_STORE_URL``).
STORE_SCHEMES = ("sqlite", "redis", "rediss")


def store_url(settings: Settings) -> str:
    """The response store's URL: ``response_store_url``, else ``sqlite:///`` + ``response_store_path``
    (empty: no store).

    Raises:
        SettingsError: ``response_store_url`` names no store toolwire can open (checked here, where the stores
            are, rather than with the other settings; the start fails on it all the same).
    """
    if settings.response_store_path and settings.response_store_url is None:
        return f"sqlite:///{settings.response_store_path}"
    try:
        return check_store_url((settings.response_store_url or "").strip())
    except ValueError as exc:
        raise SettingsError(f"invalid settings: {ENV_PREFIX}RESPONSE_STORE_URL: {exc}") from None


def sqlite_path(url: str) -> str:
    """The file of a ``sqlite:///path`` URL: ``sqlite:///var/r.db`` is relative, ``sqlite:////srv/r.db`` absolute.

    Raises:
        ValueError: not a ``sqlite:///`` URL with a path.
    """
    if not url.startswith("sqlite:///") or url == "sqlite:///":
        raise ValueError(f"a SQLite store URL is sqlite:///relative/path or sqlite:////absolute/path, not {url!r}")
    return url[len("sqlite:///"):]


def check_store_url(url: str) -> str:
    """``url`` when it names a response store toolwire can open (or is empty: no store), else ``ValueError``."""
    if url:
        scheme = urlsplit(url).scheme
        if scheme not in STORE_SCHEMES:
            raise ValueError(f"the response store URL must start with sqlite:///, redis:// or rediss://, "
                             f"not {scheme + '://' if scheme else repr(url)}")
        if scheme == "sqlite":
            sqlite_path(url)
    return url
