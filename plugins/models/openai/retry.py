"""When and how long the OpenAI-compatible client waits before trying a request again.

Kept apart from the client so that the policy (which failures are transient, how the
delay grows, how Retry-After is read) can be read and tested on its own.
"""

from __future__ import annotations

import email.utils
import random
import time
from dataclasses import dataclass
from typing import Mapping

# Statuses the OpenAI SDKs also treat as transient: request timeout, conflict, rate limit.
_RETRYABLE_4XX = frozenset({408, 409, 429})


# 5xx statuses that say the request can never succeed here: not implemented, HTTP version
# not supported, not extended. Trying them again only makes the user wait.
_PERMANENT_5XX = frozenset({501, 505, 510})


def is_retryable_status(status: int) -> bool:
    """True for statuses worth retrying: 408, 409, 429 and every 5xx but 501, 505, 510."""
    return status in _RETRYABLE_4XX or (status >= 500 and status not in _PERMANENT_5XX)


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds the server asked us to wait, or None.

    Reads `retry-after-ms` (OpenAI's extension) first, then `Retry-After` as seconds or
    as an HTTP date (RFC 9110). Unparseable or negative values are ignored.
    """
    lowered = {key.lower(): value for key, value in headers.items()}
    raw_ms = lowered.get("retry-after-ms")
    if raw_ms is not None:
        try:
            value = float(raw_ms) / 1000.0
        except ValueError:
            value = -1.0
        if value >= 0:
            return value
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
        value = when.timestamp() - (time.time() if now is None else now)
        return max(value, 0.0)
    return value if value >= 0 else None


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with "equal jitter".

    The n-th retry waits between half and all of min(maximum, base * 2**(n-1)): the
    random half spreads clients that failed together, the fixed half keeps a floor so a
    struggling server is not hammered. A server's Retry-After is a lower bound, capped at
    `maximum` so that one odd header cannot stall a run for hours.
    """

    base: float = 0.5
    maximum: float = 60.0

    def delay(
        self, retry: int, retry_after: float | None = None, rng: random.Random | None = None
    ) -> float:
        ceiling = min(self.maximum, self.base * 2 ** max(retry - 1, 0))
        jittered = (rng or random).uniform(ceiling / 2, ceiling)
        if retry_after is None:
            return jittered
        return max(jittered, min(retry_after, self.maximum))
