"""Test support for toolwire: a scripted upstream, a gunicorn runner and wire-contract checkers.

Modules:
    scripted_upstream: an OpenAI-compatible loopback server whose answers tests script.
    server: starts real gunicorn (gevent workers) serving toolwire and stops it cleanly.
    invariants: checkers for wire-contract section 9 and an httpx transport that records streams.
"""
