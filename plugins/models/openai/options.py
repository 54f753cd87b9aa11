"""The `[model.options]` of ``--model openai:MODEL``, validated before any request."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import Any, Mapping
from urllib.parse import urlsplit

import httpx

from coral_core.errors import UserError

from .redaction import excerpt, redact_url, url_credentials

MODES = ("chat", "completions")
# The request fields Coral sets from the run: `extra_body` may add fields, never replace
# these (a red-team's `seed`, `model` and `messages` there were sent in place of the run's,
# which recorded a prompt and per-sample seeds the server never saw).
OWN_FIELDS = ("model", "messages", "prompt", "suffix", "n", "seed", "max_tokens",
              "temperature", "top_p", "stop", "stream")
LONGEST = 86400.0  # seconds: the most a timeout or a backoff may be (a day)


@dataclass(frozen=True)
class OpenAIOptions:
    """The `[model.options]` table, validated. The API key is deliberately not here."""

    base_url: str
    mode: str = "chat"
    concurrency: int = 8
    max_retries: int = 5
    timeout: float = 300.0
    max_reply_bytes: int = 8 * 1024 * 1024
    backoff_base: float = 0.5
    backoff_max: float = 60.0
    api_key_env: str = "OPENAI_API_KEY"
    max_n_per_request: int | None = None
    system_prompt: str | None = None
    fim_template: str | None = None
    strip_suffix_echo: bool = False
    extra_body: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> "OpenAIOptions":
        """Validate user options; every problem is a one-line UserError."""
        options = {key: value for key, value in options.items() if value is not None}
        if "api_key" in options:
            raise UserError(
                "openai: the API key is never taken as an option (it would end up in config "
                "files and run records); set OPENAI_API_KEY, or name another variable with "
                "option api_key_env"
            )
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise UserError(
                f"openai: unknown option(s) {', '.join(unknown)} "
                f"(known: {', '.join(sorted(known))})"
            )
        base_url = options.pop("base_url", None) or os.environ.get("OPENAI_BASE_URL")
        if not base_url:
            raise UserError(
                "openai: no server URL; pass --base-url URL (option base_url) "
                "or set OPENAI_BASE_URL"
            )
        parsed = cls(base_url=_normalise_base_url(str(base_url)), **options)
        parsed._check()
        return parsed

    def _check(self) -> None:
        def need(condition: bool, message: str) -> None:
            if not condition:
                raise UserError(f"openai: {message}")

        def number(value: Any) -> bool:
            return isinstance(value, (int, float)) and not isinstance(value, bool)

        def integer(value: Any) -> bool:
            return isinstance(value, int) and not isinstance(value, bool)

        need(self.mode in MODES, f"mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        need(integer(self.concurrency) and self.concurrency >= 1,
             "concurrency must be an integer >= 1")
        need(integer(self.max_retries) and self.max_retries >= 0,
             "max_retries must be an integer >= 0")
        need(number(self.timeout) and 0 < self.timeout <= LONGEST,
             f"timeout must be a number of seconds in (0, {LONGEST:g}]")
        need(integer(self.max_reply_bytes) and self.max_reply_bytes >= 1024,
             "max_reply_bytes must be an integer >= 1024")
        need(number(self.backoff_base) and 0 <= self.backoff_base <= LONGEST,
             f"backoff_base must be a number of seconds in [0, {LONGEST:g}]")
        need(number(self.backoff_max) and 0 <= self.backoff_max <= LONGEST,
             f"backoff_max must be a number of seconds in [0, {LONGEST:g}]")
        need(isinstance(self.api_key_env, str) and bool(self.api_key_env),
             "api_key_env must name an environment variable")
        need(self.max_n_per_request is None
             or (integer(self.max_n_per_request) and self.max_n_per_request >= 1),
             "max_n_per_request must be an integer >= 1")
        need(self.system_prompt is None or isinstance(self.system_prompt, str),
             "system_prompt must be a string")
        need(self.fim_template is None or isinstance(self.fim_template, str),
             "fim_template must be a string")
        if self.fim_template:
            from coral_core.fim.templates import template_for
            template_for(self.fim_template)  # an unknown family is refused now
        need(isinstance(self.strip_suffix_echo, bool), "strip_suffix_echo must be true or false")
        need(isinstance(self.extra_body, Mapping), "extra_body must be a table")
        owned = sorted(set(self.extra_body) & set(OWN_FIELDS))
        need(not owned, f"extra_body may not set {', '.join(owned)}: Coral sets "
             f"{'it' if len(owned) == 1 else 'them'} from the run (the sampling flags, "
             "[model] and [run]), and records what it sends")


def _normalise_base_url(url: str) -> str:
    """Accept `http://host:port` as well as `http://host:port/v1` (the SDK convention).

    A URL that carries credentials is refused: the run directory stores the base URL, and
    the key's place is the environment.
    """
    url = url.strip().rstrip("/")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a malformed port
        if any(ord(c) < 32 or ord(c) == 127 for c in url):
            raise ValueError("a control character")
        if parts.hostname:  # what the connection will ask of the host name (IDNA: an
            parts.hostname.encode("idna")  # empty or 64-character label raised there)
        httpx.URL(url)
    except (ValueError, UnicodeError, httpx.InvalidURL):
        raise UserError(f"openai: base URL {excerpt(url)!r} is malformed") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserError(f"openai: base URL must look like http://HOST:PORT/v1, not "
                        f"{excerpt(redact_url(url))!r}")
    credentials = url_credentials(url)
    if credentials:
        raise UserError(
            f"openai: the base URL {excerpt(redact_url(url))!r} carries credentials "
            f"({', '.join(credentials)}), which would be stored with the run; give the URL "
            "without them and the key in OPENAI_API_KEY (or the variable named by api_key_env)"
        )
    if parts.fragment:
        raise UserError("openai: the base URL must not have a #fragment")
    if not parts.path:
        url += "/v1"
    return url
