"""The core is sans-IO: importing it pulls in no web, network or concurrency stack."""

import json
import pathlib
import subprocess
import sys
from importlib import metadata

REPO = pathlib.Path(__file__).resolve().parents[2]
# threading is absent from this list on purpose: the stdlib logging module (imported by
# transitions) loads it; the core itself starts no threads and logs nothing.
FORBIDDEN = ("flask", "werkzeug", "gevent", "httpx", "socket", "ssl", "asyncio", "select", "selectors")


def test_importing_the_core_pulls_in_no_io_modules():
    probe = (
        "import sys, json, statemachine, statemachine.diagram;"
        "print(json.dumps({'file': statemachine.__file__, 'mods': sorted(sys.modules)}))"
    )
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True)
    report = json.loads(result.stdout)
    loaded = {m.split(".")[0] for m in report["mods"]}
    assert not loaded & set(FORBIDDEN), sorted(loaded & set(FORBIDDEN))
    assert pathlib.Path(report["file"]).resolve().is_relative_to(REPO)


def test_python_statemachine_is_not_installed():
    # Its wheel also installs a top-level "statemachine" package, which would shadow ours.
    names = {(d.metadata["Name"] or "").lower() for d in metadata.distributions()}
    assert "python-statemachine" not in names
