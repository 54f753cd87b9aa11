"""The OpenAI-compatible backend against a real server (`transformers serve` on the tiny
model), with a real fault-injecting proxy in between where a test needs faults or counts."""

from __future__ import annotations

import dataclasses
import logging
import subprocess  # nosec B404 - runs this interpreter to check import weight
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from coral_core.errors import UserError
from coral_core.types import GenerationRequest, Message, Prompt, SamplingParams
from coral_plugins.models import openai as openai_backend
from coral_plugins.models.openai import OpenAIRequestError, create_model
from coral_plugins.models.openai.retry import Backoff, is_retryable_status, parse_retry_after
from fault_proxy import FaultProxy

if TYPE_CHECKING:  # registered in conftest.py; importing it first would skip assert rewriting
    from serve_fixture import ServedModel

KEY = "sk-coral-test-SECRET-5f2c8e1d9a"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CORAL_TEST_KEY"):
        monkeypatch.delenv(name, raising=False)


def requests_for(count: int, n: int = 1, max_new_tokens: int = 8, **params) -> list:
    """Prompts of growing length, so prompt_tokens reveal the order of the results."""
    return [
        GenerationRequest(prompt=Prompt("def f(x):\n    return x" + " + x" * i), task_id=f"t{i}",
                          params=SamplingParams(n=n, max_new_tokens=max_new_tokens, **params))
        for i in range(count)
    ]


def model_for(served: ServedModel, url: str | None = None, **options):
    options.setdefault("backoff_base", 0.02)
    return create_model(served.model, base_url=url or served.base_url, **options)


def assert_in_order(results: list) -> None:
    firsts = [samples[0].prompt_tokens for samples in results]
    assert firsts == sorted(firsts) and len(set(firsts)) == len(firsts), firsts


# ----- the happy path -----

@pytest.mark.parametrize("mode", ["chat", "completions"])
def test_every_sample_comes_back_in_both_modes(served_tiny_model: ServedModel, mode: str) -> None:
    with FaultProxy(served_tiny_model.base_url, rate=0.0) as proxy:
        model = model_for(served_tiny_model, proxy.url, mode=mode)
        results = model.generate(requests_for(4, n=3))
    assert [len(samples) for samples in results] == [3, 3, 3, 3]
    assert_in_order(results)
    for sample in (s for samples in results for s in samples):
        assert isinstance(sample.text, str) and sample.text
        assert sample.prompt_tokens and sample.prompt_tokens > 0
        assert sample.completion_tokens == 8 and sample.finish_reason == "length"
        assert sample.seconds > 0
    key = "messages" if mode == "chat" else "prompt"
    assert all(key in body for body in proxy.bodies)
    assert all(body["model"] == served_tiny_model.model for body in proxy.bodies)
    assert proxy.counts["ok"] == model.stats.calls == 12  # the server ignores n: topped up


def test_chat_mode_applies_the_server_side_chat_template(served_tiny_model: ServedModel) -> None:
    request = requests_for(1)
    chat = model_for(served_tiny_model, mode="chat").generate(request)[0][0]
    plain = model_for(served_tiny_model, mode="completions").generate(request)[0][0]
    assert chat.prompt_tokens > plain.prompt_tokens  # "<|user|>\n...<|assistant|>\n" added


def test_n_is_topped_up_with_distinct_seeds(served_tiny_model: ServedModel) -> None:
    with FaultProxy(served_tiny_model.base_url, rate=0.0) as proxy:
        model = model_for(served_tiny_model, proxy.url)
        first = model.generate(requests_for(1, n=4, seed=7))
        asked_first = [body["n"] for body in proxy.bodies]
        second = model.generate(requests_for(1, n=2, seed=7))
    assert len(first[0]) == 4 and len(second[0]) == 2
    assert asked_first == [4, 1, 1, 1]  # the server gave 1 of 4: three more calls
    assert sorted(body["seed"] for body in proxy.bodies[:4]) == [7, 8, 9, 10]  # in parallel
    assert [body["n"] for body in proxy.bodies[4:]] == [1, 1]  # the cap was learned


def test_a_server_that_honours_n_is_asked_once(served_tiny_model: ServedModel) -> None:
    with FaultProxy(served_tiny_model.base_url, rate=0.0, honour_n=True) as proxy:
        results = model_for(served_tiny_model, proxy.url).generate(requests_for(2, n=3))
    assert [len(samples) for samples in results] == [3, 3]
    assert [body["n"] for body in proxy.bodies] == [3, 3]
    sample = results[0][0]
    assert sample.completion_tokens is None  # usage sums 3 choices: per-sample unknown
    assert sample.prompt_tokens and sample.prompt_tokens > 0


@pytest.mark.parametrize("status", [400, 500])
def test_a_server_that_rejects_n_gets_single_requests(served_tiny_model: ServedModel,
                                                      status: int) -> None:
    with FaultProxy(served_tiny_model.base_url, rate=0.0, reject_n=status) as proxy:
        results = model_for(served_tiny_model, proxy.url).generate(requests_for(1, n=3))
    assert len(results[0]) == 3
    assert [body["n"] for body in proxy.bodies] == [3, 1, 1, 1]
    assert proxy.counts["reject_n"] == 1


@pytest.mark.parametrize("mode", ["chat", "completions"])
def test_stop_sequences_end_the_text(served_tiny_model: ServedModel, mode: str) -> None:
    model = model_for(served_tiny_model, mode=mode)
    free = model.generate(requests_for(1, max_new_tokens=32, temperature=0.0))[0][0]
    # A short ASCII stop string that first occurs in the middle of the free text.
    start = next(i for i in range(4, len(free.text) - 2)
                 if free.text[i:i + 2].isascii() and free.text[i:i + 2].isalpha()
                 and free.text.find(free.text[i:i + 2]) == i)
    stop = free.text[start:start + 2]
    stopped = model.generate(
        requests_for(1, max_new_tokens=32, temperature=0.0, stop=(stop, "never-seen-stop")))[0][0]
    assert stopped.text == free.text[:start]
    assert stopped.finish_reason == "stop"
    assert stopped.completion_tokens < free.completion_tokens  # the server stopped early too


# ----- concurrency -----

def test_concurrency_bound_is_respected(served_tiny_model: ServedModel) -> None:
    with FaultProxy(served_tiny_model.base_url, rate=0.0, latency=0.3) as proxy:
        model_for(served_tiny_model, proxy.url, concurrency=3).generate(requests_for(10))
        assert proxy.max_in_flight == 3
    with FaultProxy(served_tiny_model.base_url, rate=0.0, latency=0.3) as proxy:
        results = model_for(served_tiny_model, proxy.url).generate(requests_for(20))
        assert proxy.max_in_flight == 8  # the default
    assert_in_order(results)


# ----- faults -----

def test_faults_at_30_percent_still_return_every_sample(served_tiny_model: ServedModel,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="coral_plugins.models.openai.client")
    max_retries = 8
    with FaultProxy(served_tiny_model.base_url, rate=0.3, seed=1234, slow_seconds=30,
                    retry_after=1) as proxy:
        model = model_for(served_tiny_model, proxy.url, concurrency=4, timeout=2.0,
                          max_retries=max_retries, backoff_base=0.05)
        results = model.generate(requests_for(12, n=2))
    assert [len(samples) for samples in results] == [2] * 12
    assert_in_order(results)
    stats = model.stats
    # Every injected fault cost exactly one retry, and nothing else failed.
    assert stats.calls == proxy.counts["ok"] == 24
    assert stats.retries == proxy.injected
    assert dict(stats.failures) == {
        kind: count for kind, count in {
            "http_500": proxy.counts["500"], "http_429": proxy.counts["429"],
            "connection": proxy.counts["reset"], "timeout": proxy.counts["slow"],
        }.items() if count}
    assert all(proxy.counts[kind] > 0 for kind in ("500", "429", "reset", "slow")), proxy.counts
    assert 0.2 < proxy.injected / proxy.requests < 0.45
    assert max(proxy.attempts_per_call.values()) <= max_retries + 1
    assert len(proxy.attempts_per_call) == 24
    assert "retried" in caplog.text and "HTTP 429" in caplog.text


def test_retry_after_is_honoured(served_tiny_model: ServedModel) -> None:
    with FaultProxy(served_tiny_model.base_url, script=["429", "ok"], retry_after=1) as proxy:
        model = model_for(served_tiny_model, proxy.url, backoff_base=0.001)
        start = time.perf_counter()
        model.generate(requests_for(1))
        elapsed = time.perf_counter() - start
    assert proxy.counts == {"429": 1, "ok": 1}
    assert elapsed >= 1.0  # waited as long as the server asked, not the tiny backoff


@pytest.mark.parametrize("fault, words", [
    ("500", "HTTP 500"), ("reset", "connection failed"), ("slow", "no complete reply within 0.5s"),
])
def test_retries_give_up_after_the_maximum(served_tiny_model: ServedModel, fault: str,
                                           words: str) -> None:
    with FaultProxy(served_tiny_model.base_url, rate=1.0, faults=(fault,)) as proxy:
        model = model_for(served_tiny_model, proxy.url, max_retries=2, timeout=0.5)
        with pytest.raises(OpenAIRequestError) as caught:
            model.generate(requests_for(1))
    assert isinstance(caught.value, UserError)
    message = str(caught.value)
    assert "gave up after 3 attempts (max_retries=2)" in message and words in message
    assert proxy.requests == 3 and list(proxy.attempts_per_call.values()) == [3]


def test_a_client_error_is_not_retried(served_tiny_model: ServedModel) -> None:
    with FaultProxy(served_tiny_model.base_url, rate=0.0) as proxy:
        model = create_model("no-such-model", base_url=proxy.url)
        with pytest.raises(OpenAIRequestError, match="HTTP 400") as caught:
            model.generate(requests_for(1))
    assert caught.value.status == 400 and proxy.requests == 1


# ----- the API key -----

def test_api_key_is_sent_but_never_logged_or_recorded(served_tiny_model: ServedModel,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    caplog.set_level(logging.DEBUG)
    with FaultProxy(served_tiny_model.base_url, rate=0.5, seed=3, slow_seconds=5) as proxy:
        model = model_for(served_tiny_model, proxy.url, timeout=1.0, max_retries=10)
        results = model.generate(requests_for(3, n=2))
    with FaultProxy(served_tiny_model.base_url, rate=1.0, faults=("500",)) as failing:
        with pytest.raises(OpenAIRequestError) as caught:
            model_for(served_tiny_model, failing.url, max_retries=1).generate(requests_for(1))
    assert proxy.injected > 0  # the retry paths were logged too
    assert {h.get("authorization") for h in proxy.headers + failing.headers} == {f"Bearer {KEY}"}
    assert "httpcore" in caplog.text or "HTTP Request" in caplog.text  # DEBUG really captured
    seen = [caplog.text, repr(model), repr(model.options), repr(model.stats), repr(results),
            str(caught.value), repr(caught.value),
            repr([dataclasses.asdict(s) for samples in results for s in samples])]
    assert not [text for text in seen if KEY in text]


def test_api_key_env_names_another_variable(served_tiny_model: ServedModel,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORAL_TEST_KEY", KEY)
    with FaultProxy(served_tiny_model.base_url, rate=0.0) as proxy:
        model_for(served_tiny_model, proxy.url, api_key_env="CORAL_TEST_KEY").generate(
            requests_for(1))
        model_for(served_tiny_model, proxy.url).generate(requests_for(1))  # OPENAI_API_KEY unset
    assert [h.get("authorization") for h in proxy.headers] == [f"Bearer {KEY}", None]


def test_the_key_itself_is_refused_as_an_option() -> None:
    with pytest.raises(UserError, match="OPENAI_API_KEY"):
        create_model("m", base_url="http://127.0.0.1:1/v1", api_key=KEY)


# ----- options, registration, policy -----

def test_base_url_comes_from_the_option_or_the_environment(monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    with pytest.raises(UserError) as caught:
        create_model("m")
    assert "--base-url" in str(caught.value) and "OPENAI_BASE_URL" in str(caught.value)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1/")
    assert create_model("m").options.base_url == "http://127.0.0.1:9/v1"
    assert create_model("m", base_url="http://h:8000").options.base_url == "http://h:8000/v1"
    assert create_model("m", base_url=None).options.base_url == "http://127.0.0.1:9/v1"


@pytest.mark.parametrize("options, words", [
    ({"mode": "edit"}, "mode"), ({"concurrency": 0}, "concurrency"),
    ({"max_retries": -1}, "max_retries"), ({"timeout": "fast"}, "timeout"),
    ({"temperature": 1}, "unknown option"), ({"base_url": "localhost:8000"}, "base URL"),
    ({"max_n_per_request": 0}, "max_n_per_request"),
])
def test_bad_options_are_user_errors(options: dict, words: str) -> None:
    options = {"base_url": "http://127.0.0.1:9/v1", **options}
    with pytest.raises(UserError, match=words):
        create_model("m", **options)
    with pytest.raises(UserError, match="openai:MODEL"):
        create_model("", base_url="http://127.0.0.1:9/v1")


def test_adapters_are_refused() -> None:
    model = create_model("m", base_url="http://127.0.0.1:9/v1")
    assert type(model).supports_adapters is False
    with pytest.raises(UserError, match="adapter"):
        model.generate([GenerationRequest(prompt=Prompt("x"), adapter="/some/adapter")])


# ----- structured prompts: what each endpoint is sent -----

CHAT = Prompt(messages=(Message("system", "Be terse."), Message("user", "Fix f."),
                        Message("assistant", "Which f?"), Message("user", "def f(): pass")))


@pytest.mark.parametrize("mode, prompt, path, fields", [
    ("chat", Prompt("Fix f."), "/chat/completions",
     {"messages": [{"role": "user", "content": "Fix f."}]}),
    ("chat", CHAT, "/chat/completions", {"messages": [
        {"role": "system", "content": "Be terse."}, {"role": "user", "content": "Fix f."},
        {"role": "assistant", "content": "Which f?"},
        {"role": "user", "content": "def f(): pass"}]}),
    ("completions", Prompt("Fix f."), "/completions", {"prompt": "Fix f."}),
    ("completions", Prompt(messages=(Message("user", "Fix f."),)), "/completions",
     {"prompt": "Fix f."}),
    ("chat", Prompt(prefix="def f(x):\n    return ", suffix="\n\nprint(f(2))\n"),
     "/completions", {"prompt": "def f(x):\n    return ", "suffix": "\n\nprint(f(2))\n"}),
    ("completions", Prompt(prefix="", suffix="x = 1\n"), "/completions",
     {"prompt": "", "suffix": "x = 1\n"}),
])
def test_each_prompt_shape_goes_to_its_endpoint(mode: str, prompt: Prompt, path: str,
                                                fields: dict) -> None:
    model = create_model("m", base_url="http://127.0.0.1:9/v1", mode=mode)
    request = GenerationRequest(prompt, SamplingParams(max_new_tokens=5, seed=4, stop=("\n",)))
    body = model._body(request, 2, 1)
    assert body == {"model": "m", "max_tokens": 5, "temperature": 0.8, "top_p": 0.95,
                    "n": 2, "seed": 5, "stop": ["\n"], **fields}
    assert model._endpoint(prompt) == path.strip("/").split("/")[0]


def test_the_system_prompt_option_never_doubles_a_system_turn() -> None:
    model = create_model("m", base_url="http://127.0.0.1:9/v1", system_prompt="Only code.")
    plain = model._body(GenerationRequest(Prompt("Fix f.")), 1, 0)["messages"]
    assert plain == [{"role": "system", "content": "Only code."},
                     {"role": "user", "content": "Fix f."}]
    own = model._body(GenerationRequest(CHAT), 1, 0)["messages"]
    assert [m["content"] for m in own if m["role"] == "system"] == ["Be terse."]


def test_a_chat_cannot_be_sent_to_the_completions_endpoint() -> None:
    model = create_model("m", base_url="http://127.0.0.1:9/v1", mode="completions")
    with pytest.raises(UserError, match='chat of 4 turns.*mode = "chat"'):
        model.generate([GenerationRequest(CHAT)])  # refused before any call (port 9 is shut)


def test_registered_under_openai_and_light_to_import() -> None:
    registered = {}
    openai_backend.coral_register_models(lambda name, factory: registered.update({name: factory}))
    assert registered == {"openai": create_model}
    code = ("import sys, coral_plugins.models.openai; "
            "sys.exit(bool({'torch', 'transformers'} & set(sys.modules)))")
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0  # nosec B603


def test_backoff_grows_with_jitter_and_respects_retry_after() -> None:
    import random

    backoff, rng = Backoff(base=1.0, maximum=8.0), random.Random(0)
    for retry, ceiling in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (9, 8.0)]:
        delays = {backoff.delay(retry, rng=rng) for _ in range(20)}
        assert all(ceiling / 2 <= d <= ceiling for d in delays) and len(delays) > 1
    assert backoff.delay(1, retry_after=5.0, rng=rng) == 5.0
    assert backoff.delay(1, retry_after=500.0, rng=rng) == 8.0  # capped at maximum
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "250", "Retry-After": "3"}) == 0.25
    assert parse_retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:10 GMT"},
                             now=1445412480.0) == 10.0
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({}) is None
    assert [is_retryable_status(s) for s in (400, 401, 404, 408, 429, 500, 503)] == [
        False, False, False, True, True, True, True]
    # a server that does not implement the endpoint never will: no ten seconds of retries
    assert not any(is_retryable_status(s) for s in (501, 505, 510))


def test_the_docs_cover_every_option() -> None:
    docs = (Path(__file__).parent.parent / "docs" / "models-openai.md").read_text()
    for option in (f.name for f in dataclasses.fields(openai_backend.OpenAIOptions)):
        assert f"`{option}`" in docs, option


def test_an_echoed_suffix_is_cut_only_when_asked() -> None:
    """A right middle may end like the suffix (`xs)` before `)`): by default nothing is cut;
    `strip_suffix_echo` is for servers that return middle + suffix (transformers serve)."""
    from coral_core.types import Prompt
    infill = Prompt(prefix="print(len(", suffix=")")
    assert create_model("m", base_url="http://127.0.0.1:1/v1")._echoed_suffix(infill) == ""
    stripping = create_model("m", base_url="http://127.0.0.1:1/v1", strip_suffix_echo=True)
    assert stripping._echoed_suffix(infill) == ")"
    assert stripping._echoed_suffix(Prompt("an instruction")) == ""
    with pytest.raises(UserError, match="strip_suffix_echo"):
        create_model("m", base_url="http://127.0.0.1:1/v1", strip_suffix_echo="yes")
