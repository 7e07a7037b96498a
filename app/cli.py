"""The ``toolwire`` command: ``serve``, ``config``, ``diagram``."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from statemachine.diagram import FORMATS

from .store import store_url
from .routing import routing_table, upstream_names, upstream_settings
from .loading import config_file_keys, load_settings
from .settings import ENV_PREFIX, MASK, NESTED, SECTIONS, Settings, SettingsError, mask_url
from .upstream_settings import NamedUpstream

#: gunicorn's settings, shipped inside the package (see that file for why it is not a module).
GUNICORN_CONF = Path(__file__).resolve().parent / "gunicorn.conf.py"


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``toolwire`` console script."""
    parser = argparse.ArgumentParser(prog="toolwire", description="OpenAI-compatible tool-calling gateway.")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run gunicorn (gevent workers) with the packaged gunicorn settings "
                                              "and app.wsgi:app")
    serve.add_argument("--bind", help="host:port (default TOOLWIRE_BIND or 127.0.0.1:8000)")
    serve.add_argument("--workers", type=int, help="worker processes (default WEB_CONCURRENCY or 2)")

    config = commands.add_parser("config", help="print the effective settings (secrets masked) and their sources")
    config.add_argument("--describe", action="store_true",
                        help="print the configuration reference (docs/configuration.md) instead")
    commands.add_parser("check", help="check the settings and the client key file: exit 2 with one line naming "
                                      "what to fix when toolwire could not start with them")

    diagram = commands.add_parser("diagram", help="render the per-choice state machine")
    diagram.add_argument("--format", choices=FORMATS, default="mermaid")
    diagram.add_argument("--state", help="highlight this state (text, in_tool_call, args_streaming, done)")
    diagram.add_argument("-o", "--output", help="write to this file instead of stdout")

    args = parser.parse_args(argv)
    try:
        code = {"serve": _serve, "config": _config, "check": _check, "diagram": _diagram}[args.command](args)
        sys.stdout.flush()  # a reader that left shows here, not in Python's flush at exit
        return code
    except BrokenPipeError:
        # The reader had enough (`toolwire config | head -1`): stop quietly; stdout goes nowhere from now
        # on, so Python's exit-time flush has nothing to complain about.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _serve(args: argparse.Namespace) -> int:
    argv = [sys.executable, "-m", "gunicorn", "-c", str(GUNICORN_CONF)]
    if args.bind:
        argv += ["--bind", args.bind]
    if args.workers is not None:  # 0 too: gunicorn's settings refuse it, naming it
        argv += ["--workers", str(args.workers)]
    argv.append("app.wsgi:app")
    os.execv(sys.executable, argv)
    return 0  # not reached


def _check(args: argparse.Namespace) -> int:
    """What gunicorn's master runs before it binds (app/gunicorn.conf.py): the master never imports the app."""
    from .http.auth import load_keyring
    from .upstreams.kinds import check_backend

    try:
        settings = load_settings()
        load_keyring(settings)
        store_url(settings)
        for name in upstream_names(settings):
            check_backend(upstream_settings(settings, name), name)
    except SettingsError as exc:
        print(f"toolwire cannot start: {exc}", file=sys.stderr)
        return 2
    return 0


def _config(args: argparse.Namespace) -> int:
    if args.describe:
        from .config_reference import render_reference

        sys.stdout.write(render_reference())
        return 0
    try:
        settings = load_settings()
        rows = describe(settings)
    except SettingsError as exc:
        print(f"toolwire config: {exc}", file=sys.stderr)
        return 2
    width = max(len(name) for name, _, _ in rows)
    for name, value, source in rows:
        env = f"{ENV_PREFIX}{name.upper()}"
        print(f"{name:<{width}}  {value or '-':<30}  [{source}] {env}")
    print("\nrouting (client model -> back end; unlisted models go to default):")
    for backend in routing_table(settings):
        print(f"  {backend['name']} ({backend['kind']}{' ' + backend['url'] if backend['url'] else ''}): "
              f"{', '.join(backend['models']) or '-'}")
    return 0


def describe(settings: Settings) -> list[tuple[str, str, str]]:
    """``(name, display value, source)`` per setting, as ``toolwire config`` prints them; secrets and URL
    passwords masked. ``source`` is ``env``, ``file`` or ``default`` (``init`` for values passed in code).

    Raises:
        SettingsError: the response store's URL names no store (:func:`~app.store.store_url`).
    """
    store = store_url(settings)
    file_keys = set(config_file_keys())
    explicit = settings.model_fields_set
    # As pydantic-settings reads them: names in any case, nested values as NAME__KEY.
    env_keys = {key.upper().split(NESTED, 1)[0] for key in os.environ}
    rows = []
    for name in (name for section in SECTIONS for name in section.model_fields):
        if f"{ENV_PREFIX}{name.upper()}" in env_keys:
            source = "env"
        elif name in file_keys:
            source = "file"
        elif name in explicit:
            source = "init"
        else:
            source = "default"
        display = _display(name, getattr(settings, name))
        if name == "response_store_url" and settings.response_store_url is None:
            display = f"{store or 'none'} (from response_store_path)"
        rows.append((name, display, source))
    return rows


def _display(name: str, value: Any) -> str:
    if isinstance(value, SecretStr):
        return MASK if value.get_secret_value() else ""
    if name in ("upstream_url", "codex_provider_url", "response_store_url") and isinstance(value, str):
        return mask_url(value)
    if value is None:
        return ""
    if name == "upstreams":
        return json.dumps({key: _upstream_display(named) for key, named in value.items()})
    if name == "model_map":
        return json.dumps({k: v if isinstance(v, str) else v.model_dump(exclude_defaults=True)
                           for k, v in value.items()})
    return str(value)


def _upstream_display(named: NamedUpstream) -> dict[str, Any]:
    """A back end of ``upstreams`` as ``toolwire config`` shows it: set keys only, keys and URL passwords masked."""
    shown = named.model_dump(mode="json", exclude_defaults=True)
    for key in ("url", "codex_provider_url"):
        if key in shown:
            shown[key] = mask_url(shown[key])
    return shown


def _diagram(args: argparse.Namespace) -> int:
    from statemachine import ChoiceState
    from statemachine.diagram import render_choice_fsm

    current = None
    if args.state:
        wanted = args.state.lower()
        matches = [s for s in ChoiceState if wanted in (s.value, s.name.lower())]
        if not matches:
            print(f"toolwire diagram: unknown state {args.state!r}; one of "
                  f"{', '.join(s.value for s in ChoiceState)}", file=sys.stderr)
            return 2
        current = matches[0]
    try:
        output = render_choice_fsm(args.format, current)
    except (ValueError, RuntimeError) as exc:  # e.g. svg without the "diagrams" extra
        print(f"toolwire diagram: {exc}", file=sys.stderr)
        return 2
    data = output.encode() if isinstance(output, str) else output
    if args.output:
        Path(args.output).write_bytes(data)
    else:
        sys.stdout.buffer.write(data if data.endswith(b"\n") else data + b"\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
