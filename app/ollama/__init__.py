"""Ollama's API (``/api/chat``, ``/api/generate``, ``/api/tags``, ``/api/show``…) on the shared pipeline."""
