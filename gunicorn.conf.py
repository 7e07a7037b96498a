"""The checkout's gunicorn settings (``gunicorn -c gunicorn.conf.py wsgi:app``): the packaged ones.

They live in ``app/gunicorn.conf.py`` so an installed toolwire has them too;
this file runs that one as is (without importing ``app``: gunicorn's master must not).
"""

import runpy
from pathlib import Path

globals().update(runpy.run_path(str(Path(__file__).resolve().parent / "app" / "gunicorn.conf.py")))
