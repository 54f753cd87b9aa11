"""The content-addressed adapter cache.

An adapter is stored under `cache_dir/<key>`, where the key is a sha256 over everything
that decides what training produces: the base model's identity (for a local directory a
digest of its config, tokenizer and weight files; for a hub id its resolved commit), the
heavy genes, a digest of the training data as rendered by its data set (each example's
prompt digest and answer), the training hyperparameters (with the version of the
rendering) and the seed. Entries are written to a temporary directory and renamed into
place (`coral_core.files.atomic.publish_dir`), so a reader sees a complete adapter or none; a
lock file keeps two processes from training the same key at once.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from coral_core.data.locate import cache_root
from coral_core.errors import UserError
from coral_core.files.fileio import open_plain
from coral_core.types import AdapterGenes, TrainingExample

from .loading import OFFLINE_HINT, ModelSource

log = logging.getLogger(__name__)

KEY_SCHEMA = 2  # bump when the meaning of a key component changes
_MODEL_FILE_SUFFIXES = (
    ".json", ".safetensors", ".bin", ".model", ".txt", ".jinja", ".py", ".tiktoken",
)
_file_digests: dict[tuple[str, int, int, int], str] = {}


def default_cache_dir() -> Path:
    """`$CORAL_CACHE_DIR/adapters`, else `~/.cache/coral/adapters` (XDG_CACHE_HOME honoured)."""
    return cache_root() / "adapters"


def model_identity(source: ModelSource) -> str:
    """What names the base model's weights: a content digest, or a hub commit."""
    if source.local:
        return "local-sha256:" + _directory_digest(Path(source.location))
    return f"hub:{source.location}@{hub_commit(source)}"


def hub_commit(source: ModelSource) -> str:
    """The commit a hub id (and revision) resolves to, online or from the local cache."""
    from huggingface_hub import snapshot_download

    try:
        snapshot = snapshot_download(
            source.location, revision=source.revision, allow_patterns=["config.json"]
        )
    except Exception as error:  # hub errors have many types; all mean "cannot resolve"
        raise UserError(
            f"hf model: cannot resolve '{source.location}' to a commit: {error}; {OFFLINE_HINT}"
        ) from error
    return Path(snapshot).name


def _directory_digest(directory: Path) -> str:
    files = sorted(
        path for path in directory.iterdir()
        if path.is_file() and path.suffix in _MODEL_FILE_SUFFIXES
    )
    digest = hashlib.sha256()
    for path in files:
        digest.update(f"{path.name}\0{_file_digest(path)}\n".encode())
    return digest.hexdigest()


def _file_digest(path: Path) -> str:
    """sha256 of a file, remembered per (path, inode, size, mtime) since weights are large."""
    stat = path.stat()
    memo = (str(path), stat.st_ino, stat.st_size, stat.st_mtime_ns)
    if memo not in _file_digests:
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        _file_digests[memo] = digest.hexdigest()
    return _file_digests[memo]


def canonical_genes(genes: AdapterGenes) -> dict[str, Any]:
    """The genes as the key sees them: module order and duplicates do not matter to peft."""
    return {
        "kind": genes.kind.lower(), "rank": int(genes.rank), "alpha": float(genes.alpha),
        "dropout": float(genes.dropout), "target_modules": sorted(set(genes.target_modules)),
    }


def data_digest(examples: Sequence[TrainingExample]) -> str:
    """sha256 of what training reads from the examples, in order (order changes what a
    seeded run trains on): each one's prompt digest and answer. Fields training does not
    read (task id, source, solution) do not change the key."""
    rows = [[example.prompt.digest(), example.answer] for example in examples]
    text = json.dumps(rows, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def key_digest(components: Mapping[str, Any]) -> str:
    """The cache key: sha256 of the canonical JSON of the key components."""
    return hashlib.sha256(json.dumps(components, sort_keys=True).encode()).hexdigest()


def key_components(
    identity: str, genes: AdapterGenes, data: str, settings: Mapping[str, Any], seed: int
) -> dict[str, Any]:
    """What the key covers, as stored next to each adapter (`coral_adapter.json`)."""
    return {
        "schema": KEY_SCHEMA, "base_model": identity, "genes": canonical_genes(genes),
        "data": data, "training": dict(settings), "seed": int(seed),
    }


def cached_adapter(cache_dir: Path, key: str) -> Path | None:
    """The adapter stored under `key`, or None; an incomplete entry is an error, not a miss."""
    entry = cache_dir / key
    if not entry.exists():
        return None
    if not (entry / "adapter_model.safetensors").is_file():
        raise UserError(f"adapter cache entry {entry} is incomplete; delete it to retrain")
    return entry


@contextmanager
def key_lock(cache_dir: Path, key: str) -> Iterator[None]:
    """Hold an exclusive lock on `key` (blocks while another process trains it)."""
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UserError(f"cannot use the adapter cache {cache_dir} "
                        f"({error.strerror or error}); set [search.options.training] cache_dir or "
                        "CORAL_CACHE_DIR to a folder you can write") from None
    descriptor = open_plain(cache_dir / f".{key}.lock", "adapter cache lock")
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # releases the lock
