"""Downloading HumanEval and HumanEval-Infilling: the upstream repositories' archives at
the commits PROVENANCE.md names, checked against a digest of the data files Coral reads
(`coral_core.data.fetch.fetch_pinned`: bounded in size and time, installed atomically)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from coral_core.data.locate import FetchLimits


@dataclass(frozen=True)
class Pinned:
    """One upstream archive: where, which files, and their content digest (sha256 over
    each file's path and sha256, coral_core.data.fetch.tree_digest's recipe)."""

    name: str
    url: str
    files: tuple[str, ...]
    digest: str
    url_variable: str  # an environment variable that may point elsewhere (a mirror, tests)

    def fetch(self, force: bool = False, timeout: float | None = None) -> Path:
        url = os.environ.get(self.url_variable, self.url)
        from coral_core.data.fetch import fetch_pinned  # the network code, when fetching

        limits = FetchLimits() if timeout is None else FetchLimits(deadline=timeout)
        return fetch_pinned(self.name, url, self.digest, ("data",), force=force,
                            limits=limits, files=self.files)


HUMANEVAL_COMMIT = "6d43fb980f9fee3c892a914eda09951f772ad10d"
INFILLING_COMMIT = "88062ff9859c875d04db115b698ed4b0f0395170"

HUMANEVAL = Pinned(
    "humaneval", f"https://github.com/openai/human-eval/archive/{HUMANEVAL_COMMIT}.tar.gz",
    ("data/HumanEval.jsonl.gz",),
    "c8d8b9cfaa8ba0380328842cbcacd4842d1695786dbbc7bb3ffe7e38ef335e5d",
    "CORAL_HUMANEVAL_URL")
INFILLING = Pinned(
    "humaneval-infilling",
    f"https://github.com/openai/human-eval-infilling/archive/{INFILLING_COMMIT}.tar.gz",
    tuple(f"data/HumanEval-{kind}.jsonl.gz" for kind in (
        "SingleLineInfilling", "MultiLineInfilling", "RandomSpanInfilling",
        "RandomSpanInfillingLight")),
    "f044a299119f549af72e1b8ef46acb013b0eb0f88fc92422fd3fd2e732481c4b",
    "CORAL_HUMANEVAL_INFILLING_URL")
