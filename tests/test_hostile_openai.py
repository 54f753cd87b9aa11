"""The OpenAI-compatible client against a hostile server (tests/hostile_server.py).

Every reply is bounded (size, inflated size, a deadline per attempt), validated before use,
and every failure is one line with no secret in it. Bounds are asserted generously: the
machine may be loaded, and what matters is the order of magnitude (before these bounds, a
300 MB reply took 4 GB, a gzip bomb 7.5 GB, and one byte per second waited forever).
"""

from __future__ import annotations

import json
import logging
import sqlite3
import subprocess  # nosec B404 - runs this interpreter with a fixed child script
import sys
import time
from pathlib import Path

import pytest

from coral_core.errors import UserError
from coral_core.types import GenerationRequest, Prompt, SamplingParams
from coral_plugins.models.openai import OpenAIRequestError, create_model
from coral_plugins.models.openai.redaction import excerpt, redact_url, url_credentials
from coral_plugins.models.openai.reply import UnusableReply, parse_reply
from hostile_cli import base_env, leaks, run_measured
from hostile_server import TEXT, HostileServer

KEY = "sk-hostile-canary-5b8e2f0c71d94a3e"
FAST = dict(max_retries=1, backoff_base=0.01, backoff_max=0.05)


@pytest.fixture(scope="module")
def server():
    with HostileServer() as running:
        yield running


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def ask(server: HostileServer, mode: str, *, timeout: float = 10.0, max_new_tokens: int = 64,
        **options) -> list:
    model = create_model(mode, base_url=server.url, timeout=timeout, **{**FAST, **options})
    request = GenerationRequest(Prompt("Fix f."), SamplingParams(max_new_tokens=max_new_tokens))
    return model.generate([request])[0]


# ----- shapes: validated before anything is used -----

@pytest.mark.parametrize("mode, prompt_tokens, completion_tokens, finish", [
    ("ok", 7, 5, "stop"),
    ("parts", 7, 5, "stop"),  # OpenAI content parts: text parts joined, the refusal dropped
    ("usage_list", None, None, "stop"),
    ("tokens_huge", None, 5, "stop"),  # 2**70
    ("tokens_dict", 7, None, "stop"),
    ("tokens_inf", None, 5, "stop"),  # 1e999 parses as inf
    ("tokens_lots", None, 5, "stop"),
    ("tokens_negative", None, 5, "stop"),
    ("finish_dict", 7, 5, ""),
    ("finish_escape", 7, 5, ""),  # "stop\x1b[31m" is no finish reason
])
def test_metadata_is_kept_only_when_sound(server: HostileServer, mode: str,
                                          prompt_tokens, completion_tokens, finish) -> None:
    [sample] = ask(server, mode)
    assert sample.text == TEXT
    assert (sample.prompt_tokens, sample.completion_tokens) == (prompt_tokens, completion_tokens)
    assert sample.finish_reason == finish


@pytest.mark.parametrize("mode, where", [
    ("choices_dict", "choices: Input should be a valid array"),
    ("choices_string", "choices: Input should be a valid array"),
    ("choice_string", "choices.0: Input should be an object"),
    ("no_choices", "choices: List should have at least 1 item"),
    ("message_string", "choices.0.message: Input should be an object"),
    ("content_dict", "choices.0.message.content"),
    ("content_int", "choices.0.message.content"),
    ("content_nan", "choices.0.message.content"),
    ("deep", "recursion limit exceeded"),
    ("html", "Invalid JSON"),
    ("bad_gzip", "corrupt gzip body"),
    ("truncated_gzip", "ended before its end marker"),
])
def test_wrong_shapes_are_unusable_replies_retried_then_one_line(server: HostileServer,
                                                                 mode: str, where: str) -> None:
    before = server.counts[mode]
    with pytest.raises(OpenAIRequestError) as caught:
        ask(server, mode)
    message = str(caught.value)
    assert isinstance(caught.value, UserError)  # the CLI prints it as one line, exit 2
    assert "gave up after 2 attempts" in message and "unusable reply" in message, message
    assert where in message, message
    assert "\n" not in message and len(message) < 600
    assert server.counts[mode] - before == 2  # a failed attempt, retried within the budget


def test_reply_schema_directly() -> None:
    ok = parse_reply(json.dumps({"choices": [
        {"index": 1, "text": "b", "finish_reason": "length"},
        {"index": 0, "text": "a"}], "usage": {"prompt_tokens": 3, "completion_tokens": True}}
    ).encode(), "completions")
    assert [c.text for c in ok.choices] == ["a", "b"]
    assert (ok.prompt_tokens, ok.completion_tokens) == (3, None)  # a bool is no count
    for body in (b"", b"null", b'{"choices": [{"index": -1, "text": "a"}]}',
                 b'{"choices": [{"text": 5}]}', b'{"choices": [{"text": "\\ud800"}]}'):
        with pytest.raises(UnusableReply):
            parse_reply(body, "completions")
    with pytest.raises(UnusableReply) as caught:
        parse_reply(json.dumps({"choices": [{"message": {"content": {"k": KEY}}}]}).encode(),
                    "chat")
    assert KEY not in str(caught.value)  # the schema's words, never the server's values


# ----- size and time: bounded -----

CHILD = """
import json, resource, sys, time
from coral_core.errors import UserError
from coral_core.types import GenerationRequest, Prompt, SamplingParams
from coral_plugins.models.openai import create_model
url, mode, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
request = [GenerationRequest(Prompt("Fix f."), SamplingParams(max_new_tokens=64))]
peak = lambda: next(int(line.split()[1]) for line in open("/proc/self/status")
                    if line.startswith("VmHWM:")) / 1024  # not ru_maxrss: see hostile_cli
create_model("ok", base_url=url).generate(request)  # imports and pools warmed up
before, started = peak(), time.monotonic()
try:
    create_model(mode, base_url=url, timeout=timeout, max_retries=1,
                 backoff_base=0.01).generate(request)
    error = None
except UserError as caught:
    error = str(caught)
print(json.dumps({"grew_mib": peak() - before, "seconds": time.monotonic() - started,
                  "error": error}))
"""


def measure(server: HostileServer, mode: str, timeout: float) -> dict:
    """Run one hostile exchange in a fresh interpreter: memory growth, time, error."""
    done = subprocess.run(  # nosec B603 - this interpreter, fixed child script
        [sys.executable, "-c", CHILD, server.url, mode, str(timeout)],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("mode, words", [
    ("oversized", "declared 314572855 bytes"),  # 300 MiB announced
    ("endless", "(sent)"),  # chunked, never ends
    ("gzip_bomb", "(inflated)"),  # 64 KiB inflates to 64 MiB, endlessly
    ("deep", "recursion limit"),  # 100,000 nested arrays
])
def test_big_replies_cost_a_bounded_amount_of_memory(server: HostileServer, mode: str,
                                                     words: str) -> None:
    result = measure(server, mode, timeout=30)
    assert result["error"] and words in result["error"], result
    assert "gave up after 2 attempts" in result["error"]
    assert result["grew_mib"] < 32, result  # the cap is 1 MiB + 256 B per token asked for
    assert result["seconds"] < 20, result


@pytest.mark.parametrize("mode", ["slow_body", "slow_headers"])
def test_one_byte_per_second_meets_the_deadline_of_each_attempt(server: HostileServer,
                                                                mode: str) -> None:
    result = measure(server, mode, timeout=2)
    assert result["error"] and "no complete reply within 2s" in result["error"], result
    # Two attempts of 2 s each: the deadline counts the whole exchange (before, a
    # per-read timeout of 5 s was still waiting after 40 s).
    assert 3.5 <= result["seconds"] < 20, result


def test_the_check_before_a_run_has_a_deadline_too(
        server: HostileServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server trickling its model list a byte a second held a red-team's `coral run`
    for ever: the check's READY_SECONDS bounded each read, not the exchange."""
    from coral_plugins.models.openai import client

    monkeypatch.setattr(client, "READY_SECONDS", 1.0)
    model = create_model("m", base_url=server.url + "?mode=slow_body")
    started = time.monotonic()
    with pytest.raises(UserError, match="does not answer"):
        model.check_ready()
    assert time.monotonic() - started < 15  # two attempts of 1 s, on a loaded machine


def test_a_query_in_the_base_url_goes_after_every_path(server: HostileServer) -> None:
    """`?api-version=...` (kept, not a secret) went before the path: requests reached
    /v1?api-version=2024-06-01/chat/completions."""
    server.targets.clear()
    model = create_model("ok", base_url=server.url + "?api-version=2024-06-01")
    model.check_ready()
    request = GenerationRequest(Prompt("Fix f."), SamplingParams(max_new_tokens=8))
    assert model.generate([request])[0][0].text == TEXT
    assert server.targets[0] == "GET /v1/models?api-version=2024-06-01"
    assert set(server.targets[1:]) == {"POST /v1/chat/completions?api-version=2024-06-01"}


@pytest.mark.parametrize("option, value, words", [
    ("timeout", 1e10, "timeout must be a number of seconds in (0, 86400]"),
    ("backoff_max", 1e10, "backoff_max must be a number of seconds in [0, 86400]"),
    ("backoff_base", 1e300, "backoff_base must be a number of seconds in [0, 86400]"),
    ("extra_body", {"seed": 5, "model": "other", "top_k": 20},
     "extra_body may not set model, seed: Coral sets them from the run"),
])
def test_options_that_would_break_the_run_are_refused(option: str, value: object,
                                                      words: str) -> None:
    """A red-team's timeout = 1e10 crashed the first request (OverflowError) and left a run
    that could not be resumed; an extra_body seed and prompt replaced the run's unseen."""
    with pytest.raises(UserError) as caught:
        create_model("m", base_url="http://127.0.0.1:9/v1", **{option: value})
    assert words in str(caught.value)


def test_the_cap_follows_the_request_and_its_ceiling(server: HostileServer) -> None:
    model = create_model("m", base_url=server.url)
    assert model.reply_cap(1, 64) == (1 << 20) + 256 * 64
    assert model.reply_cap(4, 1000) == (1 << 20) + 256 * 4000
    assert model.reply_cap(100, 100_000) == 8 << 20  # the default max_reply_bytes
    small = create_model("m", base_url=server.url, max_reply_bytes=4096)
    assert small.reply_cap(1, 64) == 4096
    assert ask(server, "parts", max_reply_bytes=4096)[0].text == TEXT
    with pytest.raises(OpenAIRequestError, match="over the 4096-byte cap"):
        ask(server, "endless", max_reply_bytes=4096)
    with pytest.raises(UserError, match="max_reply_bytes"):
        create_model("m", base_url=server.url, max_reply_bytes=10)


def test_a_short_body_and_a_redirect(server: HostileServer) -> None:
    with pytest.raises(OpenAIRequestError, match="connection failed: RemoteProtocolError"):
        ask(server, "short_body")
    with pytest.raises(OpenAIRequestError, match="HTTP 302.*redirects are not followed"):
        ask(server, "redirect")
    assert server.counts["redirect"] == 1  # not retried, not followed


# ----- secrets and terminal control -----

def test_an_echoed_key_is_redacted_everywhere(server: HostileServer,
                                              caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    failures = []
    for mode in ("key_echo", "key_echo_400"):
        with pytest.raises(OpenAIRequestError) as caught:
            ask(server, mode)
        failures.append(caught.value)
    texts = [str(f) for f in failures] + [repr(f) for f in failures]
    coral_logs = "\n".join(r.getMessage() for r in caplog.records
                           if r.name.startswith("coral"))
    assert "retry 1/1" in coral_logs and "Bearer ***" in coral_logs
    assert not [t for t in texts + [coral_logs] if KEY in t]
    assert all("Bearer ***" in t for t in texts[:2])


def test_terminal_control_and_huge_error_bodies_are_escaped(server: HostileServer) -> None:
    with pytest.raises(OpenAIRequestError) as caught:
        ask(server, "escape_error")
    message = str(caught.value)
    assert "\x1b" not in message and "\r" not in message and "\n" not in message
    assert "\\x1b[2J" in message and len(message) < 500


def test_excerpt_and_url_redaction() -> None:
    text = f"key={KEY} auth: Bearer abc.def Basic dXNlcjpwYXNz \x1b[31m\u202e end " + "y" * 500
    cleaned = excerpt(text, [KEY])
    assert KEY not in cleaned and "abc.def" not in cleaned and "dXNlcjpwYXNz" not in cleaned
    assert "\x1b" not in cleaned and "\\x1b" in cleaned and "\\u202e" in cleaned
    assert len(cleaned) <= 203
    url = f"https://me:{KEY}@host:8000/v1?api-version=2024&api_key={KEY}&sig=s3cret"
    assert url_credentials(url) == ["user info (user:password@)", "query parameter 'api_key'",
                                    "query parameter 'sig'"]
    shown = redact_url(url)
    assert KEY not in shown and "s3cret" not in shown and "api-version=2024" in shown
    assert url_credentials("http://127.0.0.1:8000/v1?api-version=2024") == []


@pytest.mark.parametrize("url", [
    f"http://user:{KEY}@127.0.0.1:8000/v1", f"http://127.0.0.1:8000/v1?api_key={KEY}",
    f"http://127.0.0.1:8000/v1?token={KEY}",
])
def test_a_base_url_with_credentials_is_refused_without_showing_them(url: str) -> None:
    with pytest.raises(UserError) as caught:
        create_model("m", base_url=url)
    assert "carries credentials" in str(caught.value) and KEY not in str(caught.value)


# ----- end to end: `coral run`, as a user runs it -----

def _experiment(tmp_path: Path) -> Path:
    path = tmp_path / "hostile.toml"
    path.write_text('[dataset]\nproblems = ["sieve"]\n[model]\nmax_new_tokens = 64\n'
                    "[model.options]\nmax_retries = 1\nbackoff_base = 0.01\ntimeout = 3\n"
                    "[run]\nsamples = 1\n")
    return path


@pytest.mark.parametrize("mode, words", [
    ("oversized", "over the"), ("endless", "over the"), ("gzip_bomb", "(inflated)"),
    ("content_dict", "unusable reply"), ("deep", "unusable reply"),
    ("key_echo", "HTTP 503"), ("slow_headers", "no complete reply within 3s"),
])
def test_coral_run_fails_in_one_line_with_bounded_cost_and_no_secret(
        server: HostileServer, tmp_path: Path, data_dir: Path, mode: str, words: str) -> None:
    run_dir = tmp_path / "run"
    result = run_measured("run", "--plugin", "quixbugs", "--config", str(_experiment(tmp_path)),
                          "--model", f"openai:{mode}", "--base-url", server.url,
                          "--data-dir", str(data_dir), "--out", str(run_dir), "--json",
                          env=base_env(OPENAI_API_KEY=KEY))
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert len(result.error_lines) == 1 and result.error_lines[0].startswith("coral: error: ")
    assert words in result.stderr, result.stderr
    assert not leaks(KEY, result.stdout, result.stderr, run_dir)
    assert result.peak_mib < 250, result  # GBs before the caps
    assert result.seconds < 60, result
    with sqlite3.connect(run_dir / "coral.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM generations").fetchone()[0] == 0
    assert (run_dir / "coral.sqlite").stat().st_size < 1 << 20  # was 946 MB


def test_coral_run_with_a_secret_in_the_base_url_stops_before_the_run_directory(
        server: HostileServer, tmp_path: Path, data_dir: Path) -> None:
    run_dir = tmp_path / "run"
    url = server.url.replace("http://", f"http://user:{KEY}@") + f"?api_key={KEY}"
    started = time.monotonic()
    result = run_measured("run", "--plugin", "quixbugs", "--config", str(_experiment(tmp_path)),
                          "--model", "openai:ok", "--base-url", url, "--data-dir", str(data_dir),
                          "--out", str(run_dir), env=base_env())
    assert result.returncode == 2 and len(result.error_lines) == 1, result.stderr
    assert "carries credentials" in result.stderr and KEY not in result.stderr
    assert not run_dir.exists()
    assert time.monotonic() - started < 60
