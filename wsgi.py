"""The checkout's WSGI entry point: ``gunicorn -c gunicorn.conf.py wsgi:app`` (the same app as ``app.wsgi``)."""

from app.wsgi import app

__all__ = ["app"]
