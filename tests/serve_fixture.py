"""`transformers serve` on the tiny local model, on loopback, for tests of the HTTP path.

`served_tiny_model` is a session-scoped pytest fixture (one server per test session: it
costs about 5 s to start); enable it in a test module with
``pytest_plugins = ("serve_fixture",)``. `serve_model` is the context manager behind it,
usable on its own (benchmarks, scripts).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess  # nosec B404 - starts a local test server with a fixed argument list
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from tiny_model import shared_tiny_model


@dataclass(frozen=True)
class ServedModel:
    """Where the server listens; `model` is the name requests must use (the model path)."""

    base_url: str  # ends in /v1, as OpenAI clients expect
    model: str
    log_path: Path


def free_port() -> int:
    """A port that was free a moment ago (the server binds it right after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _serve_command() -> list[str]:
    script = Path(sys.executable).with_name("transformers")
    if script.exists():
        return [str(script), "serve"]
    found = shutil.which("transformers")
    if found is None:
        pytest.skip("`transformers` CLI not found (pip install 'transformers[serving]')")
    return [found, "serve"]


@contextmanager
def serve_model(model_dir: Path, log_path: Path, startup_timeout: float = 120.0
                ) -> Iterator[ServedModel]:
    """Start `transformers serve MODEL_DIR` on 127.0.0.1, wait for /health, stop on exit."""
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
           "TOKENIZERS_PARALLELISM": "false"}
    command = _serve_command() + [str(model_dir), "--host", "127.0.0.1", "--port", str(port),
                                  "--device", "cpu", "--log-level", "warning"]
    with open(log_path, "wb") as log_file:
        process = subprocess.Popen(  # nosec B603 - fixed command, no shell
            command, stdout=log_file, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + startup_timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"transformers serve exited with {process.returncode}:\n"
                                   + log_path.read_text(errors="replace")[-3000:])
            try:
                if httpx.get(f"{base}/health", timeout=2.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("transformers serve did not become healthy:\n"
                                   + log_path.read_text(errors="replace")[-3000:])
            time.sleep(0.2)
        yield ServedModel(base_url=f"{base}/v1", model=str(model_dir), log_path=log_path)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


@pytest.fixture(scope="session")
def tiny_models(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
                ) -> Path:
    """Where the tiny models are built once (tiny_model.shared_tiny_model): pytest's cache,
    or a temporary folder under -p no:cacheprovider."""
    cache = getattr(request.config, "cache", None)
    return Path(cache.mkdir("coral-tiny-models")) if cache else tmp_path_factory.mktemp("tiny")


@pytest.fixture(scope="session")
def served_tiny_model(tiny_models: Path,
                      tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedModel]:
    model_dir = shared_tiny_model(tiny_models, chat_template=True)
    log_path = tmp_path_factory.mktemp("serve") / "transformers-serve.log"
    with serve_model(model_dir, log_path) as served:
        yield served
