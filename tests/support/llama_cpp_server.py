"""llama.cpp's own C++ server, ``llama-server``, for e2e tests and ``make bench-bfcl``: what users run.

Built from the llama.cpp sources that the pinned llama-cpp-python sdist vendors (``vendor/llama.cpp``, the
same version as :mod:`support.llama_server`'s Python server), with cmake, CPU only, the ``llama-server``
target alone, once into ``~/.cache/toolwire/llama/llama-server-VERSION`` (``bin/llama-server``; about 15
minutes on 2 cores the first time, nothing afterwards). ``python -m support.llama_cpp_server --install``
(run by ``make test``) builds it and fetches the models; :func:`ensure_llama_server` does the same for a plain
``pytest`` run. The models are :mod:`support.llama_server`'s, in the same cache.

:class:`LlamaCppServer` runs it for one model on a free loopback port with one generation thread and one
slot: ``jinja=True`` renders the model's own chat template and reads its tool calls (``tools`` natively,
lazy grammars), ``jinja=False`` answers ``tools`` with a 400 (the server's built-in template only), as a
text-only back end in front of which toolwire's prompt mode runs.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Sequence

from support.llama_server import CACHE_ROOT, LLAMA_VERSION, MODELS, ModelServer, _locked, ensure_model, install

SERVER_DIR = CACHE_ROOT / f"llama-server-{LLAMA_VERSION}"
BINARY = SERVER_DIR / "bin" / "llama-server"
# The same CPU flags as the Python server's build (no -march=native: this VM faults on AMX tile state); a
# static binary; no web UI (its assets would be downloaded), no HTTPS, no tests, examples or other tools.
CMAKE_FLAGS = ("-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF",
               "-DGGML_NATIVE=OFF", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON",
               "-DGGML_BMI2=ON", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_APP=OFF",
               "-DLLAMA_BUILD_TOOLS=ON", "-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_BUILD_UI=OFF",
               "-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_OPENSSL=OFF")
BUILD_TIMEOUT = 3600
DOWNLOAD_TIMEOUT = 900
START_TIMEOUT = 120.0
_VENDORED = f"llama_cpp_python-{LLAMA_VERSION}/vendor/llama.cpp/"
#: llama.cpp's built-in chat template for a model whose GGUF has none (Gemma 3 270M is a base model): ``gemma``
#: writes the system text at the start of the first user turn, as Gemma 3's official template does.
BUILT_IN_TEMPLATES = {"gemma3": "gemma"}


def ensure_llama_server() -> Path:
    """The built ``llama-server`` binary, building it first if needed (an install that fails is an error)."""
    with _locked("llama-server"):
        if BINARY.exists():
            return BINARY
        source, build = SERVER_DIR / "src", SERVER_DIR / "build"
        shutil.rmtree(SERVER_DIR, ignore_errors=True)
        SERVER_DIR.mkdir(parents=True)
        _unpack_sources(source)
        log = SERVER_DIR / "build.log"
        with open(log, "w") as out:
            for step in (["cmake", "-S", str(source), "-B", str(build), *CMAKE_FLAGS],
                         ["cmake", "--build", str(build), "--target", "llama-server", "-j2"]):
                if subprocess.run(step, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  timeout=BUILD_TIMEOUT).returncode != 0:
                    raise RuntimeError(f"building llama-server {LLAMA_VERSION} failed:\n"
                                       f"{log.read_text(errors='replace')[-4000:]}")
        BINARY.parent.mkdir()
        shutil.copy2(build / "bin" / "llama-server", BINARY.with_suffix(".partial"))
        BINARY.with_suffix(".partial").rename(BINARY)
        shutil.rmtree(source)
        shutil.rmtree(build)
    return BINARY


def _unpack_sources(source: Path) -> None:
    """``vendor/llama.cpp`` of the pinned llama-cpp-python sdist, into ``source``."""
    with tempfile.TemporaryDirectory(prefix="toolwire-sdist-", dir=SERVER_DIR) as scratch:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                        "--no-input", "--quiet", "-d", scratch, f"llama-cpp-python=={LLAMA_VERSION}"],
                       check=True, timeout=DOWNLOAD_TIMEOUT, stdin=subprocess.DEVNULL)
        with tarfile.open(Path(scratch, f"llama_cpp_python-{LLAMA_VERSION}.tar.gz")) as archive:
            members = [m for m in archive.getmembers() if m.name.startswith(_VENDORED)]
            for member in members:
                member.name = member.name[len(_VENDORED):]
            archive.extractall(source, members=members, filter="data")


class LlamaCppServer(ModelServer):
    """``llama-server`` for one model on a loopback port (one slot, the whole context).

    Args:
        model: a key of :data:`support.llama_server.MODELS`.
        jinja: render the GGUF's own chat template (native ``tools``); off, ``tools`` are refused with an error.
        n_ctx: the context size.
        extra_args: more command-line options (e.g. ``("--reasoning-format", "none")``).
    """

    ready_path = "/health"
    start_timeout = START_TIMEOUT

    def __init__(self, model: str, *, jinja: bool = False, n_ctx: int = 8192, extra_args: Sequence[str] = ()):
        super().__init__(model)
        self.jinja = jinja
        self.n_ctx = n_ctx
        self.extra_args = tuple(extra_args)

    def command(self) -> list[str]:
        binary, path = ensure_llama_server(), ensure_model(self.model.name)
        return [str(binary), "--model", str(path), "--alias", self.model.name, "--host", "127.0.0.1",
                "--port", str(self.port), "--ctx-size", str(self.n_ctx), "--parallel", "1", "--threads", "1",
                "--threads-batch", "2", "--no-webui", "--jinja" if self.jinja else "--no-jinja",
                *(("--chat-template", BUILT_IN_TEMPLATES[self.model.name]) if self.model.name in BUILT_IN_TEMPLATES
                  else ()), *self.extra_args]


if __name__ == "__main__":
    if "--install" in sys.argv:
        install("llama-server", ensure_llama_server)
