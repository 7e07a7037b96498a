"""The Codex app-server back end: ``TOOLWIRE_UPSTREAM_KIND=codex`` (see :func:`make_codex_upstream`)."""

from .factory import make_codex_upstream
from .home import CodexSetupError
from .upstream import CodexUpstream

__all__ = ["CodexSetupError", "CodexUpstream", "make_codex_upstream"]
