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
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from tiny_model import build_tiny_model


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


def cached_tiny_model(cache_dir: Path) -> Path:
    """The tiny chat model, built once and kept in pytest's cache across sessions.

    Built in a scratch folder and renamed into place, so an interrupted build never
    leaves a half-written model that later sessions would reuse.
    """
    target = cache_dir / "tiny-chat-model"
    if not (target / "coral_tiny_model.json").exists():
        scratch = Path(tempfile.mkdtemp(dir=cache_dir))
        build_tiny_model(scratch / "model", chat_template=True)
        shutil.rmtree(target, ignore_errors=True)
        (scratch / "model").rename(target)
        shutil.rmtree(scratch, ignore_errors=True)
    return target


@pytest.fixture(scope="session")
def served_tiny_model(request: pytest.FixtureRequest,
                      tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedModel]:
    cache = getattr(request.config, "cache", None)  # None under -p no:cacheprovider
    cache_dir = Path(cache.mkdir("coral-serve")) if cache else tmp_path_factory.mktemp("model")
    model_dir = cached_tiny_model(cache_dir)
    log_path = tmp_path_factory.mktemp("serve") / "transformers-serve.log"
    with serve_model(model_dir, log_path) as served:
        yield served
