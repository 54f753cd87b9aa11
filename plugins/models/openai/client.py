"""The OpenAI-compatible client behind ``--model openai:MODEL`` (imported when used).

Works with vLLM, Ollama, llama.cpp's server, ``transformers serve`` and hosted APIs.

Prompts: the chat endpoint (`mode = "chat"`) gets `Prompt.as_messages()` (an instruction
is one user turn; option `system_prompt` adds a system turn unless the prompt has its
own); the completions endpoint gets the instruction text (a chat of one user turn is
sent as its text; longer chats are refused). An infilling prompt always goes to the
completions endpoint, as `prompt` = prefix and `suffix` = suffix (OpenAI's `suffix`
field; servers without FIM support refuse or ignore it; option `strip_suffix_echo` cuts
the suffix from the end of replies of a server that returns middle + suffix, as
`transformers serve` does), or, with option `fim_template`
(a family such as "qwen", or a format with {prefix} and {suffix}), rendered here into one
`prompt` with that family's sentinels, whose stop tokens join the stop sequences. One
Coral request asks for ``n`` samples; servers that return fewer choices than asked (many
ignore ``n``) are topped up with further requests, so exactly ``n`` come back. Requests
run on a bounded thread pool, and transient failures (429, 5xx, timeouts, dropped
connections, replies over the size cap or of the wrong shape) are retried with exponential
backoff and jitter up to a limit.

The API key is read from the environment on every request by an httpx auth hook: no
Coral object holds it, so it cannot reach a record, a repr or a log line.

Every server is treated as hostile: each attempt runs under a deadline that covers the
whole exchange (`transport`), its body is read under a byte cap derived from the request
(`body`), the reply is validated against the shape it must have before any of it is used
(`reply`), and what the server wrote is redacted and escaped before it reaches an error
or a log line (`redaction`). The options are checked before any of it (`options`).
"""

from __future__ import annotations

import json
import logging
import os
import random
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Sequence

import httpx

from coral_core.errors import UserError
from coral_core.stops import cut_at_stop
from coral_core.types import Generation, GenerationRequest, Prompt

from .body import BadEncoding, BodyTooLarge, read_capped
from .options import OpenAIOptions
from .redaction import excerpt, redact_url
from .reply import Reply, UnusableReply, parse_reply
from .retry import Backoff, is_retryable_status, parse_retry_after
from .transport import deadline, deadline_client

log = logging.getLogger(__name__)

CALL_ID_HEADER = "X-Coral-Call-Id"
# A reply may hold this much besides its texts (ids, usage, logprobs a server adds)...
REPLY_BASE_BYTES = 1 << 20
# ...and this much per token asked for (JSON-escaped text, per-token fields).
REPLY_BYTES_PER_TOKEN = 256
ERROR_BODY_BYTES = 64 * 1024  # what is read of an error reply, for its excerpt
READY_SECONDS = 10.0  # the check before a run: connect and first byte
READY_ATTEMPTS = 2
READY_BODY_BYTES = 1 << 20  # a model list is small; a bigger reply is not one


class OpenAIRequestError(UserError):
    """A request failed for good: a non-retryable status, or retries used up.

    A UserError because the fix is on the user's side (server down, wrong URL or model
    name, missing key, rate limit too tight for the chosen concurrency).
    """

    def __init__(self, message: str, *, status: int | None = None, attempts: int = 1):
        super().__init__(message)
        self.status = status
        self.attempts = attempts


class _EnvKeyAuth(httpx.Auth):
    """Adds `Authorization: Bearer $VAR` per request; the key lives only in the environment."""

    def __init__(self, env_var: str) -> None:
        self.env_var = env_var

    def auth_flow(self, request: httpx.Request) -> Iterator[httpx.Request]:
        key = os.environ.get(self.env_var)
        if key:
            request.headers["Authorization"] = f"Bearer {key}"
        yield request


@dataclass(frozen=True)
class CallStats:
    """Cumulative HTTP traffic of one model object: useful to see what faults cost."""

    calls: int = 0  # logical calls that succeeded
    attempts: int = 0  # HTTP attempts, successful or not
    retries: int = 0  # attempts repeated after a transient failure
    failures: Mapping[str, int] = field(default_factory=dict)  # transient failures by kind


@dataclass
class _Slot:
    """Progress of one GenerationRequest: samples keyed by their first sample offset."""

    parts: dict[int, list[Generation]] = field(default_factory=dict)
    have: int = 0
    in_flight: int = 0
    next_offset: int = 0
    calls: int = 0


class _Aborted(Exception):
    """Another call failed for good; this one stops retrying."""


class OpenAIModel:
    """Completes Coral requests on an OpenAI-compatible server (see the module docstring)."""

    supports_adapters = False  # serve an adapter as its own model instead (vLLM --lora-modules)

    def __init__(self, model: str, options: OpenAIOptions) -> None:
        self.model = model
        self.name = f"openai:{model}"
        self.options = options
        self._backoff = Backoff(options.backoff_base, options.backoff_max)
        self._rng = random.Random()  # nosec B311 - jitter only, nothing secret or reproducible
        self._lock = threading.Lock()
        self._client: httpx.Client | None = None
        # Most choices one reply has carried when it carried fewer than asked.
        self._choices_cap: int | None = options.max_n_per_request
        self._calls = self._attempts = self._retries = 0
        self._failures: Counter[str] = Counter()
        self._warned_unsent: set[str] = set()

    def __repr__(self) -> str:
        return (f"OpenAIModel(name={self.name!r}, base_url={self.options.base_url!r}, "
                f"mode={self.options.mode!r})")

    @property
    def stats(self) -> CallStats:
        with self._lock:
            return CallStats(self._calls, self._attempts, self._retries, dict(self._failures))

    def close(self) -> None:
        """Close pooled connections; the model stays usable (a new pool opens on demand)."""
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def _http(self) -> httpx.Client:
        """One client (and connection pool) per model object, made on first use."""
        with self._lock:
            if self._client is None:
                self._client = self._make_client()
            return self._client

    def _make_client(self) -> httpx.Client:
        return deadline_client(
            base_url=self.options.base_url, timeout=self.options.timeout,
            connections=self.options.concurrency, auth=_EnvKeyAuth(self.options.api_key_env),
            headers={"User-Agent": "coral-openai", "Accept-Encoding": "gzip, deflate"},
        )

    def check_ready(self) -> None:
        """Quick requests (no retries) before a run creates its folder: a server that does
        not answer, refuses the key, or is not an OpenAI-compatible API (a web server or a
        proxy at that URL) is one line now, not a run directory left after the first
        batch's retries. GET /models answering OpenAI's list will do; a server without
        /models must at least take a POST on the endpoint the run uses (an empty body:
        a 400 or 422 for it costs no generation)."""
        status, detail, data = self._ready_request("GET", "/models")
        if status in (401, 403):
            raise UserError(f"openai: {self.options.base_url} refused the API key (HTTP "
                            f"{status}: {detail}); set {self.options.api_key_env}")
        listed = isinstance(data, dict) and isinstance(data.get("data"), list)
        if 200 <= status < 300 and listed:
            return  # OpenAI's model list
        path = "/chat/completions" if self.options.mode == "chat" else "/completions"
        posted, detail, data = self._ready_request("POST", path)
        if posted in (401, 403):
            raise UserError(f"openai: {self.options.base_url} refused the API key (HTTP "
                            f"{posted}: {detail}); set {self.options.api_key_env}")
        # no such route (a web server, a proxy); a 404 in JSON is an API's own answer
        # (some say "model not found" to an empty body)
        if posted in (405, 501) or posted == 404 and not isinstance(data, dict):
            raise UserError(f"openai: {self.options.base_url} answers, but not as an "
                            f"OpenAI-compatible API (GET /models: HTTP {status}"
                            f"{', not a model list' if 200 <= status < 300 else ''}; POST "
                            f"{path}: HTTP {posted}); fix --base-url / OPENAI_BASE_URL (it "
                            "usually ends in /v1)")

    def _ready_request(self, method: str, path: str) -> tuple[int, str, Any]:
        """(HTTP status, an error excerpt for 401/403, the reply's JSON or None) of one
        readiness request; a server that does not answer is a UserError."""
        for attempt in range(READY_ATTEMPTS):  # a refused connection is final at once
            try:
                body = {"json": {}} if method == "POST" else {}
                # a deadline on the whole exchange: READY_SECONDS bounds each read only,
                # and a server sending a byte a second held a red-team's run for ever
                with deadline(READY_SECONDS), self._http().stream(
                        method, path, timeout=READY_SECONDS, **body) as response:
                    status = response.status_code
                    if status in (401, 403):
                        return status, self._error_excerpt(response), None
                    return status, "", _json_body(response)
            except httpx.HTTPError as error:
                if isinstance(error, httpx.ConnectError) or attempt == READY_ATTEMPTS - 1:
                    reason = self._clean(str(error) or type(error).__name__)
                    raise UserError(f"openai: {self.options.base_url} does not answer "
                                    f"({reason}); start the server, or fix --base-url / "
                                    "OPENAI_BASE_URL") from None
        raise AssertionError("not reached")  # the last attempt returns or raises

    def reply_cap(self, count: int, max_new_tokens: int) -> int:
        """Most bytes a reply of `count` samples of `max_new_tokens` tokens may take, sent
        or inflated: 1 MiB + 256 B per token asked for, at most `max_reply_bytes`."""
        wanted = REPLY_BASE_BYTES + REPLY_BYTES_PER_TOKEN * count * max(max_new_tokens, 1)
        return min(self.options.max_reply_bytes, wanted)

    # ----- scheduling -----

    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Generation]]:
        """Exactly `request.params.n` generations per request, in request order."""
        for request in requests:
            if request.adapter is not None:  # refused before a run starts; kept for callers
                raise UserError(
                    "openai: adapters cannot be applied per request on a server; serve the "
                    "adapter as its own model (e.g. vLLM --lora-modules) and use openai:NAME"
                )
            self._prompt_fields(request.prompt)  # an unsendable prompt fails before any call
            self._warn_unsent(request)
        before = self.stats
        slots = [_Slot() for _ in requests]
        abort = threading.Event()
        pool = ThreadPoolExecutor(max_workers=self.options.concurrency,
                                  thread_name_prefix="coral-openai")
        pending: dict[Future[list[Generation]], tuple[int, int, int]] = {}

        def plan(index: int) -> None:
            slot, want = slots[index], requests[index].params.n
            missing = want - slot.have - slot.in_flight
            while missing > 0:
                count = min(missing, self._choices_cap or missing)
                future = pool.submit(self._call, requests[index], count, slot.calls, abort)
                pending[future] = (index, slot.next_offset, count)
                slot.next_offset += count
                slot.calls += 1
                slot.in_flight += count
                missing -= count

        try:
            for index in range(len(requests)):
                plan(index)
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    index, offset, count = pending.pop(future)
                    samples = future.result()[:count]
                    slot = slots[index]
                    slot.in_flight -= count
                    slot.parts[offset] = samples
                    slot.have += len(samples)
                    if len(samples) < count:
                        self._learn_cap(len(samples), count)
                        plan(index)
        except BaseException:
            abort.set()
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        after = self.stats
        if after.retries > before.retries:
            kinds = {kind: count - before.failures.get(kind, 0)
                     for kind, count in sorted(after.failures.items())}
            log.warning("openai: retried %d transient failure(s) in this batch (%s)",
                        after.retries - before.retries,
                        ", ".join(f"{kind}: {count}" for kind, count in kinds.items() if count))
        return [
            [sample for offset in sorted(slot.parts) for sample in slot.parts[offset]][:r.params.n]
            for slot, r in zip(slots, requests)
        ]

    def _learn_cap(self, got: int, asked: int) -> None:
        with self._lock:
            if self._choices_cap is None or got < self._choices_cap:
                log.info("openai: server returned %d of %d choices; asking for at most %d "
                         "per request from now on", got, asked, got)
                self._choices_cap = got

    def _warn_unsent(self, request: GenerationRequest) -> None:
        params = request.params
        unsent = [name for name, unset in (("top_k", params.top_k == 0),
                                           ("repetition_penalty", params.repetition_penalty == 1.0))
                  if not unset and name not in self.options.extra_body]
        for name in unsent:
            if name not in self._warned_unsent:
                self._warned_unsent.add(name)
                log.warning("openai: %s is not part of the OpenAI API and is not sent; servers "
                            "that accept it (vLLM) can get it through option extra_body", name)

    # ----- one logical call, with retries -----

    def _body(self, request: GenerationRequest, count: int, call: int) -> dict[str, Any]:
        params = request.params
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": params.max_new_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "n": count,
            # A distinct seed per top-up call: otherwise a seeded server repeats one sample.
            "seed": params.seed + call,
        }
        stops = list(params.stop)
        if request.prompt.kind == "infill" and self.options.fim_template:
            from coral_core.fim.templates import template_for
            stops += [s for s in template_for(self.options.fim_template).stops
                      if s not in stops]
        if stops:
            body["stop"] = stops
        body.update(self._prompt_fields(request.prompt)[1])
        body.update(self.options.extra_body)
        return body

    def _endpoint(self, prompt: Prompt) -> str:
        """"chat" or "completions": infilling needs the completions endpoint's `suffix`."""
        return "completions" if prompt.kind == "infill" else self.options.mode

    def _prompt_fields(self, prompt: Prompt) -> tuple[str, dict[str, Any]]:
        """The endpoint and the body fields that carry `prompt` (see the module docstring)."""
        endpoint = self._endpoint(prompt)
        if prompt.kind == "infill":
            if self.options.fim_template:
                from coral_core.fim.templates import template_for
                template = template_for(self.options.fim_template)
                return endpoint, {"prompt": template.render(prompt.prefix or "",
                                                            prompt.suffix or "")}
            return endpoint, {"prompt": prompt.prefix or "", "suffix": prompt.suffix or ""}
        turns = prompt.as_messages()
        if endpoint == "chat":
            messages = [{"role": m.role, "content": m.content} for m in turns]
            if self.options.system_prompt and not any(m.role == "system" for m in turns):
                messages.insert(0, {"role": "system", "content": self.options.system_prompt})
            return endpoint, {"messages": messages}
        if len(turns) == 1 and turns[0].role == "user":
            return endpoint, {"prompt": turns[0].content}
        raise UserError(
            f"openai: the prompt is a chat of {len(turns)} turns, which the completions "
            "endpoint cannot take; use mode = \"chat\""
        )

    def _call(self, request: GenerationRequest, count: int, call: int,
              abort: threading.Event) -> list[Generation]:
        """POST until a usable reply; transient failures wait and retry, others raise.

        `call` numbers the calls made for this request (0 first, then top-ups). Every
        failed attempt counts against `max_retries`: timeouts, dropped connections, 429 and
        5xx, replies over the size cap and replies of the wrong shape.
        """
        endpoint = self._endpoint(request.prompt)
        path = "/chat/completions" if endpoint == "chat" else "/completions"
        body = self._body(request, count, call)
        headers = {CALL_ID_HEADER: uuid.uuid4().hex}
        client, failures = self._http(), 0
        where = f"POST {redact_url(str(client.build_request('POST', path).url))}"
        while True:
            if abort.is_set():
                raise _Aborted()
            with self._lock:
                self._attempts += 1
            try:
                return self._attempt(client, path, body, headers, request, endpoint)
            except _RefusesN as refused:  # only asked while n > 1: at most once
                # llama.cpp refuses n > 1: ask for one sample, the top-up asks for the rest.
                log.warning("openai: server refused n=%d (%s); retrying with n=1",
                            body["n"], refused.detail)
                body = {**body, "n": 1}
                continue
            except _Failed as failed:
                if failed.final:
                    raise OpenAIRequestError(f"openai: {where} failed: {failed.detail}",
                                             status=failed.status,
                                             attempts=failures + 1) from None
                kind, detail, status = failed.kind, failed.detail, failed.status
                retry_after = failed.retry_after
            failures += 1
            with self._lock:
                self._failures[kind] += 1
            if failures > self.options.max_retries:
                raise OpenAIRequestError(
                    f"openai: {where} gave up after {failures} attempts "
                    f"(max_retries={self.options.max_retries}); last error: {detail}",
                    status=status, attempts=failures)
            delay = self._backoff.delay(failures, retry_after, self._rng)
            with self._lock:
                self._retries += 1
            log.info("openai: %s; retry %d/%d in %.2fs", detail, failures,
                     self.options.max_retries, delay)
            if abort.wait(delay):
                raise _Aborted()

    def _attempt(self, client: httpx.Client, path: str, body: dict[str, Any],
                 headers: dict[str, str], request: GenerationRequest,
                 endpoint: str) -> list[Generation]:
        """One HTTP exchange under the deadline; raises `_Failed` or `_RefusesN`."""
        cap = self.reply_cap(body["n"], request.params.max_new_tokens)
        timeout = self.options.timeout
        start = time.perf_counter()
        data = b""
        try:
            with deadline(timeout), client.stream("POST", path, json=body,
                                                  headers=headers) as response:
                status = response.status_code
                if response.is_success:
                    data = read_capped(response, cap)
                else:
                    text = self._error_excerpt(response)
        except httpx.TimeoutException:
            raise _Failed("timeout", f"no complete reply within {timeout:g}s "
                          "(the deadline of one attempt)") from None
        except BodyTooLarge as error:
            raise _Failed("too_large", f"reply over the {cap}-byte cap ({error}); raise "
                          "max_reply_bytes if the server is right") from None
        except BadEncoding as error:
            raise _Failed("malformed", f"unusable reply ({self._clean(str(error))})") from None
        except httpx.HTTPError as error:
            raise _Failed("connection", "connection failed: "
                          f"{type(error).__name__}: {self._clean(str(error))}") from None
        if not response.is_success:
            if body["n"] > 1 and _refuses_n(status, text):
                raise _RefusesN(f"HTTP {status}: {text}")
            if is_retryable_status(status):
                raise _Failed(f"http_{status}", f"HTTP {status}: {text}", status=status,
                              retry_after=parse_retry_after(response.headers))
            hint = (f"; is {self.options.api_key_env} set to a valid key?"
                    if status in (401, 403) else
                    "; redirects are not followed: give the server's own address"
                    if 300 <= status < 400 else "")
            raise _Failed(f"http_{status}", f"HTTP {status}: {text}{hint}", status=status,
                          final=True)
        try:
            reply = parse_reply(data, endpoint)
        except UnusableReply as error:
            raise _Failed("malformed", f"unusable reply ({self._clean(str(error))})",
                          status=status) from None
        samples = self._samples(reply, request, time.perf_counter() - start)
        with self._lock:
            self._calls += 1
        return samples

    def _samples(self, reply: Reply, request: GenerationRequest,
                 seconds: float) -> list[Generation]:
        choices = reply.choices
        # usage sums over choices: per-sample counts are only known for a single choice.
        completion_tokens = reply.completion_tokens if len(choices) == 1 else None
        samples = []
        echoed = self._echoed_suffix(request.prompt)
        for choice in choices:
            text = choice.text
            if echoed and text.endswith(echoed):  # transformers serve returns middle+suffix
                text = text[:-len(echoed)]
            text, cut = cut_at_stop(text, request.params.stop)
            samples.append(Generation(
                text=text, prompt_tokens=reply.prompt_tokens,
                completion_tokens=completion_tokens, seconds=seconds / len(choices),
                finish_reason="stop" if cut else (choice.finish_reason or ""),
            ))
        return samples

    def _echoed_suffix(self, prompt: Prompt) -> str:
        """The suffix to cut from the end of an infilling reply sent with `suffix`, for a
        server that returns middle + suffix (`transformers serve`): only with option
        `strip_suffix_echo`, since a right middle may itself end like the suffix."""
        if prompt.kind != "infill" or self.options.fim_template \
                or not self.options.strip_suffix_echo:
            return ""
        return prompt.suffix or ""

    def _clean(self, text: str) -> str:
        """`text` from the server, safe to print: the key blanked, control escaped, short."""
        return excerpt(text, [os.environ.get(self.options.api_key_env, "")])

    def _error_excerpt(self, response: httpx.Response) -> str:
        """The start of an error reply's body, read under a small cap, made safe."""
        try:
            raw = read_capped(response, ERROR_BODY_BYTES, truncate=True)
        except BadEncoding as error:
            return f"(unreadable body: {self._clean(str(error))})"
        return self._clean(raw.decode("utf-8", errors="replace")) or "(empty body)"


def _json_body(response: httpx.Response) -> Any:
    """A small reply's JSON (a model list, an API's error), None for anything else."""
    try:
        return json.loads(read_capped(response, READY_BODY_BYTES, truncate=False))
    except (BadEncoding, BodyTooLarge, ValueError):
        return None


class _Failed(Exception):
    """One attempt failed: `kind` counts it, `detail` says why (already made safe)."""

    def __init__(self, kind: str, detail: str, *, status: int | None = None,
                 retry_after: float | None = None, final: bool = False) -> None:
        super().__init__(detail)
        self.kind, self.detail, self.status = kind, detail, status
        self.retry_after, self.final = retry_after, final


class _RefusesN(Exception):
    """The server refused n > 1 (llama.cpp)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def _refuses_n(status: int, text: str) -> bool:
    """A 400, or llama.cpp's "Only one completion choice is allowed" (a 500 in some versions)."""
    return status == 400 or (status >= 500 and "choice" in text.lower())


def check_target(target: str) -> None:
    if not target:
        raise UserError("openai: name the served model, as in --model openai:MODEL")


def create_model(target: str, **options: Any) -> OpenAIModel:
    """Factory for `--model openai:MODEL`; options come from `[model.options]` and --base-url."""
    check_target(target)
    return OpenAIModel(target, OpenAIOptions.parse(options))
