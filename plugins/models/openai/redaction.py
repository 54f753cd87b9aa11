"""Keeping secrets and terminal control out of what Coral prints, logs and stores.

A server's error body is the server's text: it may echo the request (API key included),
carry terminal escape sequences, or be megabytes long. `excerpt` turns any such text into a
short single line with the key and bearer tokens blanked and control characters escaped.
A base URL may carry credentials (`user:password@`, `?api_key=`): the client refuses such a
URL (the key belongs in the environment), and `redact_url` is how the refusal names it.
"""

from __future__ import annotations

import re
from typing import Iterable
from urllib.parse import parse_qsl, quote, urlsplit, urlunsplit

from coral_core.shown import one_line

MASK = "***"
_SECRET_NAME = re.compile(r"key|token|secret|passw|pwd|auth|sig|credential|session",
                          re.IGNORECASE)
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[^\s\"',;]+")


def url_credentials(url: str) -> list[str]:
    """What in `url` is a credential: its user info, and query parameters named like one."""
    parts = urlsplit(url)
    found = ["user info (user:password@)"] if parts.username or parts.password else []
    found += [f"query parameter {name!r}" for name, _ in parse_qsl(parts.query, True)
              if _SECRET_NAME.search(name)]
    return found


def redact_url(url: str) -> str:
    """`url` with its user info and secret-looking query values replaced by ***."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    if parts.username or parts.password:
        netloc = f"{MASK}@{netloc}"
    query = "&".join(
        f"{quote(name, safe='')}={MASK if _SECRET_NAME.search(name) else quote(value, safe='')}"
        for name, value in parse_qsl(parts.query, True))
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def excerpt(text: str, secrets: Iterable[str] = (), limit: int = 200) -> str:
    """One short line of `text` that is safe to print, log and store."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, MASK).replace(quote(secret, safe=""), MASK)
    text = _BEARER.sub(lambda match: f"{match.group(1)} {MASK}", text)
    return one_line(text, limit)
