"""The WSGI entry point for gunicorn: ``gunicorn -c app/gunicorn.conf.py app.wsgi:app`` (``toolwire serve``)."""

from gunicorn.errors import AppImportError

from . import SettingsError, create_app

try:
    app = create_app()
except SettingsError as exc:
    # gunicorn prints an AppImportError's message as one line (no traceback) and its master stops, rather than
    # forking a worker that fails the same way again.
    raise AppImportError(f"toolwire cannot start: {exc}") from None
