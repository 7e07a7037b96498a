"""The WSGI entry point for gunicorn: ``gunicorn -c app/gunicorn.conf.py app.wsgi:app`` (``toolwire serve``)."""

from . import create_app

app = create_app()
