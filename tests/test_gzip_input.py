"""Gzip-compressed inputs (task files, samples, predictions): read as `gzip.open` reads
them, every member and zero padding included, and refused in one line when broken or when
they would expand past the cap, before more than the cap is held."""

from __future__ import annotations

import gzip

import pytest

from coral_core.errors import UserError
from coral_core.files import fileio

HELLO, WORLD = gzip.compress(b"hello\n", mtime=0), gzip.compress(b"world\n", mtime=0)


@pytest.mark.parametrize("data", [
    HELLO + WORLD,  # cat a.gz b.gz
    HELLO + b"\0" * 1000 + WORLD + b"\0" * 7,  # padded, as tape tools write them
    gzip.compress(b"hello\n", compresslevel=1, mtime=0) + WORLD,
], ids=["concatenated", "padded", "mixed levels"])
def test_every_member_is_read_as_gzip_open_reads_it(data):
    assert fileio.gunzip(data, "f", 100) == gzip.decompress(data) == b"hello\nworld\n"


def test_many_small_members_are_all_read():
    data = gzip.compress(b"x", mtime=0) * 50_000
    assert fileio.gunzip(data, "f", 50_000) == b"x" * 50_000


@pytest.mark.parametrize("data, words", [
    (HELLO[:-3], "truncated"),
    (HELLO + b"junk", "not gzip"),
    (b"\x1f\x8b" + b"\xff" * 20, "not a valid gzip file"),
    (gzip.compress(b"x" * 101, mtime=0), "expands to more than 100 bytes"),
    (gzip.compress(b"x" * 60, mtime=0) + gzip.compress(b"x" * 41, mtime=0),
     "expands to more than 100 bytes"),
], ids=["truncated", "junk after", "not deflate", "too large", "too large together"])
def test_a_broken_or_oversized_stream_is_one_error(data, words):
    with pytest.raises(UserError, match=words):
        fileio.gunzip(data, "f", 100)


def test_a_bomb_is_refused_before_it_is_inflated():
    bomb = gzip.compress(b"\0" * (64 << 20), compresslevel=9)  # 64 MiB in about 64 KiB
    with pytest.raises(UserError, match="expands to more than"):
        fileio.gunzip(bomb, "f", 1 << 20)


def test_read_text_decompresses_only_when_asked(tmp_path):
    path = tmp_path / "s.jsonl.gz"
    path.write_bytes(HELLO)
    assert fileio.read_text(path, limit=100, gzipped=True) == "hello\n"
    with pytest.raises(UserError, match="not UTF-8"):
        fileio.read_text(path, limit=100)
    plain = tmp_path / "s.jsonl"
    plain.write_text("\x1f is not magic alone\n")
    assert fileio.read_text(plain, limit=100, gzipped=True) == "\x1f is not magic alone\n"
