"""Thin server programs for the back-end conformance suite, one per real server stack (see ``support.backends``).

Each serves the plans of ``support.backend_model`` as ``<program> <plans.json> <port>`` on 127.0.0.1.
"""
