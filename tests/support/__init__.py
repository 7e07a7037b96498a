"""Test support for toolwire: a scripted upstream, a gunicorn runner, wire-contract checkers, fakes.

The one way to import it, from any test: ``from support.<module> import …`` (pytest puts ``tests/`` on
``sys.path``). Tests never import from conftest files or from other tests; ``tests/test_support_imports.py``
holds them to that.

Modules:
    fakes: in-process doubles: a scripted fake upstream, upstream chunk builders, the weather tool.
    responses_calls: ``post`` / ``stream`` to ``/v1/responses`` through a Flask test client.
    scripted_upstream: an OpenAI-compatible loopback server whose answers tests script.
    server: starts real gunicorn (gevent workers) serving toolwire and stops it cleanly.
    invariants: checkers for wire-contract section 9 and an httpx transport that records streams.
    endpoints: one adapter per endpoint (Chat, Responses), so a test runs against both.
    fuzz_bodies: hostile request bodies and the judge of what toolwire answered to them.
    injection: a transcript quoting call text back (marker-mode tests).
    tools: function tool definitions shared by the tests.
    responses_model: a scripted Responses-API model server (Codex's provider in the Codex e2e tests).
    codex_binary: the pinned Codex CLI, installed from npm into the test cache on first use.
    loopback: a tiny threaded HTTP/1.1 (or TLS) server answering as a test says (upstream client unit tests).
"""
