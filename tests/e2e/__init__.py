"""End-to-end tests: real gunicorn + gevent serving toolwire against the scripted upstream."""
