"""The registry of back-end kinds: a kind is its settings section and a factory.

``upstream_kind`` (a named back end's ``kind``) names a registered kind; :func:`make_upstream` validates the
back end's settings with the kind's section and calls its factory. The built-in kinds (``openai``, ``codex``,
``demo``) are registered here; an app adds one with :func:`register_kind` before it mounts toolwire::

    class EchoSection(BaseModel):
        model_config = ConfigDict(extra="forbid")
        greeting: str = "hello"

    register_kind(BackendKind("echo", EchoSection, lambda settings, section: EchoUpstream(section.greeting)))

A section field that is a setting (``codex_command``…) is read from the back end's settings; any other is read
from its ``upstream_options`` (a named back end's ``options``), so a kind registered outside ``app.settings``
needs no setting of its own. Nothing outside this package names a kind, except the settings' default
(``openai`` with an ``upstream_url``, else ``demo``) and the routing's knowing that a demo serves its
``demo_model``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from ..settings import Settings, SettingsError
from ..upstream_settings import DEFAULT_UPSTREAM, CodexSettings, DemoSettings
from .base import Upstream
from .demo import DemoUpstream
from .http import HttpSection, make_http_upstream

S = TypeVar("S", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class BackendKind(Generic[S]):
    """One kind of back end.

    Fields:
        name: what ``upstream_kind`` (a named back end's ``kind``) says to pick it.
        section: its settings section: the model of the settings it reads, validated once per back end when
            the back ends are made (see the module's docstring for where each field is read from).
        build: makes the back end's upstream from its settings (as that back end sees them) and its section.
            May raise :class:`~app.settings.SettingsError` for settings it cannot use.
    """

    name: str
    section: type[S]
    build: Callable[[Settings, S], Upstream]


_KINDS: dict[str, BackendKind[Any]] = {}


def register_kind(kind: BackendKind[Any], *, replace: bool = False) -> None:
    """Add ``kind`` to the registry.

    Raises:
        ValueError: a kind of that name is registered (and ``replace`` is false).
    """
    if kind.name in _KINDS and not replace:
        raise ValueError(f"a back-end kind named {kind.name!r} is registered already")
    _KINDS[kind.name] = kind


def registered_kinds() -> tuple[str, ...]:
    """The registered kinds' names, in the order they were registered."""
    return tuple(_KINDS)


def make_upstream(settings: Settings, name: str = DEFAULT_UPSTREAM) -> Upstream:
    """The upstream of the back end ``name``, given the settings as that back end sees them.

    Raises:
        SettingsError: its kind is not registered, its section refused its settings, or its factory did
            (each one line naming the variable).
        CodexSetupError: as the Codex kind's factory.
    """
    kind, section = _checked(settings, name)
    try:
        return kind.build(settings, section)
    except SettingsError as exc:
        raise SettingsError(f"{_variable(name, f'TOOLWIRE_UPSTREAM_KIND={kind.name}')}: {exc}") from None


def check_backend(settings: Settings, name: str = DEFAULT_UPSTREAM) -> None:
    """What :func:`make_upstream` checks before it builds (the kind, its section), building nothing:
    ``toolwire check`` runs it before gunicorn binds, so a bad back end stops the start at once.

    Raises:
        SettingsError: as :func:`make_upstream`.
    """
    _checked(settings, name)


def _checked(settings: Settings, name: str) -> tuple[BackendKind[Any], BaseModel]:
    """The back end's kind and its section."""
    kind = _KINDS.get(settings.backend)
    if kind is None:
        raise SettingsError(f"{_variable(name, 'TOOLWIRE_UPSTREAM_KIND')}: no back-end kind named "
                            f"{settings.backend!r}; registered: {', '.join(_KINDS)}")
    try:
        return kind, _section(kind, settings)
    except SettingsError as exc:
        raise SettingsError(f"{_variable(name, f'TOOLWIRE_UPSTREAM_KIND={kind.name}')}: {exc}") from None


def _variable(name: str, default: str) -> str:
    """Where an error in the back end ``name``'s settings is: ``default`` for the default back end."""
    return default if name == DEFAULT_UPSTREAM else f"TOOLWIRE_UPSTREAMS ({name})"


def _section(kind: BackendKind[S], settings: Settings) -> S:
    """``kind``'s section of ``settings``: its fields that are settings from them, the rest from the options.

    Raises:
        SettingsError: an option the section lacks or that is a setting, or a value it refused.
    """
    fields = kind.section.model_fields
    options = settings.upstream_options
    unknown = sorted(options.keys() - fields.keys())
    if unknown:
        raise SettingsError(f"options: {', '.join(unknown)}: not a key of kind {kind.name!r}")
    settings_too = sorted(options.keys() & Settings.model_fields.keys())
    if settings_too:  # one place for each value: routing reads the setting
        raise SettingsError(f"options: {', '.join(settings_too)}: a setting of its own, not an option")
    values = {key: getattr(settings, key) for key in fields if key in Settings.model_fields}
    try:
        return kind.section.model_validate({**values, **options})
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(map(str, error["loc"]))
        raise SettingsError(f"{where + ': ' if where else ''}{error['msg'].removeprefix('Value error, ')}") from None


def _codex(settings: Settings, section: CodexSettings) -> Upstream:
    from .codex import make_codex_upstream  # gevent's subprocess machinery only when used

    return make_codex_upstream(settings)


def _demo(settings: Settings, section: DemoSettings) -> Upstream:
    return DemoUpstream(model=section.demo_model)


register_kind(BackendKind("openai", HttpSection, make_http_upstream))
register_kind(BackendKind("codex", CodexSettings, _codex))
register_kind(BackendKind("demo", DemoSettings, _demo))
