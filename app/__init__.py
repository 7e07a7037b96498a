"""toolwire's Flask side: ``create_app()`` for the standalone service, ``Toolwire`` to mount it into a host app
(with :class:`Settings`), and the health/metrics and debug routes a host may add
(``create_ops_blueprint()``, ``create_debug_blueprint()``)."""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path


def _require_toolwire_core() -> None:
    """Refuse to start when ``statemachine`` is not toolwire's parsing core.

    PyPI's ``python-statemachine`` installs a top-level ``statemachine`` package too: installed beside
    toolwire's core, it overwrites the core's files, and uninstalling it deletes them. Fail now, with the
    fix, rather than with a confusing error (or wrong behaviour) later. Only the directory the core was
    imported from is listed: a python-statemachine installed elsewhere cannot touch its files.

    Raises:
        ImportError: ``python-statemachine`` is installed beside the core, or ``statemachine`` is another package.
    """
    import statemachine

    site = os.path.dirname(os.path.dirname(statemachine.__file__))
    other = next((name for name in os.listdir(site)
                  if name.startswith("python_statemachine-") and name.endswith(".dist-info")), None)
    if other is not None:
        version = importlib.metadata.PathDistribution(Path(site, other)).version
        raise ImportError(
            f"toolwire cannot start: the PyPI package 'python-statemachine' ({version}) is installed in {site}, "
            "and it uses the same top-level package name, 'statemachine', as toolwire's parsing core "
            "(installing it overwrote toolwire's files; uninstalling it deletes them). Fix: "
            "'pip uninstall python-statemachine', then reinstall toolwire ('pip install --force-reinstall "
            "--no-deps toolwire', or '-e .' in a checkout); or give toolwire a virtual environment of its own.")
    if not hasattr(statemachine, "ChoiceStream"):
        raise ImportError(
            f"toolwire cannot start: the 'statemachine' package imported from {statemachine.__file__} is not "
            "toolwire's parsing core (another package of that name comes first on sys.path, e.g. PyPI's "
            "'python-statemachine'). Fix: remove it from this environment, then reinstall toolwire.")


_require_toolwire_core()

from flask import Flask

from .http.debug import create_debug_blueprint
from .http.errors import register_error_handlers
from .http.extension import Toolwire
from .http.jsonprovider import OrjsonProvider
from .http.ops import create_ops_blueprint
from .observability.logs import configure_logging
from .loading import load_settings
from .settings import Settings, SettingsError

#: The public API: the standalone app, the extension and its settings, and the optional routes a host adds.
__all__ = ["Settings", "SettingsError", "Toolwire", "create_app", "create_debug_blueprint", "create_ops_blueprint"]


def create_app(settings: Settings | None = None) -> Flask:
    """The standalone toolwire app: API under ``/v1``, ``/healthz``, ``/readyz``, ``/metrics``, ``/debug/…``.

    Args:
        settings: settings to use; default read from ``TOOLWIRE_*`` and the config file.
    Raises:
        SettingsError: the settings are invalid or name a file that cannot be read (one line, naming it).
    """
    settings = settings or load_settings()
    configure_logging(settings.log_level, settings.log_format)
    app = Flask(__name__)
    app.json = OrjsonProvider(app)
    register_error_handlers(app)
    Toolwire(app, settings=settings)
    app.register_blueprint(create_ops_blueprint())  # /metrics behind a key when metrics_require_key is on
    app.register_blueprint(create_debug_blueprint())  # behind the client keys: the records hold model output
    return app

